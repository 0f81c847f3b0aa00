// The same stack without Atrium's safety: Fastify and postgres.js connected as the database's owner
// (no authentication, no rate limit, no row-level security, no envelope checks), doing the work of
// Atrium's project routes on Atrium's own tables. What it serves is the ceiling the safety is
// measured against. RAW_TENANT_ID names the tenant whose projects it lists and creates.
import { createHash, randomUUID } from 'node:crypto'
import { mkdir, rename, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import Fastify from 'fastify'
import { Client } from 'minio'
import postgres from 'postgres'

const sql = postgres(process.env.DATABASE_URL!, { max: 10, onnotice: () => {} })
const tenantId = process.env.RAW_TENANT_ID!
const app = Fastify()
const COLUMNS = sql`id, name, description, language, version, created_at, updated_at`

app.get<{ Params: { id: string } }>('/projects/:id', async (req, reply) => {
  const [row] = await sql`select ${COLUMNS} from projects where id = ${req.params.id}`
  return row ? { data: row } : reply.code(404).send({ error: 'not found' })
})

app.get('/projects', async () => ({
  data: await sql`select ${COLUMNS} from projects where tenant_id = ${tenantId} order by id desc limit 50`,
}))

app.post<{ Body: { name: string; description?: string; language?: string } }>('/projects', async (req, reply) => {
  const { name, description = '', language = '' } = req.body
  const row = await sql.begin(async (tx) => {
    const [p] =
      await tx`insert into projects (id, tenant_id, name, description, language) values (${randomUUID()}, ${tenantId}, ${name}, ${description}, ${language}) returning ${COLUMNS}`
    await tx`insert into project_versions (id, tenant_id, project_id, version, name, description, language, change) values (${randomUUID()}, ${tenantId}, ${p!.id}, 1, ${name}, ${description}, ${language}, 'created')`
    await tx`insert into webhook_events (id, tenant_id, type, data) values (${randomUUID()}, ${tenantId}, 'project.created', ${sql.json({ id: p!.id, name })})`
    return p
  })
  return reply.code(201).send({ data: row })
})

// A file's bytes copied to the same store as Atrium's (the S3 store of R2_*, or a folder: RAW_BLOB_DIR)
// under the same content address, then the file, a version with its manifest and the outbox event
// in one transaction: a PUT's work without the plan's checks, the upload's registration or RLS.
const s3 = process.env.R2_ENDPOINT ? new URL(process.env.R2_ENDPOINT) : null
const client = s3
  ? new Client({
      endPoint: s3.hostname,
      port: Number(s3.port) || undefined,
      useSSL: s3.protocol === 'https:',
      accessKey: process.env.R2_ACCESS_KEY_ID!,
      secretKey: process.env.R2_SECRET_ACCESS_KEY!,
      region: 'us-east-1',
    })
  : null
async function store(key: string, body: Buffer) {
  if (client) return void (await client.putObject(process.env.R2_BUCKET!, key, body, body.length))
  const path = join(process.env.RAW_BLOB_DIR!, key)
  await mkdir(dirname(path), { recursive: true })
  const part = `${path}.${randomUUID()}.part` // written aside, then renamed: concurrent writes of one key never meet
  await writeFile(part, body)
  await rename(part, path)
}
app.addContentTypeParser(
  'application/octet-stream',
  { parseAs: 'buffer', bodyLimit: 100 * 1024 * 1024 },
  (_req, body, done) => done(null, body),
)
app.put<{ Params: { id: string; '*': string } }>('/projects/:id/files/*', async (req) => {
  const body = req.body as Buffer
  const projectId = req.params.id
  const path = req.params['*']
  const sha256 = createHash('sha256').update(body).digest('hex')
  const key = `tenants/${tenantId}/projects/${projectId}/files/${sha256}`
  await store(key, body)
  const version = await sql.begin(async (tx) => {
    const [p] =
      await tx`update projects set version = version + 1, updated_at = now() where id = ${projectId} returning version, name, description, language`
    await tx`insert into project_files (tenant_id, project_id, path, blob_key, size, sha256, content_type, version)
             values (${tenantId}, ${projectId}, ${path}, ${key}, ${body.length}, ${sha256}, 'application/octet-stream', ${p!.version})
             on conflict (tenant_id, project_id, path) do update set blob_key = excluded.blob_key, size = excluded.size, sha256 = excluded.sha256, version = excluded.version, updated_at = now()`
    await tx`insert into project_versions (id, tenant_id, project_id, version, name, description, language, change) values (${randomUUID()}, ${tenantId}, ${projectId}, ${p!.version}, ${p!.name}, ${p!.description}, ${p!.language}, 'files')`
    await tx`insert into project_version_files (tenant_id, project_id, version, path, blob_key, size, sha256, content_type)
             select tenant_id, project_id, ${p!.version}, path, blob_key, size, sha256, content_type from project_files where tenant_id = ${tenantId} and project_id = ${projectId}`
    await tx`insert into webhook_events (id, tenant_id, type, data) values (${randomUUID()}, ${tenantId}, 'project.updated', ${sql.json({ id: projectId, change: 'files', files: [{ path }] })})`
    return p!.version
  })
  return { data: { path, size: body.length, etag: sha256, version } }
})

const address = await app.listen({ port: 0, host: '127.0.0.1' })
process.stderr.write(`listening on ${address}\n`)
process.on(
  'SIGTERM',
  () =>
    void app
      .close()
      .then(() => sql.end({ timeout: 5 }))
      .then(() => process.exit(0)),
)
