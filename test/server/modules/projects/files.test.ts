import { createHash } from 'node:crypto'
import { request } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { testApp, type Caller } from '../../../helpers/app.js'
import { unzip, unzipRaw } from '../../../helpers/zip.js'
import { projectFilesService } from '../../../../server/modules/projects/files-service.js'
import type { Actor } from '../../../../server/domain/actor.js'

const h = await testApp(t)
const MiB = 1024 * 1024
const sha = (b: string | Buffer) => createHash('sha256').update(b).digest('hex')

async function makeProject(call: Caller): Promise<string> {
  const r = await call('POST', '/api/v1/projects', { name: 'Files' })
  if (r.status !== 201) throw new Error(`project not created: ${r.status}`)
  return r.body.data.id
}
const put = (
  call: Caller,
  projectId: string,
  path: string,
  body: string | Buffer,
  headers: Record<string, string> = {},
) => call('PUT', `/api/v1/projects/${projectId}/files/${path}`, body, { 'content-type': 'text/plain', ...headers })
const pathsOf = async (call: Caller, projectId: string) =>
  (await call('GET', `/api/v1/projects/${projectId}/files?limit=200`)).body.data.map((f: { path: string }) => f.path)
const versionOf = async (call: Caller, projectId: string) =>
  (await call('GET', `/api/v1/projects/${projectId}`)).body.data.version as number

/** A request over a real socket, the path sent exactly as written (inject resolves '..' and %2e%2e first). */
async function rawRequest(
  method: string,
  path: string,
  apiKey: string,
  body?: Buffer,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON from the API under test
): Promise<{ status: number; body: any }> {
  if (!h.app.server.listening) await h.app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = h.app.server.address() as AddressInfo
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'text/plain' },
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8')
          resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : null })
        })
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

t.test('a file is created, read, listed, replaced and deleted, each change a version', async (t) => {
  const { call } = await h.tenant()
  const p = await makeProject(call)
  const created = await put(call, p, 'src/main.ts', 'console.log(1)\n', { 'content-type': 'application/typescript' })
  t.equal(created.status, 201)
  t.same(created.body.data, {
    path: 'src/main.ts',
    size: 15,
    etag: sha('console.log(1)\n'),
    contentType: 'application/typescript',
    version: 2,
  })
  t.equal(created.headers.etag, `"${sha('console.log(1)\n')}"`)

  const got = await call('GET', `/api/v1/projects/${p}/files/src/main.ts`)
  t.equal(got.status, 200)
  t.equal(got.raw.toString('utf8'), 'console.log(1)\n')
  t.equal(got.headers['content-type'], 'application/typescript')
  t.equal(got.headers.etag, `"${sha('console.log(1)\n')}"`)

  const replaced = await put(call, p, 'src/main.ts', 'console.log(2)\n')
  t.equal(replaced.status, 200, 'replacing answers 200')
  t.match(replaced.body.data, { etag: sha('console.log(2)\n'), contentType: 'text/plain', version: 3 })

  const list = await call('GET', `/api/v1/projects/${p}/files`)
  t.equal(list.status, 200)
  t.match(list.body, {
    data: [
      {
        path: 'src/main.ts',
        size: 15,
        etag: sha('console.log(2)\n'),
        contentType: 'text/plain',
        version: 3,
        updatedAt: /Z$/,
      },
    ],
    meta: { nextCursor: null },
  })

  const deleted = await call('DELETE', `/api/v1/projects/${p}/files/src/main.ts`)
  t.equal(deleted.status, 204)
  t.equal(deleted.raw.length, 0)
  t.same(await pathsOf(call, p), [])
  t.equal((await call('GET', `/api/v1/projects/${p}/files/src/main.ts`)).body.error.details.resource, 'file')
  t.equal((await call('DELETE', `/api/v1/projects/${p}/files/src/main.ts`)).status, 404, 'deleting a missing file')

  const versions = await call('GET', `/api/v1/projects/${p}/versions`)
  t.same(
    versions.body.data.map((v: { version: number; change: string }) => [v.version, v.change]),
    [
      [4, 'files'],
      [3, 'files'],
      [2, 'files'],
      [1, 'created'],
    ],
  )
  const events = await h.platform.db.system(
    (sql) => sql<{ data: { change: string; files: unknown[]; version: number } }[]>`
    select data from webhook_events where type = 'project.updated' and data->>'id' = ${p} order by (data->>'version')::int`,
  )
  t.same(
    events.map((e) => [e.data.version, e.data.change, e.data.files]),
    [
      [2, 'files', [{ path: 'src/main.ts', change: 'created' }]],
      [3, 'files', [{ path: 'src/main.ts', change: 'replaced' }]],
      [4, 'files', [{ path: 'src/main.ts', change: 'deleted' }]],
    ],
    'project.updated for every change',
  )
})

