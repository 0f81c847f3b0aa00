// The Compose bundle's own variables in .env (compose/.env.example): the passwords of the bundled
// PostgreSQL, Redis and MinIO the site runs, made once and kept (the services keep the first
// password they start with, so a new one would lock Atrium out), and the service settings that
// point Atrium at them unless the answers name external services.
import { randomBytes } from 'node:crypto'
import { chownSync, existsSync, mkdirSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { VERSION } from '../../common/version.js'
import { isRedisList, redisHosts, redisListOf } from '../../common/redis-topology.js'
import {
  BUNDLED_PROFILES,
  COMPOSE_SERVICE_SETTINGS,
  COMPOSE_VARIABLES,
  PROFILE_SETTINGS,
} from '../../config/compose-variables.js'
import { isSecret } from '../../config/secrets.js'
import type { Answers } from './answers.js'

/**
 * The passwords made for the bundled services: the bundle's secret variables without an example.
 * A secret with an example (MINIO_ROOT_USER=atrium) starts from it; one without has no value
 * anybody could know, so the installer must make it.
 */
export const BUNDLE_SECRETS = Object.entries(COMPOSE_VARIABLES)
  .filter(([name, v]) => isSecret(name) && !v.example)
  .map(([name]) => name)

type Profile = (typeof BUNDLED_PROFILES)[number]

/** The bundled service (its profile) each generated password belongs to: made only for a site that runs it. */
export const SECRET_PROFILES: Readonly<Record<string, Profile>> = {
  POSTGRES_PASSWORD: 'postgres',
  REDIS_PASSWORD: 'redis',
  MINIO_ROOT_PASSWORD: 's3',
  MINIO_ATRIUM_PASSWORD: 's3',
}

/** The folder under the data path each bundled service keeps its data in; Atrium's own `data` is always used. */
export const PROFILE_FOLDERS: Readonly<Record<Profile, string>> = { postgres: 'postgres', redis: 'redis', s3: 'minio' }

/** The profiles a written COMPOSE_PROFILES names; every bundled one when it is not written (a .env from before profiles). */
export function profilesInUse(values: Readonly<Record<string, string | undefined>>): Profile[] {
  const written = values.COMPOSE_PROFILES
  if (written === undefined) return [...BUNDLED_PROFILES]
  const named = written.split(',').map((p) => p.trim())
  return BUNDLED_PROFILES.filter((p) => named.includes(p))
}

/**
 * The folders under the data path this site needs a volume for: `data` (the server's), and each bundled service's it
 * runs (COMPOSE_PROFILES). A site with its own PostgreSQL, Redis and S3 needs `data` alone. The deploy creates (and
 * checks) the volumes of these folders only.
 */
export function volumesInUse(values: Readonly<Record<string, string | undefined>>): string[] {
  return ['data', ...profilesInUse(values).map((p) => PROFILE_FOLDERS[p])]
}

/** Bundled services' host names inside the Compose network: a setting pointing there is ours. */
const BUNDLED_HOSTS = new Set(['postgres', 'redis', 'minio'])

/**
 * A URL's host names, IPv6 without brackets: one, or a Redis Sentinel set's or Cluster's list; none
 * for no URL or one that does not parse.
 */
export function hostsOf(url: string | undefined): string[] {
  // A Redis list first: WHATWG URL would read 'a,b:6379' as one host.
  if (isRedisList(url)) {
    const list = redisListOf(url)
    return list ? redisHosts(list).map((h) => h.host) : []
  }
  return url && URL.canParse(url) ? [new URL(url).hostname.replace(/^\[(.*)\]$/, '$1')] : []
}

/** A URL's host name (its hosts, comma-separated, for a list); '' for no URL or one that does not parse. */
export const hostOf = (url: string | undefined): string => hostsOf(url).join(',')

/** A service setting that names no service, or one of the bundle's hosts, means the bundled service. */
export const usesBundled = (url: string | undefined): boolean =>
  !url || (!isRedisList(url) && BUNDLED_HOSTS.has(hostOf(url))) // the bundle's Redis is one server

const SERVICES = { DATABASE_URL: 'PostgreSQL', REDIS_URL: 'Redis', R2_ENDPOINT: 'S3' } as const

/** Which PostgreSQL, Redis and S3 the configuration uses: the bundled ones, or the site's own (by host). */
export function servicesInUse(values: Partial<Record<string, string>>): string {
  return Object.entries(SERVICES)
    .map(([setting, name]) => {
      const url = values[setting]
      return `${name} ${usesBundled(url) ? 'bundled' : `yours (${hostOf(url)})`}`
    })
    .join(', ')
}

export interface BundleValues {
  /** Compose variables (not Atrium settings) for .env. */
  variables: Record<string, string>
  /** Atrium settings that point at the bundled services. */
  settings: Record<string, string>
  /** Variables made by this run. */
  generated: string[]
}

/**
 * What .env needs for the bundled services. A service the answers name (an external PostgreSQL,
 * say) is used instead of the bundled one; one already pointing at a bundled host is refreshed.
 */
export function composeBundleValues(
  answers: Answers,
  resolved: Record<string, string>,
  existing: Record<string, string> | null,
): BundleValues {
  const variables: Record<string, string> = {}
  const generated: string[] = []
  const bundled = (setting: string) => {
    // Given in the answers, even empty, it decides (empty: the bundled one, also after an external
    // one was written before); not given, the configuration already written does.
    const given = setting in resolved ? resolved[setting] : existing?.[setting]
    return usesBundled(given)
  }
  // Only the bundled services Atrium uses start: an external one's container would sit idle.
  const profiles = BUNDLED_PROFILES.filter((p) => bundled(PROFILE_SETTINGS[p]))
  // Every written variable is kept, a password of a service the site no longer runs too: its volume
  // still holds data made with it, should the site come back to it.
  for (const name of Object.keys(COMPOSE_VARIABLES)) if (existing?.[name]) variables[name] = existing[name]!
  for (const name of BUNDLE_SECRETS) {
    if (variables[name] || !profiles.includes(SECRET_PROFILES[name]!)) continue
    variables[name] = randomBytes(24).toString('hex')
    generated.push(name)
  }
  variables.MINIO_ROOT_USER ||= 'atrium'
  // The answers name the site (context.ts refuses a rename of one already written).
  variables.ATRIUM_SITE = answers.site
  // Absolute: Compose would read a relative path against the compose file's folder.
  variables.ATRIUM_DATA_PATH = resolve(answers.dataPath)
  variables.ATRIUM_S3_PORT ||= COMPOSE_VARIABLES.ATRIUM_S3_PORT!.example
  variables.ATRIUM_METRICS_PORT ||= COMPOSE_VARIABLES.ATRIUM_METRICS_PORT!.example
  // The answer wins; without one, what is written stays (an upgrade publishes where the site did).
  variables.ATRIUM_BIND_ADDRESS =
    answers.bindAddress || variables.ATRIUM_BIND_ADDRESS || COMPOSE_VARIABLES.ATRIUM_BIND_ADDRESS!.example
  const fill = (template: string) => template.replace(/\$\{(\w+)\}/g, (_, v: string) => variables[v] ?? '')
  const settings: Record<string, string> = {}
  variables.COMPOSE_PROFILES = profiles.join(',')
  if (bundled('DATABASE_URL')) settings.DATABASE_URL = fill(COMPOSE_SERVICE_SETTINGS.DATABASE_URL)
  if (bundled('REDIS_URL')) settings.REDIS_URL = fill(COMPOSE_SERVICE_SETTINGS.REDIS_URL)
  if (bundled('R2_ENDPOINT')) {
    settings.R2_ENDPOINT = COMPOSE_SERVICE_SETTINGS.R2_ENDPOINT
    settings.R2_ACCESS_KEY_ID = fill(COMPOSE_SERVICE_SETTINGS.R2_ACCESS_KEY_ID)
    settings.R2_SECRET_ACCESS_KEY = fill(COMPOSE_SERVICE_SETTINGS.R2_SECRET_ACCESS_KEY)
    // Download links must name an address users reach: the PUBLIC_URL's host, MinIO's published
    // port, and MinIO's own scheme (the bundled MinIO speaks plain HTTP, whatever is in front of
    // Atrium). A PUBLIC_URL that is no URL is left to the configuration's check, which names it.
    const publicUrl = resolved.PUBLIC_URL || existing?.PUBLIC_URL
    if (!resolved.R2_PUBLIC_ENDPOINT && publicUrl && URL.canParse(publicUrl)) {
      settings.R2_PUBLIC_ENDPOINT = `http://${new URL(publicUrl).hostname}:${variables.ATRIUM_S3_PORT}`
    }
  }
  return { variables, settings, generated }
}

/** The .env section with the bundle's variables, in compose/.env.example's order. */
export function renderBundleSection(variables: Record<string, string>): string {
  const lines = ['', '# --- the Compose bundle (compose/.env.example) ---']
  for (const [name, v] of Object.entries(COMPOSE_VARIABLES)) {
    const value = variables[name]
    // Only variables this site sets are here, and only COMPOSE_PROFILES may be empty: written so, it
    // says the site runs none of the bundled services.
    if (value === undefined) continue
    lines.push(`# ${v.description}`, `${name}=${value}`)
  }
  return lines.join('\n') + '\n'
}

/** The folders the Compose volumes are bound to, made before `docker volume create` needs them. */
export function prepareDataFolders(dataPath: string, folders: readonly string[]): string[] {
  const made: string[] = []
  for (const folder of folders) {
    const path = join(resolve(dataPath), folder)
    mkdirSync(path, { recursive: true, mode: 0o700 })
    made.push(path)
  }
  // The server runs as uid 10001 (Dockerfile); as root we hand it its own folder.
  if (process.getuid?.() === 0 && folders.includes('data')) chownSync(join(resolve(dataPath), 'data'), 10001, 10001)
  return made
}

const CHART_DIR = fileURLToPath(new URL('../../charts/atrium', import.meta.url))
/** The air-gap kit carries the chart packaged (`helm package`), beside where its folder would be. */
const PACKAGED_CHART = fileURLToPath(new URL(`../../charts/atrium-${VERSION}.tgz`, import.meta.url))

/** Where the bundles sit in this package (compose/ and charts/atrium; in the kit, the packaged chart). */
export const BUNDLES = {
  compose: fileURLToPath(new URL('../../compose', import.meta.url)),
  // In the kit the packaged chart is the one its SHA256SUMS lists: a folder beside it is not looked at.
  chart: existsSync(PACKAGED_CHART) ? PACKAGED_CHART : CHART_DIR,
}

/**
 * `docker compose` with the site's project (its name: every later command, support bundle, backup, upgrade and
 * uninstall, names it), the written .env and the bundle's files (plus the air-gapped variant).
 */
export function composeArgs(
  answers: Pick<Answers, 'mode' | 'site'>,
  envFile: string,
  o: { bundles?: Pick<typeof BUNDLES, 'compose'> } = {},
): string[] {
  const dir = (o.bundles ?? BUNDLES).compose
  const args = [
    'compose',
    '--project-name',
    answers.site,
    '--env-file',
    resolve(envFile),
    '-f',
    join(dir, 'compose.yaml'),
  ]
  if (answers.mode === 'air-gapped') args.push('-f', join(dir, 'compose.airgap.yaml'))
  return args
}
