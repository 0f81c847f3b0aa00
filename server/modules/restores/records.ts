// What an archive holds, checked before anything is written (the first pass of a restore): the
// metadata and its format version, every record against its kind's columns and types, each entry
// against the include list and its parent, and every file's bytes against the manifests that name
// them. Records are checked chunk by chunk and not kept: the second pass reads them again to write.
import { isUuid } from '../../../common/ids.js'
import { normalizePath } from '../projects/files-service.js'
import { EXPORT_FORMAT, EXPORT_FORMAT_VERSION, INCLUDES, SPECS, type ExportMetadata, type Include, type Kind } from '../exports/format.js'
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

const invalidData = (entry: string, message: string, more: Record<string, unknown> = {}) => refused('ARCHIVE_INVALID_DATA', `${entry}: ${message}`, { entry, ...more })

/** A record checked against its kind: exactly the kind's columns, each of its type. */
export function checkRow(kind: Kind, row: unknown, entry: string): Row {
  if (!row || typeof row !== 'object' || Array.isArray(row)) throw invalidData(entry, `a ${kind} record is not an object`, { kind })
  const r = row as Row
  const columns = SPECS[kind].columns
  for (const name of Object.keys(r)) if (!(name in columns)) throw invalidData(entry, `a ${kind} record has a field ${JSON.stringify(name)} the format does not`, { kind, field: name })
  for (const [name, c] of Object.entries(columns)) {
    const v = r[name]
    const bad = (why: string) => invalidData(entry, `${kind}.${name} ${why}`, { kind, field: name, ...(typeof r.id === 'string' ? { id: r.id } : {}) })
    if (v === undefined) throw bad('is missing')
    if (v === null) {
      if (!c.nullable) throw bad('must not be null')
      continue
    }
    switch (c.type) {
      case 'id':
        if (typeof v !== 'string' || !isUuid(v)) throw bad('must be a UUID')
        break
      case 'text':
        if (typeof v !== 'string') throw bad('must be text')
        if (c.values && !c.values.includes(v)) throw bad(`must be one of ${c.values.join(', ')}`)
        break
      case 'int':
        if (!Number.isSafeInteger(v)) throw bad('must be a whole number')
        break
      case 'float':
        if (typeof v !== 'number' || !Number.isFinite(v)) throw bad('must be a number')
        break
      case 'time':
        if (typeof v !== 'string' || Number.isNaN(Date.parse(v))) throw bad('must be an ISO 8601 time')
        break
      case 'sha256':
        if (typeof v !== 'string' || !/^[0-9a-f]{64}$/.test(v)) throw bad('must be a SHA-256 in hex')
        break
      case 'json':
        break
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
  files: Map<string, { entry: ArchiveEntry; sha256: string; size: number }>
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
  /** Records of each kind in the archive. */
  counts: Record<Kind, number>
  files: { count: number; bytes: number }
}

const byName = (a: ArchiveEntry, b: ArchiveEntry) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)

/** The first pass: everything the archive holds, checked; refused with the first problem. */
export async function survey(archive: Archive): Promise<Survey> {
  const groups = new Map<string, ArchiveEntry[]>()
  for (const e of archive.entries) groups.set(e.def.name, [...(groups.get(e.def.name) ?? []), e])
  const one = (name: string) => groups.get(name)?.[0] ?? null
  const each = (name: string) => (groups.get(name) ?? []).sort(byName)

  const metaEntry = one('metadata')
  if (!metaEntry) throw refused('ARCHIVE_VERSION_UNSUPPORTED', 'The archive has no metadata.json: it is not a tenant export', { rule: 'no-metadata' })
  const meta = (await archive.json(metaEntry)) as Partial<ExportMetadata> | null
  if (!meta || meta.format !== EXPORT_FORMAT) throw refused('ARCHIVE_VERSION_UNSUPPORTED', `metadata.json does not name the ${EXPORT_FORMAT} format`, { format: meta?.format ?? null })
  if (!Number.isSafeInteger(meta.formatVersion) || meta.formatVersion! < 1) throw invalidData('metadata.json', 'formatVersion must be a whole number from 1')
  if (meta.formatVersion! > EXPORT_FORMAT_VERSION) {
    throw refused('ARCHIVE_VERSION_UNSUPPORTED', `The archive is format version ${meta.formatVersion}; this server reads up to ${EXPORT_FORMAT_VERSION}: upgrade Atrium first`, {
      formatVersion: meta.formatVersion,
      supported: EXPORT_FORMAT_VERSION,
      atriumVersion: meta.atriumVersion ?? null,
    })
  }
  if (typeof meta.tenantId !== 'string' || !isUuid(meta.tenantId)) throw invalidData('metadata.json', 'tenantId must be a UUID')
  if (typeof meta.createdAt !== 'string' || Number.isNaN(Date.parse(meta.createdAt))) throw invalidData('metadata.json', 'createdAt must be an ISO 8601 time')
  if (!Array.isArray(meta.include) || meta.include.some((i) => !(INCLUDES as readonly string[]).includes(i))) throw invalidData('metadata.json', `include must list some of ${INCLUDES.join(', ')}`)
  const include = meta.include as Include[]
  const version = meta.formatVersion!

  // Every entry belongs to what the archive says it includes.
  for (const e of archive.entries) {
    const kind = 'kind' in e.def ? e.def.kind : e.def.holds === 'settings' ? 'llm_settings' : e.def.name.startsWith('projects/') ? 'projects' : null
    if (kind && !include.includes(SPECS[kind].include)) throw invalidData(e.name, `is ${SPECS[kind].include} data, which metadata.json does not include`)
  }

  const counts = Object.fromEntries(Object.keys(SPECS).map((k) => [k, 0])) as Record<Kind, number>
  const files = { count: 0, bytes: 0 }
  const rows = async (entries: ArchiveEntry[], kind: Kind, parent?: { column: string; id: string }) => {
    for (const e of entries) {
      const list = await rowsOf(archive, e, kind, version)
      if (parent) for (const r of list) if (r[parent.column] !== parent.id) throw invalidData(e.name, `holds a ${kind} record of another ${parent.column}`, { id: r.id ?? null })
      counts[kind] += list.length
    }
  }
  const perId = (name: string) => {
    const m = new Map<string, ArchiveEntry[]>()
    for (const e of each(name)) m.set(e.match[1]!, [...(m.get(e.match[1]!) ?? []), e])
    return m
  }

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
  const listed = index ? await rowsOf(archive, index, 'projects', version) : []
  if (include.includes('projects') && !index) throw invalidData('projects/index.json', 'is missing: metadata.json includes projects')
  const listedIds = new Set(listed.map((p) => p.id as string))
  for (const [name, m] of Object.entries(pEntries)) {
    for (const [pid, es] of m) if (!listedIds.has(pid)) throw invalidData(es[0]!.name, `belongs to project ${pid}, which projects/index.json does not list`, { part: name })
  }
  for (const p of listed) {
    const pid = p.id as string
    const projectEntry = pEntries.project.get(pid)?.[0]
    if (!projectEntry) throw invalidData(`projects/${pid}/project.json`, 'is missing for a project of the index')
    const row = await rowOf(archive, projectEntry, 'projects', version)
    if (JSON.stringify(row) !== JSON.stringify(p)) throw invalidData(projectEntry.name, 'differs from its record in projects/index.json')
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
    await rows(project.versions, 'project_versions', parent)
    await rows(project.versionFiles, 'project_version_files', parent)
    // The current files: each manifest record has its bytes, of its size; nothing else is there.
    const fileEntries = new Map((pEntries.files.get(pid) ?? []).map((e) => [e.match[2]!, e]))
    for (const e of project.manifest) {
      for (const f of await rowsOf(archive, e, 'project_files', version)) {
        if (f.project_id !== pid) throw invalidData(e.name, 'holds a project_files record of another project_id')
        const path = f.path as string
        let normal: string | null
        try {
          normal = normalizePath(path)
        } catch {
          normal = null
        }
        if (normal !== path) throw refused('ARCHIVE_UNSAFE_PATH', `${e.name}: the file path ${JSON.stringify(path)} is not a project path`, { entry: e.name, path })
        const bytes = fileEntries.get(path)
        if (!bytes) throw invalidData(e.name, `the bytes of ${path} are missing (projects/${pid}/files/${path})`, { path })
        if (bytes.size !== f.size) throw invalidData(bytes.name, `holds ${bytes.size} bytes; its manifest says ${f.size as number}`, { path })
        project.files.set(path, { entry: bytes, sha256: f.sha256 as string, size: f.size as number })
        counts.project_files++
        files.count++
        files.bytes += bytes.size
      }
    }
    for (const [path, e] of fileEntries) if (!project.files.has(path)) throw invalidData(e.name, 'is a file no manifest record names')
    for (const e of pEntries.history.get(pid) ?? []) {
      project.history.set(e.match[2]!, e)
      files.count++
      files.bytes += e.size
    }
    // Every digest an older version names has its bytes: among the current files or in history/.
    const current = new Set([...project.files.values()].map((f) => f.sha256))
    for (const e of project.versionFiles) {
      for (const f of await rowsOf(archive, e, 'project_version_files', version)) {
        const sha = f.sha256 as string
        if (!current.has(sha) && !project.history.has(sha)) throw invalidData(e.name, `the bytes of version ${f.version as number}'s ${f.path as string} are missing (projects/${pid}/history/${sha})`)
      }
    }
    projects.push(project)
  }

  // Agents: the list, each one's entry and runs.
  const agents: Survey['agents'] = []
  const agentList = one('agents')
  if (include.includes('agents') && !agentList) throw invalidData('agents.json', 'is missing: metadata.json includes agents')
  const aEntries = perId('agents/<id>')
  const runEntries = perId('agents/<id>/runs')
  const aListed = agentList ? await rowsOf(archive, agentList, 'agents', version) : []
  const agentIds = new Set(aListed.map((a) => a.id as string))
  for (const m of [aEntries, runEntries]) for (const [aid, es] of m) if (!agentIds.has(aid)) throw invalidData(es[0]!.name, `belongs to agent ${aid}, which agents.json does not list`)
  for (const a of aListed) {
    const aid = a.id as string
    const entry = aEntries.get(aid)?.[0]
    if (!entry) throw invalidData(`agents/${aid}.json`, 'is missing for an agent of agents.json')
    const row = await rowOf(archive, entry, 'agents', version)
    if (JSON.stringify(row) !== JSON.stringify(a)) throw invalidData(entry.name, 'differs from its record in agents.json')
    counts.agents++
    const runs = runEntries.get(aid) ?? []
    await rows(runs, 'agent_runs', { column: 'agent_id', id: aid })
    agents.push({ id: aid, row, runs })
  }

  // Chat: the sessions, then the messages, each of a session the archive has.
  const sessions = one('chat/sessions')
  if (include.includes('chat_history') && !sessions) throw invalidData('chat/sessions.json', 'is missing: metadata.json includes chat_history')
  const sessionIds = new Set<string>()
  if (sessions) {
    for (const s of await rowsOf(archive, sessions, 'chat_sessions', version)) sessionIds.add(s.id as string)
    counts.chat_sessions = sessionIds.size
  }
  const messages = each('chat/messages')
  for (const e of messages) {
    for (const m of await rowsOf(archive, e, 'chat_messages', version)) {
      if (!sessionIds.has(m.session_id as string)) throw invalidData(e.name, `a message of session ${m.session_id as string}, which chat/sessions.json does not have`, { id: m.id })
      counts.chat_messages++
    }
  }

  // Settings.
  const settings = one('settings/preferences')
  if (include.includes('settings') && !settings) throw invalidData('settings/preferences.json', 'is missing: metadata.json includes settings')
  if (settings) {
    const value = (await archive.json(settings)) as { llm?: unknown } | null
    if (!value || typeof value !== 'object' || !('llm' in value)) throw invalidData(settings.name, 'must be an object with llm')
    if (value.llm !== null) {
      checkRow('llm_settings', value.llm, settings.name)
      counts.llm_settings = 1
    }
  }

  return { meta: meta as ExportMetadata, include, projects, agents, sessions, messages, settings, counts, files }
}

/** The settings record of a survey's settings entry (checked by survey), or null. */
export async function settingsOf(archive: Archive, s: Survey): Promise<Row | null> {
  if (!s.settings) return null
  const value = (await archive.json(s.settings)) as { llm: Row | null }
  return value.llm ? upgrade('llm_settings', [value.llm], s.meta.formatVersion)[0]! : null
}
