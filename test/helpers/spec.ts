// The API specification (docs/api-spec.md) read from its own tables, for the conformance suite
// (test/server/conformance.test.ts): the endpoints (method, path, request, response), the resources'
// field tables, the error codes, the limits and their headers, the event kinds, the states, the key
// prefixes and the region codes. Nothing here is a copy of the spec: a change to a table changes what
// the suite sends and expects. Where a cell is prose rather than field names, the two small tables
// below (REQUEST_PROSE, RESPONSE_PROSE) say, citing the spec's words, what it stands for; a cell they
// do not know fails loudly, so that a new spelling is looked at, not guessed.
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'

export const SPEC_FILE = new URL('../../docs/api-spec.md', import.meta.url)

/** A field of a resource table or of a request cell, with what the spec's words say about its value. */
export interface SpecField {
  /** As the spec spells it; a dotted name is a nested object (dateRange.start). */
  name: string
  /** string, boolean, integer, date, array, object (the Type column or the cell's parenthesis; string if neither). */
  type: string
  /** The spec's words about it (Notes, or the cell's parenthesis). */
  notes: string
  /** The spec says its type (a Type column, a type word, listed or given values): responses are checked for it. */
  typed?: boolean
  /** The Required column: true, false, or undefined when the table has none. */
  required?: boolean
  /** A value the spec gives ("weekly given", "(S256)", "the only allowed value given is medium"). */
  given?: string
  /** The values the spec lists ("zip or json", "values projects, agents, ..."), the first one sent. */
  values?: string[]
  /** Whether `values` is the whole list ("platform or byos") rather than examples ("Values given: ..., (the list continues ...)"). */
  closed?: boolean
  /** A region code (Notes "A region code.", "Failover region"). */
  region?: boolean
  /** Event kinds (Notes "Event kinds, see Events."). */
  eventKinds?: boolean
  /** Random bytes as hex ("random 32-byte hex string"). */
  hexBytes?: number
  /**
   * A secret the client chooses or a key sealed at rest: what the server keeps of it need not come back
   * (a response never carries a secret: rules.md).
   */
  secret?: boolean
}

export interface Resource {
  name: string
  fields: SpecField[]
}

export type RequestSpec =
  | { kind: 'none' }
  /** JSON fields: a body, or the query string of a GET. */
  | { kind: 'fields'; in: 'body' | 'query'; fields: SpecField[]; source: string }
  /** The spec names no fields for this request (its words: `why`); the suite sends what the API documents. */
  | { kind: 'unspecified'; why: string }
  /** A multipart form: one file part, and a part holding JSON with `options`. */
  | { kind: 'multipart'; filePart: string; jsonPart: string; options: SpecField[] }

export interface ResponseSpec {
  /** The cell as written. */
  cell: string
  /** data is a list (of `fields` items, when given). */
  list?: boolean
  /** Fields data must have (a list: each item). */
  fields: SpecField[]
  /** A field whose value the spec lists completely in the cell ("status: pending, approved, expired or consumed"). */
  statusValues?: { field: string; values: string[] }
  /** Fields that must not be null ("Run with an output"). */
  nonNull?: string[]
  /** Fields present only once the resource reaches a state (Export job: when completed), by field name. */
  presentWhen?: Record<string, { field: string; value: string }>
  /** The tenant's identifier under either name (Tenant: "an identifier (tenantId)"). */
  identifier?: string
  /** data holds an absolute URL somewhere ("Returns the OAuth URL"). */
  url?: boolean
  /** A stream, not a JSON document ("Streamed response"). */
  stream?: boolean
  /** The resource table the fields come from, if one. */
  resource?: string
}

export interface SpecEndpoint {
  /** The table it is in (Projects, Agents, ..., Authentication endpoints). */
  area: string
  /** Resolved: "(see gaps)" takes the server's method (`resolveMethod`). */
  method: string
  /** Written as the spec writes it. */
  specPath: string
  /** In the server's spelling: base path applied, parameters as {name}. */
  path: string
  /** The method is not in the spec ("(see gaps)"): the server's was taken. */
  methodFromServer?: boolean
  request: RequestSpec
  response: ResponseSpec
  /** "Auth endpoints | no rate limiting | Authentication endpoints": no X-RateLimit-* headers expected. */
  rateLimitExempt: boolean
  /** "METHOD path", as findings name it. */
  key: string
}

