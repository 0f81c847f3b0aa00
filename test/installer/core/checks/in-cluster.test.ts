// The Helm preflight's service checks from inside the cluster. No cluster runs here, so an API
// server stands in, and where a kubelet would start the Job's container it runs the container's
// command for real: the server's `check-services` with the Secret's settings as its environment,
// against the test's PostgreSQL, Redis and S3 (or addresses where nothing listens).
import type { ChildProcess } from 'node:child_process'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { DEFAULT_ANSWERS, type Answers } from '../../../../installer/core/answers.js'
import { SERVICE_SETTINGS } from '../../../../common/service-checks.js'
import { inClusterServiceChecks } from '../../../../installer/core/checks/in-cluster.js'
import { runPreflight } from '../../../../installer/core/preflight.js'
import { run } from '../../../../installer/core/run.js'
import { finished, spawnScript } from '../../../helpers/cli.js'
import { configSecrets, secretsIn } from '../../../helpers/leaks.js'
import { freshBucket, services, suffix, tempDir } from '../../../helpers/platform.js'
import { writeKubeconfig } from '../../../helpers/tools.js'

t.setTimeout(300_000)

interface Job {
  metadata: { name: string; uid?: string }
  spec: {
    template: {
      spec: {
        containers: { image: string; args: string[]; envFrom: { secretRef: { name: string } }[] }[]
        automountServiceAccountToken: boolean
      }
    }
    backoffLimit: number
  }
  status: { succeeded?: number; failed?: number }
}

/** The API server; `kubelet` says what happens to a Job's pod: it runs, or its image is never pulled. */
async function fakeCluster(t: Test, o: { namespace: boolean; kubelet: 'runs' | 'image-never-pulled' }) {
  const secrets = new Map<string, Record<string, string>>()
  const jobs = new Map<string, Job>()
  const logs = new Map<string, string>()
  const deleted: string[] = []
  const running: ChildProcess[] = []
  const owners = new Map<string, { kind: string; name: string; uid: string }[]>()
  const started = new Set<string>()
  // As a kubelet does: the container starts once its Job exists and the Secret it reads does too.
  const start = (name: string) => {
    const job = jobs.get(name)
    if (o.kubelet !== 'runs' || !job || started.has(name)) return
    const container = job.spec.template.spec.containers[0]!
    const env = secrets.get(container.envFrom[0]!.secretRef.name)
    if (!env) return
    started.add(name)
    const child = spawnScript('server/cli.ts', container.args, env)
    running.push(child)
    void finished(child).then((r) => {
      logs.set(name, r.stdout)
      job.status = r.code === 0 ? { succeeded: 1 } : { failed: 1 }
    })
  }
  const send = (res: ServerResponse, status: number, body: unknown) =>
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
  const notFound = (res: ServerResponse) =>
    send(res, 404, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 })
  const server = createServer(async (req: IncomingMessage, res) => {
    const url = new URL(req.url ?? '/', 'http://x')
    const chunks: Buffer[] = []
    for await (const c of req) chunks.push(c as Buffer)
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : null
    const path = url.pathname
    if (path === '/api/v1/namespaces/ai')
      return o.namespace
        ? send(res, 200, { kind: 'Namespace', apiVersion: 'v1', metadata: { name: 'ai' } })
        : notFound(res)
    if (req.method === 'POST' && path === '/api/v1/namespaces/ai/secrets') {
      secrets.set(body.metadata.name, body.stringData)
      owners.set(body.metadata.name, body.metadata.ownerReferences ?? [])
      start(body.metadata.name)
      return send(res, 201, body)
    }
    if (req.method === 'POST' && path === '/apis/batch/v1/namespaces/ai/jobs') {
      const job = { ...body, metadata: { ...body.metadata, uid: `uid-${body.metadata.name}` }, status: {} } as Job
      jobs.set(job.metadata.name, job)
      start(job.metadata.name)
      return send(res, 201, job)
    }
    const jobName = /^\/apis\/batch\/v1\/namespaces\/ai\/jobs\/([^/]+)$/.exec(path)?.[1]
    if (jobName) {
      if (req.method === 'DELETE') {
        deleted.push(
          `job ${jobName} (${url.searchParams.get('propagationPolicy') ?? body?.propagationPolicy ?? 'default'})`,
        )
        return send(res, 200, { kind: 'Status', apiVersion: 'v1', status: 'Success' })
      }
      const job = jobs.get(jobName)
      return job ? send(res, 200, job) : notFound(res)
    }
    const secretName = /^\/api\/v1\/namespaces\/ai\/secrets\/([^/]+)$/.exec(path)?.[1]
    if (secretName && req.method === 'DELETE') {
      deleted.push(`secret ${secretName}`)
      return send(res, 200, { kind: 'Status', apiVersion: 'v1', status: 'Success' })
    }
    if (path === '/api/v1/namespaces/ai/pods') {
      const name = (url.searchParams.get('labelSelector') ?? '').replace('job-name=', '')
      const waiting =
        o.kubelet === 'image-never-pulled'
          ? { waiting: { reason: 'ImagePullBackOff', message: 'Back-off pulling image' } }
          : { running: {} }
      return send(res, 200, {
        kind: 'PodList',
        apiVersion: 'v1',
        metadata: {},
        items: jobs.has(name)
          ? [
              {
                metadata: { name: `${name}-x7k2p` },
                status: { phase: 'Pending', containerStatuses: [{ name: 'check', state: waiting }] },
              },
            ]
          : [],
      })
    }
    const logOf = /^\/api\/v1\/namespaces\/ai\/pods\/(.+)-x7k2p\/log$/.exec(path)?.[1]
    if (logOf) return res.writeHead(200, { 'content-type': 'text/plain' }).end(logs.get(logOf) ?? '')
    notFound(res)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => {
    for (const c of running) c.kill()
    return new Promise<void>((r) => server.close(() => r()))
  })
  const kubeconfig = writeKubeconfig(t, `http://127.0.0.1:${(server.address() as AddressInfo).port}`, {
    token: 'admin-token',
  })
  return { kubeconfig, secrets, owners, jobs, deleted }
}

