// Reading an uploaded archive safely. The zip is read in place in the store (yauzl over ranged
// reads: the central directory, then each entry on its own), never unpacked to disk or held whole.
//
// Before any entry is read, the central directory is judged whole; the first broken rule refuses
// the archive with its code (ARCHIVE_*): more entries than the limit, a name that is not UTF-8, is
// absolute, has a drive letter, a backslash, '.' or '..' segments or a control character (zip
// slip), a symbolic link, two entries of one name, an encrypted entry or an unknown compression,
// entries whose data overlap (the overlapping-file bomb), an entry or the whole archive expanding
// beyond the ratio rule or the unpacked-size limit, and a name the format does not have. Two formats
// are read: a tenant export (metadata.json) and a project backup (manifest.json, and no
// metadata.json); which one is told from the directory's names, before any entry is read. Reading
// an entry then checks its size (yauzl) and its CRC-32 against the directory: a mismatch is
// ARCHIVE_CORRUPT. The limits are the ones the export writes within (exports/limits.ts), so an
// archive Atrium wrote passes them.
import { PassThrough, Transform, type Readable } from 'node:stream'
import zlib from 'node:zlib'
import yauzl from 'yauzl'
import { AppError, type ErrorCode } from '../../domain/errors.js'
import { jsonTooDeep } from '../../domain/text.js'
import type { Blobs } from '../../platform/blobs.js'
import { ENTRIES, type EntryDef } from '../exports/format.js'
import { BACKUP_ENTRIES } from '../projects/backup-format.js'
import { MAX_JSON_DEPTH, MAX_JSON_ENTRY_BYTES, MAX_RATIO, withinRatio, type ArchiveLimits } from '../exports/limits.js'

/** The formats a restore reads, with the entries each may hold. */
const FORMATS = {
  'tenant-export': { entries: ENTRIES, what: 'a tenant export' },
  'project-backup': { entries: BACKUP_ENTRIES, what: 'a project backup' },
} as const
export type ArchiveFormat = keyof typeof FORMATS
type AnyEntryDef = EntryDef | (typeof BACKUP_ENTRIES)[number]

export interface ArchiveEntry {
  name: string
  def: AnyEntryDef
  match: RegExpExecArray
  /** Bytes it unpacks to. */
  size: number
  raw: yauzl.Entry
}

export interface Archive {
  /** What the archive is, by its names: a project backup has manifest.json and no metadata.json. */
  readonly format: ArchiveFormat
  readonly entries: readonly ArchiveEntry[]
  /** An entry's bytes, checked against its size and CRC-32 as they pass (the stream fails ARCHIVE_CORRUPT). */
  open(entry: ArchiveEntry): Promise<Readable>
  /** A JSON entry, parsed. */
  json(entry: ArchiveEntry): Promise<unknown>
  close(): void
}

export const refused = (code: ErrorCode, message: string, details: Record<string, unknown> = {}) =>
  new AppError(code, message, details)

/** Ranged reads of an object in the store. */
class BlobReader extends yauzl.RandomAccessReader {
  constructor(
    private readonly blobs: Blobs,
    private readonly key: string,
  ) {
    super()
  }
  override _readStreamForRange(start: number, end: number): Readable {
    const out = new PassThrough()
    if (end <= start) {
      out.end()
      return out
    }
    this.blobs.getRange(this.key, start, end - 1).then(
      (s) => {
        s.once('error', (err) => out.destroy(err))
        s.pipe(out)
      },
      (err: unknown) => out.destroy(err as Error),
    )
    return out
  }
}

// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f]/

/**
 * Whether a failure while reading came from the store (a network fault: the job tries again)
 * rather than from the archive's bytes (yauzl's and zlib's own errors, which carry no code or a Z_ one).
 */
const fromStore = (err: unknown) => {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' && !code.startsWith('Z_') && !code.startsWith('ARCHIVE_')
}

/** Why a name may not be unpacked anywhere, or null. */
function unsafeName(name: string): string | null {
  if (name.startsWith('/')) return 'absolute path'
  if (/^[A-Za-z]:/.test(name)) return 'drive letter'
  if (name.includes('\\')) return 'backslash'
  if (CONTROL.test(name)) return 'control character'
  const segments = (name.endsWith('/') ? name.slice(0, -1) : name).split('/')
  if (segments.some((s) => s === '..')) return "'..' segment"
  if (segments.some((s) => s === '.' || s === '')) return "empty or '.' segment"
  return null
}

const S_IFMT = 0o170000
const S_IFLNK = 0o120000

/**
 * Opens an archive stored under `key` (`size` bytes) and judges its directory; refused with the first rule it breaks.
 */
