// Helm on a real Kubernetes: the single-node cluster .ci/kube.sh builds from Kubernetes' sources
// (etcd, the control plane with RBAC and Pod Security admission, a kubelet on containerd with a
// bridge CNI, kube-proxy, kube-router enforcing NetworkPolicy, CoreDNS). An air-gapped site in a
// namespace that enforces Pod Security "restricted", as an operator runs it: the installer's
// preflight (its in-cluster Job, the RBAC check through SelfSubjectAccessReview), its install (the
// migration Job once, the pods Ready, /readyz through a Service, the first tenant), the chart's
// NetworkPolicy enforced (the server reaches its own services and no other pod, and no pod of
// another namespace reaches it), then `helm upgrade` to a newer build under a steady read and write
// load, `helm rollback` over the newer schema (the old pods refuse, the new ones keep serving), a
// node drain held by the PodDisruptionBudget, and the support bundle read from the cluster. Then
// every value of values.yaml given to the API server (server-side dry run), and the chart's own
// Secret kept across an upgrade. Skips, saying why, where there is no cluster, engine or services.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import postgres from 'postgres'
import t, { type Test } from 'tap'
import { parse, parseAllDocuments, stringify } from 'yaml'
import { imageNamed, imageRef } from '../../config/images.js'
import {
  buildImage,
  docker,
  engine,
  ownServicesConfig,
  siteServices,
  stepTimer,
  trustingImage,
} from '../helpers/engine.js'
import {
  cluster,
  kubeJson,
  kubectl,
  loadImage,
  NODE_IP,
  podReady,
  until,
  type Cluster,
  type PodItem,
} from '../helpers/cluster.js'
import { installer, NEEDS_SERVICES, realServices } from '../helpers/installer.js'
import { secretsIn } from '../helpers/leaks.js'
import { testLicense, testVendor } from '../helpers/license.js'
import { freshBucket, services, suffix, tempDir } from '../helpers/platform.js'
import { CHART, needs, runTool } from '../helpers/tools.js'
import { unzip } from '../helpers/zip.js'

const SERVER = imageNamed('atrium-server')
/** The release the chart runs (its appVersion), and a newer build of it with one more migration. */
const RELEASED = imageRef(SERVER)
const NEXT_TAG = SERVER.tag.replace(/\d+$/, (n) => String(Number(n) + 1))
const NEXT = imageRef({ ...SERVER, tag: NEXT_TAG })
const PROBE_MIGRATION = { version: 998, file: '0998_helm_upgrade_probe.sql', table: 'helm_upgrade_probe' }
const RELEASE = 'atrium'

const c = await cluster()
const found = 'skip' in c ? null : await engine()
const skip =
  'skip' in c ? c.skip : found && 'skip' in found ? found.skip : !realServices ? NEEDS_SERVICES : needs('helm')
if (!skip) t.setTimeout(1_500_000)

const helm = (cl: Cluster, args: string[], timeoutMs = 120_000) => runTool('helm', args, { env: cl.env, timeoutMs })

/** The release as it is (`--reuse-values`) with one value changed, `set`, waited for. */
const upgradeWith = (cl: Cluster, ns: string, set: string) =>
  helm(cl, ['upgrade', RELEASE, CHART, '-n', ns, '--reuse-values', '--set', set, '--wait', '--timeout', '10m'], 660_000)

/**
 * A namespace of the test's with these labels, gone afterwards, once its "default" ServiceAccount exists: the chart's
 * lookup of it tells a live render from a GitOps one, and the controller-manager makes it within moments.
 */
/** The label of every namespace a test makes (.ci/kube.sh up deletes those left behind). */
const TEST_NAMESPACE_LABEL = 'atrium.test/namespace'

async function namespace(t: Test, cl: Cluster, prefix: string, labels: string[] = []): Promise<string> {
  const ns = `${prefix}-${suffix()}`
  const made = await kubectl(cl, ['create', 'namespace', ns])
  if (made.code !== 0) throw new Error(made.stderr)
  t.teardown(() => kubectl(cl, ['delete', 'namespace', ns, '--wait=false']))
  // Marked as a test's, so that the next `.ci/kube.sh up` removes it should this run stop before its teardown (its
  // pods would hold the node's CPU and leave the next run's Pending).
  const labelled = await kubectl(cl, ['label', 'namespace', ns, `${TEST_NAMESPACE_LABEL}=true`, ...labels])
  if (labelled.code !== 0) throw new Error(labelled.stderr)
  await until(30_000, async () =>
    (await kubectl(cl, ['-n', ns, 'get', 'serviceaccount', 'default'])).code === 0 ? true : undefined,
  )
  return ns
}

/** A namespace that enforces Pod Security "restricted" (every pod the chart makes must pass it). */
const restrictedNamespace = (t: Test, cl: Cluster, prefix: string) =>
  namespace(
    t,
    cl,
    prefix,
    ['enforce', 'warn', 'audit'].map((m) => `pod-security.kubernetes.io/${m}=restricted`),
  )

/** The server pods of the release, as the cluster sees them now. */
async function serverPods(cl: Cluster, ns: string): Promise<PodItem[]> {
  return (
    await kubeJson<{ items: PodItem[] }>(cl, [
      '-n',
      ns,
      'get',
      'pods',
      '-l',
      `app.kubernetes.io/instance=${RELEASE},app.kubernetes.io/component=server`,
    ])
  ).items
}

