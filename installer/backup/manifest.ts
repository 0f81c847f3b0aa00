// A site backup's manifest (manifest.json, the archive's last entry): what is in the archive and
// how to check it. Pure: what a restore refuses is decided here from the manifest alone.
import { compareVersions, parseVersion } from '../../common/version-numbers.js'
import type { SealParams } from './seal.js'

export const FORMAT = 'atrium-site-backup/1'

/** The archive's entries, in the order they are written. */
export const PART = {
  configuration: 'configuration.enc',
  objects: 'objects/',
  database: 'database.dump',
  index: 'objects.jsonl',
  manifest: 'manifest.json',
} as const

export interface StoreSummary {
  /** `default` (R2_*), or the region code of a REGION_STORES entry. */
  name: string
  bucket: string
  count: number
  bytes: number
}

export interface BackupManifest {
  format: typeof FORMAT
  atriumVersion: string
  schemaVersion: number
  createdAt: string
  target: 'compose' | 'helm'
  configuration: { file: string; bytes: number; sha256: string; encryption: SealParams }
  database: {
    file: string
    bytes: number
    sha256: string
    /** PostgreSQL's server_version_num where it was taken, and the pg_dump that took it. */
    serverVersion: number
    dumpedWith: string
    /** Rows per table, counted when the backup started. */
    tables: Record<string, number>
  }
  objects: {
    index: string
    indexBytes: number
    indexSha256: string
    count: number
    bytes: number
    stores: StoreSummary[]
  }
  /** SHA-256 of every archive byte before manifest.json's header. */
  archive: { sha256: string }
  /** HMAC-SHA256 of this manifest without `mac`, under the passphrase's key. */
  mac: string
}

/** One line of objects.jsonl. */
export interface IndexLine {
  store: string
  key: string
  size: number
  sha256: string
  contentType?: string
}

/** The archive entry of an object (store and key, as the store names it). */
export const objectEntry = (store: string, key: string) => `${PART.objects}${store}/${key}`

/** The text the manifest's mac covers. */
export const macText = (m: Omit<BackupManifest, 'mac'> & { mac?: string }): string => {
  const { mac: _, ...rest } = m
  return JSON.stringify(rest)
}

/** The manifest's shape, or why it is not one. */
export function parseManifest(text: string): { manifest: BackupManifest } | { problem: string } {
  let m: BackupManifest
  try {
    m = JSON.parse(text) as BackupManifest
  } catch {
    return { problem: 'manifest.json is not JSON: the archive is damaged' }
  }
  if (m?.format !== FORMAT)
    return {
      problem: `manifest.json is not an Atrium site backup's (format ${JSON.stringify(m?.format)}; this installer reads ${FORMAT})`,
    }
  const fields = [
    typeof m.atriumVersion === 'string',
    Number.isInteger(m.schemaVersion),
    typeof m.mac === 'string',
    typeof m.archive?.sha256 === 'string',
    typeof m.database?.sha256 === 'string',
    typeof m.configuration?.sha256 === 'string',
    Array.isArray(m.objects?.stores),
  ]
  if (fields.includes(false))
    return { problem: 'manifest.json lacks fields an Atrium site backup has: the archive is damaged' }
  return { manifest: m }
}

/**
 * Why this release must not restore the archive: one from a newer Atrium or a newer schema (migrations only go
 * forward).
 */
export function versionProblem(
  m: Pick<BackupManifest, 'atriumVersion' | 'schemaVersion'>,
  release: { version: string; schema: number },
): string | null {
  const from = parseVersion(m.atriumVersion)
  const to = parseVersion(release.version)
  if (from && to && compareVersions(from, to) > 0)
    return `the backup is from Atrium ${m.atriumVersion}, newer than this installer's ${release.version}: restore it with the ${m.atriumVersion} installer (a release cannot run on a newer one's data)`
  if (m.schemaVersion > release.schema)
    return `the backup's database schema is version ${m.schemaVersion}, newer than this release's ${release.schema}: restore it with the installer of the release that made it`
  return null
}
