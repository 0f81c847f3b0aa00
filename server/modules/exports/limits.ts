// The bounds of a tenant archive, in one place: the writer (writer.ts) keeps inside them and the
// restore (server/modules/restores/archive.ts, records.ts) refuses what goes beyond them, so what
// Atrium exports it can restore. An export that cannot be written inside them fails
// EXPORT_TOO_LARGE rather than leaving an archive nobody can restore; an archive beyond them is
// refused with its ARCHIVE_* code. docs/portability.md lists them.
//
// Memory: a restore reads a JSON entry whole (to check it), so every JSON entry is bounded
// (MAX_JSON_ENTRY_BYTES); the exporter reads records from the database in batches bounded by bytes
// as PostgreSQL measures them before they are fetched (READ_BATCH_BYTES), and a record larger than
// a JSON entry may be is never fetched at all.
//
// Compression: a zip bomb is told apart by how far its bytes expand. The rule (withinRatio) allows
// MAX_RATIO times the compressed bytes plus RATIO_ALLOWANCE_BYTES, for each entry and for the whole
// archive. The writer keeps to it by construction rather than by hoping its data compresses
// moderately (run records full of repeated text expand a thousand times): it deflates an entry only
// when the entry is at most PAGE_BYTES (so the entry passes whatever its ratio) and the archive so
// far, with the entry at its largest, still passes against the bytes already written (stored
// entries add as much to the compressed side as to the unpacked one, so the archive passes at its
// end too); everything else (file contents, a page holding one record larger than a page, a list
// larger than a page) is stored as it is, expanding once. A bomb still cannot pass: a small entry
// expands at most RATIO_ALLOWANCE_BYTES beyond the ratio, and the archive as a whole no more.
import type { Config } from '../../../config/schema.js'
import { AppError } from '../../domain/errors.js'

const MiB = 1024 * 1024

/** The largest JSON entry (a page of records, a list, one record): a restore reads one whole to check it. */
/** Attempts of an export or a restore before it ends failed (their queues in server/jobs.ts, and their enqueues). */
export const DATA_ATTEMPTS = 3

export const MAX_JSON_ENTRY_BYTES = 64 * MiB
/** Records a page entry (`00001.json`, ...) holds at most. */
export const PAGE_ROWS = 5000
/** Bytes after which the writer starts another page; also the largest entry it deflates. */
export const PAGE_BYTES = 4 * MiB
/** How many times its compressed bytes an entry, or the archive, may expand, beyond the allowance. */
export const MAX_RATIO = 200
/** What an entry or the archive may expand beyond MAX_RATIO: at least a deflated page, whatever its ratio. */
export const RATIO_ALLOWANCE_BYTES = PAGE_BYTES
/**
 * How deeply a JSON entry may nest arrays and objects. The API takes bodies of 64 levels; the
 * entry's list and record add two, and what a model produced (a run's steps) may nest deeper. Far
 * below where JSON.stringify or PostgreSQL's jsonb run out of stack (some thousands).
 */
export const MAX_JSON_DEPTH = 256
/** Bytes of records (as PostgreSQL renders them) the exporter fetches at once; a larger record comes alone. */
export const READ_BATCH_BYTES = 16 * MiB
/** Records the exporter fetches at once at most. */
export const READ_BATCH_ROWS = 500

/** Whether `unpacked` bytes from `packed` compressed ones is within the ratio rule (an entry, or the archive). */
export const withinRatio = (unpacked: number, packed: number) => unpacked <= MAX_RATIO * packed + RATIO_ALLOWANCE_BYTES

/** The bounds of a whole archive this installation restores (settings of the deployment: config/atrium.env.example). */
export interface ArchiveLimits {
  /** Entries at most (RESTORE_MAX_ENTRIES). */
  maxEntries: number
  /** Bytes all entries unpack to, at most (RESTORE_MAX_UNPACKED_BYTES). */
  maxUnpackedBytes: number
  /** Bytes of the archive itself, as uploaded (RESTORE_MAX_UPLOAD_BYTES). */
  maxArchiveBytes: number
}

export const archiveLimits = (
  c: Pick<Config, 'RESTORE_MAX_ENTRIES' | 'RESTORE_MAX_UNPACKED_BYTES' | 'RESTORE_MAX_UPLOAD_BYTES'>,
): ArchiveLimits => ({
  maxEntries: c.RESTORE_MAX_ENTRIES,
  maxUnpackedBytes: c.RESTORE_MAX_UNPACKED_BYTES,
  maxArchiveBytes: c.RESTORE_MAX_UPLOAD_BYTES,
})

/** An export that cannot be written inside the bounds: `details` say which bound and what went over it. */
export const exportTooLarge = (message: string, details: Record<string, unknown>) =>
  new AppError('EXPORT_TOO_LARGE', message, details)
