import t from 'tap'
import { AUDIT_LOG_PLAN, PLAN_TERMS, PLANS } from '../../../server/domain/plans.js'
import { testPlatform } from '../../helpers/platform.js'

t.test('every plan has its terms, and the audit log begins with the smallest plan that keeps one', async (t) => {
  t.same(Object.keys(PLAN_TERMS), [...PLANS])
  t.equal(AUDIT_LOG_PLAN, 'pro')
})

t.test('the database keeps the audit log as long as the table says, and knows the same plans', async (t) => {
  const { db } = await testPlatform(t)
  for (const plan of PLANS) {
    const retention = PLAN_TERMS[plan].auditRetention ?? '0'
    const [row] = await db.system(
      (sql) => sql<{ same: boolean }[]>`select atrium_audit_retention(${plan}) = ${retention}::interval as same`,
    )
    t.ok(row!.same, `${plan}: ${retention}`)
  }
  const [check] = await db.system(
    (sql) => sql<{ def: string }[]>`
    select pg_get_constraintdef(c.oid) as def from pg_constraint c
     where c.conrelid = 'tenants'::regclass and c.contype = 'c' and pg_get_constraintdef(c.oid) like '%plan%'`,
  )
  t.same(
    [...check!.def.matchAll(/'([a-z]+)'/g)].map((m) => m[1]),
    [...PLANS],
    'the tenants table accepts exactly these plans',
  )
})