interface Sample {
  at: number
  ms: number
  ok: boolean
  what: string
}

/**
 * A steady load as users make it: `workers` loops, each a read (list projects) then a write (make a project), back
 * to back, over kept-alive connections through the Service. Every answer is kept: its time, how long it took, and
 * whether it was the 2xx it should be.
 */
function steadyLoad(base: string, key: string, workers = 4) {
  const samples: Sample[] = []
  let stopped = false
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
  const one = async (what: string, init: RequestInit & { path: string }) => {
    const at = performance.now()
    let ok = false
    let status = 'no answer'
    try {
      const r = await fetch(`${base}${init.path}`, { ...init, headers, signal: AbortSignal.timeout(10_000) })
      await r.arrayBuffer()
      ok = r.ok
      status = String(r.status)
    } catch (err) {
      status = String((err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name)
    }
    samples.push({ at, ms: performance.now() - at, ok, what: ok ? what : `${what} ${status}` })
  }
  const loops = Array.from({ length: workers }, async (_, w) => {
    for (let i = 0; !stopped; i++) {
      await one('read', { path: '/api/v1/projects?limit=5', method: 'GET' })
      await one('write', {
        path: '/api/v1/projects',
        method: 'POST',
        body: JSON.stringify({ name: `load ${w}-${i}`, language: 'typescript' }),
      })
    }
  })
  return {
    samples,
    async stop() {
      stopped = true
      await Promise.all(loops)
      return samples
    },
  }
}

/**
 * Pods in a namespace of their own, with no NetworkPolicy: one listening on TCP 9000 (its address returned), one to
 * connect from (`kubectl exec` arguments).
 */
async function probePods(t: Test, cl: Cluster): Promise<{ listener: string; client: string[] }> {
  const ns = await namespace(t, cl, 'atrium-probe')
  const pod = (name: string, script: string) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { app: name } },
    spec: {
      automountServiceAccountToken: false,
      securityContext: { runAsNonRoot: true, runAsUser: 10001, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name,
          image: RELEASED,
          imagePullPolicy: 'Never',
          command: ['node', '-e', script],
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
        },
      ],
    },
  })
  const manifests = [
    pod('listener', "require('net').createServer((s) => s.end('hi')).listen(9000)"),
    pod('client', 'setInterval(() => {}, 1 << 30)'),
  ]
  const made = await kubectl(
    cl,
    ['-n', ns, 'apply', '-f', '-'],
    30_000,
    manifests.map((m) => stringify(m)).join('---\n'),
  )
  t.equal(made.code, 0, made.stderr || 'the probe pods')
  const ready = await kubectl(
    cl,
    ['-n', ns, 'wait', '--for=condition=Ready', 'pod', '--all', '--timeout=120s'],
    130_000,
  )
  t.equal(ready.code, 0, ready.stderr || 'the probe pods are Ready')
  const listener = (await kubeJson<PodItem>(cl, ['-n', ns, 'get', 'pod', 'listener'])).status.podIP ?? ''
  return { listener, client: ['-n', ns, 'client'] }
}

/**
 * What a connection a policy forbids gets: kube-router rejects it (an ICMP port unreachable, ECONNREFUSED to the
 * client) or drops it (a timeout). The same listener answering a pod without a policy shows it is there.
 */
const REFUSED_BY_POLICY = /^(ECONNREFUSED|timeout)$/

/** A TCP connection from inside a pod (`kubectl exec` arguments): 'open', 'timeout' (3 s) or the error's code. */
async function reach(cl: Cluster, from: string[], ip: string, port: number): Promise<string> {
  const script = `const s = require('net').connect(${port}, '${ip}'); s.setTimeout(3000)
s.on('connect', () => { console.log('open'); process.exit(0) })
s.on('timeout', () => { console.log('timeout'); process.exit(0) })
s.on('error', (e) => { console.log(e.code); process.exit(0) })`
  const r = await kubectl(cl, ['exec', ...from, '--', 'node', '-e', script], 30_000)
  return r.code === 0 ? r.stdout.trim() : `kubectl exec failed: ${r.stderr.trim()}`
}

const p99 = (xs: Sample[]) => {
  const sorted = xs.map((s) => s.ms).sort((a, b) => a - b)
  return sorted.length ? Math.round(sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))]!) : NaN
}

