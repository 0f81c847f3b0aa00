// Stored bytes follow what is accepted (files-service.ts, collector.ts): a refused write leaves the
// store as it was, and the collector removes file objects nothing points at (a deleted project, a
// pruned version, an upload whose change never came) but never one an upload in flight holds.
// Found by the second hardening round: 20 refused PUTs grew a project at its quota from 10 MB of
// objects to 31.5 MB, and deleting the project removed none.
import { request } from 'node:http'
import type { AddressInfo } from 'node:net'
import pino from 'pino'
import t from 'tap'
import { collectFileObjects } from '../../../../server/modules/projects/collector.js'
import { projectFilesService } from '../../../../server/modules/projects/files-service.js'
import { isError } from '../../../helpers/answers.js'
import { ownerActor } from '../../../helpers/principal.js'
import { testApp } from '../../../helpers/app.js'

const h = await testApp(t)
const files = projectFilesService({ db: h.platform.db, storage: h.platform.storage })
const deps = { db: h.platform.db, storage: h.platform.storage, files, log: pino({ level: 'silent' }) }

/** Every object under a prefix of the platform's store, with its size: what the bucket holds. */
async function stored(prefix: string): Promise<Map<string, number>> {
  const out = new Map<string, number>()
  for await (const o of h.platform.blobs.list(prefix)) out.set(o.key, (await h.platform.blobs.size(o.key)) ?? -1)
  return out
}
const bytes = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0)
const put = (
  call: Awaited<ReturnType<typeof h.tenant>>['call'],
  projectId: string,
  path: string,
  body: Buffer | string,
  headers: Record<string, string> = {},
) =>
  call('PUT', `/api/v1/projects/${projectId}/files/${path}`, body, {
    'content-type': 'application/octet-stream',
    ...headers,
  })

t.test('refused writes leave the stored bytes as they were, counted in the store', async (t) => {
  const { call, tenantId } = await h.tenant('free')
  const projectId = (await call('POST', '/api/v1/projects', { name: 'full' })).body.data.id
  // The free plan: 1 MiB a file, 10 MiB a project: ten files of 1,000,000 bytes leave 485,760.
  for (let i = 0; i < 10; i++)
    t.equal((await put(call, projectId, `f${i}.bin`, Buffer.alloc(1_000_000, i))).status, 201)
  const prefix = `tenants/${tenantId}/projects/${projectId}/`
  const before = await stored(prefix)
  t.equal(bytes(before), 10_000_000)
  const etag = (await call('GET', `/api/v1/projects/${projectId}/files`)).body.data[0].etag
  const refusals: [string, () => ReturnType<typeof put>, number, string][] = []
  for (let i = 0; i < 10; i++)
    refusals.push([
      `over the quota ${i}`,
      () => put(call, projectId, `new${i}.bin`, Buffer.alloc(600_000, 100 + i)),
      413,
      'QUOTA_EXCEEDED',
    ])
  for (let i = 0; i < 5; i++)
    refusals.push([
      `If-Match fails ${i}`,
      () => put(call, projectId, 'f0.bin', Buffer.alloc(1000, 200 + i), { 'if-match': `"${'0'.repeat(64)}"` }),
      412,
      'PRECONDITION_FAILED',
    ])
  for (let i = 0; i < 3; i++)
    refusals.push([
      `If-None-Match: * on a file that exists ${i}`,
      () => put(call, projectId, 'f1.bin', Buffer.alloc(1000, 210 + i), { 'if-none-match': '*' }),
      412,
      'PRECONDITION_FAILED',
    ])
  for (let i = 0; i < 2; i++)
    refusals.push([
      `over the plan's file size ${i}`,
      () => put(call, projectId, `huge${i}.bin`, Buffer.alloc(2 * 1024 * 1024, 220 + i)),
      413,
      'PAYLOAD_TOO_LARGE',
    ])
  for (const [what, send, status, code] of refusals) isError(t, await send(), status, code, what)
  const after = await stored(prefix)
  t.same([...after.keys()].sort(), [...before.keys()].sort(), 'the same objects')
  t.equal(bytes(after), bytes(before), `the same bytes after ${refusals.length} refused writes`)
  const staged = await h.platform.db.tenant(tenantId, (sql) => sql`select 1 from staged_objects`)
  t.equal(staged.length, 0, 'no upload is left registered')
  t.equal(
    (await put(call, projectId, 'f0.bin', Buffer.alloc(1000, 1), { 'if-match': `"${etag}"` })).status,
    200,
    'a write that fits still works',
  )
})

