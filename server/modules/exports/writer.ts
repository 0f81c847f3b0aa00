// Writing a tenant's archive (format.ts) as it is read: entries one at a time from database cursors
// and the store, into a zip (yazl), one JSON document, or a zip of CSV tables, with the size and
// SHA-256 of the output measured on the way. Nothing is held whole in memory: each entry is read
// only when the output has taken the one before it.
//
// The records are read first, in one snapshot of the database; the files' bytes come after, from
// the store, once that transaction has ended (a file's content never changes under its key, so it
// needs no snapshot, and the database is not held while the bytes are copied).
import { PassThrough, Readable, Transform } from 'node:stream'
import { finished } from 'node:stream/promises'
import { ZipFile } from 'yazl'
import { meterStream } from '../../../common/zip.js'
import { jsonTooDeep } from '../../domain/text.js'
import { exactly, type Blobs } from '../../platform/blobs.js'
import type { TxSql } from '../../platform/db.js'
import {
  columnsOf,
  csvLine,
  EXPORT_FORMAT,
  EXPORT_FORMAT_VERSION,
  kindsOf,
  pageName,
  SPECS,
  type ExportFormat,
  type ExportMetadata,
  type Include,
  type Kind,
} from './format.js'
import {
  exportTooLarge,
  MAX_JSON_DEPTH,
  MAX_JSON_ENTRY_BYTES,
  PAGE_BYTES,
  PAGE_ROWS,
  READ_BATCH_BYTES,
  READ_BATCH_ROWS,
  withinRatio,
  type ArchiveLimits,
} from './limits.js'
import * as store from './store.js'

export interface Entry {
  name: string
  body: string | Readable
  /** The most bytes it can unpack to, known before it is written: what the zip decides its compression by. */
  bound: number
  /**
   * A file's bytes (not JSON): stored as they are, since deflating them made an export several times slower than a
   * copy.
   */
  file?: boolean
}

/** A file's bytes, to be added once the records are written. */
export interface FileRef {
  name: string
  blobKey: string
  size: number
}

// ---- entries ------------------------------------------------------------------------------------

const bytesOf = (text: string) => Buffer.byteLength(text, 'utf8')

/** A record's key as the archive's details name it. */
const keyText = (kind: Kind, key: readonly unknown[]) => `${kind} ${key.map(String).join('/')}`

/**
 * A kind's records in key order, in batches read as the consumer asks for them and bounded by their
 * bytes: each batch's records are measured in the database first (their size as PostgreSQL renders
 * them), then fetched, up to READ_BATCH_BYTES at once. A record larger than a JSON entry may be
 * is never fetched: the export fails EXPORT_TOO_LARGE naming it.
 */
export async function* records(sql: TxSql, kind: Kind, scope: store.RecordScope): AsyncGenerator<store.Row[]> {
  let after: unknown[] | null = null
  for (;;) {
    const sizes = await store.recordSizes(sql, kind, scope, after, READ_BATCH_ROWS)
    for (let i = 0; i < sizes.length;) {
      const first = sizes[i]!
      if (first.bytes > MAX_JSON_ENTRY_BYTES) {
        throw exportTooLarge(
          `The record ${keyText(kind, first.key)} is ${first.bytes} bytes as JSON; an archive's JSON entry holds at most ${MAX_JSON_ENTRY_BYTES}`,
          {
            rule: 'record-bytes',
            kind,
            key: first.key,
            bytes: first.bytes,
            limit: MAX_JSON_ENTRY_BYTES,
          },
        )
      }
      let bytes = first.bytes
      let j = i + 1
      while (j < sizes.length && sizes[j]!.bytes <= MAX_JSON_ENTRY_BYTES && bytes + sizes[j]!.bytes <= READ_BATCH_BYTES)
        bytes += sizes[j++]!.bytes
      yield (await store.recordRange(sql, kind, scope, first.key, sizes[j - 1]!.key)).map((r) =>
        store.asRecord(kind, r),
      )
      i = j
    }
    if (sizes.length < READ_BATCH_ROWS) return
    after = sizes[sizes.length - 1]!.key
  }
}

