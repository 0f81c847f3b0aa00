// Where a tenant's objects live. Everything that stores, links or deletes a tenant's blob asks here,
// with the tenant, so that customer-owned (BYOS) and regional stores can plug in behind this one
// function without any caller changing. Today every tenant gets the platform's store.
import type { Blobs } from './blobs.js'

export interface Storage {
  /**
   * The store holding the tenant's objects: a key a tenant's row records is a key in this store.
   * Asynchronous because a customer's own store will need its settings read (and its keys
   * unsealed) before it can be reached.
   */
  forTenant(tenantId: string): Promise<Blobs>
}

/** Every tenant in the platform's own store (R2_ENDPOINT, or the local folder). */
export function platformStorage(blobs: Blobs): Storage {
  return { forTenant: async () => blobs }
}