export interface SpecError {
  code: string
  status: number
  condition: string
}

export interface Spec {
  endpoints: SpecEndpoint[]
  resources: Map<string, Resource>
  errors: SpecError[]
  /** Limits table: "Rate-limit headers" row. */
  rateLimitHeaders: string[]
  /** Limits table: "Default rate limit" row, as numbers. */
  defaultRateLimit: { requests: number; seconds: number }
  /** Response envelope table: its dotted fields (meta.request_id, ...). */
  envelope: SpecField[]
  eventKinds: string[]
  /** Authentication: "Prefixes given: svc_sdk_ (...) and svc_ci_ (...)". */
  keyPrefixes: string[]
  regionCodes: string[]
  /** States tables: the state a resource starts in, by the endpoint that creates it. */
  initialStates: Map<string, { resource: string; state: string }>
  /** States tables: fields that "become present" in a state, by resource. */
  presentIn: Map<string, { state: string; fields: string[] }>
  /** The sentence of "Chat session and message" that names a message's fields. */
  messageFields: string[]
}

// ---------------------------------------------------------------------------------------------
// Prose cells, and what they stand for. Each entry cites the spec's words.

type RequestProse =
  | { kind: 'none' }
  | { kind: 'unspecified'; why: string }
  /** The fields of a resource table; `pick` chooses the ones meant, `given` fixes values the cell implies. */
  | {
      kind: 'resource'
      resource: string
      pick?: (f: SpecField) => boolean
      given?: Record<string, string>
      why: string
    }
  /** The fields a sentence of the Resources section names ("A message is sent with ..."). */
  | { kind: 'message'; why: string }

export const REQUEST_PROSE: Record<string, RequestProse> = {
  none: { kind: 'none' },
  'partial project fields': {
    kind: 'resource',
    resource: 'Project',
    pick: (f) => /given at creation/i.test(f.notes),
    why: 'Project table: the fields "Given at creation." (id and created_at are the server\'s)',
  },
  'message content': {
    kind: 'message',
    why: 'Chat session and message: "A message is sent with sessionId, content and projectId."',
  },
  'create a session': {
    kind: 'unspecified',
    why: 'Gaps: "Request bodies of session creation and message sending ...: not shown"',
  },
  'partial LLM settings': { kind: 'unspecified', why: 'Tenant: "the LLM settings fields ...: not shown"' },
  'regional preferences fields': {
    kind: 'resource',
    resource: 'Regional preferences',
    why: 'the Regional preferences table',
  },
  'storage configuration fields': {
    kind: 'resource',
    resource: 'Storage configuration',
    why: 'the Storage configuration table',
  },
  'BYOS connection data': {
    kind: 'resource',
    resource: 'Storage configuration',
    pick: (f) => f.name === 'storageMode' || f.name.startsWith('byos'),
    given: { storageMode: 'byos' },
    why: 'the Storage configuration fields that describe a BYOS store: storageMode (byos) and the byos* fields',
  },
  'state-changing OAuth step; POST only': {
    kind: 'unspecified',
    why: 'the cell names no fields ("state-changing OAuth step; POST only")',
  },
  '': { kind: 'unspecified', why: 'the cell is empty (/oauth/{provider}/start: "(see gaps)")' },
}

type ResponseProse = Omit<ResponseSpec, 'cell' | 'fields'> & { resource?: string; names?: string[] }