t.test("a plan's file size is refused before the body is read", async (t) => {
  const { apiKey } = await h.tenant('free')
  const projectId = (
    await h.anonymous('POST', '/api/v1/projects', { name: 'p' }, { authorization: `Bearer ${apiKey}` })
  ).body.data.id
  await h.app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = h.app.server.address() as AddressInfo
  // 50 MiB declared (within the largest plan's limit), a kilobyte sent: the answer comes without the rest.
  const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const headers = {
      authorization: `Bearer ${apiKey}`,
      'content-type': 'application/octet-stream',
      'content-length': String(50 * 1024 * 1024),
    }
    const r = request(
      { host: '127.0.0.1', port, method: 'PUT', path: `/api/v1/projects/${projectId}/files/big.bin`, headers },
      (res) => {
        let body = ''
        res.on('data', (c: Buffer) => (body += c.toString()))
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, body })
          r.destroy() // the rest is never sent
        })
      },
    )
    r.on('error', reject)
    r.write(Buffer.alloc(1024))
  })
  t.equal(answer.status, 413)
  t.match(JSON.parse(answer.body), {
    error: { code: 'PAYLOAD_TOO_LARGE', details: { limit: 1024 * 1024, size: 50 * 1024 * 1024 } },
  })
})

t.test('two uploads racing to create one path: the store keeps the winner only', async (t) => {
  const { call, tenantId } = await h.tenant()
  const projectId = (await call('POST', '/api/v1/projects', { name: 'race' })).body.data.id
  const tries = await Promise.all(
    Array.from({ length: 6 }, (_, i) => put(call, projectId, 'one.txt', `contender ${i}`, { 'if-none-match': '*' })),
  )
  t.equal(tries.filter((r) => r.status === 201).length, 1, 'one created it')
  t.equal(tries.filter((r) => r.status === 412).length, 5, 'the others were refused')
  const objects = await stored(`tenants/${tenantId}/projects/${projectId}/files/`)
  t.same(
    [...objects.keys()],
    [`tenants/${tenantId}/projects/${projectId}/files/${tries.find((r) => r.status === 201)!.body.data.etag}`],
    "only the winner's bytes are stored",
  )
})

