// The tenant export's format (docs/portability.md): what an archive holds and how each record looks.
// The export writes it, the restore reads it (server/modules/restores), and both take the kinds of
// record, their columns and the entry names from here, so the two cannot drift apart.
//
// A record is a row of its table as the database holds it, by column name (snake_case), minus what
// only this installation can use: the jobs and streams of work in flight, sealed secrets, and blob
// keys (a file's key is derived again from where it is restored). Ids are kept where a restore finds
// the record is already the tenant's own; every other id is derived for the tenant (derivedId), so
// that the same archive restored twice meets its own records again.
import { createHmac } from 'node:crypto'
import type { Secrets } from '../../platform/secrets.js'

export const EXPORT_FORMAT = 'atrium.tenant-export'
/** The format this server writes; a restore accepts this and older (upgraded on the way in). */
export const EXPORT_FORMAT_VERSION = 1

/** What an export may include; 'all' is every one of them. */
export const INCLUDES = ['projects', 'agents', 'chat_history', 'settings'] as const
export type Include = (typeof INCLUDES)[number]
export const INCLUDE_NAMES = [...INCLUDES, 'chat history', 'all'] as const

/** The include list as given (with 'all' and the spec's "chat history"), as a set in the canonical order. */
export function normalizeInclude(names: readonly string[]): Include[] {
  const wanted = new Set(names.flatMap((n) => (n === 'all' ? INCLUDES : n === 'chat history' ? ['chat_history'] : [n])))
  return INCLUDES.filter((i) => wanted.has(i))
}

export const FORMATS = ['zip', 'json', 'csv'] as const
export type ExportFormat = (typeof FORMATS)[number]

// ---- records ------------------------------------------------------------------------------------

export type ColumnType = 'id' | 'text' | 'int' | 'float' | 'time' | 'json' | 'sha256'
export interface Column {
  type: ColumnType
  nullable?: boolean
  /** The kind whose id this column holds (mapped with it on restore). */
  ref?: Kind
  /** The values the database accepts (its check constraint). */
  values?: readonly string[]
  /** An int column that is bigint (others are integer: 32 bits). */
  big?: boolean
  /** The smallest value an int column takes (its check constraint). */
  min?: number
  /** The characters a text column holds, at least and at most (its check constraint). */
  chars?: readonly [number, number]
}

const id: Column = { type: 'id' }
const text: Column = { type: 'text' }
const int: Column = { type: 'int' }
const time: Column = { type: 'time' }
const json: Column = { type: 'json' }
const maybe = (c: Column): Column => ({ ...c, nullable: true })
const ref = (kind: Kind, nullable = false): Column => ({ type: 'id', ref: kind, nullable })
const oneOf = (...values: string[]): Column => ({ type: 'text', values })
const bytes: Column = { type: 'int', big: true, min: 0 }
const name: Column = { type: 'text', chars: [1, 200] }

export const KINDS = [
  'projects',
  'project_versions',
  'project_files',
  'project_version_files',
  'agents',
  'agent_runs',
  'chat_sessions',
  'chat_messages',
  'llm_settings',
] as const
export type Kind = (typeof KINDS)[number]

export interface KindSpec {
  /** The table it comes from. */
  table: string
  include: Include
  columns: Readonly<Record<string, Column>>
  /** The record's identity among the tenant's: its id, or the columns that make it unique. */
  key: readonly string[]
  /** The kind a record belongs to (it goes, or is skipped, with it). */
  parent?: { kind: Kind; column: string }
}