t.test(
  'the Helm path on a real cluster: preflight, install, upgrade under load, rollback refused, drain, support bundle',
  { skip },
  async (t) => {
    const cl = c as Cluster
    const base = found && 'base' in found ? found.base : ''
    const { step, record } = stepTimer(t, 'timings')
    const dir = tempDir(t)
    const vendor = testVendor()

    // The images: the release (trusting the test's license vendor) and a newer build with one more migration, put
    // into the cluster's containerd under the names the chart runs. The engine's tags are this run's own, so that
    // other tests tagging the release's name meanwhile change nothing here.
    const own = `atrium-helm-test-${suffix()}`
    const built = await step('docker build', () => buildImage(t, base))
    if ('error' in built) return t.fail(built.error)
    await step('the release image (trusting the test vendor)', () =>
      trustingImage(t, built.image, vendor, `${own}:released`),
    )
    writeFileSync(join(dir, PROBE_MIGRATION.file), `create table ${PROBE_MIGRATION.table} (id integer primary key);\n`)
    writeFileSync(
      join(dir, 'Dockerfile'),
      `FROM ${own}:released\nCOPY ${PROBE_MIGRATION.file} /app/server/platform/migrations/\n`,
    )
    t.equal((await docker(['build', '-t', `${own}:next`, dir], 120_000)).code, 0, 'the newer build builds')
    t.teardown(() => docker(['image', 'rm', '--force', `${own}:released`, `${own}:next`]))
    await step('images into the cluster', async () => {
      await loadImage(t, `${own}:released`, RELEASED)
      await loadImage(t, `${own}:next`, NEXT)
    })

    const ns = await restrictedNamespace(t, cl, 'atrium-helm')
    // The site's own services, where pods reach them: on the cluster's bridge, in front of the test's.
    const { database, databaseUrl, redisUrl, s3Endpoint } = await siteServices(t, NODE_IP)
    // How users reach the site: a Service of the admin's in front of the release's pods (the part a load balancer or
    // an Ingress plays at a real site), whose cluster address this machine reaches through kube-proxy.
    const front = await kubectl(
      cl,
      ['-n', ns, 'apply', '-f', '-'],
      30_000,
      stringify({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'atrium-front' },
        spec: {
          selector: {
            'app.kubernetes.io/name': 'atrium',
            'app.kubernetes.io/instance': RELEASE,
            'app.kubernetes.io/component': 'server',
          },
          ports: [{ port: 80, targetPort: 'http' }],
        },
      }),
    )
    t.equal(front.code, 0, front.stderr || 'the front Service')
    const clusterIp = (
      await kubeJson<{ spec: { clusterIP: string } }>(cl, ['-n', ns, 'get', 'service', 'atrium-front'])
    ).spec.clusterIP
    const api = `http://${clusterIp}`

    const answers = join(dir, 'answers.yaml')
    writeFileSync(
      answers,
      [
        'target: helm',
        `namespace: ${ns}`,
        `release: ${RELEASE}`,
        `dataPath: ${dir}`,
        `outputDir: ${join(dir, 'out')}`,
        // Air-gapped: the chart's NetworkPolicy then lets the server reach only its own services (kube-router enforces it).
        'mode: air-gapped',
        'tenantName: Helm Site',
        'adminEmail: admin@example.com',
        'config:',
        `  PUBLIC_URL: "${api}"`,
        // The load below is one API key's: the default limit (1000 a minute) would answer it 429.
        '  RATE_LIMIT_MAX: "1000000"',
        ...ownServicesConfig({
          redisUrl,
          s3Endpoint,
          bucket: await freshBucket(t),
          gateway: NODE_IP,
        }),
      ].join('\n') + '\n',
    )
    const env = {
      ...cl.env,
      SITE_DATABASE_URL: databaseUrl,
      SITE_S3_SECRET: services.s3SecretKey,
      SITE_LICENSE_KEY: await testLicense(vendor),
    }

    // The preflight: the services checked from a Job in the namespace (which Pod Security admits), the rights the
    // install needs asked one by one (SelfSubjectAccessReview).
    const pre = await step('installer preflight', () => installer(['preflight', '--answers', answers, '--json'], env))
    const checks =
      (JSON.parse(pre.stdout || '{}') as { checks?: { id: string; status: string; found: string }[] }).checks ?? []
    const status = (id: string) => checks.find((x) => x.id === id)
    t.match(
      status('services.where'),
      { status: 'pass', found: new RegExp(`a pod in ${ns}`) },
      'checked from a pod in the namespace',
    )
    for (const id of ['kube.connect', 'kube.version', 'kube.namespace', 'kube.rbac'])
      t.match(status(id), { status: 'pass' }, `${id} passes on the real cluster`)
    t.same(
      checks.filter((x) => x.id.startsWith('services.') && x.status !== 'pass').map((x) => `${x.id}: ${x.found}`),
      [],
      'every service check passes from inside the cluster',
    )
    t.comment(`preflight: ${checks.map((x) => `${x.id}=${x.status}`).join(' ')}`)
    const jobsLeft = await kubeJson<{ items: unknown[] }>(cl, [
      '-n',
      ns,
      'get',
      'jobs,secrets',
      '-l',
      'app.kubernetes.io/component=preflight',
    ])
    t.same(jobsLeft.items, [], 'the check Job and its Secret are gone')

    // The install: the release, the migration Job once, the pods Ready, the first tenant.
    const installed = await step('installer install', () =>
      installer(
        [
          'install',
          '--answers',
          answers,
          '--yes',
          '--json',
          // This machine is smaller than production asks, and so is the cluster's one node.
          ...['cpu', 'memory', 'disk', 'kube.cpu', 'license'].flatMap((id) => ['--accept-check', id]),
        ],
        env,
      ),
    )
    const report = JSON.parse(installed.stdout || '{}') as {
      error: string | null
      firstAdmin: { email: string; password: string; apiKey: string; tenantId: string } | null
    }
    if (installed.code !== 0) {
      const pods = await kubectl(cl, ['-n', ns, 'describe', 'pods'])
      return t.fail(
        `install failed (exit ${installed.code}): ${report.error ?? ''}\n${installed.stderr}\n${installed.stdout.slice(-3000)}\n${pods.stdout.slice(-4000)}`,
      )
    }
    const migrationJobs = async () =>
      (
        await kubeJson<{ items: { metadata: { name: string }; status: { succeeded?: number; failed?: number } }[] }>(
          cl,
          ['-n', ns, 'get', 'jobs', '-l', 'app.kubernetes.io/component=migrate'],
        )
      ).items
    const firstJobs = await migrationJobs()
    const [job] = firstJobs
    t.equal(firstJobs.length, 1, 'one migration Job')
    t.match(firstJobs, [{ status: { succeeded: 1 } }], 'succeeded once')
    t.notOk(job?.status.failed, 'with no failed try')
    const pods = await serverPods(cl, ns)
    t.equal(pods.filter(podReady).length, 2, 'two server pods Ready')
    t.equal((await fetch(`${api}/readyz`)).status, 200, '/readyz answers through the Service')
    const admin = report.firstAdmin!
    t.ok(admin?.apiKey, 'the first tenant was created')
    const auth = { authorization: `Bearer ${admin.apiKey}`, 'content-type': 'application/json' }
    const made = await fetch(`${api}/api/v1/projects`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ name: 'Made before the upgrade', language: 'typescript' }),
    })
    t.equal(made.status, 201, 'the printed API key works through the Service')
    const secretName = `${RELEASE}-installer-secrets`
    const masterKey = async () =>
      (await kubeJson<{ data: Record<string, string> }>(cl, ['-n', ns, 'get', 'secret', secretName])).data
        .ENCRYPTION_MASTER_KEY
    const keyBefore = (await masterKey()) ?? ''
    t.ok(keyBefore, 'the installer made the master key')

    // The NetworkPolicy, enforced: the air-gapped server reaches its own services (it works, above) and no pod outside
    // its namespace; nor does such a pod reach it. The same pods reach each other where no policy applies.
    const probes = await probePods(t, cl)
    const [one, other] = (await serverPods(cl, ns)).filter(podReady)
    const server = ['-n', ns, one!.metadata.name, '-c', 'server']
    const otherIp = other!.status.podIP!
    t.match(
      await reach(cl, server, probes.listener, 9000),
      REFUSED_BY_POLICY,
      'the air-gapped server cannot reach a pod elsewhere',
    )
    t.equal(await reach(cl, probes.client, probes.listener, 9000), 'open', 'which a pod with no policy reaches')
    t.match(
      await reach(cl, probes.client, otherIp, 8080),
      REFUSED_BY_POLICY,
      'a pod of another namespace cannot reach the server',
    )
    t.equal(await reach(cl, server, otherIp, 8080), 'open', 'a pod of its own namespace can')
    // DNS is let out (to the cluster DNS pods, port 53): Service names resolve in the air-gapped server.
    const resolved = await kubectl(cl, [
      'exec',
      ...server,
      '--',
      'node',
      '-e',
      "require('dns').promises.lookup('kubernetes.default.svc.cluster.local').then((a) => console.log(a.address), (e) => console.log(e.code))",
    ])
    t.equal(resolved.stdout.trim(), '10.96.0.1', 'the air-gapped server resolves Service names through the cluster DNS')

    // The upgrade: a newer build, under a steady read and write load through the Service.
    const load = steadyLoad(api, admin.apiKey)
    await new Promise((r) => setTimeout(r, 15_000))
    const rollStart = performance.now()
    const upgraded = await step('helm upgrade under load', () => upgradeWith(cl, ns, `image.tag=${NEXT_TAG}`))
    const rollEnd = performance.now()
    await new Promise((r) => setTimeout(r, 5_000))
    const samples = await load.stop()
    t.equal(upgraded.code, 0, upgraded.stderr || 'helm upgrade to the newer build')
    const before = samples.filter((s) => s.at < rollStart)
    const during = samples.filter((s) => s.at >= rollStart && s.at <= rollEnd)
    const failed = samples.filter((s) => !s.ok)
    record(
      `load: ${samples.length} requests (${during.length} during the roll of ${Math.round((rollEnd - rollStart) / 1000)} s), ${failed.length} failed; p99 ${p99(before)} ms before, ${p99(during)} ms during`,
    )
    t.ok(during.length > 50, `requests were made during the roll (${during.length})`)
    t.same(
      failed.map((s) => s.what),
      [],
      'no request failed during the upgrade',
    )
    const upgradedPods = (await serverPods(cl, ns)).filter(podReady)
    t.same(
      [...new Set(upgradedPods.map((p) => p.spec.containers[0]!.image))],
      [NEXT],
      'the Ready server pods run the newer build',
    )
    // Helm replaced the first release's Job (its name carries a hash of what it runs) by the newer build's.
    const jobs = await migrationJobs()
    t.equal(jobs.length, 1, "one migration Job: the newer build's")
    t.not(jobs[0]?.metadata.name, job?.metadata.name, 'a new Job, not the first one again')
    t.match(jobs[0]?.status, { succeeded: 1 }, 'it ran once and succeeded')
    t.notOk(jobs[0]?.status.failed, 'with no failed try')
    const sql = postgres(database, { max: 1, onnotice: () => {} })
    t.teardown(() => sql.end())
    t.same(
      (await sql`select count(*)::int as n from atrium_migrations where version = ${PROBE_MIGRATION.version}`)[0],
      { n: 1 },
      'the new migration was applied, once',
    )
    t.equal(await masterKey(), keyBefore, 'the master key is unchanged')
    const listed = (await (await fetch(`${api}/api/v1/projects?limit=1`, { headers: auth })).json()) as {
      data: unknown[]
    }
    t.ok(listed.data.length, 'the data is all there')

    // A rollback over the newer schema: the old release's pods refuse to start, naming the restore, and the newer
    // ones keep serving (the roll waits for pods that never become Ready).
    const rolledBack = await step('helm rollback', () => helm(cl, ['rollback', RELEASE, '1', '-n', ns]))
    t.equal(rolledBack.code, 0, rolledBack.stderr || 'helm rollback to revision 1')
    const refused = await until(180_000, async () => {
      for (const p of await serverPods(cl, ns)) {
        if (!p.spec.containers[0]!.image.endsWith(`:${SERVER.tag}`)) continue
        for (const previous of [[], ['--previous']]) {
          const logs = await kubectl(cl, ['-n', ns, 'logs', p.metadata.name, '-c', 'wait-for-migrations', ...previous])
          if (/newer than this release/.test(logs.stdout))
            return { pod: p.metadata.name, line: logs.stdout.trim().split('\n').at(-1) }
        }
      }
      return undefined
    })
    const refusal = refused?.line
    t.match(refusal, /newer than this release's[\s\S]*restor/, "the old pod's log names the restore")
    record(`rollback refusal: ${refusal}`)
    const serving = (await serverPods(cl, ns)).filter(podReady)
    t.ok(serving.length >= 1, 'server pods stay Ready')
    t.ok(
      serving.every((p) => p.spec.containers[0]!.image === NEXT),
      'and they are the newer build',
    )
    t.equal((await fetch(`${api}/readyz`)).status, 200, 'the site keeps serving')

    // The support bundle, from the cluster as it is now: the pods described, events, the previous logs.
    const supportZip = join(tempDir(t), 'support.zip')
    const support = await step('support-bundle', () =>
      installer(['support-bundle', '--answers', answers, '--output', supportZip, '--json'], env),
    )
    t.equal(support.code, 0, support.stderr)
    const files = await unzip(readFileSync(supportZip))
    t.match(
      files['logs/pods-describe.txt'],
      /\(exit code 0\)[\s\S]*Name: +atrium-[\s\S]*Node: +atrium-node/,
      'the pods described',
    )
    t.match(files['logs/events.txt'], /\(exit code 0\)[\s\S]*(Started|Created|Scheduled)/, "the namespace's events")
    t.match(
      files['logs/kubectl-get.txt'],
      /\(exit code 0\)[\s\S]*deployment\.apps\/atrium/,
      'the release objects listed',
    )
    t.match(files['logs/helm-history.txt'], /\(exit code 0\)[\s\S]*Rollback to 1/, "helm's history")
    // The old pod's refusal: in its init container's log, or in that of the run before it (kubelet keeps one).
    t.match(
      `${files['logs/pods.txt'] ?? ''}${files['logs/pods-previous.txt'] ?? ''}`,
      /newer than this release/,
      "the logs hold the old pod's refusal",
    )
    // One pod without an earlier run of a container (most of them) no longer fails the whole command.
    t.match(
      files['logs/pods-previous.txt'],
      new RegExp(`--previous [^\\n]*--ignore-errors\\n\\(exit code 0\\)[\\s\\S]*${refused?.pod ?? 'no refusing pod'}`),
      "the previous logs were asked of every pod, the refusing one among them (kubelet keeps a container's last run only while it can)",
    )
    t.match(
      files['logs/pods-describe.txt'],
      /Init:(CrashLoopBackOff|Error)|Reason: +(CrashLoopBackOff|Error)/,
      'the describe shows the refusing pod',
    )
    t.same(
      secretsIn(Object.values(files), {
        masterKey: Buffer.from(keyBefore, 'base64').toString(),
        password: admin.password,
        apiKey: admin.apiKey,
        databaseUrl,
        s3Secret: services.s3SecretKey,
        license: env.SITE_LICENSE_KEY,
      }),
      [],
      'no secret in the bundle, in any spelling',
    )

    // Back to the newer build, then a node drain: the PodDisruptionBudget (minAvailable 1) lets one server pod go
    // and holds the other, so the site keeps answering while the node is cordoned.
    const forward = await helm(cl, ['rollback', RELEASE, '2', '-n', ns, '--wait', '--timeout', '5m'], 330_000)
    t.equal(forward.code, 0, forward.stderr || 'rollback to the newer build again')
    const node = 'atrium-node'
    t.teardown(() => kubectl(cl, ['uncordon', node]))
    const drained = await step('kubectl drain', () =>
      kubectl(
        cl,
        [
          'drain',
          node,
          '--pod-selector',
          `app.kubernetes.io/instance=${RELEASE},app.kubernetes.io/component=server`,
          '--timeout',
          '30s',
          '--delete-emptydir-data',
        ],
        90_000,
      ),
    )
    t.not(drained.code, 0, 'the drain does not complete')
    t.match(drained.stderr, /disruption budget/, 'held by the disruption budget')
    const left = (await serverPods(cl, ns)).filter(podReady)
    t.equal(left.length, 1, 'one server pod is left Ready')
    t.equal((await fetch(`${api}/readyz`)).status, 200, 'and the site answers')
    t.equal((await kubectl(cl, ['uncordon', node])).code, 0, 'uncordoned')
    const back = await until(180_000, async () =>
      (await serverPods(cl, ns)).filter(podReady).length === 2 ? true : undefined,
    )
    t.ok(back, 'two server pods Ready again once the node takes pods')
    // The autoscaler for real: an upgrade that turns it on makes the HPA, which the controller-manager reads. This
    // cluster has no metrics source (no metrics-server), so it says it cannot read CPU: what an operator sees until one
    // is installed.
    const scaled = await upgradeWith(cl, ns, 'autoscaling.enabled=true')
    t.equal(scaled.code, 0, scaled.stderr || 'autoscaling turned on')
    const condition = await until(90_000, async () => {
      const h = await kubeJson<{
        status?: { conditions?: { type: string; status: string; reason: string; message: string }[] }
      }>(cl, ['-n', ns, 'get', 'hpa', RELEASE])
      return h.status?.conditions?.find((x) => x.type === 'ScalingActive')
    })
    t.match(
      condition,
      { status: 'False', reason: 'FailedGetResourceMetric' },
      'the HPA controller reads it: no CPU metrics here',
    )
    record(`HPA: ${condition?.type}=${condition?.status} ${condition?.reason}: ${condition?.message}`)
  },
)

