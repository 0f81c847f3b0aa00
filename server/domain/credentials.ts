// Principals of recently seen credentials, shared by the authenticators of one replica, and what
// drops them when a key is revoked, a session ends, or a user or tenant changes: an invalidation,
// sent to every replica (platform/credentials.ts). Without it a replica would trust a revoked
// credential until its entry expired; with it, revocation takes effect everywhere at once.
import { LRUCache } from 'lru-cache'
import type { Principal } from './principal.js'

/** Upper bound on how long a replica trusts what it looked up, should a message be lost. */
export const CREDENTIAL_CACHE_SECONDS = 10

export interface Invalidation {
  kind: 'api_key' | 'session' | 'user' | 'tenant'
  id: string
}

interface Entry {
  principal: Principal
  expiresAt: number | null
}

const matches = (p: Principal, inv: Invalidation) =>
  (inv.kind === 'api_key' && p.kind === 'api_key' && p.id === inv.id) ||
  (inv.kind === 'session' && p.sessionId === inv.id) ||
  (inv.kind === 'user' && p.userId === inv.id) ||
  (inv.kind === 'tenant' && p.tenantId === inv.id)

export class CredentialCache {
  // Credentials that authenticated, and apart from them (so that no number of refusals can push a
  // real one out) real credentials found dead (revoked, expired, their session ended): a leaked
  // key revoked since costs a lookup every few seconds, not one per request.
  private readonly entries = new LRUCache<string, Entry>({ max: 10_000, ttl: CREDENTIAL_CACHE_SECONDS * 1000 })
  private readonly refused = new LRUCache<string, true>({ max: 10_000, ttl: CREDENTIAL_CACHE_SECONDS * 1000 })

  /** The principal, while the credential itself has not expired; null when refused; undefined when not cached. */
  get(key: string, now = Date.now()): Principal | null | undefined {
    if (this.refused.has(key)) return null
    const hit = this.entries.get(key)
    if (!hit) return undefined
    return hit.expiresAt !== null && hit.expiresAt <= now ? null : hit.principal
  }

  /** A looked-up credential that is dead: refused from memory for a few seconds. */
  refuse(key: string): void {
    this.entries.delete(key)
    this.refused.set(key, true)
  }

  set(key: string, principal: Principal, expiresAt: number | null): void {
    this.entries.set(key, { principal, expiresAt })
  }

  drop(inv: Invalidation): void {
    for (const [key, entry] of this.entries.entries()) if (matches(entry.principal, inv)) this.entries.delete(key)
  }
}

export interface Credentials {
  readonly cache: CredentialCache
  /** Drops matching principals here and on every other replica. Call after the change commits. */
  invalidate(inv: Invalidation): Promise<void>
  close(): Promise<void>
}
