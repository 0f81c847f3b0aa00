// The one schema of every Atrium setting. The server, the installer, the env template and the Helm
// chart all read it, so a setting is added here once and appears everywhere.
import { isIP } from 'node:net'
import { isUuid } from '../common/ids.js'
import { isRegionCode, REGION_CODES, type RegionCode } from '../common/regions.js'
import { REDIS_PROTOCOLS, redisUrlProblem } from '../common/redis-topology.js'

export type SettingType = 'string' | 'url' | 'int' | 'number' | 'bool' | 'enum' | 'cidrs' | 'domains' | 'key32' | 'json'

interface SettingBase<T> {
  type: SettingType
  default: T
  secret: boolean
  description: string
  /** Shown in the env template; groups keep related settings together. */
  group: 'server' | 'storage' | 'security' | 'limits' | 'network'
  /** Must be set when NODE_ENV=production (embedded defaults are for trying Atrium out). */
  requiredInProduction?: boolean
}
interface StringSetting extends SettingBase<string> {
  type: 'string' | 'url' | 'key32'
  protocols?: readonly string[]
  /** A URL that WHATWG's parser does not read (a list of hosts): what is wrong with it, or null. */
  problemOf?: (raw: string) => string | null
}
interface IntSetting extends SettingBase<number> {
  type: 'int'
  min: number
  max: number
}
/** A decimal number, such as a ratio. */
interface NumberSetting extends SettingBase<number> {
  type: 'number'
  min: number
  max: number
}
interface BoolSetting extends SettingBase<boolean> {
  type: 'bool'
}
interface EnumSetting<V extends string> extends SettingBase<V> {
  type: 'enum'
  values: readonly V[]
}
interface CidrsSetting extends SettingBase<string[]> {
  type: 'cidrs'
}
/** DNS domains, comma-separated; each is kept lowercase, without a leading or trailing dot. */
interface DomainsSetting extends SettingBase<string[]> {
  type: 'domains'
}
/** Structured values as JSON; `parse` checks and normalizes the decoded value (problems never echo secrets). */
interface JsonSetting<T> extends SettingBase<T> {
  type: 'json'
  parse: (value: unknown) => { value: T } | { problems: string[] }
}
export type Setting =
  | StringSetting
  | IntSetting
  | NumberSetting
  | BoolSetting
  | EnumSetting<string>
  | CidrsSetting
  | DomainsSetting
  | JsonSetting<unknown>

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
const NODE_ENVS = ['development', 'production', 'test'] as const