t.test('the collector removes what nothing points at, and keeps what something does', async (t) => {
  const { call, tenantId, userId } = await h.tenant('free')
  const keep = (await call('POST', '/api/v1/projects', { name: 'kept' })).body.data.id
  const gone = (await call('POST', '/api/v1/projects', { name: 'deleted' })).body.data.id
  const fileKey = (projectId: string, etag: string) => `tenants/${tenantId}/projects/${projectId}/files/${etag}`
  // Eight versions of one file: the free plan keeps five versions, so the oldest contents go.
  const etags: string[] = []
  for (let i = 0; i < 8; i++) etags.push((await put(call, keep, 'doc.txt', `version ${i}`)).body.data.etag)
  t.equal((await put(call, gone, 'x.txt', 'in a project about to go')).status, 201)
  const goneKey = fileKey(gone, (await call('GET', `/api/v1/projects/${gone}/files`)).body.data[0].etag)
  t.equal((await call('DELETE', `/api/v1/projects/${gone}`)).status, 200)
  // An upload whose change is still to come (a run's staged file, a PUT in flight), and one whose change never came.
  const actor = ownerActor(tenantId, userId, 'free')
  const pending = await files.stage(actor, keep, 'pending.txt', Buffer.from('staged, its change to come'))
  const abandoned = await files.stage(
    actor,
    keep,
    'abandoned.txt',
    Buffer.from('staged, its process died'),
    undefined,
    { holdMs: 1 },
  )
  // Something else under the tenant's prefix that is not a file object.
  await h.platform.blobs.put(
    `tenants/${tenantId}/projects/${keep}/other/notes`,
    Buffer.from('not a file object'),
    'text/plain',
  )

  const r = await collectFileObjects(deps, { graceMs: 0, now: new Date(Date.now() + 1000) })
  t.ok(r.deleted >= 4, `${r.deleted} objects deleted`)
  t.equal(r.expired, 1, 'the abandoned upload expired')
  const left = await stored(`tenants/${tenantId}/projects/`)
  const versions = (await call('GET', `/api/v1/projects/${keep}/versions?limit=50`)).body.data.length
  t.equal(versions, 5, 'the plan keeps five versions')
  for (const [i, etag] of etags.entries()) {
    // Versions 9, 8, 7, 6, 5 of the project (creation is version 1) hold contents 7, 6, 5, 4, 3.
    t.equal(
      left.has(fileKey(keep, etag)),
      i >= 3,
      `contents ${i}: ${i >= 3 ? 'a kept version holds it' : 'no version holds it'}`,
    )
  }
  t.notOk(left.has(goneKey), "the deleted project's object is gone")
  t.ok(left.has(pending.blobKey), 'an upload whose change is to come is kept')
  t.notOk(left.has(abandoned.blobKey), 'an upload whose change never came is gone')
  t.ok(left.has(`tenants/${tenantId}/projects/${keep}/other/notes`), 'what is not a file object is not touched')
  t.equal(
    (await call('GET', `/api/v1/projects/${keep}/files/doc.txt`)).raw.toString(),
    'version 7',
    'the current file reads',
  )

  // Its change made, the pending upload is a file: the collector keeps it then too.
  await h.platform.db.tenant(tenantId, (sql) =>
    files.apply(sql, actor, keep, [{ path: 'pending.txt', staged: pending }]),
  )
  await collectFileObjects(deps, { graceMs: 0, now: new Date(Date.now() + 1000) })
  t.equal(
    (await call('GET', `/api/v1/projects/${keep}/files/pending.txt`)).raw.toString(),
    'staged, its change to come',
  )
})

t.test('objects younger than the grace are left to a later sweep', async (t) => {
  const { call, tenantId } = await h.tenant()
  const projectId = (await call('POST', '/api/v1/projects', { name: 'young' })).body.data.id
  await put(call, projectId, 'a.txt', 'soon gone')
  const key = `tenants/${tenantId}/projects/${projectId}/files/${(await call('GET', `/api/v1/projects/${projectId}/files`)).body.data[0].etag}`
  t.equal((await call('DELETE', `/api/v1/projects/${projectId}`)).status, 200)
  await collectFileObjects(deps)
  t.ok((await stored(key)).has(key), 'kept within the grace (an hour)')
  await collectFileObjects(deps, { now: new Date(Date.now() + 2 * 3600_000) })
  t.notOk((await stored(key)).has(key), 'collected after it')
})

t.test("one sweep gives one tenant's objects a bounded share: the rest are the next sweep's", async (t) => {
  const { call, tenantId } = await h.tenant()
  const projectId = (await call('POST', '/api/v1/projects', { name: 'many' })).body.data.id
  for (const name of ['a', 'b', 'c']) await put(call, projectId, `${name}.txt`, `content ${name}`)
  t.equal((await call('DELETE', `/api/v1/projects/${projectId}`)).status, 200)
  const prefix = `tenants/${tenantId}/projects/${projectId}/files/`
  t.equal((await stored(prefix)).size, 3)
  await collectFileObjects(deps, { graceMs: 0, now: new Date(Date.now() + 1000), tenantMaxObjects: 1 })
  t.equal((await stored(prefix)).size, 2, 'one object this sweep')
  await collectFileObjects(deps, { graceMs: 0, now: new Date(Date.now() + 1000) })
  t.equal((await stored(prefix)).size, 0, 'the rest the next')
})
