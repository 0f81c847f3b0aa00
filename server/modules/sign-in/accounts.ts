// What other modules may use of the sign-in module's accounts: the rules of signing in to one, which
// password sign-in, OpenID Connect, device login and invitations all follow, and the statements that
// find accounts and end a member's sessions. A module reaches another's statements through its
// service, never its store: these three are named one by one (not the store), and the tests of
// team and device login replace them here.
import type { Origin } from '../../domain/actor.js'
import { forbidden, type AppError } from '../../domain/errors.js'
import type { AccountRow } from './store.js'

export { findAccount, findAccountsByEmail, revokeUserSessions, type AccountRow } from './store.js'

/** Whether an account may sign in: it is active, in an active organization. */
export const maySignIn = (a: Pick<AccountRow, 'user_status' | 'tenant_status'>): boolean =>
  a.user_status === 'active' && a.tenant_status === 'active'

/**
 * Why an account may not sign in (FORBIDDEN): its organization is suspended, or it is disabled.
 * Undefined for an active account, and for an invited one, which joins as its way of signing in says.
 */
export function signInRefusal(a: Pick<AccountRow, 'user_status' | 'tenant_status'>): AppError | undefined {
  if (a.tenant_status !== 'active')
    return forbidden('The organization of this account is suspended', { reason: 'tenant_suspended' })
  if (a.user_status === 'disabled') return forbidden('This account is disabled', { reason: 'account_disabled' })
  return undefined
}

/**
 * Someone signing in to an account: whose session starts (AuthService.startSession, with the way
 * they signed in), and who the audit events recording it name, in the account's organization.
 */
export const signingIn = (a: Pick<AccountRow, 'tenant_id' | 'user_id'>, origin: Origin) => ({
  tenantId: a.tenant_id,
  userId: a.user_id,
  actor: { type: 'user' as const, id: a.user_id },
  origin,
})
