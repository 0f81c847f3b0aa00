// A tenant is born with its owner and an automation key holding every permission, in one
// transaction: there is never a tenant nobody can reach.
import type { Actor } from '../../domain/actor.js'
import { calendarDay, checkPeriod, DAY_MS, isoDay } from '../../domain/days.js'
import { forbidden, invalid, notFound } from '../../domain/errors.js'
import { isPlan, PLAN_TERMS, PLANS, type Plan } from '../../domain/plans.js'
import { newId } from '../../../common/ids.js'
import type { Db, TxSql } from '../../platform/db.js'
import type { Secrets } from '../../platform/secrets.js'
import { apiKeyTags } from '../api-keys/keys.js'
import { createKey } from '../api-keys/service.js'
import { ALL } from '../../domain/permissions.js'
import { auditBy } from '../audit/service.js'
import { emitEvent, eventData } from '../outbox/service.js'
import { EMAIL_RE } from '../../../common/email.js'
import { hashPassword } from '../users/passwords.js'
import { emitUserCreated, insertUser } from '../users/service.js'
import {
  countTenantsForCreation,
  insertTenant,
  renameTenant,
  selectLlmUsage,
  selectTenant,
  type TenantRow,
} from './store.js'
import type { Clock } from '../../clock.js'

// ---- a tenant named in the path (/platform/tenants/:tenantId/...: exports, restores, regions) ----

/** Another tenant's is not there for a tenant's credential (404, never 403); an operator key reaches any. */
export function ownOrOperator(a: Actor<string | null>, tenantId: string): void {
  if (a.principal.tenantId !== null && a.principal.tenantId !== tenantId) throw notFound('tenant', tenantId)
}

/** A tenant's plan; null when there is no such tenant. */
export const tenantPlan = async (sql: TxSql, tenantId: string): Promise<Plan | null> =>
  (await selectTenant(sql, tenantId))[0]?.plan ?? null

/**
 * The tenant the route names, for this caller: its own, or any that exists for a platform operator;
 * 404 otherwise.
 */
export async function tenantFor(sql: TxSql, a: Actor<string | null>, tenantId: string): Promise<{ plan: Plan }> {
  ownOrOperator(a, tenantId)
  const plan = await tenantPlan(sql, tenantId)
  if (!plan) throw notFound('tenant', tenantId)
  return { plan }
}

/** `fn` in a transaction of the tenant the route names, once tenantFor has let the caller in (its plan handed on). */
export const inTenantFor = <T>(
  db: Db,
  a: Actor<string | null>,
  tenantId: string,
  fn: (sql: TxSql, tenant: { plan: Plan }) => Promise<T>,
): Promise<T> => db.tenant(tenantId, async (sql) => fn(sql, await tenantFor(sql, a, tenantId)))

export interface CreateTenantInput {
  name: string
  plan?: string
  email?: string
  password?: string
}
export interface CreatedTenant {
  tenantId: string
  userId: string
  apiKey: string
}

export const MIN_PASSWORD_LENGTH = 12

export interface CreateTenantLimits {
  /** The license's limit; null or absent: none (unlicensed development). */
  maxTenants?: number | null
}