/** Rows of batches, one at a time across them. */
function rowsOf(batches: AsyncIterable<store.Row[]>) {
  const it = batches[Symbol.asyncIterator]()
  let batch: store.Row[] = []
  let i = 0
  return {
    async next(): Promise<store.Row | null> {
      while (i >= batch.length) {
        const r = await it.next()
        if (r.done) return null
        batch = r.value
        i = 0
      }
      return batch[i++]!
    },
  }
}

/**
 * JSON text of an entry, or of a record with what its page adds around it (`around`): refused
 * (EXPORT_TOO_LARGE) if a restore could not read the entry.
 */
function checkedJson(
  text: string,
  what: string,
  details: Record<string, unknown>,
  around = { bytes: 0, levels: 0 },
): string {
  const bytes = bytesOf(text) + around.bytes
  if (bytes > MAX_JSON_ENTRY_BYTES) {
    throw exportTooLarge(
      `${what} is ${bytes} bytes as JSON in its entry; an archive's JSON entry holds at most ${MAX_JSON_ENTRY_BYTES}`,
      {
        rule: 'json-entry-bytes',
        ...details,
        bytes,
        limit: MAX_JSON_ENTRY_BYTES,
      },
    )
  }
  if (jsonTooDeep(text, MAX_JSON_DEPTH - around.levels)) {
    throw exportTooLarge(
      `${what} nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep in its entry; a restore reads no deeper`,
      {
        rule: 'json-depth',
        ...details,
        limit: MAX_JSON_DEPTH,
      },
    )
  }
  return text
}

/**
 * A kind's records as page entries (`<prefix>00001.json`, ...) of at most PAGE_ROWS records and
 * PAGE_BYTES bytes, read when the output takes them; a record larger than a page is a page of its
 * own, stored rather than deflated (limits.ts says why). None for no records.
 */
async function* pages(kind: Kind, prefix: string, batches: AsyncIterable<store.Row[]>): AsyncGenerator<Entry> {
  const src = rowsOf(batches)
  const OPEN = '[\n'
  const SEP = ',\n'
  const CLOSE = '\n]\n'
  // Each record's text is made once: the page that cannot take it hands it to the next. Checked as
  // the one record of a page, the most its page can add around it.
  const textOf = async () => {
    const row = await src.next()
    if (!row) return null
    const key = SPECS[kind].key.map((k) => row[k])
    return checkedJson(
      JSON.stringify(row),
      `The record ${keyText(kind, key)}`,
      { kind, key },
      { bytes: OPEN.length + CLOSE.length, levels: 1 },
    )
  }
  let next = await textOf()
  for (let n = 1; next !== null; n++) {
    const first: string = next
    const firstBytes = OPEN.length + bytesOf(first)
    const alone = firstBytes + CLOSE.length > PAGE_BYTES
    const name = prefix + pageName(n)
    next = null
    yield {
      name,
      bound: alone ? firstBytes + CLOSE.length : PAGE_BYTES,
      body: Readable.from(
        (async function* () {
          yield OPEN + first
          let rows = 1
          let bytes = firstBytes
          for (let text = await textOf(); text !== null; text = await textOf()) {
            const more = SEP.length + bytesOf(text)
            if (alone || rows >= PAGE_ROWS || bytes + more + CLOSE.length > PAGE_BYTES) {
              next = text // the next page opens with it
              break
            }
            yield SEP + text
            rows++
            bytes += more
          }
          yield CLOSE
        })(),
      ),
    }
  }
}

/** A JSON entry whole: a list, or one record. */
function jsonEntry(name: string, value: unknown): Entry {
  const text = checkedJson(JSON.stringify(value, null, 2) + '\n', name, { entry: name })
  return { name, body: text, bound: bytesOf(text) }
}

/**
 * Every record as a list, read whole (lists the format keeps in one entry: projects, agents,
 * sessions), and no more of it than a JSON entry may hold.
 */