t.test('binary bytes that are not UTF-8 round-trip exactly, any content type, and an empty file', async (t) => {
  const { call, apiKey } = await h.tenant()
  const p = await makeProject(call)
  const bytes = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 167 + 13) % 256))
  t.notOk(Buffer.from(bytes.toString('utf8'), 'utf8').equals(bytes), 'the bytes are not valid UTF-8')
  for (const [path, type] of [
    ['bin/blob.dat', 'application/octet-stream'],
    ['bin/looks.json', 'application/json'],
    ['bin/form', 'application/x-www-form-urlencoded'],
  ] as const) {
    const r = await put(call, p, path, bytes, { 'content-type': type })
    t.equal(r.status, 201, type)
    t.equal(r.body.data.etag, sha(bytes))
    // inject directly: the test caller would parse a JSON-typed answer
    const got = await h.app.inject({
      method: 'GET',
      url: `/api/v1/projects/${p}/files/${path}`,
      headers: { authorization: `Bearer ${apiKey}` },
    })
    t.ok(got.rawPayload.equals(bytes), `${type}: the same bytes back`)
    t.equal(got.headers['content-type'], type)
  }
  const untyped = await h.app.inject({
    method: 'PUT',
    url: `/api/v1/projects/${p}/files/untyped`,
    payload: bytes,
    headers: { authorization: `Bearer ${(await h.tenant()).apiKey}` },
  })
  t.equal(untyped.statusCode, 404, "another tenant's key cannot write here")
  const empty = await call('PUT', `/api/v1/projects/${p}/files/empty.txt`)
  t.match(empty.body.data, { size: 0, etag: sha(''), contentType: 'application/octet-stream' })
  t.equal((await call('GET', `/api/v1/projects/${p}/files/empty.txt`)).raw.length, 0)
})

t.test('ETags: 304 for If-None-Match, 412 when If-Match or If-None-Match: * does not hold', async (t) => {
  const { call } = await h.tenant()
  const p = await makeProject(call)
  const first = await put(call, p, 'a.txt', 'one')
  const etag = `"${first.body.data.etag}"`

  const notModified = await call('GET', `/api/v1/projects/${p}/files/a.txt`, undefined, { 'if-none-match': etag })
  t.equal(notModified.status, 304)
  t.equal(notModified.raw.length, 0)
  t.equal(notModified.headers.etag, etag)
  t.equal(
    (await call('GET', `/api/v1/projects/${p}/files/a.txt`, undefined, { 'if-none-match': `"${sha('other')}"` }))
      .status,
    200,
  )

  const exists = await put(call, p, 'a.txt', 'two', { 'if-none-match': '*' })
  t.equal(exists.status, 412)
  t.match(exists.body.error, { code: 'PRECONDITION_FAILED', details: { path: 'a.txt', etag: first.body.data.etag } })
  t.equal(
    (await put(call, p, 'b.txt', 'new', { 'if-none-match': '*' })).status,
    201,
    'If-None-Match: * creates a new file',
  )

  const stale = await put(call, p, 'a.txt', 'two', { 'if-match': `"${sha('stale')}"` })
  t.equal(stale.status, 412)
  t.equal(
    (await put(call, p, 'missing.txt', 'x', { 'if-match': etag })).status,
    412,
    'If-Match on a file that does not exist',
  )
  t.equal(
    (await put(call, p, 'missing.txt', 'x', { 'if-match': '*' })).status,
    412,
    'If-Match: * on a file that does not exist',
  )
  t.equal(
    (await call('GET', `/api/v1/projects/${p}/files/a.txt`)).raw.toString(),
    'one',
    'refused changes changed nothing',
  )
  const version = await versionOf(call, p)

  const fresh = await put(call, p, 'a.txt', 'two', { 'if-match': etag })
  t.equal(fresh.status, 200)
  t.equal(fresh.body.data.version, version + 1)

  t.equal(
    (await call('DELETE', `/api/v1/projects/${p}/files/a.txt`, undefined, { 'if-match': etag })).status,
    412,
    'DELETE with a stale etag',
  )
  t.equal(
    (await call('DELETE', `/api/v1/projects/${p}/files/a.txt`, undefined, { 'if-match': 'W/"x", "y"' })).body.error
      .code,
    'VALIDATION_ERROR',
    'a list is refused',
  )
  t.equal(
    (await call('DELETE', `/api/v1/projects/${p}/files/a.txt`, undefined, { 'if-match': `"${fresh.body.data.etag}"` }))
      .status,
    204,
  )
  t.equal(await versionOf(call, p), version + 2)
})

