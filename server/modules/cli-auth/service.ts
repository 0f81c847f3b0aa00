// CLI device login (docs/identity.md, "CLI device login"), as a state machine:
//
//   (none) --start--> pending --complete (signed-in user, matching state)--> approved
//          --token (matching PKCE verifier)--> consumed
//
// pending and approved logins expire 10 minutes after start. The CLI holds the PKCE verifier and
// the state; the browser sees only the state (in authUrl). Whoever learns a loginId can read its
// status and approval info but can neither approve it (needs the state and a signed-in user) nor
// redeem it (needs the verifier). Each transition is one conditional UPDATE, so a login is approved
// once and consumed once however many requests race.
import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto'
import type { Actor, Origin } from '../../domain/actor.js'
import { AppError, forbidden, notFound, unauthorized } from '../../domain/errors.js'
import type { Db } from '../../platform/db.js'
import { credentialTags, type CredentialTags } from '../../platform/credential-tags.js'
import type { Secrets } from '../../platform/secrets.js'
import { audit, auditBy } from '../audit/service.js'
import { accountOf, type Account, type AuthService } from '../sign-in/service.js'
import { findAccount, maySignIn, signingIn } from '../sign-in/accounts.js'
import type { TokenIssuer } from '../sign-in/tokens.js'
import { approveLogin, consumeLogin, deleteExpiredLogins, findLogin, insertLogin, type CliLoginRow } from './store.js'
import { dateClock } from '../../clock.js'

export const LOGIN_TTL_SECONDS = 10 * 60
/** How often the CLI is told to poll status. */
export const POLL_INTERVAL_SECONDS = 5
// Logins are kept a day past expiry, so a late or repeated call still learns "expired" or
// "consumed" rather than "unknown"; then start removes them a batch at a time.
const KEEP_EXPIRED_MS = 24 * 3600 * 1000
const CLEANUP_BATCH = 100
// No vowels (no words), no look-alikes (no I, O, U, Y, 0, 1): easy to compare with the terminal.
export const VERIFICATION_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ'

export type LoginStatus = 'pending' | 'approved' | 'expired' | 'consumed'

/** PKCE S256 (RFC 7636 section 4.2): BASE64URL(SHA256(ASCII(code_verifier))). */
export const pkceChallenge = (verifier: string): string =>
  createHash('sha256').update(verifier, 'ascii').digest('base64url')

/** Constant-time comparison of two strings of any length (hashing first equalises the lengths). */
export function safeEqual(a: string, b: string): boolean {
  const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest()
  return timingSafeEqual(digest(a), digest(b))
}

/**
 * 26 random bytes (208 bits) as base64url, then the 8-character tag of platform/credential-tags.ts:
 * 43 characters of [A-Za-z0-9_-]. A loginId whose tag does not verify was not made here.
 */
export const newLoginId = (tags: CredentialTags): string => tags.sign(randomBytes(26).toString('base64url'))

/** 8 characters from VERIFICATION_ALPHABET, shown XXXX-XXXX. */
export function newVerificationCode(): string {
  let code = ''
  for (let i = 0; i < 8; i++) code += VERIFICATION_ALPHABET[randomInt(VERIFICATION_ALPHABET.length)]
  return `${code.slice(0, 4)}-${code.slice(4)}`
}

/** The status a client sees: a login that was not consumed in time is expired, whether approved or not. */
export const statusOf = (r: Pick<CliLoginRow, 'status' | 'expires_at'>, at: Date): LoginStatus =>
  r.status === 'consumed' ? 'consumed' : r.expires_at.getTime() <= at.getTime() ? 'expired' : r.status

const WRONG_STATUS: Record<LoginStatus, string> = {
  pending: 'This login has not been approved yet: keep polling its status',
  approved: 'This login has already been approved',
  expired: 'This login has expired: start the login again from the command line',
  consumed: 'This login has already been used: start the login again from the command line',
}

/** A transition refused because the login is in another state; details.status says which. */
const wrongStatus = (status: LoginStatus) =>
  new AppError('VALIDATION_ERROR', WRONG_STATUS[status], {
    status,
    errors: [{ field: 'body.loginId', message: `login is ${status}` }],
  })

export interface StartInput {
  state: string
  codeChallenge: string
  cliVersion: string
  platform: string
}

export interface StartedLogin {
  loginId: string
  authUrl: string
  verificationCode: string
  expiresAt: Date
  interval: number
}

export interface LoginInfo {
  loginId: string
  verificationCode: string
  cliVersion: string
  platform: string
  requesterIp: string
  status: LoginStatus
  createdAt: Date
  expiresAt: Date
}

export interface IssuedCliToken extends Account {
  token: string
  expiresIn: number
  refreshToken: string
  refreshExpiresAt: Date
}

export interface CliAuthServiceOptions {
  db: Db
  /** Tags loginIds (derived from the master key). */
  secrets: Pick<Secrets, 'deriveKey'>
  auth: AuthService
  tokens: TokenIssuer
  /** Where users reach the server; authUrl points at the approval page under it. */
  publicUrl: string
  now?: () => number
}

export type CliAuthService = ReturnType<typeof cliAuthService>

