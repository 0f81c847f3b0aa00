// A tenant is born with its owner and an automation key holding every permission, in one
// transaction: there is never a tenant nobody can reach.
import { AppError, invalid } from '../../http/errors.js'
import { PLANS, type Plan } from '../../http/principal.js'
import { newId } from '../../ids.js'
import { isUniqueViolation, type Db } from '../../platform/db.js'
import { createKey } from '../api-keys/service.js'
import { ALL } from '../api-keys/permissions.js'
import { hashPassword } from '../users/passwords.js'
import { insertUser } from '../users/store.js'
import { insertTenant } from './store.js'

export interface CreateTenantInput { name: string; plan?: string; email?: string; password?: string }
export interface CreatedTenant { tenantId: string; userId: string; apiKey: string }

const EMAIL_RE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/
export const MIN_PASSWORD_LENGTH = 12

export async function createTenant(db: Db, input: CreateTenantInput): Promise<CreatedTenant> {
  const name = input.name.trim()
  if (!name || name.length > 200) throw invalid('name', 'must be 1 to 200 characters')
  const plan = (input.plan ?? 'free') as Plan
  if (!PLANS.includes(plan)) throw invalid('plan', `must be one of ${PLANS.join(', ')}`)
  const tenantId = newId()
  const userId = newId()
  const email = input.email?.trim() ?? `owner-${tenantId.slice(-12)}@tenant.invalid`
  if (!EMAIL_RE.test(email) || email.length > 320) throw invalid('email', 'is not an email address')
  if (input.password !== undefined && input.password.length < MIN_PASSWORD_LENGTH) {
    throw invalid('password', `must be at least ${MIN_PASSWORD_LENGTH} characters`)
  }
  const passwordHash = input.password === undefined ? null : await hashPassword(input.password)

  try {
    return await db.system(async (sql) => {
      await insertTenant(sql, { id: tenantId, name, plan })
      await insertUser(sql, { id: userId, tenantId, email, name: '', role: 'owner', passwordHash })
      const key = await createKey(sql, { tenantId, userId, type: 'ci', name: 'owner key (admin CLI)', permissions: [ALL] })
      return { tenantId, userId, apiKey: key.key }
    })
  } catch (err) {
    if (isUniqueViolation(err, 'users_email_key')) {
      throw new AppError('VALIDATION_ERROR', `${email} already has an account`, { errors: [{ field: 'email', message: 'is already registered' }] })
    }
    throw err
  }
}
