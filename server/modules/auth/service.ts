// Sign-in and sessions. A sign-in (password, OpenID Connect, CLI device login, accepted invitation)
// starts an identity session and hands out its session token; the token is exchanged for short-lived
// JWT access tokens, rotated by refresh, and ended by logout. Access tokens name their session, so
// ending the session ends them too.
import { createHash } from 'node:crypto'
import { AppError, forbidden, unauthorized } from '../../http/errors.js'
import type { Credentials } from '../../http/credentials.js'
import { ROLE_PERMISSIONS } from '../../http/permissions.js'
import type { Authenticator, Principal } from '../../http/principal.js'
import { newId, randomBase62 } from '../../ids.js'
import type { Db, TxSql } from '../../platform/db.js'
import { audit, type Origin } from '../audit/service.js'
import { hashPassword, verifyPassword } from '../users/passwords.js'
import {
  clearLoginFailures, findAccount, findAccountByEmail, findSession, findSessionByToken, insertSession, insertSessionToken,
  lockedUntil, markLoggedIn, recordLoginFailure, retireToken, revokeSession, type AccountRow, type NewSession, type SessionRow,
} from './store.js'
import { looksLikeJwt, type TokenIssuer } from './tokens.js'
import { dateClock } from '../../clock.js'

// Session tokens: ats_ + 43 base62 characters (about 256 random bits); stored as SHA-256 only.
const SESSION_TOKEN_RE = /^ats_[A-Za-z0-9]{43}$/
export const looksLikeSessionToken = (token: string) => SESSION_TOKEN_RE.test(token)
const hashToken = (token: string) => createHash('sha256').update(token).digest()
const emailHash = (email: string) => createHash('sha256').update('atrium-login:').update(email.trim().toLowerCase()).digest()

export interface Account {
  user: { id: string; email: string; name: string; role: AccountRow['role'] }
  tenant: { id: string; name: string; plan: AccountRow['plan'] }
}
export const accountOf = (r: AccountRow): Account => ({
  user: { id: r.user_id, email: r.email, name: r.name, role: r.role },
  tenant: { id: r.tenant_id, name: r.tenant_name, plan: r.plan },
})

export interface StartedSession { sessionId: string; token: string; expiresAt: Date }

export interface AuthServiceOptions {
  db: Db
  tokens: TokenIssuer
  credentials: Credentials
  sessionTtlSeconds: number
  now?: () => number
}

export type AuthService = ReturnType<typeof authService>

