// The configuration for the helm target: a values file with the ordinary settings, and a
// Kubernetes Secret manifest with the secret ones, which the chart reads through `existingSecret`
// (so the secrets never sit in Helm's release history). The Secret carries
// `helm.sh/resource-policy: keep` in spirit of the chart's own: deleting a release must not lose
// ENCRYPTION_MASTER_KEY.
import { existsSync, readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { parse, stringify } from 'yaml'
import { CHART_FIXED, CONTAINER_FIXED, helmValue } from '../../config/bundles.js'
import { readRegionStores, settings, type Setting, type SettingName } from '../../config/schema.js'
import { isSecret } from '../../config/secrets.js'
import { isRedisList, redisHosts, redisListOf } from '../../common/redis-topology.js'
import type { Answers } from './answers.js'
import type { EnvValues } from './config-file.js'

export interface HelmFiles {
  values: string
  secret: string
}

/**
 * Named for who writes it: never like the chart's own objects (its ConfigMap is <fullname>-config,
 * its Secret <fullname>-secrets), so `kubectl get` shows which is which. Installations written
 * by 0.1.0 used <release>-config; a re-run writes this one, and the old Secret stays (kept) until
 * removed by hand.
 */
export const secretName = (release: string) => `${release}-installer-secrets`

/**
 * The chart's values: typed as its values.schema.json wants them (numbers, booleans), without the
 * settings the chart fixes itself (port, data folder, production mode), AIR_GAPPED as `airGapped`.
 */
export function renderHelmFiles(
  values: EnvValues,
  opts: { release: string; namespace: string; servicesCidrs?: readonly string[] },
): HelmFiles {
  const env: Record<string, string | number | boolean> = {}
  const stringData: Record<string, string> = {}
  for (const name of Object.keys(settings) as SettingName[]) {
    const v = values[name]
    if (v === undefined || v === '' || name in CONTAINER_FIXED || name in CHART_FIXED || name === 'AIR_GAPPED') continue
    if (isSecret(name)) stringData[name] = v
    else env[name] = helmValue(settings[name] as Setting, v)
  }
  const header = '# Written by the Atrium installer; re-run it to change these.\n'
  const airGapped = values.AIR_GAPPED === 'true'
  // Air-gapped, the chart lets out only what it is told: the site's own services among it.
  const egress = airGapped
    ? serviceEgress(values, { namespace: opts.namespace, servicesCidrs: opts.servicesCidrs })
    : null
  return {
    values:
      header +
      stringify({
        airGapped,
        existingSecret: secretName(opts.release),
        env,
        ...(egress && {
          networkPolicy: { servicesCidrs: egress.servicesCidrs, clusterNamespaces: egress.clusterNamespaces },
        }),
      }),
    secret:
      header +
      stringify({
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: {
          name: secretName(opts.release),
          namespace: opts.namespace,
          labels: { 'app.kubernetes.io/name': 'atrium', 'app.kubernetes.io/instance': opts.release },
          annotations: { 'helm.sh/resource-policy': 'keep' },
        },
        type: 'Opaque',
        stringData,
      }),
  }
}

/** The settings written earlier (values env plus Secret stringData), or null on a first run. */
export function readHelmFiles(valuesPath: string, secretPath: string): Record<string, string> | null {
  if (!existsSync(valuesPath) && !existsSync(secretPath)) return null
  const out: Record<string, string> = {}
  const read = (path: string, pick: (doc: Record<string, unknown>) => unknown) => {
    if (!existsSync(path)) return
    const doc = parse(readFileSync(path, 'utf8')) as Record<string, unknown> | null
    const map = doc ? pick(doc) : null
    if (map && typeof map === 'object')
      for (const [k, v] of Object.entries(map))
        if (['string', 'number', 'boolean'].includes(typeof v)) out[k] = String(v)
  }
  read(valuesPath, (d) => ({
    ...(d.env as object),
    ...(d.airGapped === true ? { AIR_GAPPED: 'true' } : {}),
    NODE_ENV: CONTAINER_FIXED.NODE_ENV,
  }))
  read(secretPath, (d) => d.stringData)
  return out
}

/** A service the server connects to, as the settings name it (its host, never its credentials). */
export interface ServiceAddress {
  /** The setting that names it (REGION_STORES.<code> for a region's store). */
  setting: string
  host: string
  port: number
}

const DEFAULT_PORTS: Record<string, number> = {
  'postgres:': 5432,
  'postgresql:': 5432,
  'redis:': 6379,
  'rediss:': 6379,
  'http:': 80,
  'https:': 443,
}

/**
 * Where a setting's service is. A Redis Sentinel set or Cluster is every host its URL lists: its
 * data nodes beyond them (the master a Sentinel names, the nodes a cluster announces) are reached
 * through servicesCidrs, which the docs say (docs/installer.md).
 */
function addressesOf(setting: string, url: string | undefined): ServiceAddress[] {
  if (isRedisList(url)) {
    const list = redisListOf(url) // null: the configuration's own check says what is wrong with it
    return list ? redisHosts(list).map(({ host, port }) => ({ setting, host: host.toLowerCase(), port })) : []
  }
  const one = addressOf(setting, url)
  return one ? [one] : []
}

function addressOf(setting: string, url: string | undefined): ServiceAddress | null {
  if (!url) return null
  let u: URL
  try {
    u = new URL(url)
  } catch {
    return null // the configuration's own check names a setting that is no URL
  }
  // libpq's ?host= (node-postgres reads it too) wins over the authority; a socket path is no network.
  const query = u.protocol.startsWith('postgres') ? u.searchParams.get('host') : null
  const host = (query ?? u.hostname).replace(/^\[|\]$/g, '').toLowerCase()
  if (!host || host.startsWith('/')) return null
  const port = Number((query && u.searchParams.get('port')) || u.port) || DEFAULT_PORTS[u.protocol]
  return port ? { setting, host, port } : null
}

/** Every service the settings name: PostgreSQL, Redis, the object store and each region's store. */
export function serviceAddresses(values: Readonly<Record<string, string | undefined>>): ServiceAddress[] {
  const stores = readRegionStores(values.REGION_STORES)
  const regions = 'value' in stores ? Object.entries(stores.value) : []
  return [
    addressesOf('DATABASE_URL', values.DATABASE_URL),
    addressesOf('REDIS_URL', values.REDIS_URL),
    addressesOf('R2_ENDPOINT', values.R2_ENDPOINT),
    ...regions.map(([code, store]) => addressesOf(`REGION_STORES.${code}`, store.endpoint)),
  ].flat()
}

/**
 * Where a host is, as far as the answers can tell: an address literal is its own network; a name
 * without a dot, or NAME.NAMESPACE.svc[.cluster.local], is a service of the cluster (in that
 * namespace); any other name is outside, and its address cannot be derived here, since the
 * cluster's DNS may answer otherwise than this machine's.
 */
export function placeOf(host: string): { cidr: string } | { namespace: string | null } | 'outside' {
  const family = isIP(host)
  if (family) return { cidr: `${host}/${family === 4 ? 32 : 128}` }
  if (!host.includes('.')) return { namespace: null }
  const labels = host.replace(/\.cluster\.local$/, '').split('.')
  return labels.at(-1) === 'svc' ? { namespace: labels.at(-2)! } : 'outside'
}

export interface ServiceEgress {
  /** The services at address literals, and the admin's networks, each with the ports it serves. */
  servicesCidrs: { cidr: string; ports: number[] }[]
  /** Namespaces besides the release's whose services the settings name. */
  clusterNamespaces: string[]
  /** Services named by host names outside the cluster: only the admin's servicesCidrs can admit them. */
  byName: ServiceAddress[]
}

/**
 * The chart's egress for the site's services (networkPolicy.servicesCidrs and clusterNamespaces):
 * an address literal becomes its /32 (/128) with its ports; the admin's networks get the ports of
 * the services named by host name (of every service, when none is).
 */
export function serviceEgress(
  values: Readonly<Record<string, string | undefined>>,
  opts: { namespace: string; servicesCidrs?: readonly string[] },
): ServiceEgress {
  const services = serviceAddresses(values)
  const ports = new Map<string, number[]>()
  const namespaces: string[] = []
  const byName: ServiceAddress[] = []
  for (const s of services) {
    const place = placeOf(s.host)
    if (place === 'outside') byName.push(s)
    else if ('cidr' in place) ports.set(place.cidr, [...(ports.get(place.cidr) ?? []), s.port])
    else if (place.namespace && place.namespace !== opts.namespace) namespaces.push(place.namespace)
  }
  const named = (byName.length ? byName : services).map((s) => s.port)
  for (const cidr of opts.servicesCidrs ?? []) ports.set(cidr, [...(ports.get(cidr) ?? []), ...named])
  return {
    servicesCidrs: [...ports].map(([cidr, p]) => ({ cidr, ports: [...new Set(p)].sort((a, b) => a - b) })),
    clusterNamespaces: [...new Set(namespaces)].sort(),
    byName,
  }
}

/**
 * Air-gapped helm only: a service named by a host name outside the cluster, with no servicesCidrs
 * answer to admit it, would be blocked by the chart's egress policy. Bad input, naming the answer
 * and the ways out (never a credential: hosts only).
 */
export function servicesCidrsProblem(
  answers: Pick<Answers, 'target' | 'mode' | 'namespace' | 'servicesCidrs'>,
  values: Readonly<Record<string, string | undefined>>,
): string | null {
  if (answers.target !== 'helm' || answers.mode !== 'air-gapped' || answers.servicesCidrs.length) return null
  const { byName } = serviceEgress(values, answers)
  if (!byName.length) return null
  const named = byName.map((s) => `${s.setting} (${s.host})`).join(', ')
  return `servicesCidrs: ${named} ${byName.length === 1 ? 'is' : 'are'} named by host name, whose address the installer cannot derive (the cluster's DNS may answer otherwise), and the air-gapped NetworkPolicy lets out only the site's own services: add servicesCidrs to the answers, the networks they are on (e.g. servicesCidrs: [10.20.0.0/16]), or name them by IP address or as cluster services (NAME.NAMESPACE.svc)`
}
