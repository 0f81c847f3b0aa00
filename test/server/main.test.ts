import { Agent, get as httpGet } from 'node:http'
import t from 'tap'
import { admin, finished, halfSentPost, spawnScript, startServer } from '../helpers/cli.js'
import { freePort, testEnv } from '../helpers/platform.js'

/** No service named: the embedded database, the in-process cache, local blobs and a generated master key. */
const NO_SERVICES = { DATABASE_URL: '', REDIS_URL: '', R2_ENDPOINT: '', ENCRYPTION_MASTER_KEY: '' }

t.test('with no services configured the server starts on embedded defaults and is ready', async (t) => {
  const env = await testEnv(t, { LOG_LEVEL: 'info', ...NO_SERVICES })
  const s = await startServer(env)
  t.teardown(() => {
    s.child.kill('SIGKILL')
  })
  const ready = await (await fetch(`${s.base}/readyz`)).json()
  t.match(ready.data, {
    status: 'ready',
    checks: { db: { mode: 'embedded' }, cache: { mode: 'in-process' }, blobs: { mode: 'local' } },
  })

  // The admin CLI shares the running server's embedded database through its socket.
  const created = await admin(['create-tenant', '--name', 'While running'], env)
  t.equal(created.code, 0, created.stderr)
  const { apiKey } = JSON.parse(created.stdout)
  const r = await fetch(`${s.base}/api/v1/projects`, { headers: { authorization: `Bearer ${apiKey}` } })
  t.equal(r.status, 200, 'the server sees the tenant the CLI created')

  s.child.kill('SIGTERM')
  const exit = await s.done
  t.equal(exit.code, 0)
  t.match(exit.stdout, /"msg":"stopped"/)
  // No LICENSE_KEY is needed to try Atrium: it says so and runs.
  t.match(exit.stderr, /Unlicensed \(development\): set LICENSE_KEY/)
  // The mode is in the start-up line and the banner.
  t.match(exit.stdout, /"airGapped":false,.*"msg":"atrium listening"/)
  t.match(exit.stderr, /Connected \(AIR_GAPPED=false\): features that call outside APIs are available/)
  t.match(exit.stdout, /"level":40,.*"msg":"running unlicensed \(development\): no LICENSE_KEY is set/)
})

t.test('with METRICS_PORT, /metrics is served on that port only, not beside the API', async (t) => {
  const metricsPort = await freePort()
  const s = await startServer(await testEnv(t, { LOG_LEVEL: 'info', METRICS_PORT: String(metricsPort) }))
  t.teardown(() => {
    s.child.kill('SIGKILL')
  })
  const onApi = await fetch(`${s.base}/metrics`)
  t.equal(onApi.status, 404, 'not on the API port (an ingress routes there)')
  t.equal((await onApi.json()).error.code, 'RESOURCE_NOT_FOUND')
  const scraped = await fetch(`http://127.0.0.1:${metricsPort}/metrics`)
  t.equal(scraped.status, 200)
  t.match(scraped.headers.get('content-type'), /^text\/plain/)
  t.match(await scraped.text(), /^atrium_air_gapped 0$/m)
  t.equal(
    (await fetch(`http://127.0.0.1:${metricsPort}/api/v1/projects`)).status,
    404,
    'nothing else on the metrics port',
  )
  const doc = await (await fetch(`${s.base}/openapi.json`)).json()
  t.notOk('/metrics' in doc.paths, 'nor in the API description')
  s.child.kill('SIGTERM')
  const exit = await s.done
  t.equal(exit.code, 0, 'a drain closes the metrics listener too')
  t.match(exit.stderr, new RegExp(`Metrics: http://127\\.0\\.0\\.1:${metricsPort}/metrics \\(METRICS_PORT\\)`))
})

t.test('SIGTERM lets an in-flight request finish, then exits 0', async (t) => {
  const env = await testEnv(t, { LOG_LEVEL: 'info' })
  const created = await admin(['create-tenant', '--name', 'Drain'], env)
  const { apiKey } = JSON.parse(created.stdout)
  const s = await startServer(env)
  t.teardown(() => {
    s.child.kill('SIGKILL')
  })

  const body = JSON.stringify({ name: 'created during shutdown', description: 'x'.repeat(2000) })
  // Half the body now: the request is in flight when the signal arrives.
  const post = halfSentPost(
    `${s.base}/api/v1/projects`,
    { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body,
  )
  await post.connected
  await new Promise((r) => setTimeout(r, 300))
  s.child.kill('SIGTERM')
  await new Promise((r) => setTimeout(r, 500))
  post.finish()
  const r = await post.response
  t.equal(r.status, 201, 'the in-flight request completed')
  t.match(JSON.parse(r.text), { data: { name: 'created during shutdown' } })
  t.equal(r.connection, 'close', 'its kept-alive connection closed with it, not held until its idle timeout')
  const exit = await s.done
  t.equal(exit.code, 0, exit.stderr)
  t.match(exit.stdout, /draining/)
  await t.rejects(fetch(`${s.base}/healthz`), 'no longer listening')
})

t.test(
  'SIGTERM: a kept-alive connection idle at the signal still gets its next answer, with the connection closed',
  async (t) => {
    const env = await testEnv(t, { LOG_LEVEL: 'info' })
    const s = await startServer(env)
    t.teardown(() => {
      s.child.kill('SIGKILL')
    })
    // One pooled connection, as a client or a load balancer keeps it between requests.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    t.teardown(() => agent.destroy())
    const get = () =>
      new Promise<{ status: number; connection: string; reused: boolean }>((resolve, reject) => {
        const req = httpGet(`${s.base}/healthz`, { agent }, (res) => {
          res.resume()
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              connection: String(res.headers.connection),
              reused: req.reusedSocket,
            }),
          )
        })
        req.on('error', reject)
      })
    t.match(await get(), { status: 200, connection: 'keep-alive' }, 'the connection is kept alive')
    s.child.kill('SIGTERM')
    // Well inside the drain's window (5 s by default): the server is draining, the connection idle.
    await new Promise((r) => setTimeout(r, 500))
    t.same(
      await get(),
      { status: 200, connection: 'close', reused: true },
      'the request on it is answered, and the connection ends with the answer (not cut under the request)',
    )
    const exit = await s.done
    t.equal(exit.code, 0, exit.stderr)
  },
)

t.test('production mode refuses to start on embedded defaults', async (t) => {
  const env = await testEnv(t, { NODE_ENV: 'production', ...NO_SERVICES })
  const r = await finished(spawnScript('server/main.ts', [], env))
  t.equal(r.code, 78)
  for (const name of Object.keys(NO_SERVICES)) t.match(r.stderr, new RegExp(`config error: ${name} is required`))
  t.notMatch(r.stderr, /\n\s+at /, 'no stack trace')
})
