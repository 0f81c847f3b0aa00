import t from 'tap'
import { testApp } from '../../../helpers/app.js'

const h = await testApp(t)
const a = await h.tenant()
const b = await h.tenant()

const project = (await a.call('POST', '/api/v1/projects', { name: "A's secret project" })).body.data
await a.call('PATCH', `/api/v1/projects/${project.id}`, { description: 'v2' })
const version = (await a.call('GET', `/api/v1/projects/${project.id}/versions`)).body.data[1]

t.test("tenant B gets 404 on every one of tenant A's project routes", async (t) => {
  const routes: [Parameters<typeof b.call>[0], string, unknown?][] = [
    ['GET', `/api/v1/projects/${project.id}`],
    ['PATCH', `/api/v1/projects/${project.id}`, { name: 'taken over' }],
    ['DELETE', `/api/v1/projects/${project.id}`],
    ['GET', `/api/v1/projects/${project.id}/versions`],
    ['POST', `/api/v1/projects/${project.id}/versions/${version.id}/restore`],
    ['POST', `/api/v1/projects/${project.id}/backup`, { includeHistory: true }],
  ]
  for (const [method, url, body] of routes) {
    const r = await b.call(method, url, body)
    t.equal(r.status, 404, `${method} ${url}`)
    t.equal(r.body.error.code, 'RESOURCE_NOT_FOUND', `${method} ${url}`)
  }
  t.same((await b.call('GET', '/api/v1/projects')).body.data, [], "A's project is not in B's list")
})

t.test("tenant A's project is untouched by B's attempts", async (t) => {
  const r = await a.call('GET', `/api/v1/projects/${project.id}`)
  t.match(r.body.data, { name: "A's secret project", description: 'v2', version: 2 })
  t.equal((await a.call('GET', `/api/v1/projects/${project.id}/versions`)).body.data.length, 2)
  const [backups] = await h.platform.db.system(
    (sql) => sql`select count(*)::int as n from project_backups where project_id = ${project.id}`,
  )
  t.equal((backups as { n: number }).n, 0, 'no backup was taken for B')
})

t.test("a version of A's project cannot be restored into B's project", async (t) => {
  const own = (await b.call('POST', '/api/v1/projects', { name: "B's" })).body.data
  const r = await b.call('POST', `/api/v1/projects/${own.id}/versions/${version.id}/restore`)
  t.equal(r.status, 404)
  t.equal((await b.call('GET', `/api/v1/projects/${own.id}`)).body.data.name, "B's")
})
