// The real Helm and Compose v2, when this machine has them. CI installs both (.ci/run), so
// there a missing tool fails the test; elsewhere (npm test on a fresh clone) the test is skipped
// with the reason.
import { execFile } from 'node:child_process'
import { existsSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { homedir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import { parseAllDocuments } from 'yaml'
import { ROOT, type Ran } from './cli.js'
import { tempDir } from './platform.js'

/** The tool's path: on PATH, or where `go install` puts it. */
export function findTool(name: string): string | null {
  const dirs = [...(process.env.PATH ?? '').split(':'), join(process.env.GOPATH ?? join(homedir(), 'go'), 'bin')]
  for (const dir of dirs) if (dir && existsSync(join(dir, name))) return join(dir, name)
  return null
}

/** tap's skip option: false when `found` (or in CI, where an absence must fail), else why the test skips. */
const skipUnless = (found: unknown, what: string): false | string =>
  found || process.env.CI ? false : `needs ${what} (CI installs it; see .ci/run)`

/** tap's skip option for a tool on PATH or where `go install` puts it. */
export const needs = (name: string): false | string => skipUnless(findTool(name), name)

/** Where the docker CLI looks for its plugins; Compose v2 is the plugin the installer runs as `docker compose`. */
const PLUGIN_DIRS = [
  join(homedir(), '.docker/cli-plugins'),
  '/usr/local/lib/docker/cli-plugins',
  '/usr/local/libexec/docker/cli-plugins',
  '/usr/lib/docker/cli-plugins',
  '/usr/libexec/docker/cli-plugins',
]

/** tap's skip option for Compose v2 (the CLI plugin), as needs() is for a tool. */
export const needsCompose = (): false | string =>
  skipUnless(
    PLUGIN_DIRS.some((d) => existsSync(join(d, 'docker-compose'))),
    'Compose v2, the docker CLI plugin',
  )

/** `docker compose ...`, as the installer runs it. */
export const compose = (args: string[], opts: Parameters<typeof runTool>[2] = {}): Promise<Ran> =>
  runTool('docker', ['compose', ...args], opts)

export function runTool(
  name: string,
  args: string[],
  opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number; input?: string } = {},
): Promise<Ran> {
  const file = findTool(name) ?? name
  return new Promise((resolve) => {
    const child = execFile(
      file,
      args,
      {
        cwd: opts.cwd ?? ROOT,
        env: { ...process.env, ...opts.env },
        maxBuffer: 64 * 1024 * 1024,
        ...(opts.timeoutMs ? { timeout: opts.timeoutMs } : {}),
      },
      (err, stdout, stderr) => {
        const code = err
          ? typeof (err as { code?: unknown }).code === 'number'
            ? (err as { code: number }).code
            : 127
          : 0
        resolve({ code, stdout, stderr: stderr || (err && code === 127 ? String(err.message) : '') })
      },
    )
    // Its standard input, when given (a password for --password-stdin).
    if (opts.input !== undefined) {
      child.stdin?.on('error', () => {})
      child.stdin?.end(opts.input)
    }
  })
}

export const CHART = join(ROOT, 'charts/atrium')
/** The go-installed Helm reports Kubernetes 1.20 when no cluster is asked; render for a current one. */
export const KUBE_VERSION = '1.31.0'

export interface Manifest {
  apiVersion: string
  kind: string
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> }
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any Kubernetes manifest
  [k: string]: any
}

/** `helm template` with values files written from objects; the manifests, or the error text. */
/**
 * What every install gives (the chart refuses to render without it); a test's own values come after and may take it
 * away.
 */
/**
 * What a render without cluster access needs: the database and the master key (a render cannot make one that lasts).
 */
export const BASE_VALUES = {
  secrets: {
    DATABASE_URL: 'postgres://atrium:pw@postgres.example:5432/atrium',
    ENCRYPTION_MASTER_KEY: Buffer.alloc(32, 1).toString('base64'),
  },
}

/** BASE_VALUES, then `values`, each as a values file: Helm's -f arguments, later ones winning. */
function valuesFiles(t: Test, values: Record<string, unknown>[]): string[] {
  const dir = tempDir(t, 'atrium-helm-')
  return [BASE_VALUES, ...values].flatMap((v, i) => {
    const path = join(dir, `values-${i}.yaml`)
    writeFileSync(path, JSON.stringify(v))
    return ['-f', path]
  })
}

/** `helm <command>` of the release atrium in the namespace atrium: `flags`, the values files, then `extra`. */
function helmRelease(
  t: Test,
  command: 'template' | 'install',
  chart: string,
  values: Record<string, unknown>[],
  flags: string[],
  extra: string[] = [],
) {
  return runTool('helm', [
    command,
    'atrium',
    chart,
    '--namespace',
    'atrium',
    ...flags,
    ...valuesFiles(t, values),
    ...extra,
  ])
}