/** `secrets` tags the owner's key (api-keys/keys.ts): the platform's, or the admin CLI's from the same master key. */
export async function createTenant(
  { db, secrets }: { db: Db; secrets: Pick<Secrets, 'deriveKey'> },
  input: CreateTenantInput,
  limits: CreateTenantLimits = {},
): Promise<CreatedTenant> {
  const name = input.name.trim()
  if (!name || name.length > 200) throw invalid('name', 'must be 1 to 200 characters')
  const plan = input.plan ?? 'free'
  if (!isPlan(plan)) throw invalid('plan', `must be one of ${PLANS.join(', ')}`)
  const tenantId = newId()
  const userId = newId()
  const email = input.email?.trim() ?? `owner-${tenantId.slice(-12)}@tenant.invalid`
  if (!EMAIL_RE.test(email) || email.length > 320) throw invalid('email', 'is not an email address')
  if (input.password !== undefined && input.password.length < MIN_PASSWORD_LENGTH) {
    throw invalid('password', `must be at least ${MIN_PASSWORD_LENGTH} characters`)
  }
  const passwordHash = input.password === undefined ? null : await hashPassword(input.password)

  // A new tenant: its owner's address may have accounts in other tenants, which is no conflict.
  return db.system(async (sql) => {
    const max = limits.maxTenants
    if (max != null && (await countTenantsForCreation(sql)) >= max) {
      throw forbidden(
        `The license allows at most ${max} tenant(s) and that many exist: contact your Atrium vendor for a license with more`,
        { reason: 'license_tenant_limit', maxTenants: max },
      )
    }
    const tenant = await insertTenant(sql, { id: tenantId, name, plan })
    await insertUser(sql, { id: userId, tenantId, email, name: '', role: 'owner', passwordHash })
    await emitEvent(sql, { tenantId, type: 'tenant.created', data: eventData(tenant) })
    await emitUserCreated(sql, tenantId, userId, 'tenant_created')
    const key = await createKey(sql, apiKeyTags(secrets), {
      tenantId,
      userId,
      type: 'ci',
      name: 'owner key (admin CLI)',
      permissions: [ALL],
    })
    return { tenantId, userId, apiKey: key.key }
  })
}

/** The tenant as its own members see it, with the gates of its plan. */
export const tenantView = (t: TenantRow) => ({ ...t, limits: PLAN_TERMS[t.plan].limits })

const USAGE_DEFAULT_DAYS = 30

export interface UsagePeriod {
  from?: string
  to?: string
}

export function tenantsService(deps: { db: Db; now?: Clock }) {
  const { db } = deps
  const now = deps.now ?? Date.now
  return {
    /**
     * Model usage per day (UTC), provider and model, oldest day first, with the period's totals.
     * Default period: the last 30 days, today included; at most 366 days.
     */
    async usage(tenantId: string, q: UsagePeriod) {
      const toMs = q.to === undefined ? Date.parse(`${isoDay(now())}T00:00:00Z`) : calendarDay('to', q.to)
      const fromMs = q.from === undefined ? toMs - (USAGE_DEFAULT_DAYS - 1) * DAY_MS : calendarDay('from', q.from)
      checkPeriod({ field: 'from', ms: fromMs }, { field: 'to', ms: toMs })
      const from = isoDay(fromMs)
      const to = isoDay(toMs)
      const rows = await db.tenantRead(tenantId, (sql) => selectLlmUsage(sql, tenantId, from, to))
      const data = rows.map((r) => ({
        day: r.day,
        provider: r.provider,
        model: r.model,
        requests: r.requests,
        inputTokens: r.input_tokens,
        outputTokens: r.output_tokens,
      }))
      const totals = data.reduce(
        (t, r) => ({
          requests: t.requests + r.requests,
          inputTokens: t.inputTokens + r.inputTokens,
          outputTokens: t.outputTokens + r.outputTokens,
        }),
        {
          requests: 0,
          inputTokens: 0,
          outputTokens: 0,
        },
      )
      return { data, from, to, totals }
    },

    async get(tenantId: string) {
      const [row] = await db.tenantRead(tenantId, (sql) => selectTenant(sql, tenantId))
      // Only a tenant deleted while its credential was cached gets here.
      if (!row) throw notFound('tenant', tenantId)
      return tenantView(row)
    },

    rename: (a: Actor, name: string) =>
      db.tenant(a.tenantId, async (sql) => {
        const [current] = await selectTenant(sql, a.tenantId)
        if (!current) throw notFound('tenant', a.tenantId)
        const next = name.trim()
        if (next === current.name) return tenantView(current)
        const row = (await renameTenant(sql, a.tenantId, next))!
        await auditBy(sql, a, {
          action: 'tenant.updated',
          target: { type: 'tenant', id: a.tenantId },
          details: { fields: ['name'], from: current.name, to: next },
        })
        return tenantView(row)
      }),
  }
}

export type TenantsService = ReturnType<typeof tenantsService>