export const settings = {
  NODE_ENV: {
    type: 'enum',
    values: NODE_ENVS,
    default: 'development',
    secret: false,
    group: 'server',
    description:
      'production makes every embedded default an error: real PostgreSQL, Redis, S3 and a master key are required',
  } satisfies EnumSetting<(typeof NODE_ENVS)[number]>,
  PORT: {
    type: 'int',
    min: 0,
    max: 65535,
    default: 8080,
    secret: false,
    group: 'server',
    description: 'TCP port the API server listens on (0: any free port)',
  } satisfies IntSetting,
  METRICS_PORT: {
    type: 'int',
    min: 0,
    max: 65535,
    default: 0,
    secret: false,
    group: 'server',
    description:
      'Serve /metrics on this port only, apart from the API (so a public ingress cannot reach it); 0: on PORT with the API',
  } satisfies IntSetting,
  METRICS_TENANT_LABEL: {
    type: 'bool',
    default: false,
    secret: false,
    group: 'server',
    description:
      'Also count model tokens per tenant (atrium_llm_tenant_tokens_total{tenant}): one series per tenant, so for sites with few tenants',
  } satisfies BoolSetting,
  HOST: {
    type: 'string',
    default: '0.0.0.0',
    secret: false,
    group: 'server',
    description: 'Address the API server binds to (0.0.0.0 for every interface, 127.0.0.1 for this machine only)',
  } satisfies StringSetting,
  PUBLIC_URL: {
    type: 'url',
    protocols: ['http:', 'https:'],
    default: '',
    secret: false,
    group: 'server',
    description: 'Address users reach Atrium at, used in links it hands out (default http://localhost:PORT)',
  } satisfies StringSetting,
  DATA_DIR: {
    type: 'string',
    default: './.atrium',
    secret: false,
    group: 'server',
    description: 'Folder for embedded data: the embedded database, local blobs and a generated master key',
  } satisfies StringSetting,
  LOG_LEVEL: {
    type: 'enum',
    values: LOG_LEVELS,
    default: 'info',
    secret: false,
    group: 'server',
    description: 'Least severe log level written (JSON lines on stdout)',
  } satisfies EnumSetting<(typeof LOG_LEVELS)[number]>,
  MIGRATE_ON_START: {
    type: 'bool',
    default: true,
    secret: false,
    group: 'server',
    description: 'Apply pending database migrations at start-up (off when a separate migration job runs them)',
  } satisfies BoolSetting,
  TRACING_OTLP_ENDPOINT: {
    type: 'url',
    protocols: ['http:', 'https:'],
    default: '',
    secret: false,
    group: 'server',
    description:
      'OpenTelemetry traces: the OTLP/HTTP endpoint of a collector inside the site (e.g. http://otel-collector:4318; spans go to its /v1/traces as protobuf); empty: no tracing. Reached through the outbound policy: a private address must be inside OUTBOUND_ALLOWED_NETWORKS, and air-gapped a name must be under OUTBOUND_ALLOWED_DOMAINS',
  } satisfies StringSetting,
  TRACING_SAMPLE_RATIO: {
    type: 'number',
    min: 0,
    max: 1,
    default: 1,
    secret: false,
    group: 'server',
    description:
      'Share of traces kept when tracing is on (0 to 1, e.g. 0.1); a request that arrives with a sampled W3C traceparent is kept, and a job is kept when the request that queued it was',
  } satisfies NumberSetting,
  TRACING_SERVICE_NAME: {
    type: 'string',
    default: 'atrium',
    secret: false,
    group: 'server',
    description: 'The service.name traces carry (tell sites or clusters apart in one tracing backend)',
  } satisfies StringSetting,
  SHUTDOWN_TIMEOUT_SECONDS: {
    type: 'int',
    min: 1,
    max: 600,
    default: 25,
    secret: false,
    group: 'server',
    description: 'How long SIGTERM waits for in-flight requests before forcing exit',
  } satisfies IntSetting,
  DATABASE_URL: {
    type: 'url',
    protocols: ['postgres:', 'postgresql:'],
    default: '',
    secret: true,
    group: 'storage',
    requiredInProduction: true,
    description: 'PostgreSQL 15+ connection URL; empty runs an embedded PGlite database in DATA_DIR',
  } satisfies StringSetting,
  DATABASE_POOL_MAX: {
    type: 'int',
    min: 1,
    max: 500,
    default: 10,
    secret: false,
    group: 'storage',
    description: "Most PostgreSQL connections in each of a server process's two pools (tenant work, system work)",
  } satisfies IntSetting,
  REDIS_URL: {
    type: 'url',
    protocols: REDIS_PROTOCOLS,
    problemOf: redisUrlProblem,
    default: '',
    secret: true,
    group: 'storage',
    requiredInProduction: true,
    description:
      'Redis 7+ connection URL: redis://host:6379, redis+sentinel://h1:26379,h2:26379/master or redis+cluster://h1:6379,h2:6379 (rediss... for TLS); empty keeps rate limits in process (a single replica only)',
  } satisfies StringSetting,
  R2_ENDPOINT: {
    type: 'url',
    protocols: ['http:', 'https:'],
    default: '',
    secret: false,
    group: 'storage',
    requiredInProduction: true,
    description: 'S3-compatible object store address (MinIO, R2, S3...); empty stores blobs under DATA_DIR',
  } satisfies StringSetting,
  R2_PUBLIC_ENDPOINT: {
    type: 'url',
    protocols: ['http:', 'https:'],
    default: '',
    secret: false,
    group: 'storage',
    description: 'Address of the object store as users reach it, for download links (default R2_ENDPOINT)',
  } satisfies StringSetting,
  R2_BUCKET: {
    type: 'string',
    default: 'atrium',
    secret: false,
    group: 'storage',
    description: 'Bucket that holds backups and exports (created at start-up when missing)',
  } satisfies StringSetting,
  R2_ACCESS_KEY_ID: {
    type: 'string',
    default: '',
    secret: true,
    group: 'storage',
    description: 'Access key of the object store',
  } satisfies StringSetting,
  R2_SECRET_ACCESS_KEY: {
    type: 'string',
    default: '',
    secret: true,
    group: 'storage',
    description: 'Secret key of the object store',
  } satisfies StringSetting,
  R2_REGION: {
    type: 'string',
    default: 'us-east-1',
    secret: false,
    group: 'storage',
    description: 'Region name the object store expects in signatures',
  } satisfies StringSetting,
  STORAGE_TIMEOUT_SECONDS: {
    type: 'int',
    min: 1,
    max: 600,
    default: 30,
    secret: false,
    group: 'storage',
    description:
      'How long an object store call whose answer is small (stat, delete, a listing page) may take in all, and how long any transfer may go without a byte; past it the request is answered 503 SERVICE_UNAVAILABLE',
  } satisfies IntSetting,
  DEFAULT_REGION: {
    type: 'enum',
    values: REGION_CODES,
    default: 'us-east',
    secret: false,
    group: 'storage',
    description:
      "The region (of the specification's codes) that R2_* stores: where tenants' data lives unless their data residency names another",
  } satisfies EnumSetting<RegionCode>,
  REGION_STORES: {
    type: 'json',
    default: {} as Record<string, RegionStoreSetting>,
    parse: parseRegionStores,
    secret: true,
    group: 'storage',
    description:
      'More regions this deployment serves, each with its own S3-compatible store: JSON object of region code to {"endpoint","bucket","accessKeyId","secretAccessKey","region"?,"publicEndpoint"?}; tenants requiring data residency in a region keep their data only there',
  } satisfies JsonSetting<Record<string, RegionStoreSetting>>,
  ENCRYPTION_MASTER_KEY: {
    type: 'key32',
    default: '',
    secret: true,
    group: 'security',
    requiredInProduction: true,
    description:
      '32 random bytes, base64 (openssl rand -base64 32); encrypts every stored secret. Losing it loses them',
  } satisfies StringSetting,
  LICENSE_KEY: {
    type: 'string',
    default: '',
    secret: true,
    group: 'security',
    description: 'License key issued by the vendor',
  } satisfies StringSetting,
  ACCESS_TOKEN_TTL_SECONDS: {
    type: 'int',
    min: 60,
    max: 86_400,
    default: 900,
    secret: false,
    group: 'security',
    description: 'Lifetime of a JWT access token; clients exchange their session for a new one when it ends',
  } satisfies IntSetting,
  SESSION_TTL_HOURS: {
    type: 'int',
    min: 1,
    max: 8760,
    default: 168,
    secret: false,
    group: 'security',
    description: 'Lifetime of a sign-in session (its refresh token); the user signs in again after it',
  } satisfies IntSetting,
  OIDC_PROVIDERS: {
    type: 'json',
    default: [] as OidcProviderSetting[],
    parse: parseOidcProviders,
    secret: true,
    group: 'security',
    description:
      'OpenID Connect sign-in: JSON array of {"id","name","issuer","clientId","clientSecret","scopes"?,"tenantId"?,"defaultRole"?,"allowHttp"?,"tokenAuthMethod"?}; register PUBLIC_URL/oauth/{id}/callback at the identity provider; a private issuer must be inside OUTBOUND_ALLOWED_NETWORKS',
  } satisfies JsonSetting<OidcProviderSetting[]>,
  TRUSTED_PROXIES: {
    type: 'cidrs',
    default: [],
    secret: false,
    group: 'network',
    description: 'Comma-separated CIDRs of reverse proxies whose X-Forwarded-For is believed (empty: none)',
  } satisfies CidrsSetting,
  AIR_GAPPED: {
    type: 'bool',
    default: false,
    secret: false,
    group: 'network',
    description: 'No outside network: features that need external APIs (web search, integrations) are off',
  } satisfies BoolSetting,
  OUTBOUND_ALLOWED_NETWORKS: {
    type: 'cidrs',
    default: [],
    secret: false,
    group: 'network',
    description: 'Comma-separated private CIDRs that webhooks, BYOS checks and self-hosted LLMs may reach',
  } satisfies CidrsSetting,
  OUTBOUND_ALLOWED_DOMAINS: {
    type: 'domains',
    default: [],
    secret: false,
    group: 'network',
    description:
      'Air-gapped only: comma-separated DNS domains (e.g. corp.example,svc.cluster.local) whose names webhooks, identity providers and self-hosted LLMs may use; any other name is refused without a DNS query, and every address must still be inside OUTBOUND_ALLOWED_NETWORKS',
  } satisfies DomainsSetting,
  AGENT_RUNS_PER_REPLICA: {
    type: 'int',
    min: 1,
    max: 1000,
    default: 64,
    secret: false,
    group: 'server',
    description:
      'Agent runs one server process executes at once (each mostly waits on the model); more wait in the queue, fairly shared between tenants',
  } satisfies IntSetting,
  WEB_SEARCH_URL: {
    type: 'url',
    protocols: ['http:', 'https:'],
    default: '',
    secret: false,
    group: 'network',
    description:
      "A SearXNG-compatible search endpoint (GET ?q=...&format=json) behind the agents' web_search tool; empty: agents have no web search. Ignored when AIR_GAPPED; a private address must be inside OUTBOUND_ALLOWED_NETWORKS",
  } satisfies StringSetting,
  WEBHOOK_ALLOW_HTTP: {
    type: 'bool',
    default: false,
    secret: false,
    group: 'network',
    description: 'Accept webhook URLs with http: as well as https: (receivers on an internal network without TLS)',
  } satisfies BoolSetting,
  WEBHOOK_DELIVERY_CONCURRENCY: {
    type: 'int',
    min: 0,
    max: 256,
    default: 8,
    secret: false,
    group: 'limits',
    description: 'Webhook deliveries each replica makes at once; 0 stops this replica delivering (others still do)',
  } satisfies IntSetting,
  RATE_LIMIT_MAX: {
    type: 'int',
    min: 1,
    max: 1_000_000,
    default: 1000,
    secret: false,
    group: 'limits',
    description: 'Requests each API key (or user, or IP when unauthenticated) may make per window',
  } satisfies IntSetting,
  RATE_LIMIT_WINDOW_SECONDS: {
    type: 'int',
    min: 1,
    max: 86_400,
    default: 60,
    secret: false,
    group: 'limits',
    description: 'Length of the rate-limit window in seconds',
  } satisfies IntSetting,
  MAX_REQUEST_BODY_BYTES: {
    type: 'int',
    min: 1024,
    max: 1024 * 1024 * 1024,
    default: 1024 * 1024,
    secret: false,
    group: 'limits',
    description: 'Largest JSON request body accepted; larger ones get 413',
  } satisfies IntSetting,
  RESTORE_MAX_UPLOAD_BYTES: {
    type: 'int',
    min: 1024 * 1024,
    max: 1024 * 1024 * 1024 * 1024,
    default: 10 * 1024 * 1024 * 1024,
    secret: false,
    group: 'limits',
    description:
      'Largest archive a tenant restore takes (bytes, as uploaded); larger uploads get 413 and leave nothing behind, and a zip export that would be larger fails (EXPORT_TOO_LARGE)',
  } satisfies IntSetting,
  RESTORE_MAX_UNPACKED_BYTES: {
    type: 'int',
    min: 1024 * 1024,
    max: 4 * 1024 * 1024 * 1024 * 1024,
    default: 40 * 1024 * 1024 * 1024,
    secret: false,
    group: 'limits',
    description:
      'Bytes a restored archive may unpack to in all; more is refused (ARCHIVE_TOO_LARGE) before anything is written, and a zip export of more fails (EXPORT_TOO_LARGE)',
  } satisfies IntSetting,
  RESTORE_MAX_ENTRIES: {
    type: 'int',
    min: 100,
    max: 10_000_000,
    default: 50_000,
    secret: false,
    group: 'limits',
    description:
      'Entries a restored archive may hold; more is refused (ARCHIVE_TOO_MANY_ENTRIES) before anything is written, and a zip export of more fails (EXPORT_TOO_LARGE)',
  } satisfies IntSetting,
} as const