export const RESPONSE_PROSE: Record<string, ResponseProse> = {
  'Envelope with list of projects.': { list: true, resource: 'Project' },
  // The parenthesis lists some Project fields and "...": the rest of the Project table.
  'Envelope with project (id, name, created_at, ...).': { resource: 'Project' },
  'Envelope with project.': { resource: 'Project' },
  'Deletes the project.': {},
  'List of versions.': { list: true },
  'Restores the project to that version.': {},
  'List of agents.': { list: true },
  'Agent with id.': { names: ['id'] },
  // "An agent run ... exposes an output."
  'Run with an output.': { names: ['output'], nonNull: ['output'] },
  'Run record.': { names: ['output'] },
  // Tenant: "A tenant has at least a name and an identifier (tenantId)."
  'Current tenant info.': { names: ['name'], identifier: 'tenantId' },
  'LLM settings.': {},
  'Updated settings.': {},
  'List of team members.': { list: true },
  'Session.': {},
  'Message.': {},
  'Streamed response.': { stream: true },
  'Chat history export.': {},
  'Available regions.': { list: true },
  'Regional preferences.': { resource: 'Regional preferences' },
  'Updated preferences.': { resource: 'Regional preferences' },
  'Storage configuration.': { resource: 'Storage configuration' },
  'Updated configuration (platform or BYOS).': { resource: 'Storage configuration' },
  'Validation of the BYOS connection.': {},
  'Whether the tenant may use the feature.': {},
  'Routing information (debug).': {},
  'Export job.': { resource: 'Export job' },
  'Schedule created.': {},
  'Restore job.': { resource: 'Restore job' },
  // The four parts the cell names, spelled as every field of the spec is (camelCase).
  'Export of all personal data: personal data, processing history, consent records, data sharing log.': {
    names: ['personalData', 'processingHistory', 'consentRecords', 'dataSharingLog'],
  },
  'Webhook registration.': { resource: 'Webhook registration' },
  'Sets the access token for the session.': {},
  'OAuth result.': {},
  'Returns the OAuth URL.': { url: true },
  'Approves the login.': {},
  // CLI login session: "verificationCode | Shown in browser and terminal for the user to compare."
  'Login info used to display the verification code.': { names: ['verificationCode'] },
}

/** States tables' triggers that name no path, and the endpoint they are. */
const TRIGGERS: Record<string, string> = {
  'POST export': 'POST /api/v1/platform/tenants/{tenantId}/export',
  'POST restore': 'POST /api/v1/platform/tenants/{tenantId}/restore',
}

// ---------------------------------------------------------------------------------------------
// Markdown

interface Table {
  /** Heading path: ['Endpoints', 'Projects']. */
  headings: string[]
  header: string[]
  rows: string[][]
}

interface Parsed {
  tables: Table[]
  /** Text under each heading (joined by its full path with ' > '). */
  text: Map<string, string>
}

function parseMarkdown(md: string): Parsed {
  const tables: Table[] = []
  const text = new Map<string, string>()
  const headings: string[] = []
  const lines = md.split('\n')
  const cells = (line: string) =>
    line
      .trim()
      .replace(/^\||\|$/g, '')
      .split('|')
      .map((c) => c.trim())
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!
    const h = /^(#{1,6}) (.*)$/.exec(line)
    if (h) {
      headings.length = h[1]!.length - 1
      headings[h[1]!.length - 1] = h[2]!.trim()
      continue
    }
    if (line.startsWith('|') && lines[i + 1]?.startsWith('|---')) {
      const table: Table = { headings: headings.filter(Boolean), header: cells(line), rows: [] }
      for (i += 2; i < lines.length && lines[i]!.startsWith('|'); i++) table.rows.push(cells(lines[i]!))
      i--
      tables.push(table)
      continue
    }
    const key = headings.filter(Boolean).join(' > ')
    text.set(key, `${text.get(key) ?? ''}${line}\n`)
  }
  return { tables, text }
}

/** Splits on commas (and ";" when asked) outside parentheses. */
function splitTop(s: string, seps = ','): string[] {
  const out: string[] = []
  let depth = 0
  let cur = ''
  for (const ch of s) {
    if (ch === '(') depth++
    if (ch === ')') depth--
    if (depth === 0 && seps.includes(ch)) {
      out.push(cur.trim())
      cur = ''
    } else cur += ch
  }
  if (cur.trim()) out.push(cur.trim())
  return out
}

/** "a, b, c or d" / "a, b and c": the items of a spoken list. */
const spokenList = (s: string): string[] =>
  s
    .replace(/\.$/, '')
    .split(/,\s*|\s+or\s+|\s+and\s+/)
    .map((x) => x.trim())
    .filter(Boolean)

const TYPES = ['string', 'boolean', 'integer', 'date', 'array', 'object', 'number']
const IDENT = /^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$/

