// Creating keys (shown once, stored hashed) and turning a presented key into a principal.
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

export function apiKeyAuthenticator(db: Db): Authenticator {
  return async (token) => {
    if (!looksLikeKey(token)) return null
    const row = await db.system((sql) => findByHash(sql, hashKey(token)))
    if (!row || row.revoked_at || (row.expires_at && row.expires_at.getTime() <= Date.now())) return null
    if (row.tenant_id && row.tenant_status !== 'active') return null
    return {
      kind: 'api_key',
      id: row.id,
      tenantId: row.tenant_id,
      plan: row.plan,
      userId: row.user_id,
      permissions: new Set(row.permissions),
    } satisfies Principal
  }
}