async function all(kind: Kind, name: string, batches: AsyncIterable<store.Row[]>): Promise<store.Row[]> {
  const out: store.Row[] = []
  let bytes = 0
  for await (const b of batches) {
    for (const r of b) {
      bytes += bytesOf(JSON.stringify(r))
      if (bytes > MAX_JSON_ENTRY_BYTES) {
        throw exportTooLarge(
          `${name} would be larger than ${MAX_JSON_ENTRY_BYTES} bytes, what an archive's JSON entry holds at most`,
          {
            rule: 'json-entry-bytes',
            entry: name,
            kind,
            limit: MAX_JSON_ENTRY_BYTES,
          },
        )
      }
      out.push(r)
    }
  }
  return out
}

/**
 * The zip or JSON archive's entries that come from the database, in the format's layout; `files`
 * collects the file contents to add after them.
 */
export async function* recordEntries(sql: TxSql, meta: ExportMetadata, files: FileRef[]): AsyncGenerator<Entry> {
  const t = meta.tenantId
  const tenant = await store.tenantRecord(sql, t)
  const of = (kind: Kind, where?: store.RecordScope['where']) =>
    records(sql, kind, { tenantId: t, ...(where ? { where } : {}) })
  yield jsonEntry('metadata.json', meta)
  yield jsonEntry('tenant.json', tenant)
  if (meta.include.includes('projects')) {
    const projects = await all('projects', 'projects/index.json', of('projects'))
    yield jsonEntry('projects/index.json', projects)
    for (const p of projects) {
      const pid = p.id as string
      const dir = `projects/${pid}/`
      const one = { column: 'project_id', value: pid }
      yield jsonEntry(`${dir}project.json`, p)
      yield* pages('project_versions', `${dir}versions/`, of('project_versions', one))
      yield* pages('project_files', `${dir}manifest/`, of('project_files', one))
      yield* pages('project_version_files', `${dir}version-files/`, of('project_version_files', one))
      yield jsonEntry(`${dir}agents.json`, await store.projectAgents(sql, t, pid))
      for (const f of await store.currentBlobs(sql, t, pid))
        files.push({ name: `${dir}files/${f.path}`, blobKey: f.blob_key, size: f.size })
      for (const h of await store.historyBlobs(sql, t, pid))
        files.push({ name: `${dir}history/${h.sha256}`, blobKey: h.blob_key, size: h.size })
    }
  }
  if (meta.include.includes('agents')) {
    const agents = await all('agents', 'agents.json', of('agents'))
    yield jsonEntry('agents.json', agents)
    for (const a of agents) {
      yield jsonEntry(`agents/${a.id as string}.json`, a)
      yield* pages(
        'agent_runs',
        `agents/${a.id as string}/runs/`,
        of('agent_runs', { column: 'agent_id', value: a.id as string }),
      )
    }
  }
  if (meta.include.includes('chat_history')) {
    yield jsonEntry('chat/sessions.json', await all('chat_sessions', 'chat/sessions.json', of('chat_sessions')))
    yield* pages('chat_messages', 'chat/messages/', of('chat_messages'))
  }
  if (meta.include.includes('settings')) {
    const [llm] = await all('llm_settings', 'settings/preferences.json', of('llm_settings'))
    yield jsonEntry('settings/preferences.json', { llm: llm ?? null })
  }
}

