import t from 'tap'
import { apiKeyAuthenticator } from '../../../../server/modules/api-keys/service.js'
import { apiKeyTags } from '../../../../server/modules/api-keys/keys.js'
import { createTenant } from '../../../../server/modules/tenants/service.js'
import { verifyPassword } from '../../../../server/modules/users/passwords.js'
import { suffix, testPlatform } from '../../../helpers/platform.js'

const platform = await testPlatform(t)
const { db } = platform

t.test('a tenant is created with its owner and an all-permissions ci key', async (t) => {
  const email = `Owner-${suffix()}@Example.com`
  const r = await createTenant(platform, { name: '  Acme ', plan: 'pro', email, password: 'a sufficiently long one' })
  t.match(r, { tenantId: String, userId: String, apiKey: /^svc_ci_/ })
  const [tenant] = await db.system((sql) => sql`select name, plan, status from tenants where id = ${r.tenantId}`)
  t.same(tenant, { name: 'Acme', plan: 'pro', status: 'active' })
  const [user] = await db.system(
    (sql) =>
      sql<
        { role: string; email: string; password_hash: string }[]
      >`select role, email, password_hash from users where id = ${r.userId}`,
  )
  t.match(user, { role: 'owner', email })
  t.ok(await verifyPassword('a sufficiently long one', user!.password_hash), 'the owner can log in with the password')
  const p = await apiKeyAuthenticator({
    db,
    tags: apiKeyTags(platform.secrets),
    legacy: { mayExist: () => false },
  }).lookUp(r.apiKey)
  t.match(p, { tenantId: r.tenantId, userId: r.userId, plan: 'pro' })
  t.ok(p!.permissions.has('*'))
})

t.test('without email or password the owner still exists, without a password', async (t) => {
  const r = await createTenant(platform, { name: 'Quiet' })
  const [user] = await db.system((sql) => sql`select email, password_hash from users where id = ${r.userId}`)
  t.match(user, { email: /@tenant\.invalid$/, password_hash: null })
})

t.test('bad input is VALIDATION_ERROR and creates nothing', async (t) => {
  const email = `dup-${suffix()}@example.com`
  await createTenant(platform, { name: 'First', email })
  const before = await db.system((sql) => sql`select count(*)::int as n from tenants`)
  const bad = [
    { name: '' },
    { name: 'x'.repeat(201) },
    { name: 'ok', plan: 'platinum' },
    { name: 'ok', email: 'not-an-email' },
    { name: 'ok', email: `x-${suffix()}@example.com`, password: 'short' },
  ]
  for (const input of bad)
    await t.rejects(createTenant(platform, input), { code: 'VALIDATION_ERROR' }, JSON.stringify(input))
  const after = await db.system((sql) => sql`select count(*)::int as n from tenants`)
  t.same(after, before, 'no half-created tenant')
})

t.test('an owner whose address has an account in another tenant gets a separate account', async (t) => {
  const email = `twice-${suffix()}@example.com`
  const first = await createTenant(platform, { name: 'First', email })
  const second = await createTenant(platform, { name: 'Second', email: email.toUpperCase() })
  t.not(second.userId, first.userId)
  const rows = await db.system(
    (sql) => sql`select tenant_id from users where lower(email) = lower(${email}) order by tenant_id`,
  )
  t.same(rows.map((r) => r.tenant_id).sort(), [first.tenantId, second.tenantId].sort())
})

t.test("a license's maxTenants caps the tenants there can be; FORBIDDEN license_tenant_limit beyond it", async (t) => {
  const count = async () =>
    (await db.system((sql) => sql<{ n: number }[]>`select count(*)::int as n from tenants`))[0]!.n
  const before = await count()
  await createTenant(platform, { name: 'Within the limit' }, { maxTenants: before + 1 })
  await t.rejects(createTenant(platform, { name: 'Beyond' }, { maxTenants: before + 1 }), {
    code: 'FORBIDDEN',
    status: 403,
    details: { reason: 'license_tenant_limit', maxTenants: before + 1 },
    message: /at most \d+ tenant\(s\)/,
  })
  t.equal(await count(), before + 1, 'nothing created beyond it')

  const raced = await Promise.allSettled(
    [1, 2, 3].map((i) => createTenant(platform, { name: `Race ${i}` }, { maxTenants: before + 2 })),
  )
  t.equal(raced.filter((r) => r.status === 'fulfilled').length, 1, 'creations at once still get one place between them')
  t.equal(await count(), before + 2)

  await createTenant(platform, { name: 'Unlicensed development' }, { maxTenants: null })
  t.equal(await count(), before + 3, 'no license, no limit')
})
