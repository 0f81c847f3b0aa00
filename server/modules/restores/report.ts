// What a restore reports, and the shape each kind of archive's restore takes in the one job that
// runs them all (service.ts run): the bytes to copy, the records to write, the report to give.
import type { TxSql } from '../../platform/db.js'
import type { Kind } from '../exports/format.js'
import type { ArchiveEntry } from './archive.js'

/** Items the report lists by id (skipped, conflicts); the counts are always whole. */
const REPORT_ITEMS = 100

export interface KindCount {
  inArchive: number
  restored: number
  conflicts: number
  skipped: number
}

/** The report's counts (of the kinds an archive holds) and lists, filled as the second pass goes. */
export function tally(inArchive: Partial<Record<Kind, number>>) {
  const counts = Object.fromEntries(
    Object.entries(inArchive).map(([k, n]) => [k, { inArchive: n, restored: 0, conflicts: 0, skipped: 0 }]),
  ) as Record<Kind, KindCount>
  const skipped: { kind: Kind; id: string; reason: string }[] = []
  const conflicts: { kind: Kind; id: string }[] = []
  return {
    counts,
    skipped,
    conflicts,
    skip(kind: Kind, id: string, reason: string) {
      counts[kind].skipped++
      if (skipped.length < REPORT_ITEMS) skipped.push({ kind, id, reason })
    },
    conflict(kind: Kind, id: string) {
      counts[kind].conflicts++
      if (conflicts.length < REPORT_ITEMS) conflicts.push({ kind, id })
    },
  }
}
export type Tally = ReturnType<typeof tally>

/** What copying the files' bytes did (service.ts copyFiles). */
export interface Copied {
  stored: number
  alreadyPresent: number
  bytes: number
}

/** A file's bytes to copy into the store: its entry, its digest, and the project its key names. */
export interface Copy {
  entry: ArchiveEntry
  sha256: string
  projectId: string
}

/** One archive's restore, once its first pass has checked it: what the job does with it. */
export interface Pass {
  /** Records of each kind the archive holds. */
  counts: Partial<Record<Kind, number>>
  files: { count: number; bytes: number }
  /** The bytes to copy before any record is written. */
  copies: Copy[]
  /** The second pass's records, in the restore's transaction; what the report adds. */
  apply(sql: TxSql, t: Tally): Promise<Record<string, unknown>>
  /** What the report says of the archive and of where it went, besides the counts and the files. */
  describe: Record<string, unknown>
  /** What the audit entry of the restore's end says of the archive. */
  audit: Record<string, unknown>
}

/** A restore's report: the archive, the options, the counts, the files, and what was skipped or conflicted. */
export function reportOf(
  pass: Pass,
  o: { merge: boolean; validate: boolean },
  t: Tally | null,
  files: Copied,
  extra: Record<string, unknown>,
) {
  return {
    ...pass.describe,
    merge: o.merge,
    validateOnly: o.validate,
    counts: t ? t.counts : Object.fromEntries(Object.entries(pass.counts).map(([k, n]) => [k, { inArchive: n }])),
    files: { inArchive: pass.files.count, bytesInArchive: pass.files.bytes, ...files },
    ...(t ? { skipped: t.skipped, conflicts: t.conflicts } : {}),
    ...extra,
  }
}