/** The csv format's entries: metadata.json, tenant.csv and one CSV per kind of record, whole-tenant cursors. */
export async function* csvEntries(sql: TxSql, meta: ExportMetadata): AsyncGenerator<Entry> {
  const t = meta.tenantId
  yield jsonEntry('metadata.json', meta)
  const tenant = await store.tenantRecord(sql, t)
  const tenantCsv =
    csvLine(['id', 'name', 'plan', 'status', 'created_at']) +
    csvLine(tenant ? [tenant.id, tenant.name, tenant.plan, tenant.status, tenant.created_at] : [])
  yield { name: 'tenant.csv', body: tenantCsv, bound: bytesOf(tenantCsv) }
  for (const kind of kindsOf(meta.include)) {
    const columns = columnsOf(kind)
    const batches = records(sql, kind, { tenantId: t })
    yield {
      name: `${kind}.csv`,
      bound: Infinity, // streamed, of any length: a CSV archive is for people's tools, not for a restore
      body: Readable.from(
        (async function* () {
          yield csvLine(columns)
          for await (const batch of batches) {
            let lines = ''
            for (const row of batch) lines += csvLine(columns.map((c) => row[c]))
            yield lines
          }
        })(),
      ),
    }
  }
}

/** A file's bytes from the store, opened when the output reaches its entry. */
export function fileEntries(blobs: Blobs, files: readonly FileRef[]): Entry[] {
  return files.map((f) => ({
    name: f.name,
    file: true,
    bound: f.size,
    // As many bytes as the record says, no more: a store of the tenant's own that sends more is refused.
    body: Readable.from(
      (async function* () {
        yield* exactly(await blobs.get(f.blobKey), f.size, f.blobKey)
      })(),
    ),
  }))
}

export function metadata(o: {
  exportId: string
  tenantId: string
  include: Include[]
  createdAt: Date
  version: string
}): ExportMetadata {
  return {
    format: EXPORT_FORMAT,
    formatVersion: EXPORT_FORMAT_VERSION,
    atriumVersion: o.version,
    exportId: o.exportId,
    tenantId: o.tenantId,
    createdAt: o.createdAt.toISOString(),
    include: o.include,
  }
}

// ---- outputs ------------------------------------------------------------------------------------

export interface ArchiveSink {
  /** The archive's bytes; read it once. */
  readonly stream: Readable
  /** Adds an entry; resolves once the output has taken all of it (rejects when the output failed). */
  add(entry: Entry): Promise<void>
  /** Refuses (EXPORT_TOO_LARGE), before any of them is written, entries that would take the archive past its limits. */
  reserve(entries: number, bytes: number): void
  /** No more entries: resolves with the archive's size and SHA-256 once all of it was read. */
  end(): Promise<{ size: number; sha256: string }>
  /** Abandons the archive (an entry's cursor is closed by destroying its stream). */
  destroy(err?: Error): void
}

export const contentTypeOf = (format: ExportFormat) => (format === 'json' ? 'application/json' : 'application/zip')
export const extensionOf = (format: ExportFormat) => (format === 'json' ? 'json' : 'zip')

/** Rejects once the output fails, so that a wait for an entry to be taken does not outlive it. */
const failureOf = (p: Promise<unknown>) => p.then(() => new Promise<never>(() => {}))

/** A stream's bytes passed on as they are, counted. */
function counted(body: NodeJS.ReadableStream, count: (n: number) => Error | null): Readable {
  const out = new Transform({
    transform(chunk: Buffer, _enc, done) {
      done(count(chunk.length), chunk)
    },
  })
  body.once('error', (err) => out.destroy(err))
  return body.pipe(out)
}

/**
 * A zip archive. With `limits` (the zip a restore reads) it keeps inside what a restore takes:
 * entries, unpacked bytes and its own size, and the compression-ratio rule, by deflating a JSON
 * entry only when it is at most a page and the archive with it at its largest keeps to the rule
 * against the bytes written so far (limits.ts says why that is enough). Without (a CSV archive,
 * for people's tools), every entry but a file's bytes is deflated.
 */
