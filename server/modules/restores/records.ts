// What an archive holds, checked before anything is written (the first pass of a restore): the
// metadata and its format version, every record against its kind's columns and types, each entry
// against the include list and its parent, and every file's bytes against the manifests that name
// them. Records are checked page by page and not kept: the second pass reads them again to write.
import { randomInt } from 'node:crypto'
import { isUuid } from '../../../common/ids.js'
import { AppError } from '../../domain/errors.js'
import { escapedText, findUnstorableText, textProblem } from '../../domain/text.js'
import { PLAN_TERMS, type Plan } from '../../domain/plans.js'
import { checkContentType, normalizePath } from '../projects/files-service.js'
import {
  EXPORT_FORMAT,
  EXPORT_FORMAT_VERSION,
  INCLUDES,
  SPECS,
  type ExportMetadata,
  type Include,
  type Kind,
} from '../exports/format.js'
import { refused, type Archive, type ArchiveEntry } from './archive.js'

export type Row = Record<string, unknown>

/**
 * Upgrades of older formats, by the version they upgrade from: each takes an entry's records as
 * that version wrote them to the next version's. Version 1 is the first: none yet.
 */
const UPGRADES: Record<number, (kind: Kind, rows: Row[]) => Row[]> = {}

export function upgrade(kind: Kind, rows: Row[], from: number): Row[] {
  for (let v = from; v < EXPORT_FORMAT_VERSION; v++) rows = UPGRADES[v]!(kind, rows)
  return rows
}

export const invalidData = (entry: string, message: string, more: Record<string, unknown> = {}) =>
  refused('ARCHIVE_INVALID_DATA', `${entry}: ${message}`, { entry, ...more })

const INT32: readonly [number, number] = [-(2 ** 31), 2 ** 31 - 1]
const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(Z|[+-](\d{2}):(\d{2}))$/

/**
 * A time as an export writes it (ISO 8601 with its offset), and one PostgreSQL's timestamptz takes as the same instant.
 */
function isTime(v: string): boolean {
  const m = ISO_TIME.exec(v)
  if (!m) return false
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ]
  const lastDay = new Date(0)
  lastDay.setUTCFullYear(year, month, 0) // (Date.UTC would take years below 100 for 19xx)
  const days = lastDay.getUTCDate()
  const offsetOk = m[8] === 'Z' || (Number(m[9]) <= 15 && Number(m[10]) <= 59)
  return (
    year >= 1 &&
    month >= 1 &&
    month <= 12 &&
    day >= 1 &&
    day <= days &&
    hour <= 23 &&
    minute <= 59 &&
    second <= 59 &&
    offsetOk
  )
}

/**
 * A record checked against its kind: exactly the kind's columns, each of its type and within what
 * its database column takes (integer ranges, check constraints, text without NUL or unpaired
 * surrogates, times PostgreSQL reads as the same instant), so that nothing the database would
 * refuse reaches the write pass. Ids come back in lowercase, as PostgreSQL gives them.
 */