/** Every leaf of values.yaml, as a dotted path (an empty map or list, a list, a scalar). */
function leaves(v: unknown, prefix = ''): string[] {
  if (v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length)
    return Object.entries(v).flatMap(([k, x]) => leaves(x, prefix ? `${prefix}.${k}` : k))
  return [prefix]
}
const at = (v: unknown, path: string): unknown =>
  path
    .split('.')
    .reduce<unknown>((o, k) => (o && typeof o === 'object' ? (o as Record<string, unknown>)[k] : undefined), v)

const ALL_ON = {
  global: { imageRegistry: 'registry.corp.example:5000', imagePullSecrets: ['regcred', { name: 'regcred2' }] },
  image: {
    registry: 'mirror.corp.example',
    repository: 'platform/atrium-server',
    tag: '0.1.0',
    digest: `sha256:${'a'.repeat(64)}`,
    pullPolicy: 'Always',
  },
  replicaCount: 3,
  airGapped: true,
  existingSecret: 'atrium-from-vault',
  existingSecretKeys: { DATABASE_URL: 'db-url' },
  service: { type: 'NodePort', port: 8080, annotations: { 'corp.example/owner': 'platform' } },
  ingress: {
    enabled: true,
    className: 'nginx',
    host: 'atrium.corp.example',
    annotations: { 'nginx.ingress.kubernetes.io/proxy-body-size': '20m' },
    tls: { enabled: true, secretName: 'atrium-tls' },
  },
  resources: {
    requests: { cpu: '250m', memory: '384Mi', 'ephemeral-storage': '128Mi' },
    limits: { cpu: '1', memory: '1Gi', 'ephemeral-storage': '512Mi' },
  },
  migrations: {
    resources: {
      requests: { cpu: '50m', memory: '128Mi', 'ephemeral-storage': '32Mi' },
      limits: { cpu: '500m', memory: '512Mi', 'ephemeral-storage': '128Mi' },
    },
    backoffLimit: 1,
    activeDeadlineSeconds: 600,
    ttlSecondsAfterFinished: 3600,
  },
  autoscaling: { enabled: true, minReplicas: 3, maxReplicas: 6, targetCPUUtilizationPercentage: 60 },
  podDisruptionBudget: { enabled: true, minAvailable: 2 },
  networkPolicy: {
    enabled: true,
    ingressControllerNamespace: 'traefik',
    ingressFrom: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }],
    egress: [{ to: [{ ipBlock: { cidr: '169.254.20.10/32' } }], ports: [{ port: 53, protocol: 'UDP' }] }],
    dns: { namespace: 'dns-system', podLabels: { 'k8s-app': 'coredns' }, ports: [53, 5353] },
    servicesCidrs: ['10.20.0.0/16', { cidr: '10.30.0.7/32', ports: [5432] }],
    clusterNamespaces: ['databases'],
  },
  metrics: {
    serviceMonitor: {
      enabled: true,
      namespace: 'monitoring',
      labels: { release: 'prometheus' },
      interval: '15s',
      scrapeTimeout: '5s',
    },
    prometheusRule: { enabled: true, namespace: 'monitoring', labels: { release: 'prometheus' } },
    grafanaDashboards: {
      enabled: true,
      namespace: 'monitoring',
      labels: { grafana_dashboard: 'atrium', team: 'platform' },
      annotations: { grafana_folder: 'Atrium' },
    },
    allowFromNamespace: 'observability',
  },
  serviceAccount: { create: true, name: 'atrium-runner', annotations: { 'corp.example/role': 'atrium' } },
  upgradeGuard: { enabled: true, allowSkip: true },
  tests: { enabled: true },
  podAnnotations: { 'corp.example/cost-center': '42' },
  podLabels: { team: 'platform' },
  nodeSelector: { 'kubernetes.io/os': 'linux' },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'atrium', effect: 'NoSchedule' }],
  affinity: {
    nodeAffinity: {
      preferredDuringSchedulingIgnoredDuringExecution: [
        {
          weight: 1,
          preference: { matchExpressions: [{ key: 'kubernetes.io/os', operator: 'In', values: ['linux'] }] },
        },
      ],
    },
  },
  topologySpreadConstraints: [
    { maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'ScheduleAnyway' },
  ],
  dnsPolicy: 'ClusterFirst',
  dnsConfig: { options: [{ name: 'ndots', value: '2' }] },
  initContainers: [
    {
      name: 'fetch-config',
      image: 'registry.corp.example:5000/tools/fetch:1',
      command: ['true'],
      securityContext: {
        allowPrivilegeEscalation: false,
        runAsNonRoot: true,
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'RuntimeDefault' },
      },
    },
  ],
  sidecars: [
    {
      name: 'log-shipper',
      image: 'registry.corp.example:5000/tools/shipper:1',
      securityContext: {
        allowPrivilegeEscalation: false,
        runAsNonRoot: true,
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'RuntimeDefault' },
      },
    },
  ],
  priorityClassName: 'atrium-high',
  terminationGracePeriodSeconds: 60,
  extraEnvVars: [{ name: 'HTTPS_PROXY', value: 'http://proxy.corp.example:3128' }],
  extraVolumes: [{ name: 'vault', secret: { secretName: 'vault-agent' } }],
  extraVolumeMounts: [{ name: 'vault', mountPath: '/vault', readOnly: true }],
  caBundle: { existingConfigMap: 'corp-ca', key: 'root.pem' },
  commonLabels: { 'corp.example/system': 'atrium' },
  commonAnnotations: { 'corp.example/contact': 'platform@corp.example' },
  podSecurityContext: {
    runAsNonRoot: true,
    runAsUser: 20001,
    runAsGroup: 20001,
    fsGroup: 20001,
    seccompProfile: { type: 'RuntimeDefault' },
  },
  containerSecurityContext: {
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    runAsNonRoot: true,
    privileged: false,
    capabilities: { drop: ['ALL'] },
  },
}
/**
 * The hardening undone, which no site should do: what the API server says of it shows that the dry run would catch a
 * pod that breaks Pod Security (the helm test Pod left out: "restricted" refuses a Pod outright).
 */