t.test('paths: NFC-normalised; every refusal is VALIDATION_ERROR naming its rule, and stores nothing', async (t) => {
  const { call, apiKey } = await h.tenant()
  const p = await makeProject(call)
  const nfd = await put(call, p, encodeURIComponent('cafe\u0301.txt'), 'x')
  t.equal(nfd.body.data.path, 'caf\u00e9.txt')
  t.equal(
    (await call('GET', `/api/v1/projects/${p}/files/${encodeURIComponent('caf\u00e9.txt')}`)).raw.toString(),
    'x',
    'one file under either spelling',
  )
  t.equal((await put(call, p, 'dir%2Fsub.txt', 'y')).body.data.path, 'dir/sub.txt', 'an encoded slash is a separator')
  const version = await versionOf(call, p)

  const cases: [string, string][] = [
    ['', 'empty'],
    ['%2Fetc%2Fpasswd', 'absolute'],
    ['/etc/passwd', 'absolute'],
    ['../x', 'dot-segment'],
    ['%2e%2e/x', 'dot-segment'],
    ['a/%2E%2E/b', 'dot-segment'],
    ['a/../b', 'dot-segment'],
    ['./x', 'dot-segment'],
    ['a/%2e/b', 'dot-segment'],
    ['a//b', 'empty-segment'],
    ['a/', 'empty-segment'],
    ['a%5Cb', 'backslash'],
    ['..%5Cx', 'backslash'],
    ['a%00b', 'control-character'],
    ['a%0Ab', 'control-character'],
    ['a%1Fb', 'control-character'],
    ['a%7Fb', 'control-character'],
    ['x'.repeat(1025), 'too-long'],
    ['%C3%A9'.repeat(513), 'too-long'],
  ]
  for (const [path, rule] of cases) {
    for (const method of ['PUT', 'GET', 'DELETE']) {
      const r = await rawRequest(
        method,
        `/api/v1/projects/${p}/files/${path}`,
        apiKey,
        method === 'PUT' ? Buffer.from('evil') : undefined,
      )
      t.equal(r.status, 400, `${method} ${path.slice(0, 30)}`)
      t.match(
        r.body?.error,
        { code: 'VALIDATION_ERROR', details: { rule, errors: [{ field: 'path', rule }] } },
        `${method} ${path.slice(0, 30)}: ${rule}`,
      )
    }
  }
  t.same(await pathsOf(call, p), ['caf\u00e9.txt', 'dir/sub.txt'], 'nothing more was stored')
  t.equal(await versionOf(call, p), version, 'no version was added')
})

