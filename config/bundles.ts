// Renders the parts of the bundles that come from the one schema (config/schema.ts) and the image
// list (config/images.ts): the chart's values.schema.json, the `env`/`secrets` block of its
// values.yaml and its Chart.yaml; the server environment block and the images of compose.yaml
// (config/images.ts, the server's default tag this release) and compose's .env.example; and
// config/atrium.env.example. `npm run config:generate` rewrites them;
// `npm run config:generate -- --check` (and a test) fails when one has drifted.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { stringify } from 'yaml'
import { isMain } from '../common/is-main.js'
import { VERSION } from '../common/version.js'
import { COMPOSE_SERVICE_SETTINGS, COMPOSE_VARIABLES } from './compose-variables.js'
import { ENV_TEMPLATE_PATH, renderEnvTemplate } from './env-template.js'
import { IMAGES, imageNamed, REGISTRY_RE } from './images.js'
import { settings, type Setting, type SettingName } from './schema.js'
import { isSecret } from './secrets.js'

const root = (path: string) => fileURLToPath(new URL(`../${path}`, import.meta.url))

export const PATHS = {
  chartYaml: root('charts/atrium/Chart.yaml'),
  values: root('charts/atrium/values.yaml'),
  valuesSchema: root('charts/atrium/values.schema.json'),
  compose: root('compose/compose.yaml'),
  composeEnv: root('compose/.env.example'),
  envTemplate: ENV_TEMPLATE_PATH,
}

/**
 * Settings a container bundle fixes itself: the image listens on 8080 at every address, keeps its
 * data in the volume at /var/lib/atrium, runs in production mode, and leaves migrations to the
 * migration job. Neither values.yaml nor the container environment offers them.
 */
export const CONTAINER_FIXED: Readonly<Partial<Record<SettingName, string>>> = {
  NODE_ENV: 'production',
  PORT: '8080',
  HOST: '0.0.0.0',
  DATA_DIR: '/var/lib/atrium',
  MIGRATE_ON_START: 'false',
}

/**
 * And what both bundles fix besides: /metrics on a port of its own, never on the API's, which is
 * the one users (or a proxy, an Ingress) reach. The chart's Service names it `metrics` for a
 * ServiceMonitor, and the Ingress never routes to it; Compose publishes it on this machine's
 * loopback alone (ATRIUM_METRICS_PORT), since /metrics asks for no credentials.
 */
const METRICS_FIXED: Readonly<Partial<Record<SettingName, string>>> = { METRICS_PORT: '9090' }
export const CHART_FIXED = METRICS_FIXED
export const COMPOSE_FIXED = METRICS_FIXED

/**
 * Node's flags for the server wherever it runs compiled (`npm start`, the image, the benchmarks).
 * Semi-spaces of 8 MB rather than V8's 16: peak RSS under the benchmark's reads 181-188 MB (about
 * 195 with 16); 4 MB saved a few MB more but cost some 10% more CPU per request in garbage
 * collection (docs/performance.md).
 */
export const NODE_FLAGS: readonly string[] = ['--max-semi-space-size=8']

/**
 * And its environment there: glibc's malloc keeps an arena per thread by default (Node has a dozen:
 * libuv's pool, V8's collector), each holding freed memory; two arenas took the peak RSS under the
 * list load from 167 MB to 143 MB, at the same throughput (docs/performance.md).
 */
export const NODE_ENVIRONMENT: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: '2' }

/** The admin CLI in the image: the compiled server, `npm run build`'s dist/ copied to /app. */
export const CONTAINER_CLI: readonly string[] = ['node', '/app/server/cli.js']

/** The image's entrypoint: the admin CLI, whose `serve` (the default command) is the server, with its Node flags. */
export const CONTAINER_ENTRYPOINT: readonly string[] = ['node', ...NODE_FLAGS, '/app/server/cli.js']

const entries = () => Object.entries(settings) as [SettingName, Setting][]
export const bundleSettings = (secret: boolean) =>
  entries().filter(([name]) => isSecret(name) === secret && !(name in CONTAINER_FIXED))
/** The ordinary settings values.yaml offers under `env`. */
const chartEnvSettings = () => bundleSettings(false).filter(([name]) => !(name in CHART_FIXED))

/** The value a setting has in values.yaml: typed as the chart's schema expects. */
export function helmValue(s: Setting, raw: string): string | number | boolean {
  if (s.type === 'int' && /^-?\d+$/.test(raw)) return Number(raw)
  if (s.type === 'number' && raw !== '' && Number.isFinite(Number(raw))) return Number(raw)
  if (s.type === 'bool' && /^(true|false)$/i.test(raw)) return raw.toLowerCase() === 'true'
  return raw
}