const WEAKENED = {
  secrets: { DATABASE_URL: 'postgres://atrium:pw@10.20.0.5:5432/atrium' },
  tests: { enabled: false },
  podSecurityContext: { runAsNonRoot: false, seccompProfile: { type: 'Unconfined' } },
  containerSecurityContext: {
    allowPrivilegeEscalation: true,
    readOnlyRootFilesystem: false,
    runAsNonRoot: false,
    privileged: true,
    capabilities: { drop: [] },
  },
}
/** What ALL_ON cannot show at once: each switch the other way, and the chart's own Secret (its settings given). */
const ALL_OFF = {
  secrets: { DATABASE_URL: 'postgres://atrium:pw@10.20.0.5:5432/atrium', REDIS_URL: 'redis://10.20.0.6:6379' },
  env: { LOG_LEVEL: 'debug', R2_ENDPOINT: 'http://10.20.0.7:9000' },
  service: { type: 'ClusterIP' },
  autoscaling: { enabled: false },
  podDisruptionBudget: { enabled: false },
  networkPolicy: { enabled: false },
  serviceAccount: { create: false, name: 'existing-runner' },
  upgradeGuard: { enabled: false },
  tests: { enabled: false },
  image: { pullPolicy: 'Never' },
  // OpenShift's restricted SCC assigns the user and group (charts/atrium/ci/openshift-values.yaml).
  podSecurityContext: { runAsUser: null, runAsGroup: null, fsGroup: null },
  containerSecurityContext: { readOnlyRootFilesystem: true },
  dnsPolicy: 'Default',
}