export function cliAuthService(o: CliAuthServiceOptions) {
  const now = dateClock(o.now)
  const tags = credentialTags(o.secrets, 'cli-login')
  // Relative to PUBLIC_URL, so a deployment served under a path prefix keeps it.
  const approvePage = new URL('cli/auth/approve', o.publicUrl.endsWith('/') ? o.publicUrl : `${o.publicUrl}/`)

  async function existing(loginId: string): Promise<CliLoginRow> {
    // One not made here is refused from memory.
    const row = tags.verify(loginId) ? await o.db.system((sql) => findLogin(sql, loginId)) : undefined
    if (!row) throw notFound('CLI login', loginId)
    return row
  }

  /** After a conditional UPDATE matched nothing: the state another request moved the login to. */
  async function raced(loginId: string): Promise<AppError> {
    return wrongStatus(statusOf(await existing(loginId), now()))
  }

  return {
    /** Whether a loginId was made here (memory alone: no lookup). */
    issued: (loginId: string) => tags.verify(loginId),

    async start(input: StartInput, requesterIp: string): Promise<StartedLogin> {
      const createdAt = now()
      const expiresAt = new Date(createdAt.getTime() + LOGIN_TTL_SECONDS * 1000)
      const loginId = newLoginId(tags)
      const verificationCode = newVerificationCode()
      await o.db.system(async (sql) => {
        await deleteExpiredLogins(sql, new Date(createdAt.getTime() - KEEP_EXPIRED_MS), CLEANUP_BATCH)
        await insertLogin(sql, { loginId, ...input, verificationCode, requesterIp, createdAt, expiresAt })
      })
      const authUrl = new URL(approvePage)
      authUrl.searchParams.set('loginId', loginId)
      authUrl.searchParams.set('state', input.state)
      return { loginId, authUrl: authUrl.toString(), verificationCode, expiresAt, interval: POLL_INTERVAL_SECONDS }
    },

    async status(loginId: string): Promise<{ status: LoginStatus; expiresAt: Date }> {
      const row = await existing(loginId)
      return { status: statusOf(row, now()), expiresAt: row.expires_at }
    },

    async info(loginId: string): Promise<LoginInfo> {
      const r = await existing(loginId)
      return {
        loginId: r.login_id,
        verificationCode: r.verification_code,
        cliVersion: r.cli_version,
        platform: r.platform,
        requesterIp: r.requester_ip,
        status: statusOf(r, now()),
        createdAt: r.created_at,
        expiresAt: r.expires_at,
      }
    },

    /** A signed-in user (the routes refuse API keys) approves a pending login; recorded in their tenant's audit log. */
    async complete(approver: Actor, loginId: string, state: string): Promise<{ status: 'approved'; approvedAt: Date }> {
      const row = await existing(loginId)
      // The state travels only in authUrl: a request without it did not come from that page.
      if (!safeEqual(state, row.state))
        throw forbidden('The state does not match this login request', { reason: 'state_mismatch' })
      const at = now()
      const status = statusOf(row, at)
      if (status !== 'pending') throw wrongStatus(status)
      const approved = await o.db.system(async (sql) => {
        const r = await approveLogin(sql, {
          loginId,
          tenantId: approver.tenantId,
          userId: approver.principal.userId!,
          ip: approver.origin.ip,
          at,
        })
        if (!r) return null
        await auditBy(sql, approver, {
          action: 'cli_login.approved',
          // A prefix names the login in the log without handing out the whole identifier.
          target: { type: 'cli_login', id: loginId.slice(0, 12) },
          details: {
            cliVersion: r.cli_version,
            platform: r.platform,
            requesterIp: r.requester_ip,
            verificationCode: r.verification_code,
          },
        })
        return r
      })
      if (!approved) throw await raced(loginId)
      return { status: 'approved', approvedAt: at }
    },

    /** The CLI redeems an approved login with its PKCE verifier: an identity session and an access token. */
    async token(loginId: string, codeVerifier: string, origin: Origin): Promise<IssuedCliToken> {
      const row = await existing(loginId)
      if (!safeEqual(pkceChallenge(codeVerifier), row.code_challenge)) {
        throw unauthorized('The code verifier does not match the code challenge this login was started with')
      }
      const status = statusOf(row, now())
      if (status !== 'approved') throw wrongStatus(status)
      const issued = await o.db.system(async (sql) => {
        const at = now()
        const r = await consumeLogin(sql, loginId, at)
        if (!r) return null
        const account = await findAccount(sql, r.user_id!)
        // Throwing rolls the consumption back: the login stays approved until it expires.
        if (!account || account.tenant_id !== r.tenant_id || !maySignIn(account)) {
          throw forbidden('The account that approved this login is disabled or no longer exists', {
            reason: 'account_disabled',
          })
        }
        const signer = signingIn(account, origin)
        const session = await o.auth.startSession(sql, { ...signer, method: 'cli' })
        await audit(sql, {
          ...signer,
          action: 'auth.login',
          target: { type: 'session', id: session.sessionId },
          details: { method: 'cli', cliVersion: r.cli_version, platform: r.platform },
        })
        return { account, session }
      })
      if (!issued) throw await raced(loginId)
      const { account, session } = issued
      const access = await o.tokens.sign({
        userId: account.user_id,
        tenantId: account.tenant_id,
        sessionId: session.sessionId,
        role: account.role,
      })
      return {
        token: access.accessToken,
        expiresIn: access.expiresIn,
        refreshToken: session.token,
        refreshExpiresAt: session.expiresAt,
        ...accountOf(account),
      }
    },
  }
}