t.test('the list pages by path with a cursor and filters by prefix', async (t) => {
  const { call } = await h.tenant()
  const p = await makeProject(call)
  const all = ['a.txt', 'b/1.txt', 'b/2.txt', 'b/3.txt', 'c.txt', 'Z.txt', 'é.txt']
  for (const path of all) await put(call, p, encodeURIComponent(path).replace(/%2F/g, '/'), path)
  const seen: string[] = []
  let cursor: string | null = null
  do {
    const r: Awaited<ReturnType<Caller>> = await call(
      'GET',
      `/api/v1/projects/${p}/files?limit=3${cursor ? `&cursor=${cursor}` : ''}`,
    )
    t.equal(r.status, 200)
    seen.push(...r.body.data.map((f: { path: string }) => f.path))
    cursor = r.body.meta.nextCursor
  } while (cursor)
  t.same(
    seen,
    [...all].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y))),
    'byte order, no gaps or repeats',
  )
  const b = await call('GET', `/api/v1/projects/${p}/files?prefix=b/&limit=2`)
  t.same(
    b.body.data.map((f: { path: string }) => f.path),
    ['b/1.txt', 'b/2.txt'],
  )
  const rest = await call('GET', `/api/v1/projects/${p}/files?prefix=b/&cursor=${b.body.meta.nextCursor}`)
  t.same(
    rest.body.data.map((f: { path: string }) => f.path),
    ['b/3.txt'],
  )
  for (const q of [
    'limit=0',
    'limit=201',
    'cursor=nope',
    `cursor=${Buffer.from('v1:../x').toString('base64url')}`,
    'other=1',
  ]) {
    t.equal((await call('GET', `/api/v1/projects/${p}/files?${q}`)).body.error.code, 'VALIDATION_ERROR', q)
  }
})

t.test('the plan limits a file and all of a project files; refused uploads store nothing', async (t) => {
  const { call, tenantId } = await h.tenant('free')
  const p = await makeProject(call)
  const tooBig = await put(call, p, 'big.bin', Buffer.alloc(MiB + 1), { 'content-type': 'application/octet-stream' })
  t.equal(tooBig.status, 413)
  t.match(tooBig.body.error, { code: 'PAYLOAD_TOO_LARGE', details: { limit: MiB } })
  t.equal((await put(call, p, 'max.bin', Buffer.alloc(MiB, 1))).status, 201, 'exactly the per-file limit')

  for (let i = 0; i < 9; i++) t.equal((await put(call, p, `f${i}.bin`, Buffer.alloc(MiB, i + 2))).status, 201)
  const version = await versionOf(call, p)
  const over = await put(call, p, 'one-more.bin', Buffer.from('x'))
  t.equal(over.status, 413)
  t.match(over.body.error, { code: 'QUOTA_EXCEEDED', details: { limit: 10 * MiB, used: 10 * MiB } })
  t.equal((await put(call, p, 'f0.bin', Buffer.alloc(MiB, 0))).status, 200, 'a replacement of the same size fits')
  t.equal((await put(call, p, 'f1.bin', Buffer.alloc(MiB + 1 - MiB))).status, 200, 'a smaller replacement frees space')
  t.equal((await put(call, p, 'one-more.bin', Buffer.from('x'))).status, 201, 'and then there is room')
  t.notOk((await pathsOf(call, p)).includes('big.bin'))
  t.equal(await versionOf(call, p), version + 3, 'refusals added no version')
  const [row] = await h.platform.db.system(
    (sql) =>
      sql<
        { n: number }[]
      >`select count(*)::int as n from project_files where tenant_id = ${tenantId} and path = 'big.bin'`,
  )
  t.equal(row!.n, 0)

  const limits = (await call('GET', '/api/v1/tenant')).body.data.limits
  t.match(limits, { fileBytes: MiB, projectFileBytes: 10 * MiB }, 'GET /tenant shows the limits')
})

t.test("another tenant's project and files are 404", async (t) => {
  const owner = await h.tenant()
  const other = await h.tenant()
  const p = await makeProject(owner.call)
  await put(owner.call, p, 'secret.txt', 'mine')
  for (const [method, url] of [
    ['GET', `/api/v1/projects/${p}/files`],
    ['GET', `/api/v1/projects/${p}/files/secret.txt`],
    ['PUT', `/api/v1/projects/${p}/files/secret.txt`],
    ['PUT', `/api/v1/projects/${p}/files/new.txt`],
    ['DELETE', `/api/v1/projects/${p}/files/secret.txt`],
  ] as const) {
    const r = await other.call(method, url, method === 'PUT' ? 'theirs' : undefined, { 'content-type': 'text/plain' })
    t.equal(r.status, 404, `${method} ${url}`)
    t.match(r.body.error.details, { resource: 'project', id: p })
  }
  t.equal((await owner.call('GET', `/api/v1/projects/${p}/files/secret.txt`)).raw.toString(), 'mine')
  t.same(await pathsOf(owner.call, p), ['secret.txt'])
})