export function checkRow(kind: Kind, row: unknown, entry: string): Row {
  if (!row || typeof row !== 'object' || Array.isArray(row))
    throw invalidData(entry, `a ${kind} record is not an object`, { kind })
  const r = row as Row
  const columns = SPECS[kind].columns
  for (const name of Object.keys(r))
    if (!(name in columns))
      throw invalidData(entry, `a ${kind} record has a field ${JSON.stringify(name)} the format does not`, {
        kind,
        field: name,
      })
  for (const [name, c] of Object.entries(columns)) {
    const v = r[name]
    // (The details are stored with the failed restore: only an id already found sound is named.)
    const named = () => (typeof r.id === 'string' && isUuid(r.id) ? { id: r.id } : {})
    const bad = (why: string) => invalidData(entry, `${kind}.${name} ${why}`, { kind, field: name, ...named() })
    if (v === undefined) throw bad('is missing')
    if (v === null) {
      if (!c.nullable) throw bad('must not be null')
      continue
    }
    switch (c.type) {
      case 'id':
        if (typeof v !== 'string' || !isUuid(v)) throw bad('must be a UUID')
        r[name] = v.toLowerCase()
        break
      case 'text': {
        if (typeof v !== 'string') throw bad('must be text')
        const problem = textProblem(v)
        if (problem) throw bad(problem)
        if (c.values && !c.values.includes(v)) throw bad(`must be one of ${c.values.join(', ')}`)
        const chars = c.chars ? [...v].length : 0
        if (c.chars && (chars < c.chars[0] || chars > c.chars[1]))
          throw bad(`must hold ${c.chars[0]} to ${c.chars[1]} characters`)
        break
      }
      case 'int': {
        const [min, max] = c.big ? [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER] : INT32
        if (!Number.isSafeInteger(v) || (v as number) < Math.max(min, c.min ?? min) || (v as number) > max)
          throw bad(`must be a whole number from ${Math.max(min, c.min ?? min)} to ${max}`)
        break
      }
      case 'float':
        if (typeof v !== 'number' || !Number.isFinite(v)) throw bad('must be a number')
        break
      case 'time':
        if (typeof v !== 'string' || !isTime(v))
          throw bad('must be an ISO 8601 time with its offset, from year 1 to 9999')
        break
      case 'sha256':
        if (typeof v !== 'string' || !/^[0-9a-f]{64}$/.test(v)) throw bad('must be a SHA-256 in hex')
        break
      case 'json': {
        const problem = findUnstorableText(v, `${kind}.${name}`)
        // Its place may run through a key that is itself the bad text: named escaped.
        if (problem)
          throw invalidData(entry, `${escapedText(problem.field)} ${problem.message}`, {
            kind,
            field: name,
            at: escapedText(problem.field),
            ...named(),
          })
        break
      }
    }
  }
  return r
}

/** The records of a rows entry, checked, upgraded to the current format. */
export async function rowsOf(archive: Archive, entry: ArchiveEntry, kind: Kind, formatVersion: number): Promise<Row[]> {
  const value = await archive.json(entry)
  if (!Array.isArray(value)) throw invalidData(entry.name, 'must be a JSON array of records')
  return upgrade(
    kind,
    value.map((r) => checkRow(kind, r, entry.name)),
    formatVersion,
  )
}

export async function rowOf(archive: Archive, entry: ArchiveEntry, kind: Kind, formatVersion: number): Promise<Row> {
  return upgrade(kind, [checkRow(kind, await archive.json(entry), entry.name)], formatVersion)[0]!
}

/** A project as the archive holds it: its entries, and the file bytes its manifests need. */
export interface ArchivedProject {
  id: string
  row: Row
  versions: ArchiveEntry[]
  manifest: ArchiveEntry[]
  versionFiles: ArchiveEntry[]
  /** Current files: path to its entry and the manifest's digest and size. */
  files: Map<string, CurrentFile>
  /** Bytes only older versions hold: digest to entry. */
  history: Map<string, ArchiveEntry>
}

export interface Survey {
  meta: ExportMetadata
  include: Include[]
  projects: ArchivedProject[]
  agents: { id: string; row: Row; runs: ArchiveEntry[] }[]
  sessions: ArchiveEntry | null
  messages: ArchiveEntry[]
  settings: ArchiveEntry | null
  /** The LLM settings, as the settings' own checks left them; null when the archive has none. */
  llm: Row | null
  /** Records of each kind in the archive. */
  counts: Record<Kind, number>
  files: { count: number; bytes: number }
}

export interface SurveyOptions {
  /** The plan of the tenant restored into: its bounds on files hold for every version, as the API holds them. */
  plan: Plan
  /** Keys held in memory at once to find a repeated id (REPEAT_KEYS_BUDGET). */
  repeatBudget?: number
  /**
   * The LLM settings checked as PATCH /tenant/settings/llm checks them (its schema and the outbound
   * policy): the record as it would be stored, or ARCHIVE_INVALID_DATA naming the field.
   */
  settings(llm: Row, entry: string): Promise<Row>
}

/**
 * Ids (of records whose ids are unique across the database) held in memory at once to find one
 * that two records of an archive share: about 80 bytes each. Past it, the entries are read again.
 */
export const REPEAT_KEYS_BUDGET = 250_000

/** A hash of text from a seed the archive cannot know, so that no archive can crowd one pass. */
function seededHash(seed: number, text: string): number {
  let h = (seed ^ 0x811c9dc5) >>> 0
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193)
  return h >>> 0
}