/** The site's services as the test has them (the real ones, or addresses where nothing listens). */
async function siteValues(t: Test): Promise<Record<string, string>> {
  return {
    DATABASE_URL: services.databaseUrl || 'postgres://atrium:pw@127.0.0.1:1/atrium',
    REDIS_URL: services.redisUrl || 'redis://127.0.0.1:1',
    R2_ENDPOINT: services.s3Endpoint || 'http://127.0.0.1:1',
    R2_BUCKET: services.s3Endpoint ? await freshBucket(t) : `atrium-t-${suffix()}`,
    R2_ACCESS_KEY_ID: services.s3AccessKey || 'atrium',
    R2_SECRET_ACCESS_KEY: services.s3SecretKey || 'not-a-secret',
    PUBLIC_URL: 'https://atrium.corp.example',
  }
}

const reached = (url: string) => (url.includes(':1/') || url.endsWith(':1') ? 'fail' : 'pass')

t.test(
  'the checks run in a Job of the server image, with the settings in a Secret of their own, and both are deleted after',
  async (t) => {
    const cluster = await fakeCluster(t, { namespace: true, kubelet: 'runs' })
    const values = await siteValues(t)
    const r = await inClusterServiceChecks(values, {
      namespace: 'ai',
      image: 'registry.corp.example:5000/atrium/atrium-server:9.9.9',
      kubeconfig: cluster.kubeconfig,
      pollMs: 100,
      deadlineMs: 60_000,
    })
    if (!('checks' in r)) return t.fail(r.unavailable)
    t.match(
      r.checks.find((c) => c.id === 'postgres.connect'),
      { status: reached(values.DATABASE_URL!), found: / \(from a pod in ai\)$/ },
    )
    t.match(
      r.checks.find((c) => c.id === 'redis.connect'),
      { status: reached(values.REDIS_URL!), found: / \(from a pod in ai\)$/ },
    )
    t.match(
      r.checks.find((c) => c.id === 's3.roundtrip'),
      { status: reached(values.R2_ENDPOINT!) },
    )

    const [job] = [...cluster.jobs.values()]
    const pod = job!.spec.template.spec
    t.match(pod.containers[0], {
      image: 'registry.corp.example:5000/atrium/atrium-server:9.9.9',
      args: ['check-services'],
      envFrom: [{ secretRef: { name: job!.metadata.name } }],
    })
    t.equal(pod.automountServiceAccountToken, false, 'the pod gets no token to the API')
    t.equal(job!.spec.backoffLimit, 0)
    const [sent] = [...cluster.secrets.values()]
    // Every secret value of the settings checked (in any spelling): in the Secret, and nowhere in the Job's spec.
    const secrets = configSecrets(
      Object.fromEntries(SERVICE_SETTINGS.filter((k) => values[k]).map((k) => [k, values[k]!])),
    )
    t.ok(Object.keys(secrets).length >= 2, `looked for ${Object.keys(secrets).join(', ')}`)
    t.same(secretsIn([JSON.stringify(sent)], secrets), Object.keys(secrets), 'the Secret holds every one')
    t.same(secretsIn([JSON.stringify(job)], secrets), [], 'the Job itself holds none')
    t.same(
      Object.keys(sent!).sort(),
      SERVICE_SETTINGS.filter((k) => values[k]).sort(),
      'the Secret holds the checked settings and nothing else (no PUBLIC_URL)',
    )
    t.match(
      cluster.owners.get(job!.metadata.name),
      [{ kind: 'Job', name: job!.metadata.name, uid: job!.metadata.uid }],
      'the Secret belongs to the Job: it goes with it, also if the installer is stopped',
    )
    t.same(cluster.deleted, [`job ${job!.metadata.name} (Background)`, `secret ${job!.metadata.name}`])
  },
)

