// Sign-in and sessions. A sign-in (password, OpenID Connect, CLI device login, accepted invitation)
// starts an identity session and hands out its session token; the token is exchanged for short-lived
// JWT access tokens, rotated by refresh, and ended by logout. Access tokens name their session, so
// ending the session ends them too.
import { createHash } from 'node:crypto'
import { AppError, unauthorized } from '../../domain/errors.js'
import type { Credentials } from '../../domain/credentials.js'
import { ROLE_PERMISSIONS } from '../../domain/permissions.js'
import type { Authenticator, Principal } from '../../domain/principal.js'
import { newId, randomBase62 } from '../../../common/ids.js'
import type { Db, TxSql } from '../../platform/db.js'
import type { Origin } from '../../domain/actor.js'
import { audit, type Audited } from '../audit/service.js'
import { hashPassword, verifyPassword } from '../users/passwords.js'
import {
  findAccount,
  findAccountsByEmail,
  findSession,
  findSessionByToken,
  insertSession,
  insertSessionToken,
  markLoggedIn,
  retireToken,
  revokeSession,
  type AccountRow,
  type NewSession,
  type SessionRow,
} from './store.js'
import { maySignIn, signInRefusal, signingIn } from './accounts.js'
import { accountKey, deviceCookies, type LoginThrottle } from './throttle.js'
import { credentialTags } from '../../platform/credential-tags.js'
import type { Secrets } from '../../platform/secrets.js'
import { addressKey } from '../../domain/client-address.js'
import type { Logger } from 'pino'
import { looksLikeJwt, type TokenIssuer } from './tokens.js'
import { dateClock } from '../../clock.js'

// Session tokens: ats_ + 43 base62 characters (about 256 random bits) + the 8-character tag of
// platform/credential-tags.ts; stored as SHA-256 only. Tokens made before tags have none.
const SESSION_TOKEN_RE = /^ats_[A-Za-z0-9]{43}(?:[A-Za-z0-9]{8})?$/
export const looksLikeSessionToken = (token: string) => SESSION_TOKEN_RE.test(token)
/** A session token of the format before tags (which memory cannot tell from a made-up one). */
export const isLegacySessionToken = (token: string) => token.length === 'ats_'.length + 43
/** How a secret handed out (a session or invitation token, a sign-in's state and browser binding) is stored: its SHA-256 only. */
export const hashToken = (token: string) => createHash('sha256').update(token).digest()
/**
 * How long a retired session token counts as having lost a refresh race rather than as copied.
 * Only the refusal differs: the token gives nothing either way.
 */
export const REFRESH_RACE_SECONDS = 30
const rotated = () =>
  new AppError(
    'UNAUTHORIZED',
    'This session token was just rotated by another refresh; use the token that refresh returned (or the session cookie)',
    { reason: 'token_rotated' },
  )

export interface Account {
  user: { id: string; email: string; name: string; role: AccountRow['role'] }
  tenant: { id: string; name: string; plan: AccountRow['plan'] }
}
export const accountOf = (r: AccountRow): Account => ({
  user: { id: r.user_id, email: r.email, name: r.name, role: r.role },
  tenant: { id: r.tenant_id, name: r.tenant_name, plan: r.plan },
})

/** An event in the audit log of each account's organization, with the account for its target. */
export async function auditAccounts(
  sql: TxSql,
  accounts: Pick<AccountRow, 'tenant_id' | 'user_id'>[],
  e: Omit<Audited, 'tenantId' | 'target'>,
): Promise<void> {
  for (const a of accounts) await audit(sql, { ...e, tenantId: a.tenant_id, target: { type: 'user', id: a.user_id } })
}

export interface StartedSession {
  sessionId: string
  token: string
  expiresAt: Date
}

export interface AuthServiceOptions {
  db: Db
  tokens: TokenIssuer
  credentials: Credentials
  /** Tags session tokens and trusted-device cookies (derived from the master key). */
  secrets: Pick<Secrets, 'deriveKey'>
  throttle: Omit<LoginThrottle, 'unlock'>
  log?: Pick<Logger, 'warn'>
  sessionTtlSeconds: number
  now?: () => number
}

export interface LoginInput {
  email: string
  password: string
  tenantId?: string
}

export type AuthService = ReturnType<typeof authService>

