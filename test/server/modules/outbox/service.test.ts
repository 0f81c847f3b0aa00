// The outbox: an event exists exactly when the change it announces does.
import t from 'tap'
import { emitEvent } from '../../../../server/modules/outbox/service.js'
import { createTenant } from '../../../../server/modules/tenants/service.js'
import { testApp } from '../../../helpers/app.js'
import { suffix } from '../../../helpers/platform.js'

const h = await testApp(t)
const db = h.platform.db
const eventsOf = (tenantId: string) =>
  db.system(
    (sql) =>
      sql<
        { type: string; data: Record<string, unknown> }[]
      >`select type, data from webhook_events where tenant_id = ${tenantId} order by id`,
  )

t.test('an event is written in the transaction of its change: a rollback leaves no event', async (t) => {
  const a = await h.tenant()
  const before = (await eventsOf(a.tenantId)).length
  await t.rejects(
    db.tenant(a.tenantId, async (sql) => {
      await emitEvent(sql, { tenantId: a.tenantId, type: 'project.created', data: { id: 'x' } })
      throw new Error('the change failed after announcing itself')
    }),
  )
  t.equal((await eventsOf(a.tenantId)).length, before, 'nothing announced')
  await db.tenant(a.tenantId, (sql) =>
    emitEvent(sql, { tenantId: a.tenantId, type: 'project.created', data: { id: 'y' } }),
  )
  t.equal((await eventsOf(a.tenantId)).length, before + 1, 'a committed one is there')
})

t.test('a tenant creation that fails part-way announces neither the tenant nor its owner', async (t) => {
  // The last step, the owner's key, fails: after the tenant, its owner and both events were written.
  const name = `Doomed ${suffix()}`
  await db.sql.unsafe(`
    create function atrium_test_refuse_key() returns trigger language plpgsql as $$
    begin raise exception 'refused by the test'; end $$;
    create trigger atrium_test_refuse_key before insert on api_keys for each row
      when (new.name = 'owner key (admin CLI)') execute function atrium_test_refuse_key()`)
  t.teardown(() =>
    db.sql.unsafe('drop trigger atrium_test_refuse_key on api_keys; drop function atrium_test_refuse_key()'),
  )
  await t.rejects(createTenant(h.platform, { name, email: `doomed-${suffix()}@example.com` }), /refused by the test/)
  const leaked = await db.system(
    (sql) => sql`select type from webhook_events where data->>'name' = ${name} or data->>'email' like 'doomed-%'`,
  )
  t.same(leaked, [])
  t.same(await db.system((sql) => sql`select 1 from tenants where name = ${name}`), [], 'nor the tenant itself')
})

t.test('a project change that is refused announces nothing; the ones that happen are announced in order', async (t) => {
  const a = await h.tenant()
  const p = await a.call('POST', '/api/v1/projects', { name: 'One' })
  t.equal((await a.call('PATCH', `/api/v1/projects/${p.body.data.id}`, { name: '' })).status, 400)
  t.equal(
    (await a.call('PATCH', `/api/v1/projects/${p.body.data.id}`, { name: 'One' })).status,
    200,
    'a change to the same value',
  )
  t.equal((await a.call('DELETE', '/api/v1/projects/01a20839-45d1-7122-b2a2-34a47752223f')).status, 404)
  const versions = await a.call('GET', `/api/v1/projects/${p.body.data.id}/versions`)
  await a.call('PATCH', `/api/v1/projects/${p.body.data.id}`, { description: 'more' })
  await a.call('POST', `/api/v1/projects/${p.body.data.id}/versions/${versions.body.data[0].id}/restore`)
  await a.call('DELETE', `/api/v1/projects/${p.body.data.id}`)
  const events = await eventsOf(a.tenantId)
  t.same(
    events.map((e) => e.type),
    ['tenant.created', 'user.created', 'project.created', 'project.updated', 'project.updated', 'project.deleted'],
  )
  t.match(events[3]!.data, {
    description: 'more',
    previous: { description: '' },
    change: 'updated',
    restoredFrom: null,
  })
  t.match(events[4]!.data, { description: '', previous: { description: 'more' }, change: 'restored', restoredFrom: 1 })
  t.match(events[5]!.data, { id: p.body.data.id, name: 'One', version: 3 })
})
