// Checks of the Kubernetes cluster a helm install targets, through @kubernetes/client-node and the
// admin's kubeconfig: reachable and its version, the nodes' allocatable CPU and memory, a default
// StorageClass, the namespace, and the rights the install needs there (SelfSubjectAccessReview).
// Grading is pure; every failure is a result, never a throw.
import { existsSync } from 'node:fs'
import { homedir } from 'node:os'
import { delimiter, join } from 'node:path'
import {
  AuthorizationV1Api,
  CoreV1Api,
  KubeConfig,
  Observable,
  StorageV1Api,
  VersionApi,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node'
import { check, grade, type CheckResult } from './check.js'
import { inSeconds, PROBE_DEADLINE_MS, within } from '../../../common/deadline.js'
import { compareVersions, parseVersion } from '../../../common/version-numbers.js'

const GiB = 2 ** 30

export const KUBE_LIMITS = {
  /** The oldest Kubernetes minor still maintained upstream when this release was cut. */
  version: '1.29.0',
  cpu: { minimum: 4, recommended: 8 },
  memory: { minimum: 7.25 * GiB, recommended: 15 * GiB },
} as const

/** A Kubernetes quantity ("3920m", "4", "16Gi", "16384Ki", "1e3") as a number of units. */
export function parseQuantity(q: string): number {
  const m = /^([+-]?[\d.]+(?:e[+-]?\d+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/.exec(q.trim())
  if (!m) return Number.NaN
  const scale: Record<string, number> = {
    m: 1e-3,
    k: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
    P: 1e15,
    E: 1e18,
    Ki: 2 ** 10,
    Mi: 2 ** 20,
    Gi: 2 ** 30,
    Ti: 2 ** 40,
    Pi: 2 ** 50,
    Ei: 2 ** 60,
  }
  return Number(m[1]) * (m[2] ? scale[m[2]]! : 1)
}

export function gradeKubeVersion(gitVersion: string): CheckResult {
  const v = parseVersion(gitVersion)
  const ok = v !== null && compareVersions(v, parseVersion(KUBE_LIMITS.version)!) >= 0
  return check(
    'kube.version',
    'Kubernetes version',
    ok ? 'pass' : 'fail',
    `Kubernetes ${gitVersion}`,
    `Kubernetes ${KUBE_LIMITS.version} or newer`,
    'Upgrade the cluster to a maintained Kubernetes version',
  )
}

export interface NodeCapacity {
  name: string
  cpu: string
  memory: string
  schedulable: boolean
}

/** What the schedulable nodes can give pods together (allocatable, not capacity). */
export function gradeNodes(nodes: readonly NodeCapacity[]): CheckResult[] {
  const usable = nodes.filter((n) => n.schedulable)
  const cpu = usable.reduce((s, n) => s + parseQuantity(n.cpu), 0)
  const memory = usable.reduce((s, n) => s + parseQuantity(n.memory), 0)
  const count = `${usable.length} schedulable node${usable.length === 1 ? '' : 's'}`
  const { cpu: c, memory: m } = KUBE_LIMITS
  return [
    check(
      'kube.cpu',
      'Cluster CPU',
      grade(cpu, c.minimum, c.recommended),
      `${cpu.toFixed(1)} cores allocatable on ${count}`,
      `${c.minimum} cores minimum, ${c.recommended} recommended`,
      'Add nodes or larger nodes (or uncordon the cordoned ones)',
    ),
    check(
      'kube.memory',
      'Cluster memory',
      grade(memory, m.minimum, m.recommended),
      `${(memory / GiB).toFixed(1)} GiB allocatable on ${count}`,
      '8 GB minimum, 16 GB recommended',
      'Add nodes or nodes with more memory',
    ),
  ]
}

export interface StorageClassInfo {
  name: string
  isDefault: boolean
}

export function gradeStorageClasses(classes: readonly StorageClassInfo[]): CheckResult {
  const defaults = classes.filter((c) => c.isDefault)
  const found = defaults.length
    ? `default StorageClass ${defaults.map((c) => c.name).join(', ')}`
    : classes.length
      ? `StorageClasses ${classes.map((c) => c.name).join(', ')}, none marked default`
      : 'no StorageClass'
  // The chart's defaults use external PostgreSQL, Redis and S3, so a missing default only matters
  // for volumes the admin adds: a recommendation, not a minimum.
  return check(
    'kube.storageclass',
    'Default StorageClass',
    defaults.length ? 'pass' : 'warn',
    found,
    'a default StorageClass (recommended)',
    'Mark one as default: kubectl patch storageclass NAME -p \'{"metadata":{"annotations":{"storageclass.kubernetes.io/is-default-class":"true"}}}\'',
  )
}

export function gradeNamespace(namespace: string, state: 'exists' | 'missing' | { forbidden: string }): CheckResult {
  if (state === 'exists')
    return check(
      'kube.namespace',
      'Namespace',
      'pass',
      `namespace ${namespace} exists`,
      'the namespace, or the right to create it',
      '',
    )
  if (state === 'missing')
    return check(
      'kube.namespace',
      'Namespace',
      'pass',
      `namespace ${namespace} does not exist yet; the installer creates it`,
      'the namespace, or the right to create it',
      '',
    )
  return check(
    'kube.namespace',
    'Namespace',
    'fail',
    `not allowed to read namespace ${namespace}: ${state.forbidden}`,
    'the namespace, or the right to create it',
    `Ask a cluster admin for rights in ${namespace} (or to create it), or use a kubeconfig that has them`,
  )
}

/** A right the install needs: a verb on a kind, in the namespace (or the cluster, for namespaces). */
export interface Right {
  verb: string
  group: string
  resource: string
  subresource?: string
}

const CHANGE = ['get', 'create', 'patch', 'delete'] as const
/**
 * What an install does to each kind of object it makes: helm upgrade --install creates and patches
 * them and deletes them on a rollback (--atomic); Helm keeps its release records in Secrets (listed
 * and updated); --wait and helm test read and start pods; the first tenant is made by exec; the
 * preflight's in-cluster check reads its pod's log.
 */
export function installRights(namespaceExists: boolean): Right[] {
  const kinds: [string, string, readonly string[]][] = [
    ['', 'secrets', [...CHANGE, 'list', 'update']],
    ['', 'configmaps', CHANGE],
    ['', 'services', CHANGE],
    ['', 'serviceaccounts', CHANGE],
    ['', 'pods', ['get', 'list', 'create', 'delete']],
    ['apps', 'deployments', CHANGE],
    ['batch', 'jobs', CHANGE],
    ['policy', 'poddisruptionbudgets', CHANGE],
    ['networking.k8s.io', 'networkpolicies', CHANGE],
  ]
  return [
    ...(namespaceExists ? [] : [{ verb: 'create', group: '', resource: 'namespaces' }]),
    ...kinds.flatMap(([group, resource, verbs]) => verbs.map((verb) => ({ verb, group, resource }))),
    { verb: 'create', group: '', resource: 'pods', subresource: 'exec' },
    { verb: 'get', group: '', resource: 'pods', subresource: 'log' },
  ]
}

/** A right as kubectl names it: "create networkpolicies.networking.k8s.io", "create pods/exec". */
export const rightName = (r: Right) =>
  `${r.verb} ${r.resource}${r.group ? `.${r.group}` : ''}${r.subresource ? `/${r.subresource}` : ''}`

export function gradeRights(namespace: string, checked: number, denied: readonly Right[]): CheckResult {
  const required = `the rights to create, change and delete every kind of object the install makes in ${namespace}`
  if (!denied.length)
    return check(
      'kube.rbac',
      'Rights in the namespace',
      'pass',
      `all ${checked} rights the install needs (SelfSubjectAccessReview)`,
      required,
      '',
    )
  const first = denied[0]!
  return check(
    'kube.rbac',
    'Rights in the namespace',
    'fail',
    `not allowed to ${denied.map(rightName).join(', ')}`,
    required,
    `Ask a cluster admin for a Role in ${namespace} that grants them (check one with: kubectl auth can-i ${first.verb} ${rightName(first).split(' ')[1]} --namespace ${namespace}), or use a kubeconfig that has them`,
  )
}

export const statusOf = (err: unknown) =>
  (err as { code?: number; statusCode?: number }).code ?? (err as { statusCode?: number }).statusCode

export interface KubeCheckOptions {
  kubeconfig?: string
  context?: string
  /** Limit for each request to the API server (10 s unless told). */
  timeoutMs?: number
}

/**
 * Each request to the API server aborted at the deadline (the client has none of its own): a
 * server that accepts the connection and never answers fails the check, and its socket is closed.
 */
const abortAfter = (ms: number) => ({
  middleware: [
    {
      pre: (context: RequestContext) => {
        context.setSignal(AbortSignal.timeout(ms))
        return new Observable(Promise.resolve(context))
      },
      post: (response: ResponseContext) => new Observable(Promise.resolve(response)),
    },
  ],
  middlewareMergeStrategy: 'append' as const,
})

/**
 * The kubeconfig files the client would read, and whether any is there. Without one the client
 * quietly falls back to http://localhost:8080, and the check would fail on that instead of saying
 * what is missing. In a pod, the service account serves.
 */
export function kubeconfigSearch(
  env: NodeJS.ProcessEnv = process.env,
  home = homedir(),
): { files: string[]; found: boolean } {
  const files = env.KUBECONFIG ? env.KUBECONFIG.split(delimiter).filter(Boolean) : [join(home, '.kube', 'config')]
  return { files, found: Boolean(env.KUBERNETES_SERVICE_HOST) || files.some((f) => existsSync(f)) }
}

/**
 * The admin's kubeconfig (or the one given) with its current cluster; a failed kube.connect check when there is none to
 * use.
 */
/** kube.connect failed before the cluster was asked anything: no kubeconfig to use. */
const noCluster = (found: string, fix: string) => ({
  failure: check('kube.connect', 'Kubernetes cluster reachable', 'fail', found, 'a kubeconfig for the cluster', fix),
})

/**
 * The admin's kubeconfig (or the one given) with its current cluster; a failed kube.connect check when there is none to
 * use.
 */
export function openCluster(o: KubeCheckOptions = {}): { kc: KubeConfig; server: string } | { failure: CheckResult } {
  const kc = new KubeConfig()
  const search = o.kubeconfig ? null : kubeconfigSearch()
  if (search && !search.found) {
    return noCluster(
      `no kubeconfig: looked for ${search.files.join(', ')}${process.env.KUBECONFIG ? ' (KUBECONFIG)' : ' (KUBECONFIG is not set)'}`,
      "Point KUBECONFIG at the cluster's kubeconfig (export KUBECONFIG=/path/to/kubeconfig) or put it at ~/.kube/config, then run the preflight again",
    )
  }
  try {
    if (o.kubeconfig) kc.loadFromFile(o.kubeconfig)
    else kc.loadFromDefault()
    if (o.context) kc.setCurrentContext(o.context)
  } catch (err) {
    return noCluster(
      `cannot read the kubeconfig: ${(err as Error).message}`,
      "Set KUBECONFIG or put the cluster's kubeconfig at ~/.kube/config",
    )
  }
  const cluster = kc.getCurrentCluster()
  if (!cluster)
    return noCluster('the kubeconfig has no current cluster', 'Choose a context: kubectl config use-context NAME')
  return { kc, server: cluster.server }
}

/**
 * Requests to the API server within `timeoutMs` each: `limit` aborts the request (the client has no
 * deadline of its own), and `ask` races it in case a step of the client's ignores the signal.
 */
export function requestsWithin(timeoutMs: number) {
  const limit = abortAfter(timeoutMs)
  const ask = <T>(what: string, request: Promise<T>) => within(timeoutMs + 1000, what, request)
  return { limit, ask }
}

export async function kubeChecks(namespace: string, o: KubeCheckOptions = {}): Promise<CheckResult[]> {
  const opened = openCluster(o)
  if ('failure' in opened) return [opened.failure]
  const { kc, server } = opened
  const timeoutMs = o.timeoutMs ?? PROBE_DEADLINE_MS
  const { limit, ask } = requestsWithin(timeoutMs)
  let version: string
  try {
    version = (await ask('the version', kc.makeApiClient(VersionApi).getCode({}, limit))).gitVersion
  } catch (err) {
    const e = err as { code?: string; name?: string; cause?: { code?: string }; message?: string }
    // The abort signal's error (by name), or the backstop's (by code).
    const silent = e.name === 'AbortError' || e.name === 'TimeoutError' || e.code === 'ETIMEDOUT'
    return [
      check(
        'kube.connect',
        'Kubernetes cluster reachable',
        'fail',
        silent
          ? `${server} did not answer in ${inSeconds(timeoutMs)}`
          : `${server} did not answer (${e.cause?.code ?? e.code ?? e.message})`,
        "the cluster's API server answering",
        "Check the network path to the API server and that the kubeconfig's credentials are current",
      ),
    ]
  }
  const core = kc.makeApiClient(CoreV1Api)
  const checks: CheckResult[] = [
    check(
      'kube.connect',
      'Kubernetes cluster reachable',
      'pass',
      `${server} (context ${kc.getCurrentContext()})`,
      "the cluster's API server answering",
      '',
    ),
    gradeKubeVersion(version),
  ]
  try {
    const nodes = await ask('the nodes', core.listNode({}, limit))
    checks.push(
      ...gradeNodes(
        nodes.items.map((n) => ({
          name: n.metadata?.name ?? '',
          cpu: n.status?.allocatable?.cpu ?? '0',
          memory: n.status?.allocatable?.memory ?? '0',
          schedulable: !n.spec?.unschedulable,
        })),
      ),
    )
  } catch (err) {
    checks.push(
      check(
        'kube.nodes',
        'Cluster nodes',
        'warn',
        `cannot list nodes (HTTP ${statusOf(err) ?? '?'})`,
        'read access to nodes, to measure CPU and memory',
        'Run the preflight with a kubeconfig that may list nodes, or check the capacity by hand',
      ),
    )
  }
  try {
    const classes = await ask('the storage classes', kc.makeApiClient(StorageV1Api).listStorageClass({}, limit))
    checks.push(
      gradeStorageClasses(
        classes.items.map((c) => ({
          name: c.metadata?.name ?? '',
          isDefault: c.metadata?.annotations?.['storageclass.kubernetes.io/is-default-class'] === 'true',
        })),
      ),
    )
  } catch (err) {
    checks.push(
      check(
        'kube.storageclass',
        'Default StorageClass',
        'warn',
        `cannot list StorageClasses (HTTP ${statusOf(err) ?? '?'})`,
        'a default StorageClass (recommended)',
        'Check with: kubectl get storageclass',
      ),
    )
  }
  let namespaceExists = false
  try {
    await ask('the namespace', core.readNamespace({ name: namespace }, limit))
    namespaceExists = true
    checks.push(gradeNamespace(namespace, 'exists'))
  } catch (err) {
    const code = statusOf(err)
    checks.push(gradeNamespace(namespace, code === 404 ? 'missing' : { forbidden: `HTTP ${code ?? '?'}` }))
  }
  // Asked right by right, as `kubectl auth can-i` does: what the install would be refused, before it starts.
  const authz = kc.makeApiClient(AuthorizationV1Api)
  const rights = installRights(namespaceExists)
  try {
    const answers = await Promise.all(
      rights.map((r) =>
        ask(
          'the rights',
          authz.createSelfSubjectAccessReview(
            {
              body: {
                apiVersion: 'authorization.k8s.io/v1',
                kind: 'SelfSubjectAccessReview',
                spec: { resourceAttributes: { ...r, namespace: r.resource === 'namespaces' ? undefined : namespace } },
              },
            },
            limit,
          ),
        ),
      ),
    )
    checks.push(
      gradeRights(
        namespace,
        rights.length,
        rights.filter((_, i) => !answers[i]!.status?.allowed),
      ),
    )
  } catch (err) {
    checks.push(
      check(
        'kube.rbac',
        'Rights in the namespace',
        'warn',
        `could not ask the cluster (HTTP ${statusOf(err) ?? '?'})`,
        `the rights the install needs in ${namespace}`,
        `Check them by hand: kubectl auth can-i --list --namespace ${namespace}`,
      ),
    )
  }
  return checks
}
