// Writing a tenant's archive (format.ts) as it is read: entries one at a time from database cursors
// and the store, into a zip (yazl), one JSON document, or a zip of CSV tables, with the size and
// SHA-256 of the output measured on the way. Nothing is held whole in memory: each entry is read
// only when the output has taken the one before it.
//
// The records are read first, in one snapshot of the database; the files' bytes come after, from
// the store, once that transaction has ended (a file's content never changes under its key, so it
// needs no snapshot, and the database is not held while the bytes are copied).
import { PassThrough, Readable } from 'node:stream'
import { finished } from 'node:stream/promises'
import { ZipFile } from 'yazl'
import { meterStream } from '../../../common/zip.js'
import type { Blobs } from '../../platform/blobs.js'
import type { TxSql } from '../../platform/db.js'
import { CHUNK_BYTES, CHUNK_ROWS, chunkName, columnsOf, csvLine, EXPORT_FORMAT, EXPORT_FORMAT_VERSION, kindsOf, type ExportFormat, type ExportMetadata, type Include, type Kind } from './format.js'
import * as store from './store.js'

export interface Entry {
  name: string
  body: string | Readable
  /** File contents are stored as they are: deflating them would make an export several times slower than a copy. */
  stored?: boolean
}

/** A file's bytes, to be added once the records are written. */
export interface FileRef {
  name: string
  blobKey: string
}

// ---- entries ------------------------------------------------------------------------------------

/** Rows of a cursor, one at a time across its batches. */
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
    async close() {
      await it.return?.()
    },
  }
}

/**
 * A kind's records as chunk entries (`<prefix>00001.json`, ...) of at most CHUNK_ROWS records or
 * CHUNK_BYTES: one cursor read across them, each chunk read when the output takes it. None for no records.
 */
async function* chunked(kind: Kind, prefix: string, batches: AsyncIterable<store.Row[]>): AsyncGenerator<Entry> {
  const src = rowsOf(batches)
  let next = await src.next()
  for (let n = 1; next; n++) {
    const first = next
    next = null
    yield {
      name: prefix + chunkName(n),
      body: Readable.from(
        (async function* () {
          let rows = 0
          let bytes = 0
          for (let row: store.Row | null = first; row;) {
            const text = JSON.stringify(store.asRecord(kind, row))
            yield (rows ? ',\n' : '[\n') + text
            rows++
            bytes += text.length
            row = await src.next()
            if (row && (rows >= CHUNK_ROWS || bytes >= CHUNK_BYTES)) {
              next = row // the next chunk opens with it
              break
            }
          }
          yield '\n]\n'
        })(),
      ),
    }
  }
}

const jsonEntry = (name: string, value: unknown): Entry => ({ name, body: JSON.stringify(value, null, 2) + '\n' })

/** Every record as a list, read whole (lists the format keeps in one entry: projects, agents, sessions). */
async function all(kind: Kind, batches: AsyncIterable<store.Row[]>): Promise<store.Row[]> {
  const out: store.Row[] = []
  for await (const b of batches) for (const r of b) out.push(store.asRecord(kind, r))
  return out
}

/**
 * The zip or JSON archive's entries that come from the database, in the format's layout; `files`
 * collects the file contents to add after them.
 */
