// Where a tenant's objects are kept: its own store (BYOS) as the regions API takes it, a bucket of the test
// S3 store behind a hostile store that behaves until a test turns it, and what a bucket should hold.
import type { Test } from 'tap'
import { hostileStore, type HostileStore } from './hostile-store.js'
import { freshBucket, s3Client, services } from './platform.js'

export interface Store {
  endpoint: string
  bucket: string
  accessKey: string
  secretKey: string
}

/** The regions API's fields for `store` (an S3 store in us-east-1); the keys default to the test store's. */
export function byosFields({
  endpoint,
  bucket,
  accessKey = services.s3AccessKey,
  secretKey = services.s3SecretKey,
}: Pick<Store, 'endpoint' | 'bucket'> & Partial<Store>) {
  return {
    byosProvider: 's3',
    byosEndpoint: endpoint,
    byosBucket: bucket,
    byosRegion: 'us-east-1',
    byosAccessKey: accessKey,
    byosSecretKey: secretKey,
  }
}

/**
 * A fresh bucket of the test S3 store, reached through a hostile store that forwards to it (and answers
 * 200 MB once its mode is turned), and the settings that put a tenant on it.
 */
export async function ownStoreTurning(t: Test): Promise<{ store: HostileStore; settings: Record<string, string> }> {
  const own = await freshBucket(t)
  await s3Client().makeBucket(own, 'us-east-1')
  const store = await hostileStore(t, { mode: 'forward', forwardTo: services.s3Endpoint, bytes: 200 * 1024 * 1024 })
  return { store, settings: { storageMode: 'byos', ...byosFields({ endpoint: store.url, bucket: own }) } }
}

/** `keys` (a bucket's object names) hold a backup and an export: both were written where the tenant's data is. */
export function holdsBackupAndExport(t: Test, keys: string[], where: string) {
  t.ok(
    keys.some((k) => k.includes('/backups/')),
    `the backup is in ${where}`,
  )
  t.ok(
    keys.some((k) => k.includes('/exports/')),
    `the export is in ${where}`,
  )
}
