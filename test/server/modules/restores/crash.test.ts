// kill -9 of the server in the middle of an export and in the middle of a restore's transaction.
// The store is reached through a proxy that the test can stall, so the kill lands while the work is
// under way. After a restart each job ends completed (never stuck), and a replace killed before it
// committed has left the tenant's previous data as it was, row by row.
import postgres from 'postgres'
import t from 'tap'
import { admin, startServer } from '../../../helpers/cli.js'
import { faultProxy } from '../../../helpers/fault-proxy.js'
import { services, testEnv } from '../../../helpers/platform.js'
import { restoreForm } from '../../../helpers/portability.js'
import { unzipRaw } from '../../../helpers/zip.js'

const skip = !services.databaseUrl
  ? 'needs PostgreSQL (TEST_DATABASE_URL): two server processes share the database'
  : !services.s3Endpoint
    ? 'needs an S3 store (TEST_S3_ENDPOINT) behind a proxy'
    : false
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

t.test('kill -9 during an export and during a restore', { skip }, async (t) => {
  const env = await testEnv(t)
  const proxy = await faultProxy(t, env.R2_ENDPOINT!)
  env.R2_ENDPOINT = proxy.via(env.R2_ENDPOINT!)
  const created = await admin(['create-tenant', '--name', 'Crash', '--plan', 'enterprise'], env)
  t.equal(created.code, 0, created.stderr)
  const { tenantId, apiKey } = JSON.parse(created.stdout) as { tenantId: string; apiKey: string }
  const db = postgres(env.DATABASE_URL!, { max: 1, onnotice: () => {} })
  t.teardown(() => db.end())

  let server = await startServer(env)
  t.teardown(() => server.child.kill('SIGKILL'))
  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const r = await fetch(`${server.base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${apiKey}`,
        ...(typeof body === 'object' && !(body instanceof Buffer) ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      ...(body === undefined
        ? {}
        : { body: body instanceof Buffer || typeof body === 'string' ? body : JSON.stringify(body) }),
    })
    const text = await r.text()
    return { status: r.status, body: text ? JSON.parse(text) : null }
  }
  const restart = async () => {
    server.child.kill('SIGKILL')
    await server.done
    proxy.release()
    server = await startServer(env)
  }
  const ended = async (path: string, running: string[]) => {
    for (let i = 0; i < 900; i++) {
      const r = await call('GET', path)
      if (!running.includes(r.body.data.status)) return r.body.data
      await sleep(100)
    }
    throw new Error(`${path} did not end`)
  }

  const projectId = (await call('POST', '/api/v1/projects', { name: 'Before the crash' })).body.data.id
  for (let i = 0; i < 5; i++)
    await call('PUT', `/api/v1/projects/${projectId}/files/part-${i}.bin`, Buffer.alloc(512 * 1024, i), {
      'content-type': 'application/octet-stream',
    })
  const exports = `/api/v1/platform/tenants/${tenantId}/export`

  await t.test('an export killed while it writes: taken over after the restart, completed once', async (t) => {
    const asked = await call('POST', exports, {})
    t.equal(asked.status, 202)
    const id = asked.body.data.exportId
    for (let i = 0; i < 200 && (await call('GET', `${exports}/${id}`)).body.data.status !== 'running'; i++)
      await sleep(20)
    proxy.hold() // the store stalls: the archive is half written
    await sleep(300)
    t.equal((await call('GET', `${exports}/${id}`)).body.data.status, 'running', 'killed while running')
    await restart()
    const done = await ended(`${exports}/${id}`, ['pending', 'running'])
    t.equal(done.status, 'completed', JSON.stringify(done.error))
    const zip = Buffer.from(await (await fetch(done.downloadUrl)).arrayBuffer())
    t.equal(zip.length, done.size)
    t.equal(Object.keys(await unzipRaw(zip)).filter((n) => n.includes('/files/')).length, 5, 'the whole archive')
    const [row] =
      await db`select count(*)::int as n from audit_events where tenant_id = ${tenantId} and action = 'export.completed' and target_id = ${id}`
    t.equal(row!.n, 1, 'completed once')
  })

  await t.test(
    'a replace killed in its transaction leaves the previous data, row by row; after the restart it completes',
    async (t) => {
      const archive = Buffer.from(
        await (
          await fetch(
            (await ended(`${exports}/${(await call('POST', exports, {})).body.data.exportId}`, ['pending', 'running']))
              .downloadUrl,
          )
        ).arrayBuffer(),
      )
      // Changed since the archive was taken: a replace undoes this.
      await call('PATCH', `/api/v1/projects/${projectId}`, { name: 'Changed after the export' })
      await call('POST', '/api/v1/projects', { name: 'Made after the export' })
      const rows = () =>
        db`select json_build_object(
        'projects', (select json_agg(p order by id) from projects p where tenant_id = ${tenantId}),
        'versions', (select json_agg(v order by id) from project_versions v where tenant_id = ${tenantId}),
        'files', (select json_agg(f order by project_id, path) from project_files f where tenant_id = ${tenantId}),
        'manifests', (select json_agg(m order by project_id, version, path) from project_version_files m where tenant_id = ${tenantId})
      ) as s`.then((r) => r[0]!.s)
      const before = await rows()

      const { payload, headers } = restoreForm(archive, { merge: false })
      const asked = await call('POST', `/api/v1/platform/tenants/${tenantId}/restore`, payload, headers)
      t.equal(asked.status, 202, JSON.stringify(asked.body))
      const path = `/api/v1/platform/tenants/${tenantId}/restore/${asked.body.data.restoreId}`
      // The replace has deleted the tenant's projects in its transaction (it holds their row lock) when
      // the store stalls under it.
      let inTransaction = false
      for (let i = 0; i < 400 && !inTransaction; i++) {
        const [l] =
          await db`select count(*)::int as n from pg_locks l join pg_class c on c.oid = l.relation where c.relname = 'projects' and l.mode = 'RowExclusiveLock' and l.pid <> pg_backend_pid()`
        if (l!.n > 0) {
          proxy.hold()
          inTransaction = true
        } else await sleep(5)
      }
      t.ok(inTransaction, 'the kill lands inside the replace’s transaction')
      await sleep(300)
      server.child.kill('SIGKILL')
      await server.done
      t.same(await rows(), before, 'killed before its commit: every row as it was')
      await restart()
      const done = await ended(path, ['processing'])
      t.equal(done.status, 'completed', JSON.stringify(done.error))
      const names = (await db`select name from projects where tenant_id = ${tenantId} order by id`).map((r) => r.name)
      t.same(names, ['Before the crash'], 'the archive’s state, after the restart')
    },
  )
})