export const SPECS: Readonly<Record<Kind, KindSpec>> = {
  projects: {
    table: 'projects',
    include: 'projects',
    key: ['id'],
    columns: { id, name: text, description: text, language: text, version: int, created_at: time, updated_at: time },
  },
  project_versions: {
    table: 'project_versions',
    include: 'projects',
    key: ['id'],
    parent: { kind: 'projects', column: 'project_id' },
    columns: {
      id,
      project_id: ref('projects'),
      version: int,
      name: text,
      description: text,
      language: text,
      change: oneOf('created', 'updated', 'restored', 'files'),
      restored_from: maybe(int),
      created_at: time,
    },
  },
  project_files: {
    table: 'project_files',
    include: 'projects',
    key: ['project_id', 'path'],
    parent: { kind: 'projects', column: 'project_id' },
    columns: {
      project_id: ref('projects'),
      path: text,
      size: bytes,
      sha256: { type: 'sha256' },
      content_type: text,
      version: int,
      updated_at: time,
    },
  },
  project_version_files: {
    table: 'project_version_files',
    include: 'projects',
    key: ['project_id', 'version', 'path'],
    parent: { kind: 'projects', column: 'project_id' },
    columns: {
      project_id: ref('projects'),
      version: int,
      path: text,
      size: bytes,
      sha256: { type: 'sha256' },
      content_type: text,
    },
  },
  agents: {
    table: 'agents',
    include: 'agents',
    key: ['id'],
    columns: { id, name, system_prompt: text, config: json, created_at: time, updated_at: time },
  },
  agent_runs: {
    table: 'agent_runs',
    include: 'agents',
    key: ['id'],
    parent: { kind: 'agents', column: 'agent_id' },
    columns: {
      id,
      agent_id: ref('agents'),
      project_id: ref('projects'),
      goal: text,
      status: oneOf('queued', 'running', 'completed', 'failed', 'cancelled'),
      output: maybe(text),
      error: maybe(json),
      usage: json,
      steps: json,
      messages: json,
      pending_files: json,
      agent_snapshot: json,
      started_by: json,
      project_version: maybe(int),
      created_at: time,
      started_at: maybe(time),
      finished_at: maybe(time),
      updated_at: time,
    },
  },
  chat_sessions: {
    table: 'chat_sessions',
    include: 'chat_history',
    key: ['id'],
    columns: {
      id,
      title: name,
      agent_id: ref('agents', true),
      project_id: ref('projects', true),
      message_count: int,
      created_at: time,
      updated_at: time,
    },
  },
  chat_messages: {
    table: 'chat_messages',
    include: 'chat_history',
    key: ['id'],
    parent: { kind: 'chat_sessions', column: 'session_id' },
    columns: {
      id,
      session_id: ref('chat_sessions'),
      role: oneOf('user', 'assistant'),
      content: text,
      status: oneOf('generating', 'completed', 'failed'),
      error: maybe(json),
      usage: maybe(json),
      created_at: time,
      completed_at: maybe(time),
    },
  },
  llm_settings: {
    table: 'tenant_llm_settings',
    include: 'settings',
    key: [],
    // The API key stays behind: secrets never leave the installation (docs/portability.md).
    columns: {
      provider: text,
      base_url: text,
      model: text,
      temperature: maybe({ type: 'float' }),
      max_tokens: maybe(int),
      updated_at: time,
    },
  },
}

export const columnsOf = (kind: Kind): string[] => Object.keys(SPECS[kind].columns)
export const kindsOf = (include: readonly Include[]): Kind[] => KINDS.filter((k) => include.includes(SPECS[k].include))

/** Work that was in flight when exported comes back ended: nothing is running it any more. */
export const INTERRUPTED = {
  code: 'RUN_INTERRUPTED',
  message: 'Interrupted: the data was exported while this was in progress',
}
/**
 * Who started a restored run when that was none of the tenant's users or keys (another tenant's, or one since deleted).
 */
export const RESTORED_BY = { kind: 'restored', id: null, userId: null }

// ---- the zip archive's entries ------------------------------------------------------------------

/** A page entry's name: lists that can grow without bound come in pages (limits.ts bounds each). */
export const pageName = (n: number) => `${String(n).padStart(5, '0')}.json`

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'
const PAGE = '(\\d{5})\\.json'

/**
 * Every entry a tenant archive may hold, by name. `rows`: a JSON array of that kind's records;
 * `row`: one record; `bytes`: a project file's content. Anything else in an archive is refused.
 */