export function authService(o: AuthServiceOptions) {
  const now = dateClock(o.now)
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
    const token = `ats_${randomBase62(43)}`
    await insertSessionToken(sql, { hash: hashToken(token), sessionId, tenantId, at })
    return token
  }

  /** Starts a session in the caller's transaction (which also records how the user signed in). */
  async function startSession(sql: TxSql, s: { tenantId: string; userId: string; method: NewSession['method']; origin: Origin }): Promise<StartedSession> {
    const at = now()
    const sessionId = newId()
    const expiresAt = new Date(at.getTime() + o.sessionTtlSeconds * 1000)
    await insertSession(sql, { id: sessionId, tenantId: s.tenantId, userId: s.userId, method: s.method, ip: s.origin.ip, userAgent: s.origin.userAgent, createdAt: at, expiresAt })
    await markLoggedIn(sql, s.userId, at)
    return { sessionId, token: await issueToken(sql, sessionId, s.tenantId, at), expiresAt }
  }

  /** Ends a session whose retired token came back: someone holds a copy. */
  async function reuseDetected(r: SessionRow, origin: Origin | null) {
    await o.db.system(async (sql) => {
      await revokeSession(sql, r.session_id, now())
      await audit(sql, { tenantId: r.tenant_id, actor: { type: 'user', id: r.user_id }, action: 'auth.session_token_reused', target: { type: 'session', id: r.session_id }, ...(origin ? { origin } : {}) })
    })
    await o.credentials.invalidate({ kind: 'session', id: r.session_id })
  }

  /** The live session a session token belongs to; a retired token ends its session. */
  async function sessionOf(token: string, origin: Origin | null): Promise<SessionRow> {
    if (!looksLikeSessionToken(token)) throw unauthorized('The session token is invalid, expired or revoked')
    const r = await o.db.system((sql) => findSessionByToken(sql, hashToken(token)))
    if (r?.retired_at && !r.revoked_at) await reuseDetected(r, origin)
    if (!r || r.retired_at || !live(r, now())) throw unauthorized('The session token is invalid, expired or revoked')
    return r
  }

  return {
    startSession,

    async login(email: string, password: string, origin: Origin): Promise<Account & { session: StartedSession }> {
      const at = now()
      const key = emailHash(email)
      const [account, locked] = await o.db.system((sql) => Promise.all([findAccountByEmail(sql, email), lockedUntil(sql, key, at)]))
      if (locked) {
        const retry = Math.max(1, Math.ceil((locked.getTime() - at.getTime()) / 1000))
        throw new AppError('RATE_LIMIT_EXCEEDED', `Too many failed sign-ins for this address; try again in ${retry} s`,
          { retryAfterSeconds: retry }, { 'retry-after': String(retry) })
      }
      const matched = await verifyPassword(password, account?.password_hash ?? (await dummy()))
      if (!account || !account.password_hash || !matched) {
        await o.db.system(async (sql) => {
          const failures = await recordLoginFailure(sql, key, at)
          if (account) {
            await audit(sql, { tenantId: account.tenant_id, actor: { type: 'anonymous', id: null }, action: 'auth.login_failed', target: { type: 'user', id: account.user_id }, origin, details: { failures } })
          }
        })
        throw unauthorized('The email or password is not correct')
      }
      // Only someone who knows the password learns that the account is disabled.
      if (account.user_status !== 'active' || account.tenant_status !== 'active') {
        throw forbidden(account.tenant_status !== 'active' ? 'The organization of this account is suspended' : 'This account is disabled', { reason: account.tenant_status !== 'active' ? 'tenant_suspended' : 'account_disabled' })
      }
      const session = await o.db.system(async (sql) => {
        await clearLoginFailures(sql, key)
        const s = await startSession(sql, { tenantId: account.tenant_id, userId: account.user_id, method: 'password', origin })
        await audit(sql, { tenantId: account.tenant_id, actor: { type: 'user', id: account.user_id }, action: 'auth.login', target: { type: 'session', id: s.sessionId }, origin, details: { method: 'password' } })
        return s
      })
      return { ...accountOf(account), session }
    },

    /** A session token for a JWT access token. */
    async exchange(token: string, origin: Origin | null): Promise<{ accessToken: string; expiresIn: number }> {
      const r = await sessionOf(token, origin)
      return o.tokens.sign({ userId: r.user_id, tenantId: r.tenant_id, sessionId: r.session_id, role: r.role })
    },

    /** Rotates the session token: the presented one is retired, the next one returned with a fresh access token. */
    async refresh(token: string, origin: Origin | null): Promise<{ token: string; expiresAt: Date; accessToken: string; expiresIn: number }> {
      const r = await sessionOf(token, origin)
      const next = await o.db.system(async (sql) => {
        if (!(await retireToken(sql, hashToken(token), now()))) return null // a concurrent refresh won
        return issueToken(sql, r.session_id, r.tenant_id, now())
      })
      if (!next) throw unauthorized('The session token is invalid, expired or revoked')
      return { token: next, expiresAt: r.expires_at, ...(await o.tokens.sign({ userId: r.user_id, tenantId: r.tenant_id, sessionId: r.session_id, role: r.role })) }
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
        await audit(sql, { tenantId: s.tenant_id, actor: { type: 'user', id: s.user_id }, action: 'auth.logout', target: { type: 'session', id: sessionId }, origin })
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
          if (!r || r.user_id !== claims.userId || r.tenant_id !== claims.tenantId || !live(r, now())) return null
          const principal = principalOf(r)
          cache.set(`jwt:${token}`, principal, claims.expiresAt)
          return principal
        },
      }
    },
  }
}
