// Where a tenant's objects live. Everything that stores, links or deletes a tenant's blob asks here,
// with the tenant, so that regional and customer-owned stores plug in behind this one function
// without any caller changing.
//
// The stores: the deployment's default one (R2_*, the region DEFAULT_REGION), one per region of
// REGION_STORES, and a tenant's own (BYOS, reached through the outbound policy). A tenant's new
// objects go to its own store when it has chosen BYOS, else to the store of its primary region (its
// residency region when it requires residency: the preferences' rules make them the same). This
// is read from the database at every call, so a change applies to the next object on every
// replica. Objects are never moved: an object written before a change stays in the store it was
// written to, and is found there. A read, a link or a delete looks in the tenant's current store
// first, then in the others it may have used (the tenant's own store, kept after it went back to
// platform storage; the default store; each region's), so every earlier file, backup and export
// stays readable after a move (docs/regions.md).
import type { Readable } from 'node:stream'
import { guardedS3Blobs, type Blobs, type LinkOptions } from './blobs.js'
import type { Db } from './db.js'
import type { CompiledPolicy } from './outbound.js'
import type { Secrets } from './secrets.js'

export interface Storage {
  /**
   * The store holding the tenant's objects: a key a tenant's row records is a key in this store.
   * Asynchronous because the tenant's region, or its own store, is read first.
   */
  forTenant(tenantId: string): Promise<Blobs>
  /** Where the tenant's new objects go now: its region (when on platform storage) or its own store. */
  placement(tenantId: string): Promise<{ mode: 'platform' | 'byos'; region: string }>
  /** The site's own store of a region, or null when the site keeps no data there. */
  siteStore(region: string): SiteStore | null
  /**
   * Whether `endpoint` is the address of one of the site's own S3 stores (R2_ENDPOINT, REGION_STORES):
   * the operator configured it, so the server reaches it as it reaches its own objects.
   */
  isSiteEndpoint(endpoint: string): boolean
}

/** One of the site's own stores (R2_* or the local folder for DEFAULT_REGION; each of REGION_STORES). */
export interface SiteStore {
  region: string
  blobs: Blobs
  /** Its S3 address (an origin) and the region its signatures use; null for the local folder. */
  s3: SiteAddress | null
}

export interface SiteAddress {
  endpoint: string
  signingRegion: string
}

/** An endpoint as an origin (http(s)://host[:port]), the form addresses are compared in; null when not a URL. */
const originOf = (endpoint: string): string | null => {
  try {
    return new URL(endpoint).origin
  } catch {
    return null
  }
}

/** A tenant's own store as its row keeps it (the keys sealed, bound to the tenant's row of tenant_storage). */
export interface ByosRow {
  endpoint: string
  bucket: string
  region: string
  accessKeySealed: string
  secretKeySealed: string
  updatedAt: Date
}

/** The sealed keys' context: the tenant's row of tenant_storage. */
export const byosKeyContext = (tenantId: string, field: 'access_key' | 'secret_key') => ({
  tenantId,
  table: 'tenant_storage',
  rowId: tenantId,
  field,
})

const isMissing = (err: unknown) => {
  const code = (err as { code?: string } | null)?.code
  return code === 'NotFound' || code === 'NoSuchKey' || code === 'ENOENT'
}

export interface StorageOptions {
  db: Db
  defaultRegion: string
  /** Each region's store; the default region's is the platform's own (R2_*, or the local folder). */
  regions: ReadonlyMap<string, Blobs>
  /** The S3 address of each region's store (R2_ENDPOINT, REGION_STORES); none for the local folder. */
  addresses?: ReadonlyMap<string, SiteAddress>
  secrets: Secrets
  policy: CompiledPolicy
  /** STORAGE_TIMEOUT_SECONDS, for a tenant's own store as for the platform's. */
  timeoutMs?: number
}

