// The same stack without Atrium's safety: Fastify and postgres.js connected as the database's owner
// (no authentication, no rate limit, no row-level security, no envelope checks), doing the work of
// Atrium's project routes on Atrium's own tables. What it serves is the ceiling the safety is
// measured against. RAW_TENANT_ID names the tenant whose projects it lists and creates.
import { randomUUID } from 'node:crypto'
import Fastify from 'fastify'
import postgres from 'postgres'

const sql = postgres(process.env.DATABASE_URL!, { max: 10, onnotice: () => {} })
const tenantId = process.env.RAW_TENANT_ID!
const app = Fastify()
const COLUMNS = sql`id, name, description, language, version, created_at, updated_at`

app.get<{ Params: { id: string } }>('/projects/:id', async (req, reply) => {
  const [row] = await sql`select ${COLUMNS} from projects where id = ${req.params.id}`
  return row ? { data: row } : reply.code(404).send({ error: 'not found' })
})

app.get('/projects', async () => ({ data: await sql`select ${COLUMNS} from projects where tenant_id = ${tenantId} order by id desc limit 50` }))

app.post<{ Body: { name: string; description?: string; language?: string } }>('/projects', async (req, reply) => {
  const { name, description = '', language = '' } = req.body
  const row = await sql.begin(async (tx) => {
    const [p] = await tx`insert into projects (id, tenant_id, name, description, language) values (${randomUUID()}, ${tenantId}, ${name}, ${description}, ${language}) returning ${COLUMNS}`
    await tx`insert into project_versions (id, tenant_id, project_id, version, name, description, language, change) values (${randomUUID()}, ${tenantId}, ${p!.id}, 1, ${name}, ${description}, ${language}, 'created')`
    await tx`insert into webhook_events (id, tenant_id, type, data) values (${randomUUID()}, ${tenantId}, 'project.created', ${sql.json({ id: p!.id, name })})`
    return p
  })
  return reply.code(201).send({ data: row })
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