export const ENTRIES = [
  { name: 'metadata', re: /^metadata\.json$/, holds: 'metadata' },
  { name: 'tenant', re: /^tenant\.json$/, holds: 'tenant' },
  { name: 'projects/index', re: /^projects\/index\.json$/, holds: 'rows', kind: 'projects' },
  {
    name: 'projects/<id>/project',
    re: new RegExp(`^projects/(${UUID})/project\\.json$`),
    holds: 'row',
    kind: 'projects',
  },
  {
    name: 'projects/<id>/versions',
    re: new RegExp(`^projects/(${UUID})/versions/${PAGE}$`),
    holds: 'rows',
    kind: 'project_versions',
  },
  {
    name: 'projects/<id>/manifest',
    re: new RegExp(`^projects/(${UUID})/manifest/${PAGE}$`),
    holds: 'rows',
    kind: 'project_files',
  },
  {
    name: 'projects/<id>/version-files',
    re: new RegExp(`^projects/(${UUID})/version-files/${PAGE}$`),
    holds: 'rows',
    kind: 'project_version_files',
  },
  { name: 'projects/<id>/agents', re: new RegExp(`^projects/(${UUID})/agents\\.json$`), holds: 'derived' },
  { name: 'projects/<id>/files', re: new RegExp(`^projects/(${UUID})/files/(.+)$`), holds: 'file' },
  { name: 'projects/<id>/history', re: new RegExp(`^projects/(${UUID})/history/([0-9a-f]{64})$`), holds: 'blob' },
  { name: 'agents', re: /^agents\.json$/, holds: 'rows', kind: 'agents' },
  { name: 'agents/<id>', re: new RegExp(`^agents/(${UUID})\\.json$`), holds: 'row', kind: 'agents' },
  { name: 'agents/<id>/runs', re: new RegExp(`^agents/(${UUID})/runs/${PAGE}$`), holds: 'rows', kind: 'agent_runs' },
  { name: 'chat/sessions', re: /^chat\/sessions\.json$/, holds: 'rows', kind: 'chat_sessions' },
  { name: 'chat/messages', re: new RegExp(`^chat/messages/${PAGE}$`), holds: 'rows', kind: 'chat_messages' },
  { name: 'settings/preferences', re: /^settings\/preferences\.json$/, holds: 'settings' },
] as const satisfies readonly { name: string; re: RegExp; holds: string; kind?: Kind }[]
export type EntryDef = (typeof ENTRIES)[number]

export interface ExportMetadata {
  format: typeof EXPORT_FORMAT
  formatVersion: number
  atriumVersion: string
  exportId: string
  tenantId: string
  createdAt: string
  include: Include[]
}

// ---- ids ----------------------------------------------------------------------------------------

/** The key of derivedId: this installation's, so nobody outside it can tell what an id becomes. */
export const restoreIdKey = (secrets: Pick<Secrets, 'deriveKey'>): Buffer => secrets.deriveKey('restore-ids')

/**
 * The id a record takes in the tenant it is restored into when that tenant does not have the
 * record already (the restore keeps the ids of the tenant's own records, and derives every other:
 * whether some other tenant has a record of an id must make no difference a restore can show).
 * Derived from (tenant, id) with this installation's key: the same every time, so restoring an
 * archive twice meets the records of the first restore (merge reports them as conflicts). The first
 * 88 bits stay (a UUIDv7's time, version, variant and whole counter), so the new ids sort exactly as
 * the old ones did (lists are newest first by id, and records made in one millisecond keep their
 * order); the last 40 come from an HMAC, which an archive cannot aim at an id it chose without the key.
 */
export function derivedId(key: Buffer, to: string, id: string): string {
  const hex = id.toLowerCase().replaceAll('-', '')
  const h = createHmac('sha256', key).update(`atrium-restore\n${to}\n${hex}`).digest('hex')
  const out = hex.slice(0, 22) + h.slice(0, 10)
  return `${out.slice(0, 8)}-${out.slice(8, 12)}-${out.slice(12, 16)}-${out.slice(16, 20)}-${out.slice(20, 32)}`
}

// ---- CSV ----------------------------------------------------------------------------------------

/**
 * One CSV field (RFC 4180): quoted when it holds a comma, quote or line break; JSON values as their
 * text, null as an empty field. A text that a spreadsheet would take for a formula (=, +, -, @, tab,
 * carriage return first) gets a leading apostrophe, as OWASP advises: the file is for people's tools.
 */
export function csvField(value: unknown): string {
  if (value === null || value === undefined) return ''
  let s =
    value instanceof Date ? value.toISOString() : typeof value === 'object' ? JSON.stringify(value) : String(value)
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(s)) s = `'${s}`
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s
}

export const csvLine = (values: readonly unknown[]) => values.map(csvField).join(',') + '\r\n'
