// Keys made before tags existed cannot show by themselves that they were issued here. Each replica
// keeps the hashes of those still live, a set that only shrinks (no key without a tag is made any
// more), read at start and again every minute (during a rolling upgrade an older server may still
// make one). A key outside the set is refused from memory, so made-up keys of the old format cost
// no lookup either; a key revoked since the last read is still looked up, and refused then. Until
// the set has been read once (the database was away at start), every old-format key is looked up:
// refusing real keys then would tell their programs they are bad.
import type { Logger } from 'pino'
import type { Db } from '../../platform/db.js'
import { legacyKeyHashes } from './store.js'

export const LEGACY_RELOAD_MS = 60_000
const RETRY_MS = 5_000

export interface LegacyKeys {
  /** Whether an old-format key with this hash may exist (and so is worth a lookup). */
  mayExist(hash: Buffer): boolean
  /** Reads the set again. */
  reload(): Promise<void>
  /** Reads it now (waiting, so a ready server knows it), then every minute until close. */
  start(): Promise<void>
  close(): void
}

export function legacyKeys(db: Db, log: Logger): LegacyKeys {
  let hashes: Set<string> | null = null
  let timer: NodeJS.Timeout | undefined
  let closed = false
  const reload = async () => {
    hashes = new Set((await db.system((sql) => legacyKeyHashes(sql))).map((h) => h.toString('base64')))
  }
  const schedule = (ms: number) => {
    if (!closed) timer = setTimeout(tick, ms).unref()
  }
  const tick = () =>
    reload().then(
      () => schedule(LEGACY_RELOAD_MS),
      (err: unknown) => {
        log.warn(
          { err: (err as Error).message },
          'could not read the keys made before tags; they are looked up meanwhile',
        )
        schedule(RETRY_MS)
      },
    )
  return {
    mayExist: (hash) => hashes === null || hashes.has(hash.toString('base64')),
    reload,
    start: () => tick(),
    close() {
      closed = true
      clearTimeout(timer)
    },
  }
}