/**
 * Finds an id that two records of a kind share, across any number of entries, in bounded memory:
 * the ids are kept while they fit the budget; past it, the entries are read again in as many passes
 * as it takes, each keeping only the ids a seeded hash gives it (twice as many passes as the ids
 * need, so no pass overflows but by chance far beyond reach).
 */
export function repeatFinder(read: (entry: ArchiveEntry, kind: Kind) => Promise<Row[]>, budget = REPEAT_KEYS_BUDGET) {
  const sources: { entry: ArchiveEntry; kind: Kind }[] = []
  let kept: Map<Kind, Set<string>> | null = new Map()
  let total = 0
  const repeated = (entry: ArchiveEntry, kind: Kind, id: string) =>
    invalidData(entry.name, `holds a ${kind} record whose id ${id} another record of the archive has too`, {
      kind,
      field: 'id',
      id,
    })
  const take = (sets: Map<Kind, Set<string>>, entry: ArchiveEntry, kind: Kind, id: string) => {
    const set = sets.get(kind) ?? sets.set(kind, new Set()).get(kind)!
    if (set.has(id)) throw repeated(entry, kind, id)
    set.add(id)
  }
  return {
    /** An entry's records as the first pass reads them. */
    add(entry: ArchiveEntry, kind: Kind, rows: readonly Row[]) {
      sources.push({ entry, kind })
      total += rows.length
      if (!kept) return
      for (const r of rows) take(kept, entry, kind, r.id as string)
      if (total > budget) kept = null // the passes of finish() judge them all again
    },
    /** When the ids did not fit: the passes over the entries again. */
    async finish() {
      if (kept) return
      const passes = Math.ceil((2 * total) / budget)
      const seed = randomInt(2 ** 31)
      for (let pass = 0; pass < passes; pass++) {
        const sets = new Map<Kind, Set<string>>()
        for (const { entry, kind } of sources) {
          for (const r of await read(entry, kind))
            if (seededHash(seed, r.id as string) % passes === pass) take(sets, entry, kind, r.id as string)
        }
      }
    },
  }
}

/**
 * What every archive's metadata entry (a tenant export's metadata.json, a project backup's
 * manifest.json) must say: its format, a format version this server reads (a newer one is refused
 * ARCHIVE_VERSION_UNSUPPORTED: upgrade first), the Atrium that wrote it, when, and the ids it names
 * (lowercased). The report and the audit log keep these: text they can store, or the archive is refused.
 */
export function checkMeta(
  value: unknown,
  o: { entry: string; format: string; supported: number; ids: readonly string[] },
): Record<string, unknown> {
  const meta = value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : null
  if (!meta || meta.format !== o.format) {
    throw refused('ARCHIVE_VERSION_UNSUPPORTED', `${o.entry} does not name the ${o.format} format`, {
      format: typeof meta?.format === 'string' ? escapedText(meta.format) : null,
    })
  }
  const version = meta.formatVersion as number
  if (!Number.isSafeInteger(version) || version < 1)
    throw invalidData(o.entry, 'formatVersion must be a whole number from 1')
  if (version > o.supported) {
    throw refused(
      'ARCHIVE_VERSION_UNSUPPORTED',
      `The archive is format version ${version}, newer than this server reads (up to ${o.supported}): upgrade Atrium first`,
      {
        formatVersion: version,
        supported: o.supported,
        atriumVersion: typeof meta.atriumVersion === 'string' ? escapedText(meta.atriumVersion.slice(0, 100)) : null,
      },
    )
  }
  for (const id of o.ids) {
    if (typeof meta[id] !== 'string' || !isUuid(meta[id])) throw invalidData(o.entry, `${id} must be a UUID`)
    meta[id] = meta[id].toLowerCase()
  }
  if (typeof meta.atriumVersion !== 'string' || meta.atriumVersion.length > 100 || textProblem(meta.atriumVersion))
    throw invalidData(o.entry, 'atriumVersion must be text of at most 100 characters')
  if (typeof meta.createdAt !== 'string' || !isTime(meta.createdAt))
    throw invalidData(o.entry, 'createdAt must be an ISO 8601 time')
  return meta
}

const byName = (a: ArchiveEntry, b: ArchiveEntry) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)