/** A setting's default as an env file writes it. */
export function defaultText(s: Setting): string {
  return Array.isArray(s.default) ? s.default.join(',') : String(s.default)
}

function jsonSchemaOf(s: Setting): Record<string, unknown> {
  const description = s.description
  switch (s.type) {
    case 'int':
      return { type: 'integer', minimum: s.min, maximum: s.max, description }
    case 'number':
      return { type: 'number', minimum: s.min, maximum: s.max, description }
    case 'bool':
      return { type: 'boolean', description }
    case 'enum':
      return { type: 'string', enum: s.values, description }
    case 'url': {
      const schemes = (s.protocols ?? ['http:', 'https:']).map((p) => p.slice(0, -1))
      return {
        type: 'string',
        pattern: `^$|^(${schemes.map((p) => p.replace(/[+.]/g, '\\$&')).join('|')})://[^\\s]+$`,
        description: `${description} (empty or a ${schemes.join('|')}:// URL)`,
      }
    }
    case 'cidrs':
      return {
        type: 'string',
        pattern: '^[0-9A-Fa-f:./, ]*$',
        description: `${description} (e.g. 10.0.0.0/8,fd00::/8)`,
      }
    case 'domains':
      return { type: 'string', pattern: '^[0-9A-Za-z_.\\-, ]*$', description }
    case 'key32':
      return { type: 'string', pattern: '^$|^[A-Za-z0-9+/]{43}=$', description }
    default:
      return { type: 'string', description }
  }
}

const obj = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  type: 'object',
  additionalProperties: false,
  properties,
  ...extra,
})
const str = (description: string, extra: Record<string, unknown> = {}) => ({ type: 'string', description, ...extra })
const bool = (description: string) => ({ type: 'boolean', description })
const int = (description: string, minimum = 0) => ({ type: 'integer', minimum, description })
const anyMap = (description: string) => ({ type: 'object', description, additionalProperties: { type: 'string' } })
const quantity = {
  anyOf: [
    { type: 'string', pattern: '^[0-9.]+[a-zA-Z]*$' },
    { type: 'number', minimum: 0 },
  ],
}
const resources = obj({
  requests: obj({ cpu: quantity, memory: quantity, 'ephemeral-storage': quantity }),
  limits: obj({ cpu: quantity, memory: quantity, 'ephemeral-storage': quantity }),
})
const free = (description: string) => ({ type: 'object', description })
const CIDR = { type: 'string', pattern: '^[0-9a-fA-F.:]+/[0-9]{1,3}$' }
const PORT = { type: 'integer', minimum: 1, maximum: 65535 }
/** A key of a Kubernetes Secret. */
const SECRET_KEY = { pattern: '^[-._a-zA-Z0-9]+$' }
/** Kubernetes Container objects: named, with an image; the rest as Kubernetes takes it. */
const containerList = (description: string) => ({
  type: 'array',
  items: obj(
    { name: { type: 'string', minLength: 1 }, image: { type: 'string', minLength: 1 } },
    { required: ['name', 'image'], additionalProperties: true },
  ),
  description,
})
const list = (description: string) => ({ type: 'array', description })