export function authService(o: AuthServiceOptions) {
  const now = dateClock(o.now)
  const sessionTags = credentialTags(o.secrets, 'session')
  const devices = deviceCookies(credentialTags(o.secrets, 'device'))
  // Verifying against a hash of nothing costs the same as verifying a real password, so an unknown
  // address answers in the same time as a known one.
  let dummyHash: Promise<string> | null = null
  const dummy = () => (dummyHash ??= hashPassword(randomBase62(32)))

  const live = (r: SessionRow, at: Date) =>
    !r.revoked_at && r.expires_at > at && r.user_status === 'active' && r.tenant_status === 'active'

  const principalOf = (r: SessionRow): Principal => ({
    kind: 'user',
    id: r.user_id,
    tenantId: r.tenant_id,
    plan: r.plan,
    userId: r.user_id,
    role: r.role,
    sessionId: r.session_id,
    permissions: new Set(ROLE_PERMISSIONS[r.role]),
  })

  async function issueToken(sql: TxSql, sessionId: string, tenantId: string, at: Date): Promise<string> {
    const token = sessionTags.sign(`ats_${randomBase62(43)}`)
    await insertSessionToken(sql, { hash: hashToken(token), sessionId, tenantId, at })
    return token
  }

  /** Starts a session in the caller's transaction (which also records how the user signed in). */
  async function startSession(
    sql: TxSql,
    s: { tenantId: string; userId: string; method: NewSession['method']; origin: Origin },
  ): Promise<StartedSession> {
    const at = now()
    const sessionId = newId()
    const expiresAt = new Date(at.getTime() + o.sessionTtlSeconds * 1000)
    await insertSession(sql, {
      id: sessionId,
      tenantId: s.tenantId,
      userId: s.userId,
      method: s.method,
      ip: s.origin.ip,
      userAgent: s.origin.userAgent,
      createdAt: at,
      expiresAt,
    })
    await markLoggedIn(sql, s.userId, at)
    return { sessionId, token: await issueToken(sql, sessionId, s.tenantId, at), expiresAt }
  }

  /** Ends a session whose retired token came back: someone holds a copy. */
  async function reuseDetected(r: SessionRow, origin: Origin | null) {
    await o.db.system(async (sql) => {
      await revokeSession(sql, r.session_id, now())
      await audit(sql, {
        tenantId: r.tenant_id,
        actor: { type: 'user', id: r.user_id },
        action: 'auth.session_token_reused',
        target: { type: 'session', id: r.session_id },
        ...(origin ? { origin } : {}),
      })
    })
    await o.credentials.invalidate({ kind: 'session', id: r.session_id })
  }

  /**
   * The live session a session token belongs to. A token retired moments ago is the loser of a
   * refresh race (two tabs refreshing at once): refused, the session lives on. Retired longer ago,
   * it was copied: the session ends.
   */
  async function sessionOf(token: string, origin: Origin | null): Promise<SessionRow> {
    // Not issued here (tag), or found dead moments ago: refused from memory.
    const dead = `session:${token}`
    if (
      !looksLikeSessionToken(token) ||
      (!isLegacySessionToken(token) && !sessionTags.verify(token)) ||
      o.credentials.cache.get(dead) === null
    ) {
      throw unauthorized('The session token is invalid, expired or revoked')
    }
    const r = await o.db.system((sql) => findSessionByToken(sql, hashToken(token)))
    if (r?.retired_at && !r.revoked_at) {
      if (now().getTime() - r.retired_at.getTime() <= REFRESH_RACE_SECONDS * 1000) throw rotated()
      await reuseDetected(r, origin)
    }
    if (!r || r.retired_at || !live(r, now())) {
      o.credentials.cache.refuse(dead)
      throw unauthorized('The session token is invalid, expired or revoked')
    }
    return r
  }

  return {
    startSession,

    /**
     * Password sign-in. An address may have accounts in several tenants (one each): the password is
     * checked against each (one check against nothing when there is none, so an unknown address
     * costs the same), through the throttle's limits and gate. Several accounts opened by the same
     * password need tenantId to choose; only then, to someone who knows the password, are their
     * organizations named.
     */
    async login(
      input: LoginInput,
      ctx: { origin: Origin; deviceCookie?: string },
    ): Promise<Account & { session: StartedSession; deviceCookie: string }> {
      const { email, password, tenantId } = input
      const account = accountKey(email)
      const attempt = { ip: addressKey(ctx.origin.ip), account, device: devices.trustedFor(ctx.deviceCookie, account) }
      const standing = await o.throttle.check(attempt)
      const candidates = (await o.db.system((sql) => findAccountsByEmail(sql, email, tenantId))).filter(
        (c) => c.password_hash,
      )
      const hashes = candidates.length ? candidates.map((c) => c.password_hash!) : [await dummy()]
      // One place in the gate per attempt, whatever the number of accounts checked.
      const results = await o.throttle.passwordCheck(attempt, standing, () =>
        Promise.all(hashes.map((h) => verifyPassword(password, h))),
      )
      const matched = candidates.filter((_, i) => results[i])
      if (!matched.length) {
        await o.throttle.failed(attempt, standing)
        // Not awaited: an unknown address, which has nothing to audit, must not answer sooner.
        if (candidates.length) {
          void o.db
            .system((sql) =>
              auditAccounts(sql, candidates, {
                actor: { type: 'anonymous', id: null },
                action: 'auth.login_failed',
                origin: ctx.origin,
                details: { method: 'password' },
              }),
            )
            .catch((err: unknown) => o.log?.warn({ err: (err as Error).message }, 'could not audit a failed sign-in'))
        }
        throw unauthorized('The email or password is not correct')
      }
      await o.throttle.succeeded(attempt)
      const usable = matched.filter(maySignIn)
      // Only someone who knows the password learns that the account is disabled. An account with a
      // password is not invited, so signInRefusal names its reason.
      if (!usable.length) throw signInRefusal(matched[0]!)!
      if (usable.length > 1) {
        throw new AppError(
          'VALIDATION_ERROR',
          'This email and password open accounts in several organizations: send tenantId to choose one',
          {
            reason: 'tenant_required',
            tenants: usable.map((c) => ({ id: c.tenant_id, name: c.tenant_name })),
            errors: [
              {
                field: 'body.tenantId',
                message: 'is required: the accounts of this address are in several organizations',
              },
            ],
          },
        )
      }
      const chosen = usable[0]!
      const signer = signingIn(chosen, ctx.origin)
      const session = await o.db.system(async (sql) => {
        const s = await startSession(sql, { ...signer, method: 'password' })
        const target = { type: 'session', id: s.sessionId }
        await audit(sql, { ...signer, action: 'auth.login', target, details: { method: 'password' } })
        return s
      })
      return {
        ...accountOf(chosen),
        session,
        deviceCookie: attempt.device ? ctx.deviceCookie! : devices.issue(account),
      }
    },

    /** A session token for a JWT access token. */
    async exchange(token: string, origin: Origin | null): Promise<{ accessToken: string; expiresIn: number }> {
      const r = await sessionOf(token, origin)
      return o.tokens.sign({ userId: r.user_id, tenantId: r.tenant_id, sessionId: r.session_id, role: r.role })
    },

    /** Rotates the session token: the presented one is retired, the next one returned with a fresh access token. */
    async refresh(
      token: string,
      origin: Origin | null,
    ): Promise<{ token: string; expiresAt: Date; accessToken: string; expiresIn: number }> {
      const r = await sessionOf(token, origin)
      const next = await o.db.system(async (sql) => {
        if (!(await retireToken(sql, hashToken(token), now()))) return null // a concurrent refresh won
        return issueToken(sql, r.session_id, r.tenant_id, now())
      })
      if (!next) throw rotated()
      return {
        token: next,
        expiresAt: r.expires_at,
        ...(await o.tokens.sign({ userId: r.user_id, tenantId: r.tenant_id, sessionId: r.session_id, role: r.role })),
      }
    },

    /** The session of a session token, for callers that accept the browser's cookie (device login approval). */
    async principalOfSessionToken(token: string): Promise<Principal> {
      return principalOf(await sessionOf(token, null))
    },

    async sessionIdOf(token: string): Promise<string> {
      return (await sessionOf(token, null)).session_id
    },

    async logout(sessionId: string, origin: Origin): Promise<void> {
      const r = await o.db.system(async (sql) => {
        const s = await findSession(sql, sessionId)
        if (!s || s.revoked_at) return null
        await revokeSession(sql, sessionId, now())
        await audit(sql, {
          tenantId: s.tenant_id,
          actor: { type: 'user', id: s.user_id },
          action: 'auth.logout',
          target: { type: 'session', id: sessionId },
          origin,
        })
        return s
      })
      if (!r) throw unauthorized('The session has already ended')
      await o.credentials.invalidate({ kind: 'session', id: sessionId })
    },

    async account(userId: string): Promise<Account | null> {
      const r = await o.db.system((sql) => findAccount(sql, userId))
      return r ? accountOf(r) : null
    },

    /**
     * Access tokens: the signature and claims are checked on every request; whether the session is
     * still live (and the user's current role) comes from the database, cached for a few seconds
     * and dropped on every replica the moment the session ends.
     */
    authenticator(): Authenticator {
      const cache = o.credentials.cache
      return {
        fromMemory(token) {
          if (!looksLikeJwt(token)) return null
          return cache.get(`jwt:${token}`, now().getTime())
        },
        async lookUp(token) {
          const claims = await o.tokens.verify(token)
          if (!claims) return null
          const r = await o.db.system((sql) => findSession(sql, claims.sessionId))
          if (!r || r.user_id !== claims.userId || r.tenant_id !== claims.tenantId || !live(r, now())) {
            cache.refuse(`jwt:${token}`)
            return null
          }
          const principal = principalOf(r)
          cache.set(`jwt:${token}`, principal, claims.expiresAt)
          return principal
        },
      }
    },
  }
}