export async function* recordEntries(sql: TxSql, meta: ExportMetadata, files: FileRef[]): AsyncGenerator<Entry> {
  const t = meta.tenantId
  const tenant = await store.tenantRecord(sql, t)
  yield jsonEntry('metadata.json', meta)
  yield jsonEntry('tenant.json', tenant)
  if (meta.include.includes('projects')) {
    const projects = await all('projects', store.records(sql, 'projects', t))
    yield jsonEntry('projects/index.json', projects)
    for (const p of projects) {
      const pid = p.id as string
      const dir = `projects/${pid}/`
      const one = { column: 'project_id', value: pid }
      yield jsonEntry(`${dir}project.json`, p)
      yield* chunked('project_versions', `${dir}versions/`, store.records(sql, 'project_versions', t, one))
      yield* chunked('project_files', `${dir}manifest/`, store.records(sql, 'project_files', t, one))
      yield* chunked('project_version_files', `${dir}version-files/`, store.records(sql, 'project_version_files', t, one))
      yield jsonEntry(`${dir}agents.json`, await store.projectAgents(sql, t, pid))
      for (const f of await store.currentBlobs(sql, t, pid)) files.push({ name: `${dir}files/${f.path}`, blobKey: f.blob_key })
      for (const h of await store.historyBlobs(sql, t, pid)) files.push({ name: `${dir}history/${h.sha256}`, blobKey: h.blob_key })
    }
  }
  if (meta.include.includes('agents')) {
    const agents = await all('agents', store.records(sql, 'agents', t))
    yield jsonEntry('agents.json', agents)
    for (const a of agents) {
      yield jsonEntry(`agents/${a.id as string}.json`, a)
      yield* chunked('agent_runs', `agents/${a.id as string}/runs/`, store.records(sql, 'agent_runs', t, { column: 'agent_id', value: a.id as string }))
    }
  }
  if (meta.include.includes('chat_history')) {
    yield jsonEntry('chat/sessions.json', await all('chat_sessions', store.records(sql, 'chat_sessions', t)))
    yield* chunked('chat_messages', 'chat/messages/', store.records(sql, 'chat_messages', t))
  }
  if (meta.include.includes('settings')) {
    const [llm] = await all('llm_settings', store.records(sql, 'llm_settings', t))
    yield jsonEntry('settings/preferences.json', { llm: llm ?? null })
  }
}

/** The csv format's entries: metadata.json, tenant.csv and one CSV per kind of record, whole-tenant cursors. */
export async function* csvEntries(sql: TxSql, meta: ExportMetadata): AsyncGenerator<Entry> {
  const t = meta.tenantId
  yield jsonEntry('metadata.json', meta)
  const tenant = await store.tenantRecord(sql, t)
  yield { name: 'tenant.csv', body: csvLine(['id', 'name', 'plan', 'status', 'created_at']) + csvLine(tenant ? [tenant.id, tenant.name, tenant.plan, tenant.status, tenant.created_at] : []) }
  for (const kind of kindsOf(meta.include)) {
    const columns = columnsOf(kind)
    const batches = store.records(sql, kind, t)
    yield {
      name: `${kind}.csv`,
      body: Readable.from(
        (async function* () {
          yield csvLine(columns)
          for await (const batch of batches) {
            let lines = ''
            for (const row of batch) lines += csvLine(columns.map((c) => store.asRecord(kind, row)[c]))
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
    stored: true,
    body: Readable.from(
      (async function* () {
        yield* await blobs.get(f.blobKey)
      })(),
    ),
  }))
}

export function metadata(o: { exportId: string; tenantId: string; include: Include[]; createdAt: Date; version: string }): ExportMetadata {
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
  /** No more entries: resolves with the archive's size and SHA-256 once all of it was read. */
  end(): Promise<{ size: number; sha256: string }>
  /** Abandons the archive (an entry's cursor is closed by destroying its stream). */
  destroy(err?: Error): void
}

export const contentTypeOf = (format: ExportFormat) => (format === 'json' ? 'application/json' : 'application/zip')
export const extensionOf = (format: ExportFormat) => (format === 'json' ? 'json' : 'zip')

/** Rejects once the output fails, so that a wait for an entry to be taken does not outlive it. */
const failureOf = (p: Promise<unknown>) => p.then(() => new Promise<never>(() => {}))

export function zipSink(mtime: Date): ArchiveSink {
  const zip = new ZipFile()
  const m = meterStream()
  zip.outputStream.once('error', (err) => m.stream.destroy(err))
  zip.outputStream.pipe(m.stream)
  const failed = failureOf(m.measured)
  const current = new Set<Readable>()
  return {
    stream: m.stream,
    async add(e) {
      const body = typeof e.body === 'string' ? Readable.from([Buffer.from(e.body, 'utf8')]) : e.body
      current.add(body)
      zip.addReadStream(body, e.name, { mtime, compressionLevel: e.stored ? 0 : 6 })
      try {
        await Promise.race([finished(body), failed])
      } finally {
        current.delete(body)
      }
    },
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
    async add(e) {
      await write(`${first ? '{\n' : ',\n'}${JSON.stringify(e.name)}: `)
      first = false
      if (typeof e.body === 'string') return write(e.body.trimEnd())
      current = e.body
      try {
        if (!e.stored) {
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
