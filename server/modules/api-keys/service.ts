// Creating keys (shown once, stored hashed), a tenant admin's key management, and turning a
// presented key into a principal.
//
// Rules of key management (docs: route descriptions in routes.ts):
// - Nobody grants more than they hold: a new key's permissions must be covered by the creator's.
// - Acting on an existing key (revoking it) needs authority over it in the same sense, except that
//   a key may always revoke itself (the quickest answer to "this key leaked").
// - A key is made on behalf of the creator's user (api_keys.user_id, shown as createdBy): a key
//   made by a key inherits that key's user. Team changes revoke a user's keys through it.
// - Revocation commits with its audit event, then drops the key from every replica's cache.
import type { Db, TxSql } from '../../platform/db.js'
import type { Actor } from '../../domain/actor.js'
import { AppError, forbidden, invalid, notFound } from '../../domain/errors.js'
import { CredentialCache, type Credentials } from '../../domain/credentials.js'
import { decodeIdCursor, toPage } from '../../domain/pagination.js'
import { ALL, isPermission, uncovered } from '../../domain/permissions.js'
import type { Authenticator, Principal } from '../../domain/principal.js'
import { newId } from '../../../common/ids.js'
import { auditBy } from '../audit/service.js'
import type { CredentialTags } from '../../platform/credential-tags.js'
import { generateKey, hashKey, isLegacyKey, keyCacheId, looksLikeKey, type KeyType } from './keys.js'
import type { LegacyKeys } from './legacy.js'
import {
  findByHash,
  insertKey,
  LAST_USED_RESOLUTION_SECONDS,
  listKeys,
  revokeKey,
  selectKey,
  touchLastUsed,
  type KeyView,
} from './store.js'
import { dateClock } from '../../clock.js'

export interface CreateKeyInput {
  tenantId: string | null
  userId?: string | null
  type: KeyType
  name?: string
  permissions: string[]
  expiresAt?: Date | null
}

export interface CreatedKey {
  id: string
  key: string
  prefix: string
  lastFour: string
  view: KeyView
}

/** Runs inside the caller's transaction (tenant creation makes its first key in the same one). */
export async function createKey(sql: TxSql, tags: CredentialTags, input: CreateKeyInput): Promise<CreatedKey> {
  if ((input.type === 'admin') !== (input.tenantId === null)) {
    throw invalid('type', input.type === 'admin' ? 'admin keys belong to no tenant' : 'sdk and ci keys need a tenant')
  }
  const unknown = input.permissions.filter((p) => !isPermission(p))
  if (unknown.length) throw invalid('permissions', `unknown permissions: ${unknown.join(', ')}`)
  if (input.expiresAt && input.expiresAt.getTime() <= Date.now()) throw invalid('expiresAt', 'must be in the future')
  const g = generateKey(input.type, tags)
  const view = await insertKey(sql, {
    id: newId(),
    tenantId: input.tenantId,
    userId: input.userId ?? null,
    name: input.name ?? '',
    type: input.type,
    prefix: g.prefix,
    lastFour: g.lastFour,
    hash: g.hash,
    permissions: [...new Set(input.permissions)],
    expiresAt: input.expiresAt ?? null,
  })
  return { id: view.id, key: g.key, prefix: g.prefix, lastFour: g.lastFour, view }
}

export interface NewKeyRequest {
  name: string
  /** sdk or ci (the route's schema admits nothing else). */
  type: string
  permissions: string[]
  expiresAt?: string
  expiresInDays?: number
}

const DAY_MS = 86_400_000

const exceeds = (message: string, missing: string[]) =>
  forbidden(message, { reason: 'exceeds_own_permissions', missing })

