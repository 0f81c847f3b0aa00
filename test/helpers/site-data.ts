// A site's data as a backup must keep it: every table's row count and a checksum of its rows, and
// every object's SHA-256. Compared before a backup and after its restore.
import { createHash } from 'node:crypto'
import type { Client } from 'minio'
import postgres from 'postgres'
import { directDatabase, type SiteServices, type Store } from '../../installer/backup/site.js'
import { s3Client, services } from './platform.js'

export interface SiteSnapshot {
  tables: Record<string, { rows: number; md5: string }>
  objects: Record<string, string>
}

/** Read as the test's superuser, which row-level security does not filter. */
export async function snapshot(
  databaseUrl: string,
  bucket: string,
  client: Client = s3Client(),
): Promise<SiteSnapshot> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  const tables: SiteSnapshot['tables'] = {}
  try {
    const names = await sql<
      { name: string }[]
    >`select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'public' and c.relkind = 'r' order by 1`
    for (const { name } of names) {
      const [r] = await sql.unsafe<{ rows: string; md5: string | null }[]>(
        `select count(*) as rows, md5(coalesce(string_agg(t::text, '|' order by t::text), '')) as md5 from public."${name}" t`,
      )
      tables[name] = { rows: Number(r!.rows), md5: r!.md5 ?? '' }
    }
  } finally {
    await sql.end()
  }
  const objects: Record<string, string> = {}
  for await (const o of client.listObjectsV2(bucket, '', true) as AsyncIterable<{ name: string }>) {
    const hash = createHash('sha256')
    for await (const c of await client.getObject(bucket, o.name)) hash.update(c as Buffer)
    objects[o.name] = hash.digest('hex')
  }
  return { tables, objects }
}

/** The site's services as the installer's backup reaches a site with its own: the test's PostgreSQL and MinIO. */
export function directSite(databaseUrl: string, bucket: string, stores: Store[] = []): SiteServices {
  return {
    database: directDatabase(databaseUrl),
    stores: [
      {
        name: 'default',
        endpoint: services.s3Endpoint,
        bucket,
        accessKey: services.s3AccessKey,
        secretKey: services.s3SecretKey,
        region: 'us-east-1',
      },
      ...stores,
    ],
  }
}
