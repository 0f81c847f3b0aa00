// What every metric Atrium registers needs: a name registered once per registry (an app or runner
// built again on the same registry, as tests do, replaces the one before), and readings shared by
// the metrics one scrape collects together.
import type { Registry } from 'prom-client'

/**
 * A metric's name and where it is registered, for its constructor: `new Counter({ ...named(...), help })`.
 * The metric of that name already in the registry is removed first; no registry: counted, exported nowhere.
 */
export function named<N extends string>(name: N, registry: Registry | undefined): { name: N; registers: Registry[] } {
  registry?.removeSingleMetric(name)
  return { name, registers: registry ? [registry] : [] }
}

/**
 * `read` once for every collection that asks while it is under way: a scrape starts every metric's
 * collection at once (prom-client's Promise.all), so the gauges reading one probe or one statfs
 * share it, and the next scrape reads again.
 */
export function perScrape<T>(read: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | null = null
  return () => (pending ??= read().finally(() => (pending = null)))
}