export async function openArchive(blobs: Blobs, key: string, size: number, limits: ArchiveLimits): Promise<Archive> {
  const reader = new BlobReader(blobs, key)
  let zip: yauzl.ZipFile
  try {
    zip = await yauzl.fromRandomAccessReaderPromise(reader, size, {
      lazyEntries: true,
      decodeStrings: false,
      validateEntrySizes: true,
      autoClose: false,
    })
  } catch (err) {
    if (fromStore(err)) throw err
    throw refused('ARCHIVE_CORRUPT', `The upload is not a readable zip archive: ${(err as Error).message}`, {
      rule: 'not-a-zip',
    })
  }
  try {
    if (zip.entryCount > limits.maxEntries) {
      throw refused(
        'ARCHIVE_TOO_MANY_ENTRIES',
        `The archive holds ${zip.entryCount} entries; a restore takes at most ${limits.maxEntries}`,
        {
          entries: zip.entryCount,
          limit: limits.maxEntries,
        },
      )
    }
    const raw = await directory(zip)
    const format = formatOf(raw)
    const entries = judge(raw, size, limits, format)
    return {
      format,
      entries,
      open: (entry) => openChecked(zip, entry),
      async json(entry) {
        if (entry.size > MAX_JSON_ENTRY_BYTES)
          throw refused('ARCHIVE_TOO_LARGE', `${entry.name} is larger than ${MAX_JSON_ENTRY_BYTES} bytes`, {
            entry: entry.name,
            limit: MAX_JSON_ENTRY_BYTES,
          })
        const chunks: Buffer[] = []
        for await (const c of await openChecked(zip, entry)) chunks.push(c as Buffer)
        const text = Buffer.concat(chunks).toString('utf8')
        // Judged on the text, before parsing builds the nested value or anything walks it.
        if (jsonTooDeep(text, MAX_JSON_DEPTH))
          throw refused(
            'ARCHIVE_INVALID_DATA',
            `${entry.name} nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep`,
            { entry: entry.name, limit: MAX_JSON_DEPTH },
          )
        try {
          return JSON.parse(text)
        } catch {
          throw refused('ARCHIVE_INVALID_DATA', `${entry.name} is not JSON`, { entry: entry.name })
        }
      },
      close: () => zip.close(),
    }
  } catch (err) {
    zip.close()
    throw err
  }
}

/** Every entry of the central directory (no entry data read). */
function directory(zip: yauzl.ZipFile): Promise<yauzl.Entry[]> {
  return new Promise((resolve, reject) => {
    const out: yauzl.Entry[] = []
    zip.on('entry', (e: yauzl.Entry) => {
      out.push(e)
      zip.readEntry()
    })
    zip.once('end', () => resolve(out))
    zip.once('error', (err: Error) =>
      reject(
        fromStore(err)
          ? err
          : refused('ARCHIVE_CORRUPT', `The archive's directory is damaged: ${err.message}`, { rule: 'directory' }),
      ),
    )
    zip.readEntry()
  })
}

/** The entry names that tell the formats apart (the names' bytes as stored: none of them is read yet). */
const MARKS = { metadata: Buffer.from('metadata.json'), manifest: Buffer.from('manifest.json') }

/** A project backup when the archive has a manifest.json and no metadata.json; anything else is judged as a tenant export. */
function formatOf(raw: yauzl.Entry[]): ArchiveFormat {
  const has = (name: Buffer) => raw.some((e) => name.equals(e.fileName as unknown as Buffer))
  return has(MARKS.manifest) && !has(MARKS.metadata) ? 'project-backup' : 'tenant-export'
}

/** What an entry is in a format, from its name; null for a name the format does not have. */
function entryIn(format: ArchiveFormat, name: string): { def: AnyEntryDef; match: RegExpExecArray } | null {
  for (const def of FORMATS[format].entries) {
    const match = def.re.exec(name)
    if (match) return { def, match }
  }
  return null
}