t.test('a pod whose image is never pulled ends at the deadline, says why, and leaves nothing behind', async (t) => {
  const cluster = await fakeCluster(t, { namespace: true, kubelet: 'image-never-pulled' })
  const r = await inClusterServiceChecks(await siteValues(t), {
    namespace: 'ai',
    image: 'atrium/atrium-server:9.9.9',
    kubeconfig: cluster.kubeconfig,
    pollMs: 100,
    deadlineMs: 1500,
  })
  t.match(r, {
    unavailable:
      /^the check Job atrium-preflight-[0-9a-f]{8} did not finish in 1\.5 s \(ImagePullBackOff: Back-off pulling image\)$/,
  })
  t.equal(cluster.deleted.length, 2, 'the Job and the Secret are deleted')
})

t.test(
  'the Helm preflight checks the services from the cluster when it can, and from here, saying why, when the namespace is not there yet',
  async (t) => {
    const answers: Answers = { ...DEFAULT_ANSWERS, target: 'helm', namespace: 'ai', dataPath: tempDir(t), config: {} }
    const noTools = (file: string, args: readonly string[]) => run(file, args, { env: { PATH: tempDir(t) } })
    const values = await siteValues(t)
    const preflightOn = (kubeconfig: string) =>
      runPreflight(answers, values, { runner: noTools, kubeconfig, clockOffsetMs: 0 })
    const there = await fakeCluster(t, { namespace: true, kubelet: 'runs' })
    const inside = await preflightOn(there.kubeconfig)
    t.match(
      inside.find((c) => c.id === 'services.where'),
      { status: 'pass', found: 'a pod in ai, as Atrium will reach them' },
    )
    t.match(
      inside.find((c) => c.id === 'postgres.connect'),
      { found: / \(from a pod in ai\)$/ },
    )

    const missing = await fakeCluster(t, { namespace: false, kubelet: 'runs' })
    const outside = await preflightOn(missing.kubeconfig)
    t.match(
      outside.find((c) => c.id === 'services.where'),
      {
        status: 'warn',
        found: 'this machine: the namespace ai does not exist yet (the install creates it)',
        fix: /run the preflight again once ai exists/,
      },
    )
    t.match(
      outside.find((c) => c.id === 'postgres.connect'),
      { status: reached(values.DATABASE_URL!) },
    )
    t.notMatch(outside.find((c) => c.id === 'postgres.connect')!.found, /from a pod/)
    t.equal(missing.jobs.size, 0, 'nothing was started')
  },
)