export async function helmTemplate(
  t: Test,
  values: Record<string, unknown>[] = [],
  extra: string[] = [],
  chart = CHART,
): Promise<{ code: number | null; manifests: Manifest[]; stderr: string; yaml: string }> {
  const r = await helmRelease(t, 'template', chart, values, ['--kube-version', KUBE_VERSION], extra)
  const manifests =
    r.code === 0
      ? parseAllDocuments(r.stdout)
          .map((d) => d.toJS() as Manifest)
          .filter(Boolean)
      : []
  return { code: r.code, manifests, stderr: r.stderr, yaml: r.code === 0 ? r.stdout : '' }
}

/**
 * A kubeconfig for a fake API server over plain HTTP (which the Kubernetes client allows only with TLS verification
 * off).
 */
export function writeKubeconfig(t: Test, server: string, o: { namespace?: string; token?: string } = {}): string {
  const path = join(tempDir(t, 'atrium-kube-'), 'config')
  writeFileSync(
    path,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'fake',
      clusters: [{ name: 'fake', cluster: { server, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'fake', user: o.token ? { token: o.token } : {} }],
      contexts: [
        {
          name: 'fake',
          context: { cluster: 'fake', user: 'fake', ...(o.namespace ? { namespace: o.namespace } : {}) },
        },
      ],
    }),
  )
  return path
}

/**
 * The notes a first install prints (NOTES.txt, which `helm template` leaves out): `helm install --dry-run` against
 * fakeCluster.
 */
export async function helmNotes(t: Test, values: Record<string, unknown>[] = []): Promise<string> {
  const cluster = await fakeCluster(t, [])
  const r = await helmRelease(t, 'install', CHART, values, [
    '--dry-run=client',
    '--disable-openapi-validation',
    '--kubeconfig',
    cluster.kubeconfig,
  ])
  if (r.code !== 0) throw new Error(`helm install --dry-run failed: ${r.stderr}`)
  return r.stdout.slice(r.stdout.indexOf('NOTES:'))
}

export const find = (manifests: Manifest[], kind: string, name?: string): Manifest | undefined =>
  manifests.find((m) => m.kind === kind && (name === undefined || m.metadata.name === name))

/**
 * A Kubernetes API server as far as Helm's `lookup` needs one: discovery for v1 and apps/v1 and
 * GETs of the objects given (a live Secret, a live Deployment), 404 for the rest. Helm asks it
 * during `helm template --dry-run=server`, which is how an upgrade is simulated here, and `helm
 * install --dry-run=client` (a first install, with its notes).
 */
export async function fakeCluster(t: Test, objects: Manifest[]): Promise<{ kubeconfig: string; requests: string[] }> {
  const requests: string[] = []
  // The kinds the chart renders, by API group version, as discovery lists them.
  const groups: Record<string, string[]> = {
    v1: ['Secret', 'ServiceAccount', 'ConfigMap', 'Service', 'Pod'],
    'apps/v1': ['Deployment'],
    'batch/v1': ['Job'],
    'policy/v1': ['PodDisruptionBudget'],
    'networking.k8s.io/v1': ['NetworkPolicy', 'Ingress'],
    'autoscaling/v2': ['HorizontalPodAutoscaler'],
  }
  const plural = (kind: string) =>
    (kind.endsWith('y') ? `${kind.slice(0, -1)}ies` : kind.endsWith('s') ? `${kind}es` : `${kind}s`).toLowerCase()
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0]!
    requests.push(`${req.method} ${path}`)
    res.setHeader('content-type', 'application/json')
    const send = (status: number, body: unknown) => {
      res.statusCode = status
      res.end(JSON.stringify(body))
    }
    const base = (groupVersion: string) => (groupVersion === 'v1' ? '/api/v1' : `/apis/${groupVersion}`)
    const listed = Object.keys(groups).find((gv) => path === base(gv))
    if (listed) {
      const resources = groups[listed]!.map((k) => ({
        name: plural(k),
        singularName: k.toLowerCase(),
        namespaced: true,
        kind: k,
        verbs: ['get', 'list'],
      }))
      return send(200, { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: listed, resources })
    }
    if (path === '/version') return send(200, { major: '1', minor: '31', gitVersion: `v${KUBE_VERSION}` })
    // Discovery and an empty release history, for `helm install --dry-run` (which prints NOTES.txt).
    if (path === '/api') return send(200, { kind: 'APIVersions', versions: ['v1'] })
    if (path === '/apis') {
      const named = Object.keys(groups).filter((gv) => gv !== 'v1')
      const group = (gv: string) => ({
        name: gv.split('/')[0],
        versions: [{ groupVersion: gv, version: gv.split('/')[1] }],
        preferredVersion: { groupVersion: gv, version: gv.split('/')[1] },
      })
      return send(200, { kind: 'APIGroupList', apiVersion: 'v1', groups: named.map(group) })
    }
    if (path === '/api/v1/namespaces/atrium/secrets')
      return send(200, { kind: 'SecretList', apiVersion: 'v1', items: [] })
    const hit = objects.find(
      (o) => path === `${base(o.apiVersion)}/namespaces/atrium/${plural(o.kind)}/${o.metadata.name}`,
    )
    if (hit) return send(200, hit)
    send(404, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise<void>((r) => server.close(() => r())))
  const kubeconfig = writeKubeconfig(t, `http://127.0.0.1:${(server.address() as { port: number }).port}`, {
    namespace: 'atrium',
  })
  return { kubeconfig, requests }
}