/** values.schema.json: self-contained (no remote $ref), unknown keys refused so typos fail at install. */
export function renderValuesSchema(): string {
  const env = Object.fromEntries(chartEnvSettings().map(([n, s]) => [n, jsonSchemaOf(s)]))
  const secrets = Object.fromEntries(bundleSettings(true).map(([n, s]) => [n, jsonSchemaOf(s)]))
  const schema = {
    $schema: 'http://json-schema.org/draft-07/schema#',
    title: 'Atrium chart values',
    ...obj(
      {
        // Open: under an umbrella chart every subchart gets the parent's globals (global.storageClass...).
        global: obj(
          {
            imageRegistry: str(
              'Registry that replaces the registry of every image (air-gapped sites: the private registry)',
              { pattern: `^$|${REGISTRY_RE.source.replaceAll('\\/', '/')}` },
            ),
            imagePullSecrets: {
              type: 'array',
              items: { anyOf: [{ type: 'string' }, obj({ name: { type: 'string' } }, { required: ['name'] })] },
              description: 'Secrets with the credentials of the registry',
            },
          },
          { additionalProperties: true, description: 'Values shared with an umbrella chart; only these two are read' },
        ),
        nameOverride: str('Replaces the chart name in resource names'),
        fullnameOverride: str('Replaces the release-derived prefix of resource names'),
        image: obj(
          {
            registry: str('Registry of the server image'),
            repository: str('Repository of the server image', { minLength: 1 }),
            tag: str("Tag of the server image; empty means the chart's appVersion"),
            digest: str('Pins the image by digest (sha256:...); wins over the tag', {
              pattern: '^$|^sha256:[a-f0-9]{64}$',
            }),
            pullPolicy: { type: 'string', enum: ['Always', 'IfNotPresent', 'Never'] },
          },
          { required: ['repository'] },
        ),
        replicaCount: int('Server replicas when autoscaling is off', 1),
        airGapped: bool('No outside network: turns off web search and external integrations (AIR_GAPPED=true)'),
        existingSecret: str('Name of a Secret that holds the secret settings (GitOps); the chart then creates none'),
        existingSecretKeys: obj(
          Object.fromEntries(
            bundleSettings(true).map(([n]) => [n, str(`The key of existingSecret that holds ${n}`, SECRET_KEY)]),
          ),
          { description: "existingSecret's key for each setting whose key is not the setting's own name" },
        ),
        env: obj(env, { description: 'Atrium settings (config/schema.ts), except those the chart fixes' }),
        secrets: obj(secrets, {
          description:
            'Secret Atrium settings, used when existingSecret is empty; ENCRYPTION_MASTER_KEY is generated once when empty and kept across upgrades',
        }),
        service: obj({
          type: { type: 'string', enum: ['ClusterIP', 'NodePort', 'LoadBalancer'] },
          port: int('Service port', 1),
          annotations: anyMap('Service annotations'),
        }),
        ingress: obj({
          enabled: bool('Create an Ingress'),
          className: str('IngressClass name'),
          host: str('Host name users reach Atrium at', { pattern: '^$|^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$' }),
          annotations: anyMap('Ingress annotations'),
          tls: obj({ enabled: bool('Terminate TLS at the Ingress'), secretName: str('Secret with the certificate') }),
        }),
        resources,
        migrations: obj({
          resources,
          backoffLimit: int('Retries of the migration job'),
          activeDeadlineSeconds: int('Longest a migration may run', 60),
          ttlSecondsAfterFinished: int(
            'Seconds a finished migration Job (and its pod and log) is kept before Kubernetes deletes it',
            0,
          ),
        }),
        autoscaling: obj({
          enabled: bool('Create a HorizontalPodAutoscaler'),
          minReplicas: int('Fewest replicas', 1),
          maxReplicas: int('Most replicas', 1),
          targetCPUUtilizationPercentage: { type: 'integer', minimum: 1, maximum: 100 },
        }),
        podDisruptionBudget: obj({
          enabled: bool('Create a PodDisruptionBudget'),
          minAvailable: {
            anyOf: [
              { type: 'integer', minimum: 0 },
              { type: 'string', pattern: '^[0-9]+%$' },
            ],
          },
        }),
        networkPolicy: obj({
          enabled: bool('Create a NetworkPolicy'),
          ingressFrom: list(
            'Extra NetworkPolicyPeers allowed to reach the server (e.g. the ingress controller namespace)',
          ),
          ingressControllerNamespace: str(
            'Namespace of the ingress controller, allowed to reach the server when ingress.enabled (empty: none)',
          ),
          egress: list(
            'Egress rules; empty allows all unless airGapped (the database, Redis and S3 are outside the cluster by default)',
          ),
          dns: obj(
            {
              namespace: str('Namespace of the cluster DNS pods', { minLength: 1 }),
              podLabels: anyMap('Labels of the cluster DNS pods (empty: every pod of that namespace)'),
              ports: { type: 'array', items: PORT, minItems: 1, description: 'Ports the DNS pods listen on' },
            },
            { description: "airGapped: the cluster's DNS service, the only place DNS queries may go" },
          ),
          servicesCidrs: {
            type: 'array',
            items: {
              anyOf: [CIDR, obj({ cidr: CIDR, ports: { type: 'array', items: PORT } }, { required: ['cidr'] })],
            },
            description:
              'airGapped: the networks of PostgreSQL, Redis and S3 outside the cluster: a CIDR (every port) or {cidr, ports}',
          },
          clusterNamespaces: {
            type: 'array',
            items: { type: 'string', pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' },
            description:
              "airGapped: namespaces besides the release's whose pods the server may reach (in-cluster services)",
          },
        }),
        metrics: obj({
          serviceMonitor: obj({
            enabled: bool('Create a ServiceMonitor (Prometheus Operator) scraping the metrics port'),
            namespace: str('Namespace of the ServiceMonitor (empty: the release namespace)'),
            labels: anyMap('Labels the Prometheus selects ServiceMonitors by'),
            interval: str('Scrape interval', { pattern: '^$|^[0-9]+(ms|s|m|h)$' }),
            scrapeTimeout: str('Scrape timeout', { pattern: '^$|^[0-9]+(ms|s|m|h)$' }),
          }),
          prometheusRule: obj({
            enabled: bool("Create a PrometheusRule (Prometheus Operator) with Atrium's alert rules"),
            namespace: str('Namespace of the PrometheusRule (empty: the release namespace)'),
            labels: anyMap('Labels the Prometheus selects rules by'),
          }),
          allowFromNamespace: str(
            "Namespace of the Prometheus, allowed by the NetworkPolicy to reach the metrics port (pods of the release's namespace always are)",
          ),
          grafanaDashboards: obj({
            enabled: bool("Create a ConfigMap per Atrium Grafana dashboard, for the Grafana dashboards' sidecar"),
            namespace: str('Namespace of the ConfigMaps: where the sidecar looks (empty: the release namespace)', {
              pattern: '^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?$',
            }),
            labels: anyMap('Labels the sidecar selects ConfigMaps by (its default: grafana_dashboard: "1")'),
            annotations: anyMap('Annotations of the ConfigMaps, e.g. the folder (grafana_folder)'),
          }),
        }),
        serviceAccount: obj({
          create: bool('Create a ServiceAccount'),
          name: str('Name of the ServiceAccount to use'),
          annotations: anyMap('ServiceAccount annotations'),
        }),
        upgradeGuard: obj({
          enabled: bool('Refuse upgrades that skip a minor version or go back'),
          allowSkip: bool('Let this one upgrade skip versions (read the release notes first)'),
        }),
        tests: obj({ enabled: bool('Install the helm test that checks /readyz') }),
        podAnnotations: anyMap('Annotations on every pod (server, migration Job, helm test)'),
        podLabels: anyMap('Labels on every pod (server, migration Job, helm test)'),
        topologySpreadConstraints: {
          type: 'array',
          items: obj(
            {
              maxSkew: int('How uneven the spread may be', 1),
              topologyKey: str('The node label to spread over', { minLength: 1 }),
              whenUnsatisfiable: { type: 'string', enum: ['DoNotSchedule', 'ScheduleAnyway'] },
            },
            { required: ['maxSkew', 'topologyKey', 'whenUnsatisfiable'], additionalProperties: true },
          ),
          description: 'TopologySpreadConstraints of the server pods; without labelSelector: the server pods',
        },
        dnsPolicy: {
          type: 'string',
          enum: ['', 'ClusterFirst', 'ClusterFirstWithHostNet', 'Default', 'None'],
          description: 'DNS policy of every pod (empty: the cluster default)',
        },
        dnsConfig: obj(
          {
            nameservers: { type: 'array', items: { type: 'string' } },
            searches: { type: 'array', items: { type: 'string' } },
            options: {
              type: 'array',
              items: obj({ name: { type: 'string' }, value: { type: 'string' } }, { required: ['name'] }),
            },
          },
          { description: 'DNS configuration of every pod (Kubernetes PodDNSConfig)' },
        ),
        initContainers: containerList("More init containers of the server pod, before the chart's own"),
        sidecars: containerList('More containers of the server pod, beside the server'),
        nodeSelector: anyMap('Node selector of every pod'),
        tolerations: list('Tolerations of every pod'),
        affinity: free('Affinity of the server pods'),
        priorityClassName: str('PriorityClass of the server pods'),
        terminationGracePeriodSeconds: int('Seconds a pod gets to drain; keep above SHUTDOWN_TIMEOUT_SECONDS', 1),
        // Names as in Bitnami's charts, so admins find them.
        commonLabels: anyMap('Labels added to every object the chart makes, and to its pods'),
        commonAnnotations: anyMap('Annotations added to every object the chart makes'),
        podSecurityContext: free(
          'Security context of every Atrium pod (OpenShift: set runAsUser, runAsGroup and fsGroup to null and the restricted SCC assigns them)',
        ),
        containerSecurityContext: free('Security context of every Atrium container'),
        extraEnvVars: {
          type: 'array',
          items: obj({ name: { type: 'string', minLength: 1 } }, { required: ['name'], additionalProperties: true }),
          description: 'More environment variables of every Atrium container (Kubernetes EnvVar objects)',
        },
        extraVolumes: list('More volumes of the Atrium pods (Kubernetes Volume objects)'),
        extraVolumeMounts: list('More volume mounts of every Atrium container (Kubernetes VolumeMount objects)'),
        caBundle: obj({
          existingConfigMap: str(
            'ConfigMap with the PEM certificates of a private CA (an internal CA, a TLS-inspecting proxy): mounted, and NODE_EXTRA_CA_CERTS set, in every Atrium container',
          ),
          key: str('The key of that ConfigMap that holds the certificates'),
        }),
      },
      { required: ['image', 'env', 'secrets'] },
    ),
  }
  return JSON.stringify(schema, null, 2) + '\n'
}

const BEGIN = '# >>> generated from config/schema.ts by `npm run config:generate`: do not edit by hand'
const END = '# <<< end of generated block'

/** Replaces the generated block between the markers (kept with their indentation). */
export function replaceBlock(text: string, block: string, file: string): string {
  const start = text.indexOf(BEGIN)
  const end = text.indexOf(END)
  if (start < 0 || end < start) throw new Error(`${file} has no generated block (markers "${BEGIN}" ... "${END}")`)
  const lineStart = text.lastIndexOf('\n', start) + 1
  const indent = text.slice(lineStart, start)
  const body = block
    .split('\n')
    .filter(Boolean)
    .map((l) => indent + l)
    .join('\n')
  return text.slice(0, start) + BEGIN + '\n' + body + '\n' + indent + text.slice(end)
}

/** The `env` and `secrets` maps of values.yaml, each setting with its description. */
export function renderValuesBlock(): string {
  const lines: string[] = ['env:']
  for (const [name, s] of chartEnvSettings()) {
    lines.push(`  # ${s.description}`)
    const value = helmValue(s, defaultText(s))
    lines.push(`  ${stringify({ [name]: value }).trim()}`)
  }
  lines.push('secrets:')
  for (const [name, s] of bundleSettings(true)) {
    lines.push(`  # ${s.description}${s.requiredInProduction ? ' [required]' : ''}`)
    lines.push(`  ${name}: ""`)
  }
  return lines.join('\n')
}

/** The server's environment in compose.yaml: every setting from .env, the fixed ones set. */
export function renderComposeBlock(): string {
  const lines = ['x-atrium-env: &atrium-env']
  for (const [name, value] of Object.entries({ ...CONTAINER_FIXED, ...COMPOSE_FIXED }))
    lines.push(`  ${name}: "${value}"`)
  for (const [name] of [...bundleSettings(false), ...bundleSettings(true)])
    if (!(name in COMPOSE_FIXED)) lines.push(`  ${name}: \${${name}:-}`)
  return lines.join('\n')
}

/**
 * compose.yaml's `image:` lines from config/images.ts: each service's image is the one its repository
 * names there, under `${ATRIUM_REGISTRY:-<registry>}`; the server's tag is `${ATRIUM_VERSION:-<this
 * release>}`, so the default follows package.json. An image config/images.ts does not list is an error.
 */
export function renderComposeImages(text: string, file: string): string {
  return text.replace(
    /^(\s*image: )\$\{ATRIUM_REGISTRY:-[^}]*\}\/([^:\s]+):(\S+)$/gm,
    (line, head: string, repository: string) => {
      const image = IMAGES.find((i) => i.repository === repository && i.usedBy.includes('compose'))
      if (!image) throw new Error(`${file}: ${line.trim()} is not an image of config/images.ts`)
      const tag = image.name === 'atrium-server' ? `\${ATRIUM_VERSION:-${image.tag}}` : image.tag
      return `${head}\${ATRIUM_REGISTRY:-${image.registry}}/${image.repository}:${tag}`
    },
  )
}

