// Shared by the key and audit log tests: signed-in users of a given role, and polling for a change
// that crosses Redis.
import type { Role } from '../../../../server/domain/permissions.js'
import { newId } from '../../../../common/ids.js'
import { hashPassword } from '../../../../server/modules/users/passwords.js'
import { insertUser } from '../../../../server/modules/users/store.js'
import type { Called, Caller, TestApp } from '../../../helpers/app.js'
import { suffix } from '../../../helpers/platform.js'

export const PASSWORD = 'correct horse battery'

/** A user of `role` in the tenant, signed in: a caller with their access token (JWT). */
export async function signedIn(
  ta: TestApp,
  tenantId: string,
  role: Role,
): Promise<{ userId: string; email: string; call: Caller }> {
  const userId = newId()
  const email = `${role}-${suffix()}@example.com`
  const passwordHash = await hashPassword(PASSWORD)
  await ta.platform.db.system((sql) => insertUser(sql, { id: userId, tenantId, email, name: role, role, passwordHash }))
  const login = await ta.anonymous('POST', '/api/v1/auth/login', { email, password: PASSWORD })
  if (login.status !== 200) throw new Error(`login failed: ${JSON.stringify(login.body)}`)
  const ex = await ta.anonymous('POST', '/api/v1/auth/exchange', { token: login.body.data.token })
  const authorization = `Bearer ${ex.body.data.accessToken as string}`
  return {
    userId,
    email,
    call: (method, url, body, headers = {}) => ta.anonymous(method, url, body, { authorization, ...headers }),
  }
}

/** Calls until the answer is no longer `status` or `ms` have passed (a message crossing Redis). */
export async function until(
  call: () => Promise<Called>,
  status: number,
  ms: number,
): Promise<{ r: Called; elapsed: number }> {
  const start = Date.now()
  let r = await call()
  while (r.status === status && Date.now() - start < ms) {
    await new Promise((res) => setTimeout(res, 20))
    r = await call()
  }
  return { r, elapsed: Date.now() - start }
}