t.test(
  "every value of values.yaml, given to the real API server (server-side dry run), is accepted in a namespace that enforces Pod Security 'restricted'",
  { skip },
  async (t) => {
    const cl = c as Cluster
    const defaults = parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Record<string, unknown>
    const ciValues = (name: string) => parse(readFileSync(join(CHART, `ci/${name}-values.yaml`), 'utf8')) as object
    const ns = await restrictedNamespace(t, cl, 'atrium-values')
    const sets: Record<string, object> = {
      // The ServiceMonitor in the namespace the test has (a dry run into one that does not exist is refused).
      'all on': {
        ...ALL_ON,
        metrics: {
          ...ALL_ON.metrics,
          serviceMonitor: { ...ALL_ON.metrics.serviceMonitor, namespace: ns },
          prometheusRule: { ...ALL_ON.metrics.prometheusRule, namespace: ns },
          grafanaDashboards: { ...ALL_ON.metrics.grafanaDashboards, namespace: ns },
        },
      },
      'all off': ALL_OFF,
      enterprise: { ...ciValues('enterprise'), secrets: ALL_OFF.secrets },
      OpenShift: { ...ciValues('openshift'), secrets: ALL_OFF.secrets },
      weakened: WEAKENED,
    }
    // Which documented values no set changes from the default: none may be left (the server's settings, env and
    // secrets, are strings in a ConfigMap and a Secret, which the API server takes as they are; the install above
    // gives the chart the installer's).
    const untouched = leaves(defaults)
      .filter((p) => !p.startsWith('env.') && !p.startsWith('secrets.'))
      .filter(
        (p) =>
          !Object.values(sets).some(
            (s) => at(s, p) !== undefined && JSON.stringify(at(s, p)) !== JSON.stringify(at(defaults, p)),
          ),
      )
    t.same(untouched, [], 'every value is set to something other than its default by one of the sets')

    // The ServiceMonitor's and PrometheusRule's kinds, as the Prometheus Operator defines them (its CRDs, schema left
    // open), if the cluster has none.
    for (const kind of ['ServiceMonitor', 'PrometheusRule']) {
      const plural = `${kind.toLowerCase()}s`
      const crd = `${plural}.monitoring.coreos.com`
      if ((await kubectl(cl, ['get', 'crd', crd])).code === 0) continue
      const made = await kubectl(
        cl,
        ['apply', '-f', '-'],
        30_000,
        stringify({
          apiVersion: 'apiextensions.k8s.io/v1',
          kind: 'CustomResourceDefinition',
          metadata: { name: crd },
          spec: {
            group: 'monitoring.coreos.com',
            names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
            scope: 'Namespaced',
            versions: [
              {
                name: 'v1',
                served: true,
                storage: true,
                schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
              },
            ],
          },
        }),
      )
      t.equal(made.code, 0, made.stderr || `the ${kind} CRD`)
      t.teardown(() => kubectl(cl, ['delete', 'crd', crd]))
      await until(30_000, async () => ((await kubectl(cl, ['get', plural, '-A'])).code === 0 ? true : undefined))
    }
    // The pods' priority class, which the API server's Priority admission looks up.
    if ((await kubectl(cl, ['get', 'priorityclass', ALL_ON.priorityClassName])).code !== 0) {
      const made = await kubectl(cl, ['create', 'priorityclass', ALL_ON.priorityClassName, '--value', '1000'])
      t.equal(made.code, 0, made.stderr || 'the PriorityClass')
      t.teardown(() => kubectl(cl, ['delete', 'priorityclass', ALL_ON.priorityClassName]))
    }
    const version = (await kubeJson<{ serverVersion: { gitVersion: string } }>(cl, ['version'])).serverVersion
      .gitVersion
    // Rendered as Helm renders against the cluster (lookup reads it), then every object given to the API server in a
    // server-side dry run, which validates each one and admits it as it would be created (kubectl shows the API
    // server's warnings; Helm's own dry run keeps them to itself). The helm test Pod is a Pod, which Pod Security
    // "restricted" refuses outright if it breaks the policy; for the Deployment and the Job it warns.
    for (const [name, values] of Object.entries(sets)) {
      const file = join(tempDir(t), 'values.yaml')
      writeFileSync(file, stringify(values))
      const rendered = await helm(cl, [
        'template',
        RELEASE,
        CHART,
        '-n',
        ns,
        '-f',
        file,
        '--dry-run=server',
        '--kube-version',
        version,
      ])
      t.equal(rendered.code, 0, rendered.code ? `${name}: ${rendered.stderr}` : `${name}: rendered against the cluster`)
      const r = await kubectl(cl, ['apply', '--dry-run=server', '-n', ns, '-f', '-'], 60_000, rendered.stdout)
      t.equal(r.code, 0, r.code ? `${name}: ${r.stderr}` : `${name}: accepted`)
      const objects = r.stdout.split('\n').filter((l) => l.endsWith('(server dry run)'))
      const documents = parseAllDocuments(rendered.stdout).filter((d) => d.toJS()).length
      t.equal(objects.length, documents, `${name}: each of the ${documents} objects rendered is accepted`)
      if (name === 'weakened')
        t.match(
          r.stderr,
          /would violate PodSecurity "restricted:[^"]*": privileged[\s\S]*allowPrivilegeEscalation[\s\S]*capabilities[\s\S]*runAsNonRoot[\s\S]*seccompProfile/,
          'weakened: the API server says which rule each dropped setting breaks',
        )
      else t.notMatch(r.stderr, /violate PodSecurity/, `${name}: no pod of it would violate Pod Security "restricted"`)
    }
  },
)