export function renderComposeEnvExample(): string {
  const lines = [
    "# The Compose bundle's .env. Generated from config/schema.ts by `npm run config:generate`: do not edit by hand.",
    '# The installer writes a filled-in copy; by hand: cp .env.example .env, chmod 600 .env, fill in the blanks.',
    '# PORT is the port on this machine the API is published at (the container always listens on 8080).',
    '',
    '# --- the bundle ---',
  ]
  for (const [name, v] of Object.entries(COMPOSE_VARIABLES))
    lines.push(`# ${v.description}${isSecret(name) ? ' [secret]' : ''}`, `${name}=${v.example}`)
  lines.push('', '# --- Atrium (config/atrium.env.example explains each) ---')
  for (const [name, s] of entries()) {
    if ((name in CONTAINER_FIXED && name !== 'PORT') || name in COMPOSE_FIXED) continue
    const bundled = (COMPOSE_SERVICE_SETTINGS as Record<string, string>)[name]
    const example = bundled ? `# with the bundled services: ${name}=${bundled.replace(/\$\{(\w+)\}/g, '<$1>')}` : ''
    lines.push(`# ${s.description}${isSecret(name) ? ' [secret]' : ''}`)
    if (example) lines.push(example)
    lines.push(`${name}=${isSecret(name) || bundled ? '' : defaultText(s)}`)
  }
  return lines.join('\n') + '\n'
}