export function tenantStorage(o: StorageOptions): Storage {
  const fallback = o.regions.get(o.defaultRegion)!
  const regionStores = [
    fallback,
    ...[...o.regions.entries()].filter(([code]) => code !== o.defaultRegion).map(([, b]) => b),
  ]
  const addresses = new Map(
    [...(o.addresses ?? [])].map(([code, a]) => [code, { ...a, endpoint: originOf(a.endpoint) ?? a.endpoint }]),
  )
  const siteOrigins = new Set([...addresses.values()].map((a) => a.endpoint))
  // A tenant's own store, opened once per version of its settings.
  const own = new Map<string, { version: number; blobs: Promise<Blobs & { close(): void }> }>()

  async function settings(tenantId: string) {
    const [row] = await o.db.system(
      (sql) => sql<
        {
          mode: string | null
          region: string | null
          endpoint: string | null
          bucket: string | null
          byos_region: string | null
          ak: string | null
          sk: string | null
          updated_at: Date | null
        }[]
      >`
      select s.storage_mode as mode, case when p.data_residency_required then p.data_residency_region else p.primary_region end as region,
             s.byos_endpoint as endpoint, s.byos_bucket as bucket, s.byos_region, s.byos_access_key_sealed as ak, s.byos_secret_key_sealed as sk, s.updated_at
        from (select ${tenantId}::uuid as id) t
        left join tenant_storage s on s.tenant_id = t.id
        left join tenant_regional_preferences p on p.tenant_id = t.id`,
    )
    const region = row?.region && o.regions.has(row.region) ? row.region : o.defaultRegion
    const byos: ByosRow | null =
      row?.endpoint && row.bucket && row.ak && row.sk
        ? {
            endpoint: row.endpoint,
            bucket: row.bucket,
            region: row.byos_region ?? 'us-east-1',
            accessKeySealed: row.ak,
            secretKeySealed: row.sk,
            updatedAt: row.updated_at!,
          }
        : null
    return { mode: row?.mode === 'byos' && byos ? ('byos' as const) : ('platform' as const), region, byos }
  }

  function ownStore(tenantId: string, b: ByosRow): Promise<Blobs> {
    const version = b.updatedAt.getTime()
    const cached = own.get(tenantId)
    if (cached?.version === version) return cached.blobs
    if (cached)
      void cached.blobs.then(
        (x) => x.close(),
        () => {},
      )
    const blobs = guardedS3Blobs(o.policy, {
      endpoint: b.endpoint,
      bucket: b.bucket,
      region: b.region,
      accessKey: o.secrets.decrypt(b.accessKeySealed, byosKeyContext(tenantId, 'access_key')),
      secretKey: o.secrets.decrypt(b.secretKeySealed, byosKeyContext(tenantId, 'secret_key')),
      ...(o.timeoutMs ? { timeoutMs: o.timeoutMs } : {}),
    })
    blobs.catch(() => own.delete(tenantId)) // a refused address is tried again next time
    own.set(tenantId, { version, blobs })
    return blobs
  }

  return {
    async placement(tenantId) {
      const s = await settings(tenantId)
      return { mode: s.mode, region: s.region }
    },
    siteStore(region) {
      const blobs = o.regions.get(region)
      return blobs ? { region, blobs, s3: addresses.get(region) ?? null } : null
    },
    isSiteEndpoint(endpoint) {
      const origin = originOf(endpoint)
      return origin !== null && siteOrigins.has(origin)
    },
    async forTenant(tenantId) {
      const s = await settings(tenantId)
      const theirs = s.byos ? await ownStore(tenantId, s.byos) : null
      const current = s.mode === 'byos' ? theirs! : o.regions.get(s.region)!
      const others = [...(theirs ? [theirs] : []), ...regionStores].filter((b) => b !== current)
      if (!others.length) return current
      /** The store that holds `key`: the current one first, then the others; the current one when none does. */
      const holding = async (key: string): Promise<Blobs> => {
        for (const b of [current, ...others]) if ((await b.size(key)) !== null) return b
        return current
      }
      const router: Blobs = {
        kind: current.kind,
        put: (key, body, contentType) => current.put(key, body, contentType),
        async get(key: string): Promise<Readable> {
          try {
            return await current.get(key)
          } catch (err) {
            if (!isMissing(err)) throw err
            return (await holding(key)).get(key)
          }
        },
        getRange: async (key, start, end) => (await holding(key)).getRange(key, start, end),
        size: async (key) => (await holding(key)).size(key),
        async remove(key) {
          // An object may be in more than one store (the same content written before and after a move): every copy
          // goes.
          for (const b of [current, ...others]) if ((await b.size(key)) !== null) await b.remove(key)
        },
        presignGet: async (key: string, opts: LinkOptions) => (await holding(key)).presignGet(key, opts),
        ping: () => current.ping(),
        // Every store the tenant may have used; a key held by two is listed twice (remove takes every copy).
        async *list(prefix) {
          for (const b of [current, ...others]) yield* b.list(prefix)
        },
      }
      return router
    },
  }
}