/** What the API's check makes of a value (null: it refuses it); a record must hold that form already. */
function storedForm(check: (value: string) => string, value: unknown): string | null {
  try {
    return check(value as string)
  } catch {
    return null
  }
}

/** Why a file record's path or content type is not what the API would store, or null. */
export function fileProblem(
  f: Row,
): { code: 'ARCHIVE_UNSAFE_PATH' | 'ARCHIVE_INVALID_DATA'; message: string; field: string } | null {
  if (storedForm(normalizePath, f.path) !== f.path)
    return {
      code: 'ARCHIVE_UNSAFE_PATH',
      message: `the file path ${JSON.stringify(f.path)} is not a project path`,
      field: 'path',
    }
  if (storedForm(checkContentType, f.content_type) !== f.content_type)
    return {
      code: 'ARCHIVE_INVALID_DATA',
      message: `${f.path as string}: the content type ${JSON.stringify(f.content_type)} is not one a file is stored with`,
      field: 'content_type',
    }
  return null
}

const quotaExceeded = (plan: Plan, message: string, details: Record<string, unknown>) =>
  new AppError('QUOTA_EXCEEDED', `${message} on the ${PLAN_TERMS[plan].title} plan`, details)

/** A current file as checked: its bytes' entry, and the digest and size its record names. */
export interface CurrentFile {
  entry: ArchiveEntry
  sha256: string
  size: number
}

/**
 * A project's current files, checked record by record (`add`) as the API would store them: a
 * project path and content type, each path once, its bytes there (`bytes`: path to entry) and of
 * the size stated, a digest whose every record states one size, and within the plan's bounds on a
 * file and on a project's files; `done` then refuses bytes no record named. Every blob by its
 * digest is in `blobs` (history adds to it).
 */
export function currentFiles(o: {
  plan: Plan
  project: string
  bytes: ReadonlyMap<string, ArchiveEntry>
  /** The name the bytes of a path would have in the archive (for the message when they are missing). */
  bytesEntry: (path: string) => string
}) {
  const limits = PLAN_TERMS[o.plan].limits
  const files = new Map<string, CurrentFile>()
  // Every stored blob (current file or history) by its digest, with its size: each record that
  // names a digest must state that size, as the bytes are checked against the digest when copied.
  const blobs = new Map<string, { entry: ArchiveEntry; size: number }>()
  let total = 0
  return {
    files,
    blobs,
    /** A file record (`f`: a project_files record) listed in the entry `listedIn`. */
    add(f: Row, listedIn: string): CurrentFile {
      const path = f.path as string
      const problem = fileProblem(f)
      if (problem)
        throw refused(problem.code, `${listedIn}: ${problem.message}`, { entry: listedIn, path, field: problem.field })
      if (files.has(path))
        throw invalidData(listedIn, `names ${path} twice`, { kind: 'project_files', field: 'path', path })
      const bytes = o.bytes.get(path)
      if (!bytes) throw invalidData(listedIn, `the bytes of ${path} are missing (${o.bytesEntry(path)})`, { path })
      if (bytes.size !== f.size)
        throw invalidData(bytes.name, `holds ${bytes.size} bytes; its manifest says ${f.size as number}`, { path })
      if (bytes.size > limits.fileBytes)
        throw quotaExceeded(o.plan, `${path} holds ${bytes.size} bytes; a file may hold ${limits.fileBytes}`, {
          limit: limits.fileBytes,
          requested: bytes.size,
          path,
        })
      total += bytes.size
      if (total > limits.projectFileBytes)
        throw quotaExceeded(o.plan, `Project ${o.project}'s files hold more than ${limits.projectFileBytes} bytes`, {
          limit: limits.projectFileBytes,
          requested: total,
          project: o.project,
        })
      const same = blobs.get(f.sha256 as string)
      if (same && same.size !== bytes.size)
        throw invalidData(
          bytes.name,
          `holds ${bytes.size} bytes, ${same.entry.name} ${same.size}, yet their manifest gives both one SHA-256`,
          { path },
        )
      blobs.set(f.sha256 as string, { entry: bytes, size: bytes.size })
      const file = { entry: bytes, sha256: f.sha256 as string, size: f.size as number }
      files.set(path, file)
      return file
    },
    done() {
      for (const [path, e] of o.bytes)
        if (!files.has(path)) throw invalidData(e.name, 'is a file no manifest record names')
    },
  }
}

