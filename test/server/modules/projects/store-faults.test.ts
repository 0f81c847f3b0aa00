// A store that accepts connections and never answers (frozen, or a network that stalls) answers file
// writes, reads and backups with 503 within STORAGE_TIMEOUT_SECONDS, not after the client gives up;
// once it answers again they work. Found by the second hardening round: held 90 s, as long as the
// store stayed silent, while readiness had marked it failed in 2 s.
import t from 'tap'
import { testApp } from '../../../helpers/app.js'
import { faultProxy } from '../../../helpers/fault-proxy.js'
import { freshBucket, services } from '../../../helpers/platform.js'

t.test(
  'file PUT, GET and a backup answer 503 while the store is silent, and work again after',
  { skip: services.s3Endpoint ? false : 'needs an S3 store (TEST_S3_ENDPOINT) to freeze' },
  async (t) => {
    const proxy = await faultProxy(t, services.s3Endpoint)
    const h = await testApp(t, {
      R2_ENDPOINT: proxy.via(services.s3Endpoint),
      R2_BUCKET: await freshBucket(t),
      R2_ACCESS_KEY_ID: services.s3AccessKey,
      R2_SECRET_ACCESS_KEY: services.s3SecretKey,
      STORAGE_TIMEOUT_SECONDS: '2',
    })
    const { call } = await h.tenant()
    const projectId = (await call('POST', '/api/v1/projects', { name: 'stalls' })).body.data.id
    const file = `/api/v1/projects/${projectId}/files/a.txt`
    t.equal((await call('PUT', file, 'before the stall', { 'content-type': 'text/plain' })).status, 201)

    proxy.hold()
    for (const [what, send] of [
      [
        'PUT a file',
        () =>
          call('PUT', `/api/v1/projects/${projectId}/files/b.txt`, 'during the stall', {
            'content-type': 'text/plain',
          }),
      ],
      ['GET a file', () => call('GET', file)],
      ['a backup', () => call('POST', `/api/v1/projects/${projectId}/backup`, {})],
    ] as const) {
      const r = await send()
      t.equal(r.status, 503, what)
      t.equal(r.body.error.code, 'SERVICE_UNAVAILABLE', what)
    }
    t.equal((await call('GET', '/api/v1/projects')).status, 200, 'what needs no store serves on')
    proxy.release()

    t.equal((await call('GET', file)).raw.toString(), 'before the stall', 'the store answers again: the file reads')
    t.equal(
      (
        await call('PUT', `/api/v1/projects/${projectId}/files/b.txt`, 'after the stall', {
          'content-type': 'text/plain',
        })
      ).status,
      201,
    )
    t.equal((await call('POST', `/api/v1/projects/${projectId}/backup`, {})).status, 201)
    const paths = (await call('GET', `/api/v1/projects/${projectId}/files`)).body.data.map(
      (f: { path: string }) => f.path,
    )
    t.same(paths, ['a.txt', 'b.txt'], 'nothing half made during the stall')
  },
)
