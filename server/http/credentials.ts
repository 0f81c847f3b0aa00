// Principals of recently seen credentials, shared by the authenticators of one replica, and the
// message that drops them on every replica when a key is revoked, a session ends, or a user or
// tenant changes. Without the message a replica would trust a revoked credential until its entry
// expired; with it, revocation takes effect everywhere as soon as the message arrives.
import { LRUCache } from 'lru-cache'
import type { Cache, Unsubscribe } from '../platform/cache.js'
import type { Principal } from './principal.js'

/** Upper bound on how long a replica trusts what it looked up, should a message be lost. */
export const CREDENTIAL_CACHE_SECONDS = 10
export const INVALIDATE_CHANNEL = 'atrium:credentials:invalidate'

export interface Invalidation { kind: 'api_key' | 'session' | 'user' | 'tenant'; id: string }

interface Entry { principal: Principal; expiresAt: number | null }

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

export async function openCredentials(bus: Pick<Cache, 'publish' | 'subscribe'>, log?: { warn(o: object, m: string): void }): Promise<Credentials> {
  const cache = new CredentialCache()
  const unsubscribe: Unsubscribe = await bus.subscribe(INVALIDATE_CHANNEL, (message) => {
    try {
      cache.drop(JSON.parse(message) as Invalidation)
    } catch {
      log?.warn({ message }, 'ignored a malformed credential invalidation')
    }
  })
  return {
    cache,
    async invalidate(inv) {
      cache.drop(inv) // at once here, whatever becomes of the message
      await bus.publish(INVALIDATE_CHANNEL, JSON.stringify(inv))
    },
    close: unsubscribe,
  }
}
