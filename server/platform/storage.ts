// Where a tenant's objects live. Everything that stores, links or deletes a tenant's blob asks here,
// with the tenant, so that regional (and customer-owned) stores plug in behind this one function
// without any caller changing.
//
// The deployment's stores: the default one (R2_*, the region DEFAULT_REGION) and one per region of
// REGION_STORES. A tenant's objects are written to the store of its primary region (its
// residency region when it requires residency: the preferences' rules make them the same), read
// this instant from its regional preferences. Objects are never moved: an object written before a
// change of region stays where it was, and is found there. A read, a link or a delete looks in the
// tenant's current store first, then in the others (the default store, then each region's), so
// every earlier file, backup and export stays readable after a move (docs/regions.md).
import type { Readable } from 'node:stream'
import type { Blobs, LinkOptions } from './blobs.js'
import type { Db } from './db.js'

export interface Storage {
  /**
   * The store holding the tenant's objects: a key a tenant's row records is a key in this store.
   * Asynchronous because the tenant's region (and a customer's own store) is read first.
   */
  forTenant(tenantId: string): Promise<Blobs>
  /** Which store a tenant's new objects go to now: its region, and that region's store. */
  placement(tenantId: string): Promise<{ region: string; store: Blobs }>
}

/** Every tenant in the platform's own store (R2_ENDPOINT, or the local folder), of the region `region`. */
export function platformStorage(blobs: Blobs, region = ''): Storage {
  return { forTenant: async () => blobs, placement: async () => ({ region, store: blobs }) }
}

const isMissing = (err: unknown) => {
  const code = (err as { code?: string } | null)?.code
  return code === 'NotFound' || code === 'NoSuchKey' || code === 'ENOENT'
}

/**
 * The stores of a deployment with regions: `regions` maps each region code to its store, the
 * default region's being the platform's own.
 */
export function regionalStorage(o: { db: Db; defaultRegion: string; regions: ReadonlyMap<string, Blobs> }): Storage {
  const fallback = o.regions.get(o.defaultRegion)!
  const others = [fallback, ...[...o.regions.entries()].filter(([code]) => code !== o.defaultRegion).map(([, b]) => b)]

  async function placement(tenantId: string) {
    const [row] = await o.db.system(
      (sql) => sql<{ region: string }[]>`
      select case when data_residency_required then data_residency_region else primary_region end as region
        from tenant_regional_preferences where tenant_id = ${tenantId}`,
    )
    const region = row && o.regions.has(row.region) ? row.region : o.defaultRegion
    return { region, store: o.regions.get(region)! }
  }

  /** The store that holds `key`: the current one first, then the others; the current one when none does. */
  async function holding(current: Blobs, key: string): Promise<Blobs> {
    for (const b of [current, ...others.filter((x) => x !== current)]) {
      if ((await b.size(key)) !== null) return b
    }
    return current
  }

  return {
    placement,
    async forTenant(tenantId) {
      const { store: current } = await placement(tenantId)
      if (o.regions.size === 1) return current
      const router: Blobs = {
        kind: current.kind,
        put: (key, body, contentType) => current.put(key, body, contentType),
        async get(key: string): Promise<Readable> {
          try {
            return await current.get(key)
          } catch (err) {
            if (!isMissing(err)) throw err
            return (await holding(current, key)).get(key)
          }
        },
        getRange: async (key, start, end) => (await holding(current, key)).getRange(key, start, end),
        size: async (key) => (await holding(current, key)).size(key),
        async remove(key) {
          // An object may exist in more than one store (the same content written before and after a move): every copy goes.
          for (const b of [current, ...others.filter((x) => x !== current)]) if ((await b.size(key)) !== null) await b.remove(key)
        },
        presignGet: async (key: string, opts: LinkOptions) => (await holding(current, key)).presignGet(key, opts),
        ping: () => current.ping(),
      }
      return router
    },
  }
}