/** What the spec's words (a Type column, Notes, a cell's parenthesis) say about a field's value. */
function describe(name: string, words: string, typeColumn = '', cell = false): SpecField {
  const f: SpecField = { name, type: 'string', notes: words }
  const type = typeColumn.toLowerCase()
  if (type.startsWith('array')) f.type = 'array'
  else if (TYPES.includes(type)) f.type = type
  if (type) f.typed = true
  const parts = splitTop(words, ',;').map((p) => p.replace(/\.$/, ''))
  for (const part of parts) {
    const p = part.trim()
    let m: RegExpExecArray | null
    if (TYPES.includes(p)) {
      f.type = p
      f.typed = true
    } else if ((m = /^(\S+) given$/.exec(p))) f.given = m[1]!
    else if ((m = /value given is (\S+?)\.?$/.exec(p))) f.given = m[1]!
    else if ((m = /^values? (.+)$/i.exec(p)) && !/^values given:/i.test(p)) {
      // "values projects, agents, chat history, settings, all": the rest of the list follows as parts
      const i = parts.indexOf(part)
      f.values = [m[1]!, ...parts.slice(i + 1)].map((x) => x.trim())
      f.closed = true
      break
    } else if ((m = /^random (\d+)-byte hex string$/.exec(p))) f.hexBytes = Number(m[1])
    else if (/region code|failover region/i.test(p)) f.region = true
    else if (/^event kinds/i.test(p)) f.eventKinds = true
    else if (/^[\w-]+( or [\w-]+)+$/.test(p) && !f.values) {
      f.values = spokenList(p)
      f.closed = true
    } else if (/^[A-Za-z0-9][\w-]*$/.test(p) && cell && parts.length === 1 && !f.given) f.given = p
  }
  // Notes that list values: "platform or byos.", "s3, r2, gcs or azure.", "Values given: standard, gdpr, hipaa (...)"
  const given = /^Values given: ([^(]+?)(?: \(.*\))?\.?$/.exec(words.trim())
  if (given) {
    f.values = spokenList(given[1]!)
    f.closed = false
  } else if (/^[\w-]+(, [\w-]+)*,? or [\w-]+\.?$/.test(words.trim())) {
    f.values = spokenList(words.trim())
    f.closed = true
  }
  if (/date, YYYY-MM-DD/.test(words)) f.type = 'date'
  if (f.values || f.given !== undefined) f.typed = true
  if (/secret/i.test(name) || /accesskey/i.test(name) || /encrypted at rest|shared secret/i.test(words)) f.secret = true
  return f
}

/** "name (string), description (string)": the fields a cell names, or null when it is prose. */
function fieldList(cell: string): { name: string; words: string }[] | null {
  const items = splitTop(cell.replace(/\.$/, ''))
  const out: { name: string; words: string }[] = []
  for (const item of items) {
    const m = /^([^\s(]+)(?:\s*\((.*)\))?$/.exec(item)
    if (!m || !IDENT.test(m[1]!)) return null
    out.push({ name: m[1]!, words: m[2] ?? '' })
  }
  return out.length ? out : null
}

/** A nested value set at a dotted name. */
export function setPath(target: Record<string, unknown>, name: string, value: unknown): void {
  const keys = name.split('.')
  let o = target
  for (const k of keys.slice(0, -1)) o = (o[k] ??= {}) as Record<string, unknown>
  o[keys.at(-1)!] = value
}

/** The value at a dotted name. */
export function getPath(source: unknown, name: string): unknown {
  let o = source
  for (const k of name.split('.')) o = o && typeof o === 'object' ? (o as Record<string, unknown>)[k] : undefined
  return o
}

// ---------------------------------------------------------------------------------------------

export function loadSpec(markdown = readFileSync(SPEC_FILE, 'utf8')): Spec {
  const { tables, text } = parseMarkdown(markdown)
  const section = (name: string) => tables.filter((t) => t.headings.includes(name))
  const col = (t: Table, name: string) => t.header.indexOf(name)

  // Resources: every table under "Resources and their fields" whose first column is Field (the envelope apart).
  const resources = new Map<string, Resource>()
  let envelope: SpecField[] = []
  for (const t of section('Resources and their fields')) {
    if (t.header[0] !== 'Field') continue
    const name = t.headings.at(-1)!
    const [type, notes, required] = [col(t, 'Type'), col(t, 'Notes'), col(t, 'Required')]
    const fields = t.rows.map((r) => ({
      ...describe(r[0]!, r[notes] ?? '', r[type] ?? ''),
      ...(required >= 0 ? { required: r[required] === 'yes' } : {}),
    }))
    if (/^Response envelope/.test(name)) envelope = fields
    else resources.set(name, { name, fields })
  }

  const resourcesText = [...text].filter(([k]) => k.includes('Resources and their fields'))
  const regionText = resourcesText.map(([, v]) => v).join('\n')
  const regionLine = /Region codes and their compliance frameworks[^:]*:(.*)/.exec(regionText)?.[1] ?? ''
  const regionCodes = [...regionLine.matchAll(/([a-z]+(?:-[a-z]+)+) \(/g)].map((m) => m[1]!)
  const messageSentence = /A message is sent with ([^.]+)\./.exec(regionText)?.[1] ?? ''
  const messageFields = spokenList(messageSentence)

  const authText = [...text].find(([k]) => k.endsWith('Authentication'))?.[1] ?? ''
  const prefixLine = /Prefixes given: ([^\n]*)/.exec(authText)?.[1] ?? ''
  const keyPrefixes = [...prefixLine.matchAll(/(\w+_) \(/g)].map((m) => m[1]!)

  const errors: SpecError[] = section('Errors')
    .filter((t) => t.header[0] === 'Code')
    .flatMap((t) => t.rows.map((r) => ({ code: r[0]!, status: Number(r[1]), condition: r[2]! })))

  const limits = section('Limits').find((t) => t.header[0] === 'Limit')!
  const limitRow = (name: string) => limits.rows.find((r) => r[0] === name)
  const rateLimitHeaders = splitTop(limitRow('Rate-limit headers')?.[1] ?? '')
  const rate = /(\d+) requests per (\d+) seconds/.exec(limitRow('Default rate limit')?.[1] ?? '')
  const defaultRateLimit = { requests: Number(rate?.[1]), seconds: Number(rate?.[2]) }
  // "Auth endpoints | no rate limiting | Authentication endpoints." names the endpoints table it exempts.
  const exemptArea = /no rate limiting/.test(limitRow('Auth endpoints')?.[1] ?? '')
    ? (limitRow('Auth endpoints')?.[2] ?? '').replace(/\.$/, '')
    : null

  const eventKinds = section('Events')
    .filter((t) => t.header[0] === 'Event kind')
    .flatMap((t) => t.rows.map((r) => r[0]!))

  // Endpoints
  const endpoints: SpecEndpoint[] = []
  for (const t of section('Endpoints')) {
    if (t.header.join('|') !== 'Method|Path|Request|Response') continue
    const area = t.headings.at(-1)!
    for (const [method, specPath, request, response] of t.rows as [string, string, string, string][]) {
      let path = specPath
      const base = /^(\S+) \(under the API base path (\S+)\)$/.exec(specPath)
      if (base) path = `${base[2]}${base[1]}`
      path = path.replace(/:(\w+)/g, '{$1}')
      const fromServer = !/^[A-Z]+$/.test(method)
      const m = fromServer ? '?' : method
      endpoints.push({
        area,
        method: m,
        specPath,
        path,
        request: requestOf(m, request, t, area),
        response: responseOf(response, area),
        rateLimitExempt: exemptArea !== null && area.toLowerCase() === exemptArea.toLowerCase(),
        key: `${m} ${path}`,
        ...(fromServer ? { methodFromServer: true } : {}),
      })
    }
  }

  // States: the (none) row gives the state a creating endpoint starts its resource in; "X, Y become present".
  const initialStates = new Map<string, { resource: string; state: string }>()
  const presentIn = new Map<string, { state: string; fields: string[] }>()
  for (const t of section('States and transitions')) {
    if (t.header[0] !== 'State') continue
    const resource = t.headings.at(-1)!
    const [trigger, next, effects] = [col(t, 'Trigger'), col(t, 'Next state'), col(t, 'Other effects')]
    for (const r of t.rows) {
      if (r[0] === '(none)') {
        const key = TRIGGERS[r[trigger]!] ?? r[trigger]!
        if (!endpoints.some((e) => e.key === key))
          throw new Error(`States "${resource}": trigger ${r[trigger]} is no endpoint of the spec`)
        initialStates.set(key, { resource, state: r[next]! })
      }
      const present = /^([\w, ]+) become present/.exec(r[effects] ?? '')
      if (present) presentIn.set(resource, { state: r[next]!, fields: spokenList(present[1]!) })
    }
  }
  // A response showing a resource checks the fields that "become present" in a state only once it is in it.
  for (const ep of endpoints) {
    const present = ep.response.resource ? presentIn.get(ep.response.resource) : undefined
    if (present)
      ep.response.presentWhen = Object.fromEntries(
        present.fields.map((f) => [f, { field: 'status', value: present.state }]),
      )
  }

  return {
    endpoints,
    resources,
    errors,
    rateLimitHeaders,
    defaultRateLimit,
    envelope,
    eventKinds,
    keyPrefixes,
    regionCodes,
    initialStates,
    presentIn,
    messageFields,
  }

  /** The resource tables an area's fields are looked up in first (Agents: "Agent and agent run"), then the others. */
  function resourcesFor(area: string): Resource[] {
    const stem = area.replace(/s$/, '').toLowerCase()
    const all = [...resources.values()]
    return [...all.filter((r) => r.name.toLowerCase().startsWith(stem)), ...all]
  }

  function resourceField(name: string, area = ''): SpecField | undefined {
    for (const r of resourcesFor(area)) {
      const f = r.fields.find((x) => x.name === name)
      if (f) return f
    }
    return undefined
  }

  /** What a field named without words says elsewhere: in its own table first ("format" of the schedule: the export's). */
  function wordsElsewhere(name: string, own: Table): string {
    for (const t of [own, ...section('Endpoints')])
      for (const r of t.rows) {
        const found = fieldList(splitTop(r[2] ?? '', ';')[0] ?? '')?.find((f) => f.name === name && f.words)
        if (found) return found.words
      }
    return ''
  }

  /** A field of a cell: its words, over what its resource table says (the cell's words win where both speak). */
  function cellField(name: string, words: string, own: Table, area: string): SpecField {
    const base = resourceField(name, area)
    const said = words || (base ? '' : wordsElsewhere(name, own))
    if (!said) return base ? { ...base } : describe(name, '')
    const cell = describe(name, said, '', true)
    if (!base) return cell
    const spoke = Object.fromEntries(
      Object.entries(cell).filter(
        ([k, v]) => v !== undefined && !(k === 'type' && v === 'string' && !/string/.test(said)),
      ),
    )
    return { ...base, ...spoke, notes: `${said}; ${base.notes}` }
  }

  function requestOf(method: string, cell: string, own: Table, area: string): RequestSpec {
    const multipart =
      /^multipart form: one file part with the backup file, and a part (\w+) holding JSON with (.+)$/.exec(cell)
    if (multipart) {
      const options = spokenList(multipart[2]!.replace(/\s*\((\w+)\)/g, ':$1')).map((x) => {
        const [name, type] = x.split(':')
        return describe(name!, type ?? 'string', '', true)
      })
      // "Name of the file part in the restore form: not shown": the suite takes the API's own (its OpenAPI document).
      return { kind: 'multipart', filePart: '', jsonPart: multipart[1]!, options }
    }
    const prose = REQUEST_PROSE[cell]
    if (prose) {
      if (prose.kind === 'none' || prose.kind === 'unspecified') return prose
      if (prose.kind === 'message')
        return {
          kind: 'fields',
          in: 'body',
          source: prose.why,
          fields: messageFields.map((n) => resourceField(n, area) ?? describe(n, '')),
        }
      const table = resources.get(prose.resource)
      if (!table) throw new Error(`REQUEST_PROSE "${cell}": no resource table ${prose.resource} in the spec`)
      return {
        kind: 'fields',
        in: 'body',
        source: prose.why,
        fields: table.fields
          .filter(prose.pick ?? (() => true))
          .map((f) => (prose.given?.[f.name] ? { ...f, given: prose.given[f.name] } : f)),
      }
    }
    // "loginId, state; caller must be authenticated": the fields before the ";", a condition after it.
    const named = fieldList(splitTop(cell, ';')[0] ?? '')
    if (!named) throw new Error(`docs/api-spec.md: request cell "${cell}" is neither field names nor known prose`)
    return {
      kind: 'fields',
      in: method === 'GET' ? 'query' : 'body',
      source: cell,
      fields: named.map(({ name, words }) => cellField(name, words, own, area)),
    }
  }

  function responseOf(cell: string, area: string): ResponseSpec {
    const prose = RESPONSE_PROSE[cell]
    if (prose) {
      const { resource, names, ...rest } = prose
      const table = resource ? resources.get(resource) : undefined
      if (resource && !table) throw new Error(`RESPONSE_PROSE "${cell}": no resource table ${resource} in the spec`)
      return {
        cell,
        ...rest,
        ...(resource ? { resource } : {}),
        fields: table ? table.fields : (names ?? []).map((n) => resourceField(n, area) ?? describe(n, '')),
      }
    }
    const status = /^(\w+): (.+)$/.exec(cell)
    if (status)
      return {
        cell,
        fields: [describe(status[1]!, '')],
        statusValues: { field: status[1]!, values: spokenList(status[2]!) },
      }
    const named = fieldList(cell)
    if (!named) throw new Error(`docs/api-spec.md: response cell "${cell}" is neither field names nor known prose`)
    // The resource table holding every field the cell names (downloadUrl, expiresAt, size, checksum: Project backup result).
    const owner = resourcesFor(area).find((r) => named.every((n) => r.fields.some((f) => f.name === n.name)))
    return {
      cell,
      ...(owner ? { resource: owner.name } : {}),
      fields: named.map(({ name }) => owner?.fields.find((f) => f.name === name) ?? describe(name, '')),
    }
  }
}

/** "(see gaps)": the method the server serves the path with (the only one), from its OpenAPI operations. */
export function resolveMethod(ep: SpecEndpoint, served: { method: string; path: string }[]): SpecEndpoint {
  if (!ep.methodFromServer) return ep
  const shape = (p: string) => p.replace(/\{[^}]+\}/g, '{}')
  const methods = [...new Set(served.filter((o) => shape(o.path) === shape(ep.path)).map((o) => o.method))]
  if (methods.length !== 1) return ep // the route check reports it
  return { ...ep, method: methods[0]!, key: `${methods[0]} ${ep.path}` }
}

// ---------------------------------------------------------------------------------------------
// Values

/** A field left out of a request on purpose (allowed for fields the spec marks Required: no). */
export const OMIT = Symbol('omit')

export interface ValueContext {
  regionCodes: string[]
  eventKinds: string[]
}

/** A value of the field as the spec's words describe it: the given value, the first listed, or one of its type. */
export function valueOf(f: SpecField, c: ValueContext): unknown {
  if (f.given !== undefined) return f.given
  if (f.values?.length) return f.type === 'array' ? [f.values[0]] : f.values[0]
  if (f.region) return c.regionCodes[0]
  if (f.eventKinds) return [c.eventKinds[0]]
  if (f.hexBytes) return randomBytes(f.hexBytes).toString('hex')
  switch (f.type) {
    case 'boolean':
      return true
    case 'integer':
    case 'number':
      return 1
    case 'date':
      return new Date().toISOString().slice(0, 10)
    case 'array':
      return []
    case 'object':
      return {}
    default:
      // Printable, no spaces, 24+ characters: what any string field of the spec takes (a secret among them).
      return `${f.name.split('.').at(-1)}-${randomBytes(12).toString('hex')}`
  }
}

/**
 * The request the spec describes, with exactly its field names: each field's value from `given` (the
 * endpoints' earlier outputs, the test's services) or else from the spec's words. `given` naming a
 * field the spec does not is an error in the suite, as is leaving out a field the spec requires.
 */
export function requestFields(
  fields: SpecField[],
  given: Record<string, unknown>,
  c: ValueContext,
): Record<string, unknown> {
  const names = new Set(fields.map((f) => f.name))
  const stray = Object.keys(given).filter((k) => !names.has(k))
  if (stray.length) throw new Error(`not fields of the spec's request: ${stray.join(', ')}`)
  const out: Record<string, unknown> = {}
  for (const f of fields) {
    const v = f.name in given ? given[f.name] : valueOf(f, c)
    if (v === OMIT) {
      if (f.required !== false) throw new Error(`${f.name} may not be left out: the spec does not mark it optional`)
      continue
    }
    setPath(out, f.name, v)
  }
  return out
}

/** The dotted names of every leaf of a JSON body (what was sent, to compare with the spec's names). */
export function leafNames(value: unknown, prefix = ''): string[] {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return prefix ? [prefix] : []
  return Object.entries(value).flatMap(([k, v]) =>
    v && typeof v === 'object' && !Array.isArray(v) ? leafNames(v, `${prefix}${k}.`) : [`${prefix}${k}`],
  )
}
