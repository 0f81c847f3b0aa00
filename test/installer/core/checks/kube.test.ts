// Kubernetes checks. No cluster can run here, so the API server is a small fake that answers the
// real REST paths with real object shapes; the client, kubeconfig and credentials are the real ones.
import { execFileSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { createServer as createTlsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import {
  gradeKubeVersion,
  gradeNodes,
  gradeRights,
  gradeStorageClasses,
  installRights,
  kubeChecks,
  kubeconfigSearch,
  parseQuantity,
} from '../../../../installer/core/checks/kube.js'
import { tempDir } from '../../../helpers/platform.js'
import { silentServer } from '../../../helpers/silent.js'

const GiB = 2 ** 30

t.test('quantities are read as Kubernetes writes them', async (t) => {
  t.equal(parseQuantity('3920m'), 3.92)
  t.equal(parseQuantity('4'), 4)
  t.equal(parseQuantity('16Gi'), 16 * GiB)
  t.equal(parseQuantity('16384Ki'), 16 * 2 ** 20)
  t.equal(parseQuantity('2G'), 2e9)
  t.ok(Number.isNaN(parseQuantity('lots')))
})

t.test('version, CPU and memory are graded at, under and over their thresholds', async (t) => {
  t.same(
    ['v1.28.9', 'v1.29.0', 'v1.30.2+k3s1'].map((v) => gradeKubeVersion(v).status),
    ['fail', 'pass', 'pass'],
  )
  const node = (cpu: string, memory: string, schedulable = true) => ({ name: 'n', cpu, memory, schedulable })
  t.same(
    gradeNodes([node('3990m', '8Gi')]).map((c) => c.status),
    ['fail', 'warn'],
  )
  t.same(
    gradeNodes([node('2', '4Gi'), node('2', '4Gi')]).map((c) => c.status),
    ['warn', 'warn'],
    'nodes add up',
  )
  t.same(
    gradeNodes([node('8', '15Gi')]).map((c) => c.status),
    ['pass', 'pass'],
  )
  t.same(
    gradeNodes([node('8', '16Gi', false)]).map((c) => c.status),
    ['fail', 'fail'],
    'a cordoned node gives nothing',
  )
  t.match(gradeNodes([node('3920m', '7Gi')])[1], { found: '7.0 GiB allocatable on 1 schedulable node' })
  t.equal(gradeStorageClasses([{ name: 'local', isDefault: false }]).status, 'warn')
  t.match(gradeStorageClasses([{ name: 'ceph', isDefault: true }]), {
    status: 'pass',
    found: 'default StorageClass ceph',
  })
})

/** A certificate for 127.0.0.1 made with openssl, as a cluster's API server has (tokens need TLS). */
function certificate(t: Test): { key: string; cert: string; certPath: string } {
  const dir = tempDir(t)
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=kube-apiserver',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'cert.pem'),
    ],
    { stdio: 'ignore' },
  )
  return {
    key: readFileSync(join(dir, 'key.pem'), 'utf8'),
    cert: readFileSync(join(dir, 'cert.pem'), 'utf8'),
    certPath: join(dir, 'cert.pem'),
  }
}

/** A kubeconfig for `server` trusting `caPath`, with a bearer token, written to a temporary file. */
function kubeconfig(t: Test, server: string, caPath: string): string {
  const path = join(tempDir(t), 'config')
  writeFileSync(
    path,
    `apiVersion: v1
kind: Config
clusters: [{ name: fake, cluster: { server: "${server}", certificate-authority: "${caPath}" } }]
users: [{ name: admin, user: { token: s3cr3t-token } }]
contexts: [{ name: fake, context: { cluster: fake, user: admin } }]
current-context: fake
`,
  )
  return path
}