export function renderChartYaml(): string {
  const server = imageNamed('atrium-server')
  const images = IMAGES.filter((i) => i.usedBy.includes('helm')).map((i) => ({
    name: i.name,
    image: `${i.registry}/${i.repository}:${i.tag}`,
  }))
  const doc = {
    apiVersion: 'v2',
    name: 'atrium',
    description:
      'Atrium, the self-hosted multi-tenant AI application platform: the API server, its migrations and its operational checks',
    type: 'application',
    version: VERSION,
    appVersion: server.tag,
    kubeVersion: '>=1.29.0-0',
    keywords: ['atrium', 'ai', 'llm', 'multi-tenant'],
    annotations: {
      'artifacthub.io/images': stringify(images),
      'atrium.dev/images': IMAGES.map((i) => `${i.registry}/${i.repository}:${i.tag}`).join('\n'),
    },
  }
  return (
    '# Generated from package.json and config/images.ts by `npm run config:generate`: do not edit by hand.\n' +
    stringify(doc)
  )
}

/**
 * The alert rules and dashboards (charts/atrium/files/monitoring, which the chart reads) copied for
 * Compose sites into compose/monitoring: one source, so the two cannot drift.
 */
export const MONITORING = { source: root('charts/atrium/files/monitoring'), copy: root('compose/monitoring') }

