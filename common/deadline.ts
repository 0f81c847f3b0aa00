// Every probe of the outside (a service, the cluster, a tool) has a deadline: a server that accepts
// the connection and never answers must fail its check, not hang the installer.

/** How long one probe may take unless told otherwise. */
export const PROBE_DEADLINE_MS = 10_000

/** "10 s", "1.5 s": a deadline as the checks say it. */
export const inSeconds = (ms: number) => `${Number((ms / 1000).toFixed(1))} s`

export const timedOut = (what: string, ms?: number) =>
  Object.assign(new Error(`${what}: no answer in ${ms === undefined ? 'time' : inSeconds(ms)}`), { code: 'ETIMEDOUT' })

/**
 * `work`, or a rejection with code ETIMEDOUT after `ms` (the timer never outlives the race). The
 * work itself is not stopped: the caller closes what it opened (a pool, an agent, a signal).
 */
export async function within<T>(ms: number, what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timedOut(what, ms)), ms)
  })
  try {
    return await Promise.race([work, limit])
  } finally {
    clearTimeout(timer)
  }
}
