// Creating keys (shown once, stored hashed) and turning a presented key into a principal.
import { LRUCache } from 'lru-cache'
import type { Db, TxSql } from '../../platform/db.js'
import { invalid } from '../../http/errors.js'
import type { Authenticator, Principal } from '../../http/principal.js'
import { newId } from '../../ids.js'
import { generateKey, hashKey, looksLikeKey, type KeyType } from './keys.js'
import { isPermission } from './permissions.js'
import { findByHash, insertKey } from './store.js'

export interface CreateKeyInput {
  tenantId: string | null
  userId?: string | null
  type: KeyType
  name?: string
  permissions: string[]
  expiresAt?: Date | null
}

export interface CreatedKey { id: string; key: string; prefix: string; lastFour: string }

/** Runs inside the caller's transaction (tenant creation makes its first key in the same one). */
export async function createKey(sql: TxSql, input: CreateKeyInput): Promise<CreatedKey> {
  if ((input.type === 'admin') !== (input.tenantId === null)) {
    throw invalid('type', input.type === 'admin' ? 'admin keys belong to no tenant' : 'sdk and ci keys need a tenant')
  }
  const unknown = input.permissions.filter((p) => !isPermission(p))
  if (unknown.length) throw invalid('permissions', `unknown permissions: ${unknown.join(', ')}`)
  if (input.expiresAt && input.expiresAt.getTime() <= Date.now()) throw invalid('expiresAt', 'must be in the future')
  const g = generateKey(input.type)
  const id = newId()
  await insertKey(sql, {
    id,
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
  return { id, key: g.key, prefix: g.prefix, lastFour: g.lastFour }
}

/**
 * How long a replica trusts a key it has looked up. Keys are looked up on every request otherwise,
 * which doubles the database work of a read. A key revoked, expired or suspended in the database
 * stops working on every replica within this time; expiry itself is checked on every request.
 */
export const KEY_CACHE_SECONDS = 10

export function apiKeyAuthenticator(db: Db): Authenticator {
  // Only keys that authenticated are cached: a flood of made-up keys cannot push real ones out.
  const cache = new LRUCache<string, { principal: Principal; expiresAt: number | null }>({ max: 10_000, ttl: KEY_CACHE_SECONDS * 1000 })

  const lookUp = async (hash: Buffer) => {
    const row = await db.system((sql) => findByHash(sql, hash))
    if (!row || row.revoked_at || (row.tenant_id && row.tenant_status !== 'active')) return undefined
    const principal: Principal = {
      kind: 'api_key',
      id: row.id,
      tenantId: row.tenant_id,
      plan: row.plan,
      userId: row.user_id,
      permissions: new Set(row.permissions),
    }
    return { principal, expiresAt: row.expires_at?.getTime() ?? null }
  }

  return {
    answersFromMemory: (token) => !looksLikeKey(token) || cache.has(hashKey(token).toString('base64')),
    async authenticate(token) {
      if (!looksLikeKey(token)) return null
      const hash = hashKey(token)
      const id = hash.toString('base64')
      let hit = cache.get(id)
      if (!hit) {
        hit = await lookUp(hash)
        if (!hit) return null
        cache.set(id, hit)
      }
      if (hit.expiresAt !== null && hit.expiresAt <= Date.now()) return null
      return hit.principal
    },
  }
}
