// Credential invalidations (domain/credentials.ts) travel on the cache's pub/sub: every replica
// drops the principals one names as soon as it arrives.
import { CredentialCache, type Credentials, type Invalidation } from '../domain/credentials.js'
import type { Cache, Unsubscribe } from './cache.js'

export const INVALIDATE_CHANNEL = 'atrium:credentials:invalidate'

export async function openCredentials(
  bus: Pick<Cache, 'publish' | 'subscribe'>,
  log?: { warn(o: object, m: string): void },
): Promise<Credentials> {
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