/** An API server as the checks ask it; `denied` are the rights (kubectl's names) its RBAC refuses. */
async function fakeApiServer(t: Test, namespaceExists: boolean, denied: readonly string[] = []) {
  const tls = certificate(t)
  const seen: { path: string; auth: string | undefined }[] = []
  const reviews: Record<string, string | undefined>[] = []
  const send = (res: ServerResponse, status: number, body: unknown) =>
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
  /** A list as the API server returns it: its kind, API version and items. */
  const list = (res: ServerResponse, kind: string, apiVersion: string, items: unknown[]) =>
    send(res, 200, { kind, apiVersion, metadata: {}, items })
  const server = createTlsServer({ key: tls.key, cert: tls.cert }, async (req: IncomingMessage, res) => {
    seen.push({ path: req.url ?? '', auth: req.headers.authorization })
    const path = (req.url ?? '').split('?')[0]
    if (req.method === 'POST' && path === '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews') {
      const chunks: Buffer[] = []
      for await (const c of req) chunks.push(c as Buffer)
      const review = JSON.parse(Buffer.concat(chunks).toString()) as {
        spec: { resourceAttributes: Record<string, string | undefined> }
      }
      const a = review.spec.resourceAttributes
      reviews.push(a)
      const name = `${a.verb} ${a.resource}${a.group ? `.${a.group}` : ''}${a.subresource ? `/${a.subresource}` : ''}`
      return send(res, 201, { ...review, status: { allowed: !denied.includes(name) } })
    }
    if (path === '/version')
      return send(res, 200, { major: '1', minor: '30', gitVersion: 'v1.30.2', platform: 'linux/amd64' })
    if (path === '/api/v1/nodes') {
      return list(res, 'NodeList', 'v1', [
        { metadata: { name: 'a' }, spec: {}, status: { allocatable: { cpu: '3920m', memory: '16303428Ki' } } },
        { metadata: { name: 'b' }, spec: {}, status: { allocatable: { cpu: '4', memory: '16Gi' } } },
        {
          metadata: { name: 'c' },
          spec: { unschedulable: true },
          status: { allocatable: { cpu: '64', memory: '256Gi' } },
        },
      ])
    }
    if (path === '/apis/storage.k8s.io/v1/storageclasses') {
      return list(res, 'StorageClassList', 'storage.k8s.io/v1', [
        {
          metadata: { name: 'standard', annotations: { 'storageclass.kubernetes.io/is-default-class': 'true' } },
          provisioner: 'rancher.io/local-path',
        },
      ])
    }
    if (path === '/api/v1/namespaces/ai') {
      if (namespaceExists)
        return send(res, 200, {
          kind: 'Namespace',
          apiVersion: 'v1',
          metadata: { name: 'ai' },
          status: { phase: 'Active' },
        })
      return send(res, 404, {
        kind: 'Status',
        apiVersion: 'v1',
        status: 'Failure',
        message: 'namespaces "ai" not found',
        reason: 'NotFound',
        code: 404,
      })
    }
    send(res, 404, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => server.close())
  return { url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, reviews, ca: tls.certPath }
}

t.test("a reachable cluster is measured with the kubeconfig's credentials", async (t) => {
  const api = await fakeApiServer(t, false)
  const checks = await kubeChecks('ai', { kubeconfig: kubeconfig(t, api.url, api.ca) })
  t.match(checks, [
    { id: 'kube.connect', status: 'pass', found: new RegExp(`${api.url} \\(context fake\\)`) },
    { id: 'kube.version', status: 'pass', found: 'Kubernetes v1.30.2' },
    { id: 'kube.cpu', status: 'warn', found: '7.9 cores allocatable on 2 schedulable nodes' },
    { id: 'kube.memory', status: 'pass' },
    { id: 'kube.storageclass', status: 'pass', found: 'default StorageClass standard' },
    { id: 'kube.namespace', status: 'pass', found: /does not exist yet; the installer creates it/ },
    {
      id: 'kube.rbac',
      status: 'pass',
      found: `all ${installRights(false).length} rights the install needs (SelfSubjectAccessReview)`,
    },
  ])
  t.ok(
    api.seen.every((s) => s.auth === 'Bearer s3cr3t-token'),
    'every request carries the kubeconfig token',
  )
  t.notMatch(JSON.stringify(checks), /s3cr3t-token/)
  const existing = await fakeApiServer(t, true)
  t.match((await kubeChecks('ai', { kubeconfig: kubeconfig(t, existing.url, existing.ca) })).at(-2), {
    status: 'pass',
    found: 'namespace ai exists',
  })
})

t.test(
  'every right the install needs is asked in the namespace, and each one refused is named with how to check it',
  async (t) => {
    const api = await fakeApiServer(t, false, [
      'create networkpolicies.networking.k8s.io',
      'create pods/exec',
      'create namespaces',
    ])
    const rbac = (await kubeChecks('ai', { kubeconfig: kubeconfig(t, api.url, api.ca) })).find(
      (c) => c.id === 'kube.rbac',
    )
    t.match(rbac, {
      status: 'fail',
      found: 'not allowed to create namespaces, create networkpolicies.networking.k8s.io, create pods/exec',
      fix: 'Ask a cluster admin for a Role in ai that grants them (check one with: kubectl auth can-i create namespaces --namespace ai), or use a kubeconfig that has them',
    })
    const asked = api.reviews.map(
      (a) =>
        `${a.verb} ${a.group ? `${a.resource}.${a.group}` : a.resource}${a.subresource ? `/${a.subresource}` : ''} in ${a.namespace ?? 'the cluster'}`,
    )
    for (const right of [
      'create namespaces in the cluster',
      'update secrets in ai',
      'patch deployments.apps in ai',
      'delete jobs.batch in ai',
      'create poddisruptionbudgets.policy in ai',
      'create pods/exec in ai',
    ]) {
      t.ok(asked.includes(right), right)
    }
    const existing = await fakeApiServer(t, true)
    await kubeChecks('ai', { kubeconfig: kubeconfig(t, existing.url, existing.ca) })
    t.notOk(
      existing.reviews.some((a) => a.resource === 'namespaces'),
      'an existing namespace is not created, so that right is not needed',
    )
    t.match(gradeRights('ai', 3, []), {
      status: 'pass',
      found: 'all 3 rights the install needs (SelfSubjectAccessReview)',
    })
  },
)

t.test('no kubeconfig or no API server fails with what to do', async (t) => {
  t.match(await kubeChecks('ai', { kubeconfig: join(tempDir(t), 'missing') }), [
    { id: 'kube.connect', status: 'fail', found: /cannot read the kubeconfig/, fix: /KUBECONFIG/ },
  ])
  const server = createServer()
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`
  await new Promise((r) => server.close(r))
  t.match(await kubeChecks('ai', { kubeconfig: kubeconfig(t, url, certificate(t).certPath) }), [
    { id: 'kube.connect', status: 'fail', found: new RegExp(`${url} did not answer \\(ECONNREFUSED\\)`) },
  ])
})

t.test(
  'an API server that accepts the connection and never answers fails at the deadline, and its connection is closed',
  async (t) => {
    const silent = await silentServer(t)
    const checks = await kubeChecks('ai', {
      kubeconfig: kubeconfig(t, silent.url('https'), certificate(t).certPath),
      timeoutMs: 500,
    })
    t.match(checks, [
      {
        id: 'kube.connect',
        status: 'fail',
        found: `${silent.url('https')} did not answer in 0.5 s`,
        fix: /network path to the API server/,
      },
    ])
    t.ok(await silent.allClosed(), 'no request left hanging to keep the installer from exiting')
  },
)

t.test('without a kubeconfig the check says which files it looked for and how to set KUBECONFIG', async (t) => {
  const home = tempDir(t)
  t.same(kubeconfigSearch({}, home), { files: [join(home, '.kube', 'config')], found: false })
  const given = join(home, 'a.yaml')
  t.same(kubeconfigSearch({ KUBECONFIG: `${given}:${join(home, 'b.yaml')}` }, home), {
    files: [given, join(home, 'b.yaml')],
    found: false,
  })
  writeFileSync(given, 'apiVersion: v1')
  t.equal(kubeconfigSearch({ KUBECONFIG: given }, home).found, true)
  t.equal(kubeconfigSearch({ KUBERNETES_SERVICE_HOST: '10.0.0.1' }, home).found, true, 'in a pod, its service account')
  const saved = { KUBECONFIG: process.env.KUBECONFIG }
  process.env.KUBECONFIG = join(home, 'missing.yaml')
  t.teardown(() => {
    if (saved.KUBECONFIG === undefined) delete process.env.KUBECONFIG
    else process.env.KUBECONFIG = saved.KUBECONFIG
  })
  t.match(await kubeChecks('ai'), [
    {
      id: 'kube.connect',
      status: 'fail',
      found: `no kubeconfig: looked for ${join(home, 'missing.yaml')} (KUBECONFIG)`,
      fix: /^Point KUBECONFIG at the cluster's kubeconfig \(export KUBECONFIG=/,
    },
  ])
})