t.test(
  "the chart's own Secret: the master key it made is kept by an upgrade (lookup) and by a reinstall",
  { skip },
  async (t) => {
    const cl = c as Cluster
    const ns = await restrictedNamespace(t, cl, 'atrium-secret')
    const file = join(tempDir(t), 'values.yaml')
    // Nothing needs to run for this: no replicas' worth of pods are waited for, and the database is one that is not there.
    writeFileSync(
      file,
      stringify({ secrets: { DATABASE_URL: `postgres://atrium@${NODE_IP}:1/atrium` }, tests: { enabled: false } }),
    )
    const key = async () =>
      (await kubeJson<{ data: Record<string, string> }>(cl, ['-n', ns, 'get', 'secret', `${RELEASE}-secrets`])).data
        .ENCRYPTION_MASTER_KEY
    const first = await helm(cl, ['install', RELEASE, CHART, '-n', ns, '-f', file])
    t.equal(first.code, 0, first.stderr || 'installed')
    const made = await key()
    t.equal(Buffer.from(made ?? '', 'base64').length, 44, 'a key was made: 32 random bytes, base64')
    const upgraded = await helm(cl, ['upgrade', RELEASE, CHART, '-n', ns, '-f', file])
    t.equal(upgraded.code, 0, upgraded.stderr || 'upgraded')
    t.equal(await key(), made, 'the upgrade kept it')
    const uninstalled = await helm(cl, ['uninstall', RELEASE, '-n', ns, '--wait'])
    t.equal(uninstalled.code, 0, uninstalled.stderr || 'uninstalled')
    t.equal(await key(), made, 'the Secret outlives the release (resource-policy keep)')
    const again = await helm(cl, ['install', RELEASE, CHART, '-n', ns, '-f', file])
    t.equal(again.code, 0, again.stderr || 'installed again')
    t.equal(await key(), made, 'a reinstall finds the same key')
  },
)