/** The first pass: everything the archive holds, checked; refused with the first problem. */
export async function survey(archive: Archive, o: SurveyOptions): Promise<Survey> {
  const groups = new Map<string, ArchiveEntry[]>()
  for (const e of archive.entries) groups.set(e.def.name, [...(groups.get(e.def.name) ?? []), e])
  const one = (name: string) => groups.get(name)?.[0] ?? null
  const each = (name: string) => (groups.get(name) ?? []).sort(byName)

  const metaEntry = one('metadata')
  if (!metaEntry)
    throw refused(
      'ARCHIVE_VERSION_UNSUPPORTED',
      'The archive has neither metadata.json nor manifest.json: it is neither a tenant export nor a project backup',
      {
        rule: 'no-metadata',
      },
    )
  const meta = checkMeta(await archive.json(metaEntry), {
    entry: metaEntry.name,
    format: EXPORT_FORMAT,
    supported: EXPORT_FORMAT_VERSION,
    ids: ['exportId', 'tenantId'],
  }) as Partial<ExportMetadata>
  if (!Array.isArray(meta.include) || meta.include.some((i) => !(INCLUDES as readonly string[]).includes(i)))
    throw invalidData('metadata.json', `include must list some of ${INCLUDES.join(', ')}`)
  const include = meta.include as Include[]
  const version = meta.formatVersion!
  const limits = PLAN_TERMS[o.plan].limits

  // Every entry belongs to what the archive says it includes.
  for (const e of archive.entries) {
    const kind =
      'kind' in e.def
        ? e.def.kind
        : e.def.holds === 'settings'
          ? 'llm_settings'
          : e.def.name.startsWith('projects/')
            ? 'projects'
            : null
    if (kind && !include.includes(SPECS[kind].include))
      throw invalidData(e.name, `is ${SPECS[kind].include} data, which metadata.json does not include`)
  }

  const counts = Object.fromEntries(Object.keys(SPECS).map((k) => [k, 0])) as Record<Kind, number>
  const files = { count: 0, bytes: 0 }
  // Versions and runs come in entries of their project or agent, yet their ids are unique across all.
  const repeats = repeatFinder((e, kind) => rowsOf(archive, e, kind, version), o.repeatBudget)
  const rows = async (
    entries: ArchiveEntry[],
    kind: Kind,
    parent: { column: string; id: string },
    check?: (r: Row, e: ArchiveEntry) => void,
  ) => {
    for (const e of entries) {
      const list = await rowsOf(archive, e, kind, version)
      for (const r of list) {
        if (r[parent.column] !== parent.id)
          throw invalidData(e.name, `holds a ${kind} record of another ${parent.column}`, { id: r.id ?? null })
        check?.(r, e)
      }
      if ('id' in SPECS[kind].columns) repeats.add(e, kind, list)
      counts[kind] += list.length
    }
  }
  /** A list's records, each id once. */
  const listed = async (entry: ArchiveEntry | null, kind: Kind) => {
    const list = entry ? await rowsOf(archive, entry, kind, version) : []
    const ids = new Set<string>()
    for (const r of list) {
      if (ids.has(r.id as string))
        throw invalidData(entry!.name, `holds two ${kind} records with the id ${r.id as string}`, {
          kind,
          field: 'id',
          id: r.id,
        })
      ids.add(r.id as string)
    }
    return { list, ids }
  }
  const perId = (name: string) => {
    const m = new Map<string, ArchiveEntry[]>()
    for (const e of each(name)) m.set(e.match[1]!, [...(m.get(e.match[1]!) ?? []), e])
    return m
  }
  const overQuota = (message: string, details: Record<string, unknown>) => quotaExceeded(o.plan, message, details)

  // Projects: the index, then each project's entries.
  const projects: ArchivedProject[] = []
  const index = one('projects/index')
  const pEntries = {
    project: perId('projects/<id>/project'),
    versions: perId('projects/<id>/versions'),
    manifest: perId('projects/<id>/manifest'),
    versionFiles: perId('projects/<id>/version-files'),
    agents: perId('projects/<id>/agents'),
    files: perId('projects/<id>/files'),
    history: perId('projects/<id>/history'),
  }
  if (include.includes('projects') && !index)
    throw invalidData('projects/index.json', 'is missing: metadata.json includes projects')
  const { list: projectList, ids: listedIds } = await listed(index, 'projects')
  for (const [name, m] of Object.entries(pEntries)) {
    for (const [pid, es] of m)
      if (!listedIds.has(pid))
        throw invalidData(es[0]!.name, `belongs to project ${pid}, which projects/index.json does not list`, {
          part: name,
        })
  }
  for (const p of projectList) {
    const pid = p.id as string
    const projectEntry = pEntries.project.get(pid)?.[0]
    if (!projectEntry) throw invalidData(`projects/${pid}/project.json`, 'is missing for a project of the index')
    const row = await rowOf(archive, projectEntry, 'projects', version)
    if (JSON.stringify(row) !== JSON.stringify(p))
      throw invalidData(projectEntry.name, 'differs from its record in projects/index.json')
    counts.projects++
    const project: ArchivedProject = {
      id: pid,
      row,
      versions: pEntries.versions.get(pid) ?? [],
      manifest: pEntries.manifest.get(pid) ?? [],
      versionFiles: pEntries.versionFiles.get(pid) ?? [],
      files: new Map(),
      history: new Map(),
    }
    const parent = { column: 'project_id', id: pid }
    // The version numbers a project has (each once): what its versions' files name.
    const numbers = new Set<number>()
    await rows(project.versions, 'project_versions', parent, (v, e) => {
      if (numbers.has(v.version as number))
        throw invalidData(e.name, `holds two versions numbered ${v.version as number}`, {
          kind: 'project_versions',
          field: 'version',
          id: v.id,
        })
      numbers.add(v.version as number)
    })
    const current = currentFiles({
      plan: o.plan,
      project: pid,
      bytes: new Map((pEntries.files.get(pid) ?? []).map((e) => [e.match[2]!, e])),
      bytesEntry: (path) => `projects/${pid}/files/${path}`,
    })
    const blobs = current.blobs
    for (const e of project.manifest) {
      for (const f of await rowsOf(archive, e, 'project_files', version)) {
        if (f.project_id !== pid) throw invalidData(e.name, 'holds a project_files record of another project_id')
        const file = current.add(f, e.name)
        counts.project_files++
        files.count++
        files.bytes += file.size
      }
    }
    current.done()
    project.files = current.files
    for (const e of pEntries.history.get(pid) ?? []) {
      const sha = e.match[2]!
      if (blobs.has(sha)) throw invalidData(e.name, 'holds bytes a current file holds already')
      project.history.set(sha, e)
      blobs.set(sha, { entry: e, size: e.size })
      files.count++
      files.bytes += e.size
    }
    // Every version's files: a version of this project, in key order (version, then path: so each
    // is there once, and a version's bytes are summed as it goes), bytes there of the size stated,
    // within the plan's bounds as if the version were restored through the API.
    const named = new Set<string>()
    let last: { version: number; path: Buffer } | null = null
    let versionBytes = 0
    await rows(project.versionFiles, 'project_version_files', parent, (f, e) => {
      const at = { version: f.version as number, path: Buffer.from(f.path as string) }
      if (!numbers.has(at.version))
        throw invalidData(e.name, `names version ${at.version}, which the project's versions do not have`, {
          kind: 'project_version_files',
          field: 'version',
        })
      const order = last ? at.version - last.version || Buffer.compare(at.path, last.path) : 1
      if (order <= 0)
        throw invalidData(
          e.name,
          `version ${at.version}'s ${f.path as string} repeats or is out of order (by version, then path)`,
          { kind: 'project_version_files', field: 'path' },
        )
      if (last?.version !== at.version) versionBytes = 0
      last = at
      const problem = fileProblem(f)
      if (problem)
        throw refused(problem.code, `${e.name}: version ${at.version}'s ${problem.message}`, {
          entry: e.name,
          path: f.path,
          field: problem.field,
        })
      const sha = f.sha256 as string
      const blob = blobs.get(sha)
      if (!blob)
        throw invalidData(
          e.name,
          `the bytes of version ${at.version}'s ${f.path as string} are missing (projects/${pid}/history/${sha})`,
        )
      if (blob.size !== f.size)
        throw invalidData(
          e.name,
          `version ${at.version}'s ${f.path as string} says ${f.size as number} bytes; ${blob.entry.name} holds ${blob.size}`,
          { path: f.path, version: at.version },
        )
      if (blob.size > limits.fileBytes)
        throw overQuota(
          `Version ${at.version}'s ${f.path as string} holds ${blob.size} bytes; a file may hold ${limits.fileBytes}`,
          {
            limit: limits.fileBytes,
            requested: blob.size,
            path: f.path,
            version: at.version,
          },
        )
      versionBytes += blob.size
      if (versionBytes > limits.projectFileBytes) {
        throw overQuota(
          `Version ${at.version} of project ${pid} holds more than ${limits.projectFileBytes} bytes of files`,
          {
            limit: limits.projectFileBytes,
            requested: versionBytes,
            project: pid,
            version: at.version,
          },
        )
      }
      named.add(sha)
    })
    for (const [sha, e] of project.history)
      if (!named.has(sha)) throw invalidData(e.name, 'holds bytes no version names')
    projects.push(project)
  }

  // Agents: the list, each one's entry and runs.
  const agents: Survey['agents'] = []
  const agentList = one('agents')
  if (include.includes('agents') && !agentList)
    throw invalidData('agents.json', 'is missing: metadata.json includes agents')
  const aEntries = perId('agents/<id>')
  const runEntries = perId('agents/<id>/runs')
  const { list: aListed, ids: agentIds } = await listed(agentList, 'agents')
  for (const m of [aEntries, runEntries])
    for (const [aid, es] of m)
      if (!agentIds.has(aid)) throw invalidData(es[0]!.name, `belongs to agent ${aid}, which agents.json does not list`)
  for (const a of aListed) {
    const aid = a.id as string
    const entry = aEntries.get(aid)?.[0]
    if (!entry) throw invalidData(`agents/${aid}.json`, 'is missing for an agent of agents.json')
    const row = await rowOf(archive, entry, 'agents', version)
    if (JSON.stringify(row) !== JSON.stringify(a))
      throw invalidData(entry.name, 'differs from its record in agents.json')
    counts.agents++
    const runs = runEntries.get(aid) ?? []
    await rows(runs, 'agent_runs', { column: 'agent_id', id: aid })
    agents.push({ id: aid, row, runs })
  }
  await repeats.finish()

  // Chat: the sessions, then the messages (in id order, as exports write them: so each is there
  // once), each of a session the archive has.
  const sessions = one('chat/sessions')
  if (include.includes('chat_history') && !sessions)
    throw invalidData('chat/sessions.json', 'is missing: metadata.json includes chat_history')
  const { ids: sessionIds } = await listed(sessions, 'chat_sessions')
  counts.chat_sessions = sessionIds.size
  const messages = each('chat/messages')
  let lastMessage = ''
  for (const e of messages) {
    for (const m of await rowsOf(archive, e, 'chat_messages', version)) {
      if (!sessionIds.has(m.session_id as string))
        throw invalidData(
          e.name,
          `a message of session ${m.session_id as string}, which chat/sessions.json does not have`,
          { id: m.id },
        )
      if ((m.id as string) <= lastMessage)
        throw invalidData(e.name, `the message ${m.id as string} repeats or is out of order (by id)`, {
          kind: 'chat_messages',
          field: 'id',
          id: m.id,
        })
      lastMessage = m.id as string
      counts.chat_messages++
    }
  }

  // Settings.
  const settings = one('settings/preferences')
  if (include.includes('settings') && !settings)
    throw invalidData('settings/preferences.json', 'is missing: metadata.json includes settings')
  let llm: Row | null = null
  if (settings) {
    const value = (await archive.json(settings)) as { llm?: unknown } | null
    if (!value || typeof value !== 'object' || !('llm' in value))
      throw invalidData(settings.name, 'must be an object with llm')
    if (value.llm !== null) {
      llm = await o.settings(
        upgrade('llm_settings', [checkRow('llm_settings', value.llm, settings.name)], version)[0]!,
        settings.name,
      )
      counts.llm_settings = 1
    }
  }

  return { meta: meta as ExportMetadata, include, projects, agents, sessions, messages, settings, llm, counts, files }
}