const filesUnder = (dir: string): string[] => {
  try {
    return readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => relative(dir, join(e.parentPath, e.name)))
      .sort()
  } catch {
    return []
  }
}

function monitoringCopies(): { path: string; text: string }[] {
  return filesUnder(MONITORING.source).map((f) => ({
    path: join(MONITORING.copy, f),
    text: readFileSync(join(MONITORING.source, f), 'utf8'),
  }))
}

/** Copies in compose/monitoring whose source is gone. */
const orphanCopies = () => {
  const sources = new Set(filesUnder(MONITORING.source))
  return filesUnder(MONITORING.copy)
    .filter((f) => !sources.has(f))
    .map((f) => join(MONITORING.copy, f))
}

/** Every generated file with what it should hold now. */
export function renderAll(): { path: string; text: string }[] {
  return [
    ...monitoringCopies(),
    { path: PATHS.envTemplate, text: renderEnvTemplate() },
    { path: PATHS.valuesSchema, text: renderValuesSchema() },
    { path: PATHS.values, text: replaceBlock(readFileSync(PATHS.values, 'utf8'), renderValuesBlock(), PATHS.values) },
    { path: PATHS.chartYaml, text: renderChartYaml() },
    {
      path: PATHS.compose,
      text: renderComposeImages(
        replaceBlock(readFileSync(PATHS.compose, 'utf8'), renderComposeBlock(), PATHS.compose),
        PATHS.compose,
      ),
    },
    { path: PATHS.composeEnv, text: renderComposeEnvExample() },
  ]
}

/** The generated files that differ from what is on disk. */
export function staleFiles(): string[] {
  return renderAll()
    .filter((f) => {
      try {
        return readFileSync(f.path, 'utf8') !== f.text
      } catch {
        return true
      }
    })
    .map((f) => f.path)
    .concat(orphanCopies())
}

if (isMain(import.meta.url)) {
  if (process.argv.includes('--check')) {
    const stale = staleFiles()
    for (const p of stale) console.error(`stale: ${p} (run npm run config:generate)`)
    process.exitCode = stale.length ? 1 : 0
  } else {
    const files = renderAll()
    for (const f of orphanCopies()) rmSync(f)
    for (const f of files) {
      mkdirSync(dirname(f.path), { recursive: true })
      writeFileSync(f.path, f.text)
    }
    console.log(`wrote ${files.map((f) => f.path).join(', ')}`)
  }
}
