// Keys made before tags existed cannot show by themselves that they were issued here. Each replica
// keeps the hashes of those still live, a set that only shrinks (no key without a tag is made any
// more), read at start and again every minute (during a rolling upgrade an older server may still
// make one). A key outside the set is refused from memory, so made-up keys of the old format cost
// no lookup either; a key revoked since the last read is still looked up, and refused then.
import type { Logger } from 'pino'
import type { Db } from '../../platform/db.js'
import { legacyKeyHashes } from './store.js'

export const LEGACY_RELOAD_MS = 60_000

export interface LegacyKeys {
  has(hash: Buffer): boolean
  /** Reads the set again (at start, then every minute until close). */
  reload(): Promise<void>
  start(): void
  close(): void
}

export function legacyKeys(db: Db, log: Logger): LegacyKeys {
  let hashes = new Set<string>()
  let timer: NodeJS.Timeout | undefined
  const reload = async () => {
    hashes = new Set((await db.system((sql) => legacyKeyHashes(sql))).map((h) => h.toString('base64')))
  }
  const reloadQuietly = () => reload().catch((err: unknown) => log.warn({ err: (err as Error).message }, 'could not read the keys made before tags; retrying in a minute'))
  return {
    has: (hash) => hashes.has(hash.toString('base64')),
    reload,
    start() {
      void reloadQuietly()
      timer = setInterval(reloadQuietly, LEGACY_RELOAD_MS).unref()
    },
    close: () => clearInterval(timer),
  }
}