export function zipSink(mtime: Date, limits: ArchiveLimits | null): ArchiveSink {
  const zip = new ZipFile()
  const m = meterStream()
  let entries = 0
  let unpacked = 0
  let written = 0
  const past = (rule: string, message: string, value: number, limit: number) =>
    exportTooLarge(message, { rule, [rule === 'entries' ? 'entries' : 'bytes']: value, limit })
  const check = (moreEntries: number, moreBytes: number) => {
    if (!limits) return
    if (entries + moreEntries > limits.maxEntries)
      throw past(
        'entries',
        `The archive would hold ${entries + moreEntries} entries; a restore takes ${limits.maxEntries}`,
        entries + moreEntries,
        limits.maxEntries,
      )
    if (unpacked + moreBytes > limits.maxUnpackedBytes)
      throw past(
        'unpacked-bytes',
        `The archive would unpack to ${unpacked + moreBytes} bytes; a restore takes ${limits.maxUnpackedBytes}`,
        unpacked + moreBytes,
        limits.maxUnpackedBytes,
      )
    if (written + moreBytes > limits.maxArchiveBytes)
      throw past(
        'archive-bytes',
        `The archive would be larger than the ${limits.maxArchiveBytes} bytes a restore takes`,
        written + moreBytes,
        limits.maxArchiveBytes,
      )
  }
  const output = counted(zip.outputStream, (n) => {
    written += n
    return limits && written > limits.maxArchiveBytes
      ? past(
          'archive-bytes',
          `The archive is larger than the ${limits.maxArchiveBytes} bytes a restore takes`,
          written,
          limits.maxArchiveBytes,
        )
      : null
  })
  output.once('error', (err) => m.stream.destroy(err))
  output.pipe(m.stream)
  const failed = failureOf(m.measured)
  const current = new Set<Readable>()
  return {
    stream: m.stream,
    async add(e) {
      check(1, e.file ? e.bound : 0)
      const deflate = !e.file && (!limits || (e.bound <= PAGE_BYTES && withinRatio(unpacked + e.bound, written)))
      let n = 0
      const body = counted(
        typeof e.body === 'string' ? Readable.from([Buffer.from(e.body, 'utf8')]) : e.body,
        (size) => ((n += size), null),
      )
      current.add(body)
      zip.addReadStream(body, e.name, { mtime, compressionLevel: deflate ? 6 : 0 })
      try {
        await Promise.race([finished(body), failed])
      } finally {
        current.delete(body)
      }
      entries++
      unpacked += n
      check(0, 0)
    },
    reserve: check,
    async end() {
      zip.end()
      return m.measured
    },
    destroy(err) {
      for (const b of current) b.destroy(err)
      m.stream.destroy(err)
    },
  }
}

/**
 * The json format: one object whose members are the zip's entries by name, in the same order; a
 * JSON entry is its value, a file's bytes are {"encoding": "base64", "data": "..."}.
 */
export function jsonSink(): ArchiveSink {
  const m = meterStream()
  const out = new PassThrough()
  out.once('error', (err) => m.stream.destroy(err))
  out.pipe(m.stream)
  const failed = failureOf(m.measured)
  let first = true
  let current: Readable | null = null
  const write = async (text: string | Buffer) => {
    if (!out.write(text)) await Promise.race([new Promise((r) => out.once('drain', r)), failed])
  }
  return {
    stream: m.stream,
    reserve: () => {},
    async add(e) {
      await write(`${first ? '{\n' : ',\n'}${JSON.stringify(e.name)}: `)
      first = false
      if (typeof e.body === 'string') return write(e.body.trimEnd())
      current = e.body
      try {
        if (!e.file) {
          for await (const chunk of e.body) await write(chunk as Buffer)
          return
        }
        // base64 in whole groups of three bytes; the remainder waits for the next chunk
        await write('{"encoding": "base64", "data": "')
        let rest = Buffer.alloc(0)
        for await (const chunk of e.body) {
          const bytes = Buffer.concat([rest, chunk as Buffer])
          const cut = bytes.length - (bytes.length % 3)
          await write(bytes.subarray(0, cut).toString('base64'))
          rest = bytes.subarray(cut)
        }
        await write(rest.toString('base64') + '"}')
      } finally {
        current = null
      }
    },
    async end() {
      out.end(first ? '{}\n' : '\n}\n')
      return m.measured
    },
    destroy(err) {
      current?.destroy(err)
      m.stream.destroy(err)
    },
  }
}