function judge(raw: yauzl.Entry[], archiveBytes: number, limits: ArchiveLimits, format: ArchiveFormat): ArchiveEntry[] {
  const names = new Set<string>()
  const out: ArchiveEntry[] = []
  let unpacked = 0
  for (const e of raw) {
    let name: string
    try {
      name = new TextDecoder('utf-8', { fatal: true }).decode(e.fileName as unknown as Buffer)
    } catch {
      throw refused('ARCHIVE_UNSAFE_PATH', 'An entry name is not UTF-8', { rule: 'encoding' })
    }
    const why = unsafeName(name)
    if (why)
      throw refused('ARCHIVE_UNSAFE_PATH', `Entry ${JSON.stringify(name)} is unsafe: ${why}`, {
        entry: name,
        rule: why,
      })
    if (((e.externalFileAttributes >>> 16) & S_IFMT) === S_IFLNK)
      throw refused('ARCHIVE_SYMLINK', `Entry ${JSON.stringify(name)} is a symbolic link`, { entry: name })
    if (names.has(name))
      throw refused('ARCHIVE_DUPLICATE_ENTRY', `Entry ${JSON.stringify(name)} appears twice`, { entry: name })
    names.add(name)
    if (e.generalPurposeBitFlag & 0x1)
      throw refused('ARCHIVE_CORRUPT', `Entry ${JSON.stringify(name)} is encrypted`, { entry: name, rule: 'encrypted' })
    if (e.compressionMethod !== 0 && e.compressionMethod !== 8)
      throw refused('ARCHIVE_CORRUPT', `Entry ${JSON.stringify(name)} uses compression method ${e.compressionMethod}`, {
        entry: name,
        rule: 'compression',
      })
    if (!withinRatio(e.uncompressedSize, e.compressedSize)) {
      throw refused(
        'ARCHIVE_COMPRESSION_RATIO',
        `Entry ${JSON.stringify(name)} expands ${Math.round(e.uncompressedSize / Math.max(e.compressedSize, 1))} times`,
        {
          entry: name,
          limit: MAX_RATIO,
        },
      )
    }
    unpacked += e.uncompressedSize
    if (unpacked > limits.maxUnpackedBytes)
      throw refused('ARCHIVE_TOO_LARGE', `The archive unpacks to more than ${limits.maxUnpackedBytes} bytes`, {
        limit: limits.maxUnpackedBytes,
      })
    if (name.endsWith('/')) {
      if (e.uncompressedSize)
        throw refused('ARCHIVE_CORRUPT', `Directory entry ${JSON.stringify(name)} holds data`, {
          entry: name,
          rule: 'directory-data',
        })
      continue // a folder some zip tools add: nothing to restore
    }
    const known = entryIn(format, name)
    if (!known)
      throw refused('ARCHIVE_UNKNOWN_ENTRY', `Entry ${JSON.stringify(name)} is not part of ${FORMATS[format].what}`, {
        entry: name,
        format,
      })
    out.push({ name, def: known.def, match: known.match, size: e.uncompressedSize, raw: e })
  }
  if (!withinRatio(unpacked, archiveBytes)) {
    throw refused('ARCHIVE_COMPRESSION_RATIO', `The archive expands ${Math.round(unpacked / archiveBytes)} times`, {
      limit: MAX_RATIO,
    })
  }
  // Each entry's data must lie apart from the others': entries that share their data (a bomb
  // built from overlapping entries) are refused.
  const spans = raw
    .map((e) => ({
      start: e.relativeOffsetOfLocalHeader,
      end: e.relativeOffsetOfLocalHeader + 30 + e.fileNameLength + e.compressedSize,
    }))
    .sort((a, b) => a.start - b.start)
  for (let i = 1; i < spans.length; i++) {
    if (spans[i]!.start < spans[i - 1]!.end)
      throw refused('ARCHIVE_COMPRESSION_RATIO', 'Entries of the archive share their data (overlapping entries)', {
        rule: 'overlap',
      })
  }
  return out
}

function openChecked(zip: yauzl.ZipFile, entry: ArchiveEntry): Promise<Readable> {
  return new Promise((resolve, reject) => {
    zip.openReadStream(entry.raw, (err, stream) => {
      if (err)
        return reject(
          fromStore(err)
            ? err
            : refused('ARCHIVE_CORRUPT', `Entry ${JSON.stringify(entry.name)} cannot be read: ${err.message}`, {
                entry: entry.name,
                rule: 'local-header',
              }),
        )
      let crc = 0
      const check = new Transform({
        transform(chunk: Buffer, _enc, done) {
          crc = zlib.crc32(chunk, crc)
          done(null, chunk)
        },
        flush(done) {
          if (crc >>> 0 !== entry.raw.crc32 >>> 0)
            done(
              refused('ARCHIVE_CORRUPT', `Entry ${JSON.stringify(entry.name)} fails its CRC-32 check`, {
                entry: entry.name,
                rule: 'crc',
              }),
            )
          else done()
        },
      })
      stream.once('error', (e: Error) =>
        check.destroy(
          e instanceof AppError || fromStore(e)
            ? e
            : refused('ARCHIVE_CORRUPT', `Entry ${JSON.stringify(entry.name)} is damaged: ${e.message}`, {
                entry: entry.name,
                rule: 'data',
              }),
        ),
      )
      resolve(stream.pipe(check))
    })
  })
}