t.test('a key without projects:write can read files but not change them', async (t) => {
  const { call, tenantId } = await h.tenant()
  const p = await makeProject(call)
  await put(call, p, 'r.txt', 'read me')
  const made = await call('POST', '/api/v1/api-keys', { name: 'reader', type: 'sdk', permissions: ['projects:read'] })
  t.equal(made.status, 201, JSON.stringify(made.body))
  const key = made.body.data.key ?? made.body.data.apiKey
  const reader = (method: 'GET' | 'PUT' | 'DELETE', path: string, body?: string) =>
    h.app.inject({
      method,
      url: `/api/v1/projects/${p}/files/${path}`,
      payload: body,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'text/plain' },
    })
  t.equal((await reader('GET', 'r.txt')).statusCode, 200)
  t.equal((await reader('PUT', 'r.txt', 'no')).statusCode, 403)
  t.equal((await reader('DELETE', 'r.txt')).statusCode, 403)
  t.ok(tenantId)
})

t.test('restoring a version brings its files back; pruned versions take their manifests with them', async (t) => {
  const { call, tenantId } = await h.tenant('free') // keeps 5 versions
  const p = await makeProject(call)
  await put(call, p, 'keep.txt', 'v2')
  await put(call, p, 'gone.txt', 'v3')
  const v3 = (await call('GET', `/api/v1/projects/${p}/versions?limit=1`)).body.data[0]
  t.equal(v3.version, 3)
  await put(call, p, 'keep.txt', 'v4 changed')
  await call('DELETE', `/api/v1/projects/${p}/files/gone.txt`)
  await put(call, p, 'later.txt', 'v6')
  t.same(await pathsOf(call, p), ['keep.txt', 'later.txt'])

  const restored = await call('POST', `/api/v1/projects/${p}/versions/${v3.id}/restore`)
  t.equal(restored.status, 200)
  t.equal(restored.body.data.version, 7)
  t.same(await pathsOf(call, p), ['gone.txt', 'keep.txt'])
  t.equal((await call('GET', `/api/v1/projects/${p}/files/keep.txt`)).raw.toString(), 'v2')
  t.equal((await call('GET', `/api/v1/projects/${p}/files/gone.txt`)).raw.toString(), 'v3')
  const listed = (await call('GET', `/api/v1/projects/${p}/files`)).body.data
  t.same(
    listed.map((f: { path: string; version: number }) => [f.path, f.version]),
    [
      ['gone.txt', 7],
      ['keep.txt', 7],
    ],
    'restored files are written by the restore',
  )

  const manifests = await h.platform.db.system(
    (sql) => sql<{ version: number; n: number }[]>`
    select version, count(*)::int as n from project_version_files where tenant_id = ${tenantId} and project_id = ${p} group by version order by version`,
  )
  t.same(
    manifests.map((m) => [m.version, m.n]),
    [
      [3, 2],
      [4, 2],
      [5, 1],
      [6, 2],
      [7, 2],
    ],
    'versions 1 and 2 were pruned (the free plan keeps 5), and version 2 took its manifest with it',
  )
})

t.test('the backup zip holds files.json and every current file under files/, byte for byte', async (t) => {
  const { call } = await h.tenant()
  const p = await makeProject(call)
  const bytes = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28])
  await put(call, p, 'bin/data.bin', bytes, { 'content-type': 'application/octet-stream' })
  await put(call, p, 'README.md', '# hi\n', { 'content-type': 'text/markdown' })
  const r = await call('POST', `/api/v1/projects/${p}/backup`)
  t.equal(r.status, 201)
  const url = new URL(r.body.data.downloadUrl)
  const zip =
    h.platform.blobs.kind === 'local'
      ? (await h.app.inject({ method: 'GET', url: url.pathname + url.search })).rawPayload
      : Buffer.from(await (await fetch(url)).arrayBuffer())
  const entries = await unzipRaw(zip)
  t.same(Object.keys(entries).sort(), [
    'files.json',
    'files/README.md',
    'files/bin/data.bin',
    'manifest.json',
    'project.json',
  ])
  t.ok(entries['files/bin/data.bin']!.equals(bytes), 'binary bytes exactly')
  t.equal(entries['files/README.md']!.toString(), '# hi\n')
  const text = await unzip(zip)
  t.same(JSON.parse(text['files.json']!), [
    { path: 'README.md', size: 5, sha256: sha('# hi\n'), contentType: 'text/markdown' },
    { path: 'bin/data.bin', size: 6, sha256: sha(bytes), contentType: 'application/octet-stream' },
  ])
  t.match(JSON.parse(text['manifest.json']!), { formatVersion: 2, includes: { files: true } })
})