export type SettingName = keyof typeof settings
// Enums as their union of values, the rest widened from their default's literal type.
type ValueOf<S> = S extends { values: readonly (infer V)[] }
  ? V
  : S extends { type: 'bool' }
    ? boolean
    : S extends { type: 'int' | 'number' }
      ? number
      : S extends { default: infer T }
        ? T extends readonly (infer E)[]
          ? E[]
          : T extends string
            ? string
            : T
        : never
export type Config = { readonly [K in SettingName]: ValueOf<(typeof settings)[K]> }

/** Parse one raw value; returns the value or a problem sentence (never echoing a secret). */
/** A URL's port as written: scheme://[user[:password]@]host:PORT, then the path or the end. */
const URL_PORT = /^[a-z][a-z\d+.-]*:\/\/(?:[^/?#]*@)?(?:\[[^\]/]*\]|[^/?#:@]*):(\d+)(?=[/?#]|$)/i

export function parseSetting(name: string, s: Setting, raw: string): { value: unknown } | { problem: string } {
  const shown = s.secret ? '' : ` (got "${raw}")`
  switch (s.type) {
    case 'string':
      return { value: raw }
    case 'int': {
      if (!/^-?\d+$/.test(raw)) return { problem: `${name} must be a whole number${shown}` }
      const n = Number(raw)
      if (n < s.min || n > s.max) return { problem: `${name} must be between ${s.min} and ${s.max}${shown}` }
      return { value: n }
    }
    case 'number': {
      if (!/^(?:\d+(?:\.\d*)?|\.\d+)$/.test(raw))
        return { problem: `${name} must be a decimal number such as 0.25${shown}` }
      const n = Number(raw)
      if (n < s.min || n > s.max) return { problem: `${name} must be between ${s.min} and ${s.max}${shown}` }
      return { value: n }
    }
    case 'bool': {
      const v = raw.toLowerCase()
      if (['true', '1', 'yes', 'on'].includes(v)) return { value: true }
      if (['false', '0', 'no', 'off'].includes(v)) return { value: false }
      return { problem: `${name} must be true or false${shown}` }
    }
    case 'enum':
      return s.values.includes(raw)
        ? { value: raw }
        : { problem: `${name} must be one of ${s.values.join(', ')}${shown}` }
    case 'url': {
      const problem = s.problemOf?.(raw)
      // Kept as written: its own reader knows its shape (a password may end with '/').
      if (s.problemOf && !problem) return { value: raw }
      let u: URL
      try {
        u = new URL(raw)
      } catch {
        // new URL refuses a port past 65535 as it refuses anything else: that one is said as it is.
        const port = URL_PORT.exec(raw)?.[1]
        if (port && Number(port) > 65535) return { problem: `${name} has port ${port}, out of range (1-65535)` }
        return { problem: problem ? `${name} ${problem}` : `${name} must be a URL${shown}` }
      }
      if (problem) return { problem: `${name} ${problem}` }
      if (s.protocols && !s.protocols.includes(u.protocol)) {
        return {
          problem: `${name} must start with ${s.protocols.map((p) => p + '//').join(' or ')}${s.secret ? ` (got ${u.protocol}//...)` : shown}`,
        }
      }
      return { value: raw.replace(/\/+$/, '') }
    }
    case 'key32': {
      const bytes = /^[A-Za-z0-9+/]+={0,2}$/.test(raw) ? Buffer.from(raw, 'base64') : Buffer.alloc(0)
      if (bytes.length !== 32)
        return { problem: `${name} must be 32 bytes in base64 (generate one with: openssl rand -base64 32)` }
      return { value: raw }
    }
    case 'json': {
      let decoded: unknown
      try {
        decoded = JSON.parse(raw)
      } catch (err) {
        // JSON.parse quotes the text it choked on: only the position is repeated.
        const at = /position (\d+)/.exec(String((err as Error).message))?.[1]
        return { problem: `${name} is not valid JSON${at ? ` (at position ${at})` : ''}` }
      }
      const r = s.parse(decoded)
      return 'problems' in r ? { problem: `${name}: ${r.problems.join('; ')}` } : { value: r.value }
    }
    case 'cidrs': {
      const list = raw
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean)
      const bad = list.filter((c) => !isCidr(c))
      if (bad.length)
        return { problem: `${name} has entries that are not CIDRs: ${bad.join(', ')} (write e.g. 10.0.0.0/8,fd00::/8)` }
      return { value: list }
    }
    case 'domains': {
      const list = domainList(raw.split(','))
      const bad = list.filter((d) => !isDomain(d))
      if (bad.length)
        return {
          problem: `${name} has entries that are not DNS domains: ${bad.join(', ')} (write e.g. corp.example,svc.cluster.local)`,
        }
      return { value: [...new Set(list)] }
    }
  }
}

/** Domains as compared with names: lowercase, without the dots around them, no empty entries. */
export const domainList = (entries: readonly string[]): string[] =>
  entries
    .map((d) =>
      d
        .trim()
        .toLowerCase()
        .replace(/^\.+|\.+$/g, ''),
    )
    .filter(Boolean)

/**
 * A DNS name as written in a setting: dot-separated labels of letters, digits, hyphens (and underscores, as in service
 * records).
 */
export function isDomain(text: string): boolean {
  return (
    text.length <= 253 && text.split('.').every((label) => /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/i.test(label))
  )
}

export function isCidr(text: string): boolean {
  const [addr, bits, ...rest] = text.split('/')
  if (rest.length || addr === undefined || bits === undefined || !/^\d{1,3}$/.test(bits)) return false
  const family = isIP(addr)
  return family !== 0 && Number(bits) <= (family === 4 ? 32 : 128)
}

/** Every problem at once, so an operator fixes the environment in one pass. */
/**
 * Only the settings named, each parsed as parseConfig would, with none of production's other
 * requirements: for a command that needs no more (the admin CLI's `license`).
 */
export function parseSettings<K extends SettingName>(
  env: Record<string, string | undefined>,
  names: readonly K[],
): { config: Pick<Config, K>; problems: string[] } {
  const problems: string[] = []
  const out: Record<string, unknown> = {}
  for (const name of names) {
    const s = settings[name] as Setting
    const raw = env[name]?.trim()
    if (raw === undefined || raw === '') {
      out[name] = s.default
      continue
    }
    const r = parseSetting(name, s, raw)
    if ('problem' in r) problems.push(r.problem)
    else out[name] = r.value
  }
  return { config: out as Pick<Config, K>, problems }
}

export function parseConfig(env: Record<string, string | undefined>): { config: Config; problems: string[] } {
  const parsed = parseSettings(env, Object.keys(settings) as SettingName[])
  const { problems } = parsed
  const out = parsed.config as Record<string, unknown>
  if (out.NODE_ENV === 'production') {
    for (const [name, s] of Object.entries(settings) as [SettingName, Setting][]) {
      if (s.requiredInProduction && !env[name]?.trim())
        problems.push(`${name} is required when NODE_ENV=production: ${s.description}`)
    }
  }
  if (out.R2_ENDPOINT && !(out.R2_ACCESS_KEY_ID && out.R2_SECRET_ACCESS_KEY)) {
    problems.push('R2_ACCESS_KEY_ID and R2_SECRET_ACCESS_KEY are required when R2_ENDPOINT is set')
  }
  if (
    out.DEFAULT_REGION &&
    (out.REGION_STORES as Record<string, unknown> | undefined)?.[out.DEFAULT_REGION as string]
  ) {
    problems.push(
      `REGION_STORES must not name DEFAULT_REGION (${out.DEFAULT_REGION as string}): its store is R2_ENDPOINT`,
    )
  }
  if (out.METRICS_PORT && out.METRICS_PORT === out.PORT)
    problems.push('METRICS_PORT must differ from PORT (or be 0 to serve /metrics on PORT)')
  const tracing = out.TRACING_OTLP_ENDPOINT ? new URL(out.TRACING_OTLP_ENDPOINT as string) : null
  // Not a secret setting (shown as it is in the env file, the chart's values, the support bundle): no credentials in it.
  if (tracing && (tracing.username || tracing.password))
    problems.push(
      'TRACING_OTLP_ENDPOINT must not carry a user or password: it is not a secret setting; protect the collector on the site network instead',
    )
  if (!out.PUBLIC_URL) out.PUBLIC_URL = `http://localhost:${out.PORT}`
  return { config: out as Config, problems }
}

/** The store of one region of REGION_STORES. */
export interface RegionStoreSetting {
  endpoint: string
  bucket: string
  accessKeyId: string
  secretAccessKey: string
  /** The region name its signatures use (default us-east-1). */
  region: string
  /** Where users reach it, for download links (default endpoint). */
  publicEndpoint: string
}

const REGION_STORE_FIELDS = ['endpoint', 'bucket', 'accessKeyId', 'secretAccessKey', 'region', 'publicEndpoint']

/** Checks REGION_STORES region by region; problems name the region and field, never a value. */
/** REGION_STORES as written (JSON text), read with the server's own parser; none when unset. */
export function readRegionStores(
  raw: string | undefined,
): { value: Record<string, RegionStoreSetting> } | { problems: string[] } {
  if (!raw?.trim()) return { value: {} }
  try {
    return parseRegionStores(JSON.parse(raw))
  } catch {
    return { problems: ['is not JSON'] }
  }
}

export function parseRegionStores(
  value: unknown,
): { value: Record<string, RegionStoreSetting> } | { problems: string[] } {
  if (!value || typeof value !== 'object' || Array.isArray(value))
    return { problems: ['must be a JSON object of region code to store ({} for none)'] }
  const problems: string[] = []
  const out: Record<string, RegionStoreSetting> = {}
  for (const [code, entry] of Object.entries(value as Record<string, unknown>)) {
    const mistakes: string[] = []
    if (!isRegionCode(code)) mistakes.push(`is not a region code (${REGION_CODES.join(', ')})`)
    if (!entry || typeof entry !== 'object' || Array.isArray(entry)) {
      problems.push(`region ${code}: must be an object`)
      continue
    }
    const e = entry as Record<string, unknown>
    const unknown = Object.keys(e).filter((k) => !REGION_STORE_FIELDS.includes(k))
    if (unknown.length) mistakes.push(`unknown fields ${unknown.join(', ')} (known: ${REGION_STORE_FIELDS.join(', ')})`)
    const text = (k: string) => (typeof e[k] === 'string' ? (e[k] as string).trim() : '')
    for (const k of ['endpoint', 'publicEndpoint']) {
      if (k === 'publicEndpoint' && !text(k)) continue
      try {
        const u = new URL(text(k))
        if (u.protocol !== 'http:' && u.protocol !== 'https:') mistakes.push(`${k} must be an http:// or https:// URL`)
      } catch {
        mistakes.push(`${k} must be a URL`)
      }
    }
    if (!text('bucket')) mistakes.push('bucket is required')
    if (!text('accessKeyId') || !text('secretAccessKey')) mistakes.push('accessKeyId and secretAccessKey are required')
    if (mistakes.length) problems.push(`region ${code}: ${mistakes.join('; ')}`)
    out[code] = {
      endpoint: text('endpoint'),
      bucket: text('bucket'),
      accessKeyId: text('accessKeyId'),
      secretAccessKey: typeof e.secretAccessKey === 'string' ? e.secretAccessKey : '',
      region: text('region') || 'us-east-1',
      publicEndpoint: text('publicEndpoint'),
    }
  }
  return problems.length ? { problems } : { value: out }
}

/** One identity provider of OIDC_PROVIDERS, with its defaults filled in. */
export interface OidcProviderSetting {
  /** URL-safe slug: the {provider} of /oauth/{provider}/... */
  id: string
  /** Shown on the sign-in page. */
  name: string
  /** Issuer identifier; discovery reads {issuer}/.well-known/openid-configuration. */
  issuer: string
  clientId: string
  clientSecret: string
  /** Space-separated; must include openid. */
  scopes: string
  /** When set, first-time users are created in this tenant, and only its users sign in here. */
  tenantId: string | null
  defaultRole: 'admin' | 'member' | 'viewer'
  /** Permits an http:// issuer (internal identity providers, tests). */
  allowHttp: boolean
  tokenAuthMethod: 'client_secret_basic' | 'client_secret_post'
}

const PROVIDER_FIELDS = [
  'id',
  'name',
  'issuer',
  'clientId',
  'clientSecret',
  'scopes',
  'tenantId',
  'defaultRole',
  'allowHttp',
  'tokenAuthMethod',
]
const PROVIDER_ID_RE = /^[a-z0-9][a-z0-9_-]{0,62}$/
const JIT_ROLES = ['admin', 'member', 'viewer'] as const // never owner: an identity provider does not mint owners
const TOKEN_AUTH_METHODS = ['client_secret_basic', 'client_secret_post'] as const

/**
 * Checks OIDC_PROVIDERS entry by entry; problems name the entry and field, never a value (the secret is among them).
 */
export function parseOidcProviders(value: unknown): { value: OidcProviderSetting[] } | { problems: string[] } {
  if (!Array.isArray(value)) return { problems: ['must be a JSON array of providers ([] for none)'] }
  const problems: string[] = []
  const out: OidcProviderSetting[] = []
  const seen = new Set<string>()
  value.forEach((entry: unknown, i) => {
    const e = (entry ?? {}) as Record<string, unknown>
    const label = `provider ${i + 1}${typeof e.id === 'string' && PROVIDER_ID_RE.test(e.id) ? ` ("${e.id}")` : ''}`
    const mistakes: string[] = []
    const bad = (msg: string) => mistakes.push(msg)
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry))
      return void problems.push(`${label}: must be an object`)
    const unknown = Object.keys(e).filter((k) => !PROVIDER_FIELDS.includes(k))
    if (unknown.length) bad(`unknown fields ${unknown.join(', ')} (known: ${PROVIDER_FIELDS.join(', ')})`)
    const text = (k: string) => (typeof e[k] === 'string' ? (e[k] as string).trim() : '')

    const id = text('id')
    if (!PROVIDER_ID_RE.test(id)) bad('id must be a slug of lowercase letters, digits, - and _ (at most 63 characters)')
    else if (seen.has(id)) bad('id is used by an earlier provider')
    seen.add(id)
    if (!text('name')) bad('name is required')
    if (e.allowHttp !== undefined && typeof e.allowHttp !== 'boolean') bad('allowHttp must be true or false')
    const allowHttp = e.allowHttp === true
    let issuer: URL | null = null
    try {
      issuer = new URL(text('issuer'))
    } catch {
      bad('issuer must be a URL')
    }
    if (issuer) {
      if (issuer.protocol !== 'https:' && !(allowHttp && issuer.protocol === 'http:'))
        bad(
          `issuer must be an https:// URL${issuer.protocol === 'http:' ? ' (set allowHttp: true for an http:// issuer)' : ''}`,
        )
      if (issuer.search || issuer.hash || issuer.username || issuer.password)
        bad('issuer must not have a query, fragment or credentials')
    }
    if (!text('clientId')) bad('clientId is required')
    const clientSecret = typeof e.clientSecret === 'string' ? e.clientSecret : '' // used exactly as given
    if (!clientSecret) bad('clientSecret is required')
    const scopes =
      e.scopes === undefined ? 'openid email profile' : text('scopes').split(/\s+/).filter(Boolean).join(' ')
    if (!scopes.split(' ').includes('openid')) bad('scopes must be a space-separated string that includes openid')
    const tenantId = e.tenantId === undefined || e.tenantId === null ? null : text('tenantId')
    if (tenantId !== null && !isUuid(tenantId)) bad('tenantId must be a tenant id (UUID)')
    const defaultRole = e.defaultRole === undefined ? 'member' : e.defaultRole
    if (!(JIT_ROLES as readonly unknown[]).includes(defaultRole))
      bad(`defaultRole must be one of ${JIT_ROLES.join(', ')}`)
    else if (e.defaultRole !== undefined && tenantId === null)
      bad('defaultRole needs tenantId (the tenant new users are created in)')
    const tokenAuthMethod = e.tokenAuthMethod === undefined ? 'client_secret_basic' : e.tokenAuthMethod
    if (!(TOKEN_AUTH_METHODS as readonly unknown[]).includes(tokenAuthMethod))
      bad(`tokenAuthMethod must be one of ${TOKEN_AUTH_METHODS.join(', ')}`)

    if (mistakes.length) problems.push(`${label}: ${mistakes.join('; ')}`)
    out.push({
      id,
      name: text('name'),
      issuer: text('issuer'),
      clientId: text('clientId'),
      clientSecret,
      scopes,
      tenantId: tenantId?.toLowerCase() ?? null,
      defaultRole: defaultRole as OidcProviderSetting['defaultRole'],
      allowHttp,
      tokenAuthMethod: tokenAuthMethod as OidcProviderSetting['tokenAuthMethod'],
    })
  })
  return problems.length ? { problems } : { value: out }
}
