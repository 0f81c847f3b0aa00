// An operator lifting an address's sign-in lock (the admin CLI's `unlock-sign-in`): past the
// account limit of throttle.ts only trusted devices may try for an hour, and the owner may be the
// organization's only administrator, so waiting must not be the only way out (OWASP). The throttle
// counts the address typed, across organizations; each organization with an account for it has
// the unlock in its audit log.
import type { Db } from '../../platform/db.js'
import { auditAccounts } from './service.js'
import { findAccountsByEmail } from './store.js'
import { accountKey, type LoginThrottle, type Unlocked } from './throttle.js'

export interface SignInUnlock extends Unlocked {
  /** The accounts of the address, each of whose organizations audited the unlock. */
  accounts: { tenantId: string; userId: string }[]
}

/** Clears the address's counters (throttle.unlock) and audits it in each organization with an account for it. */
export function unlockSignIn(
  o: { db: Db; throttle: Pick<LoginThrottle, 'unlock'> },
  email: string,
): Promise<SignInUnlock> {
  return o.db.system(async (sql) => {
    // The accounts first: with the database away, nothing is cleared unaudited.
    const found = await findAccountsByEmail(sql, email.trim())
    const cleared = await o.throttle.unlock(accountKey(email))
    await auditAccounts(sql, found, {
      actor: { type: 'system', id: null },
      action: 'auth.sign_in_unlocked',
      details: { ...cleared, by: 'admin-cli' },
    })
    return { ...cleared, accounts: found.map((a) => ({ tenantId: a.tenant_id, userId: a.user_id })) }
  })
}