t.test('the service API: several changes in one version, staged bytes, and its refusals', async (t) => {
  const { call, tenantId } = await h.tenant('free')
  const p = await makeProject(call)
  const other = await makeProject(call)
  const { db, storage } = h.platform
  const files = projectFilesService({ db, storage })
  const a: Actor = {
    tenantId,
    principal: { tenantId, plan: 'free', permissions: [] } as unknown as Actor['principal'],
    origin: { ip: '127.0.0.1', userAgent: 'test' },
  }

  const one = await files.stage(a, p, 'one.txt', Buffer.from('1'), 'text/plain')
  const two = await files.stage(a, p, 'two.txt', Buffer.from('2'))
  t.same(await files.readStaged(tenantId, one), Buffer.from('1'))
  t.equal(two.contentType, 'application/octet-stream')
  const r = await db.tenant(tenantId, (sql) =>
    files.apply(sql, a, p, [
      { path: 'one.txt', staged: one },
      { path: 'dir/two.txt', staged: two },
    ]),
  )
  t.equal(r.version, 2, 'one version for both')
  t.same(
    r.files.map((f) => f.path),
    ['one.txt', 'dir/two.txt'],
  )
  t.same((await files.read(tenantId, p, 'dir/two.txt')).body, Buffer.from('2'))
  const listed = await files.list(tenantId, p, { limit: 1 })
  t.equal(listed.data.length, 1)
  t.type(listed.nextCursor, 'string')

  const code = async (fn: () => Promise<unknown>) =>
    fn().then(
      () => 'resolved',
      (err: { code?: string }) => err.code,
    )
  t.equal(
    await code(() => db.tenant(tenantId, (sql) => files.apply(sql, a, p, [{ path: 'nope.txt', delete: true }]))),
    'RESOURCE_NOT_FOUND',
  )
  t.equal(await code(() => db.tenant(tenantId, (sql) => files.apply(sql, a, p, []))), 'VALIDATION_ERROR')
  t.equal(
    await code(() => db.tenant(tenantId, (sql) => files.apply(sql, a, other, [{ path: 'x', staged: one }]))),
    'VALIDATION_ERROR',
    "another project's staged bytes",
  )
  t.equal(
    await code(() =>
      db.tenant(tenantId, (sql) =>
        files.apply(sql, a, p, [
          { path: 'x', staged: one },
          { path: 'x', delete: true },
        ]),
      ),
    ),
    'VALIDATION_ERROR',
    'a path twice',
  )
  t.equal(
    await code(() =>
      db.tenant(tenantId, (sql) =>
        files.apply(sql, a, p, [{ path: 'one.txt', staged: two }], { ifMatch: { 'one.txt': two.sha256 } }),
      ),
    ),
    'PRECONDITION_FAILED',
  )
  t.equal(await code(() => files.read(tenantId, p, 'absent')), 'RESOURCE_NOT_FOUND')
  t.equal(await code(() => files.stage(a, p, 'big', Buffer.alloc(MiB + 1))), 'PAYLOAD_TOO_LARGE')
  t.equal(await code(() => files.stage(a, p, 'ok', Buffer.from('x'), 'bad\ntype')), 'VALIDATION_ERROR')
  t.equal(await versionOf(call, p), 2, 'no refusal made a version')
})

t.test('the OpenAPI document describes the file routes', async (t) => {
  const doc = (await h.anonymous('GET', '/openapi.json')).body
  for (const m of ['get', 'put', 'delete'])
    t.ok(
      doc.paths['/api/v1/projects/{projectId}/files/{*}']?.[m] ??
        doc.paths['/api/v1/projects/{projectId}/files/*']?.[m],
      m,
    )
  t.ok(doc.paths['/api/v1/projects/{projectId}/files']?.get)
})