export function apiKeysService(deps: {
  db: Db
  tags: CredentialTags
  credentials: Pick<Credentials, 'invalidate'>
  now?: () => number
}) {
  const { db, tags, credentials } = deps
  const now = dateClock(deps.now)

  function expiryOf(input: NewKeyRequest, at: Date): Date | null {
    if (input.expiresAt !== undefined && input.expiresInDays !== undefined) {
      throw new AppError('VALIDATION_ERROR', 'Give expiresAt or expiresInDays, not both', {
        errors: [
          { field: 'body.expiresAt', message: 'cannot be combined with expiresInDays' },
          { field: 'body.expiresInDays', message: 'cannot be combined with expiresAt' },
        ],
      })
    }
    if (input.expiresInDays !== undefined) return new Date(at.getTime() + input.expiresInDays * DAY_MS)
    if (input.expiresAt === undefined) return null
    const expiresAt = new Date(input.expiresAt)
    if (!(expiresAt.getTime() > at.getTime())) throw invalid('body.expiresAt', 'must be in the future')
    return expiresAt
  }

  return {
    async create(a: Actor, input: NewKeyRequest): Promise<CreatedKey> {
      // Operator keys act on every tenant: only someone with the server's database may make one.
      const type = input.type
      if (type !== 'sdk' && type !== 'ci') {
        throw invalid(
          'body.type',
          type === 'admin' ? 'admin keys are made with the admin CLI (create-key --type admin)' : 'must be sdk or ci',
        )
      }
      const name = input.name.trim()
      if (!name) throw invalid('body.name', 'must not be blank')
      const unknown = input.permissions.filter((p) => !isPermission(p))
      if (unknown.length) throw invalid('body.permissions', `unknown permissions: ${unknown.join(', ')}`)
      // '*' already holds everything: the others beside it would only mislead a reader of the list.
      const permissions = input.permissions.includes(ALL) ? [ALL] : [...new Set(input.permissions)]
      const missing = uncovered(a.principal.permissions, permissions)
      if (missing.length) {
        throw exceeds(`A key cannot be given permissions this credential lacks: ${missing.join(', ')}`, missing)
      }
      const expiresAt = expiryOf(input, now())
      return db.tenant(a.tenantId, async (sql) => {
        const created = await createKey(sql, tags, {
          tenantId: a.tenantId,
          userId: a.principal.userId,
          type,
          name,
          permissions,
          expiresAt,
        })
        await auditBy(sql, a, {
          action: 'key.created',
          target: { type: 'api_key', id: created.id },
          details: { type, permissions, name, expiresAt: expiresAt?.toISOString() ?? null },
        })
        return created
      })
    },

    async list(tenantId: string, page: { limit: number; cursor?: string }) {
      const before = decodeIdCursor(page.cursor)
      const rows = await db.tenantRead(tenantId, (sql) => listKeys(sql, tenantId, page.limit + 1, before))
      return toPage(rows, page.limit, (k) => k.id)
    },

    async get(tenantId: string, id: string): Promise<KeyView> {
      const [row] = await db.tenantRead(tenantId, (sql) => selectKey(sql, tenantId, id))
      if (!row) throw notFound('api_key', id)
      return row
    },

    /**
     * Revokes a key; revoking a revoked key answers with it as it is (no second event), so a retried
     * DELETE is safe. The key stops working on every replica once this returns.
     */
    async revoke(a: Actor, id: string): Promise<KeyView> {
      const key = await db.tenant(a.tenantId, async (sql) => {
        const [current] = await selectKey(sql, a.tenantId, id, { lock: true })
        if (!current) throw notFound('api_key', id)
        const itself = a.principal.kind === 'api_key' && a.principal.id === id
        const missing = itself ? [] : uncovered(a.principal.permissions, current.permissions)
        if (missing.length) {
          throw exceeds(
            `This credential may not revoke a key holding permissions it lacks: ${missing.join(', ')}`,
            missing,
          )
        }
        if (current.revoked_at) return current
        const revoked = (await revokeKey(sql, a.tenantId, id, now()))!
        await auditBy(sql, a, {
          action: 'key.revoked',
          target: { type: 'api_key', id },
          details: { type: revoked.type, permissions: revoked.permissions, name: revoked.name },
        })
        return revoked
      })
      // Also for a key revoked earlier: a message lost back then is sent again.
      await credentials.invalidate({ kind: 'api_key', id })
      return key
    },
  }
}

export type ApiKeysService = ReturnType<typeof apiKeysService>

/**
 * API keys as credentials. Memory decides every key that was not issued here (wrong tag, or of
 * the old format and not among the live old keys): only keys that exist are looked up.
 */
export function apiKeyAuthenticator(o: {
  db: Db
  tags: CredentialTags
  legacy: Pick<LegacyKeys, 'mayExist'>
  cache?: CredentialCache
}): Authenticator {
  const { db, tags, legacy } = o
  const cache = o.cache ?? new CredentialCache()
  return {
    fromMemory(token) {
      if (!looksLikeKey(token)) return null
      const cached = cache.get(keyCacheId(token))
      if (cached !== undefined) return cached
      return (isLegacyKey(token) ? legacy.mayExist(hashKey(token)) : tags.verify(token)) ? undefined : null
    },
    async lookUp(token) {
      const hash = hashKey(token)
      const row = await db.system((sql) => findByHash(sql, hash))
      if (!row || row.revoked_at || (row.tenant_id && row.tenant_status !== 'active')) {
        cache.refuse(keyCacheId(token))
        return null
      }
      const principal: Principal = {
        kind: 'api_key',
        id: row.id,
        tenantId: row.tenant_id,
        plan: row.plan,
        userId: row.user_id,
        role: null,
        sessionId: null,
        permissions: new Set(row.permissions),
      }
      const expiresAt = row.expires_at?.getTime() ?? null
      cache.set(keyCacheId(token), principal, expiresAt)
      if (expiresAt !== null && expiresAt <= Date.now()) return null
      // Lookups happen only on a cache miss (at most every few seconds per key and replica), and
      // the write only when the stored time is a minute old; it is not awaited, so the request
      // never waits for it, and a failure only leaves the time a little stale.
      if (!row.last_used_at || row.last_used_at.getTime() < Date.now() - LAST_USED_RESOLUTION_SECONDS * 1000) {
        db.system((sql) => touchLastUsed(sql, row.id)).catch(() => {})
      }
      return principal
    },
  }
}
