// The Helm chart, rendered and linted by the real Helm: what it deploys, how it is locked down,
// and what an upgrade keeps.
import { cpSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { parse } from 'yaml'
import { CONTAINER_FIXED } from '../../config/bundles.js'
import { IMAGES } from '../../config/images.js'
import { VERSION } from '../../common/version.js'
import { renderHelmFiles } from '../../installer/core/helm-values.js'
import { tempDir } from '../helpers/platform.js'
import {
  BASE_VALUES,
  CHART,
  KUBE_VERSION,
  fakeCluster,
  find,
  helmNotes,
  helmTemplate,
  needs,
  runTool,
  type Manifest,
} from '../helpers/tools.js'

const skip = needs('helm')

const VARIANTS: Record<string, Record<string, unknown>> = {
  default: {},
  'air-gapped': {
    airGapped: true,
    global: { imageRegistry: 'registry.corp.example:5000', imagePullSecrets: ['regcred'] },
  },
  existingSecret: { existingSecret: 'atrium-from-vault' },
  hpa: {
    autoscaling: { enabled: true, minReplicas: 3, maxReplicas: 12 },
    ingress: { enabled: true, host: 'atrium.example.com', tls: { enabled: true } },
  },
  monitored: {
    metrics: {
      serviceMonitor: { enabled: true, labels: { release: 'prometheus' } },
      grafanaDashboards: { enabled: true, namespace: 'monitoring' },
    },
    airGapped: true,
    networkPolicy: { servicesCidrs: ['10.20.0.0/16'] },
  },
  extras: {
    caBundle: { existingConfigMap: 'corp-ca' },
    extraEnvVars: [{ name: 'HTTPS_PROXY', value: 'http://proxy.corp.example:3128' }],
    extraVolumes: [{ name: 'vault', secret: { secretName: 'vault-agent' } }],
    extraVolumeMounts: [{ name: 'vault', mountPath: '/vault', readOnly: true }],
  },
}

/** The values each kind of site starts from: the chart's ci/ files (which chart-testing reads too), documented there. */
const ciValues = (name: string): Record<string, unknown> =>
  parse(readFileSync(join(CHART, `ci/${name}-values.yaml`), 'utf8'))
const SITES: Record<string, Record<string, unknown>> = {
  default: {},
  enterprise: ciValues('enterprise'),
  OpenShift: ciValues('openshift'),
}

interface Scored {
  type_meta: { kind: string }
  object_meta: { name: string }
  checks: { check: { id: string }; grade: number; skipped: boolean }[]
}
/** kube-score on a render: its exit code and its findings by grade, each as `Kind name: check-id`. */
async function kubeScore(t: Test, yaml: string, flags: string[] = []) {
  const file = join(tempDir(t), 'render.yaml')
  writeFileSync(file, yaml)
  const r = await runTool('kube-score', ['score', file, '--output-format', 'json', ...flags])
  const objects = JSON.parse(r.stdout) as Scored[]
  // kube-score's grades: 1 CRITICAL, 5 WARNING, 7 almost OK, 10 OK.
  const graded = (grade: number) =>
    objects.flatMap((o) =>
      o.checks
        .filter((c) => !c.skipped && c.grade === grade)
        .map((c) => `${o.type_meta.kind} ${o.object_meta.name}: ${c.check.id}`),
    )
  return { code: r.code, critical: graded(1), warning: graded(5) }
}

const podSpecs = (manifests: Manifest[]) => [
  ...manifests.filter((m) => m.kind === 'Deployment' || m.kind === 'Job').map((m) => m.spec.template.spec),
  ...manifests.filter((m) => m.kind === 'Pod').map((m) => m.spec),
]
const containers = (spec: any): any[] => [...(spec.initContainers ?? []), ...spec.containers] // eslint-disable-line @typescript-eslint/no-explicit-any -- a pod spec from parsed YAML

t.test(
  'helm lint --strict passes with the default, enterprise, OpenShift and every other variant',
  { skip },
  async (t) => {
    const dir = tempDir(t)
    const base = join(dir, 'base.yaml')
    writeFileSync(base, JSON.stringify(BASE_VALUES))
    for (const [name, values] of Object.entries({ ...VARIANTS, ...SITES })) {
      const file = join(dir, `${name}.yaml`)
      writeFileSync(file, JSON.stringify(values))
      const r = await runTool('helm', [
        'lint',
        '--strict',
        CHART,
        '-f',
        base,
        '-f',
        file,
        '--kube-version',
        KUBE_VERSION,
      ])
      t.equal(r.code, 0, `${name}: ${r.stdout}${r.stderr}`)
      t.match(r.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/)
      t.notMatch(r.stdout, /\[(WARNING|ERROR)\]/, `${name}: nothing but the icon's [INFO]`)
    }
  },
)

t.test(
  'kube-score: the default, enterprise and OpenShift values have no CRITICAL finding; the only warnings are the open egress of a connected site',
  { skip: skip || needs('kube-score') },
  async (t) => {
    for (const [name, values] of Object.entries(SITES)) {
      const r = await helmTemplate(t, [values])
      t.equal(r.code, 0, `${name}: ${r.stderr}`)
      const scored = await kubeScore(t, r.yaml)
      t.same(scored.critical, [], `${name}: no CRITICAL`)
      t.equal(scored.code, 0, `${name}: kube-score exits 0`)
      const pods = r.manifests.filter((m) => ['Deployment', 'Job', 'Pod'].includes(m.kind))
      // Connected, egress is open by design (models, webhooks, identity providers anywhere); air-gapped it is not.
      const airGapped = values.airGapped === true
      t.same(
        [...scored.warning].sort(),
        airGapped ? [] : pods.map((m) => `${m.kind} ${m.metadata.name}: pod-networkpolicy`).sort(),
        `${name}: ${airGapped ? 'no warning' : 'the egress warning of each pod, nothing else'}`,
      )
    }
  },
)

t.test(
  "the chart's kube-score exceptions hide exactly what they name: with them disabled, each object's CRITICAL findings are its annotation's",
  { skip: skip || needs('kube-score') },
  async (t) => {
    const expected: Record<string, string> = {
      default: 'container-image-pull-policy',
      enterprise: 'container-image-pull-policy',
      OpenShift: 'container-image-pull-policy,container-security-context-user-group-id',
      'OpenShift, pull Always': 'container-security-context-user-group-id',
      'pull Always': '',
    }
    const cases = {
      ...SITES,
      'OpenShift, pull Always': { ...SITES.OpenShift, image: { pullPolicy: 'Always' } },
      'pull Always': { image: { pullPolicy: 'Always' } },
    }
    for (const [name, values] of Object.entries(cases)) {
      const r = await helmTemplate(t, [values])
      const scored = await kubeScore(t, r.yaml, ['--disable-ignore-checks-annotations'])
      const pods = r.manifests.filter((m) => ['Deployment', 'Job', 'Pod'].includes(m.kind))
      t.same(
        pods.map((m) => m.metadata.annotations?.['kube-score/ignore'] ?? ''),
        pods.map(() => expected[name]),
        `${name}: the exceptions annotated`,
      )
      t.same(
        [...scored.critical].sort(),
        pods
          .flatMap((m) =>
            expected[name] ? expected[name].split(',').map((id) => `${m.kind} ${m.metadata.name}: ${id}`) : [],
          )
          .sort(),
        `${name}: and nothing else is CRITICAL`,
      )
    }
    // Root is a user set, not one left to OpenShift: never excepted.
    const root = await helmTemplate(t, [SITES.OpenShift!, { podSecurityContext: { runAsUser: 0, runAsGroup: 0 } }])
    const scored = await kubeScore(t, root.yaml)
    t.equal(scored.code, 1, 'root: kube-score fails')
    t.same(
      scored.critical.filter((f) => f.endsWith('container-security-context-user-group-id')).length,
      3,
      'root: the low user and group IDs are CRITICAL on every pod',
    )
  },
)

t.test(
  'kube-score finds nothing critical in any variant; its one exception is annotated where it applies',
  { skip: skip || needs('kube-score') },
  async (t) => {
    const dir = tempDir(t)
    for (const [name, values] of Object.entries({ ...VARIANTS, 'pull Always': { image: { pullPolicy: 'Always' } } })) {
      const r = await helmTemplate(t, [values])
      t.equal(r.code, 0, `${name}: ${r.stderr}`)
      const file = join(dir, `${name}.yaml`)
      writeFileSync(file, r.yaml)
      const scored = await runTool('kube-score', ['score', file, '--output-format', 'ci'])
      const critical = scored.stdout.split('\n').filter((l) => l.startsWith('[CRITICAL]'))
      t.same(critical, [], `${name}: ${critical.join('; ')}`)
      t.equal(scored.code, 0, `${name}: kube-score exits 0`)
      const always = name === 'pull Always'
      for (const m of r.manifests.filter((m) => ['Deployment', 'Job', 'Pod'].includes(m.kind))) {
        t.equal(
          m.metadata.annotations?.['kube-score/ignore'],
          always ? undefined : 'container-image-pull-policy',
          `${name}: ${m.kind}`,
        )
      }
    }
  },
)

t.test(
  'every variant renders; every pod runs non-root, read-only, without capabilities, under RuntimeDefault seccomp',
  { skip },
  async (t) => {
    for (const [name, values] of Object.entries(VARIANTS)) {
      const r = await helmTemplate(t, [values])
      t.equal(r.code, 0, `${name}: ${r.stderr}`)
      // The server, its migration Job and the helm test Pod: a render that lost one would check fewer.
      t.same(
        r.manifests
          .filter((m) => ['Deployment', 'Job', 'Pod'].includes(m.kind))
          .map((m) => m.kind)
          .sort(),
        ['Deployment', 'Job', 'Pod'],
        `${name}: every pod is checked`,
      )
      for (const spec of podSpecs(r.manifests)) {
        t.equal(spec.automountServiceAccountToken, false, `${name}: no service account token`)
        t.match(spec.securityContext, {
          runAsNonRoot: true,
          runAsUser: 10001,
          seccompProfile: { type: 'RuntimeDefault' },
        })
        for (const c of containers(spec)) {
          t.match(
            c.securityContext,
            {
              allowPrivilegeEscalation: false,
              readOnlyRootFilesystem: true,
              runAsNonRoot: true,
              capabilities: { drop: ['ALL'] },
            },
            `${name}/${c.name}`,
          )
        }
      }
      const sa = find(r.manifests, 'ServiceAccount')
      t.equal(sa?.automountServiceAccountToken, false)
    }
  },
)

t.test(
  'the server probes /healthz for liveness and start-up and /readyz for readiness, and has resources',
  { skip },
  async (t) => {
    const { manifests } = await helmTemplate(t)
    const server = find(manifests, 'Deployment', 'atrium')!.spec.template.spec.containers[0]
    t.match(server.livenessProbe.httpGet, { path: '/healthz', port: 'http' })
    t.match(server.startupProbe.httpGet, { path: '/healthz', port: 'http' })
    t.match(server.readinessProbe.httpGet, { path: '/readyz', port: 'http' })
    t.match(server.resources, { requests: { cpu: '500m', memory: '512Mi' }, limits: { memory: '2Gi' } })
    t.same(server.ports, [
      { name: 'http', containerPort: 8080, protocol: 'TCP' },
      { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
    ])
    const test = find(manifests, 'Pod')!
    t.equal(test.metadata.annotations!['helm.sh/hook'], 'test')
    t.match(test.spec.containers[0].command.join(' '), /\/readyz/)
  },
)

t.test('the ConfigMap holds the settings, with the ones the container depends on fixed', { skip }, async (t) => {
  const { manifests } = await helmTemplate(t, [
    { env: { LOG_LEVEL: 'debug', MAX_REQUEST_BODY_BYTES: 10485760, PUBLIC_URL: 'https://ai.example.com' } },
  ])
  const data = find(manifests, 'ConfigMap')!.data
  t.match(data, CONTAINER_FIXED)
  t.match(data, {
    LOG_LEVEL: 'debug',
    MAX_REQUEST_BODY_BYTES: '10485760',
    PUBLIC_URL: 'https://ai.example.com',
    AIR_GAPPED: 'false',
  })
  t.notOk('R2_PUBLIC_ENDPOINT' in data, "empty settings are left to the server's defaults")
})

t.test(
  'airGapped turns outside features off; global.imageRegistry moves every image, with its pull secrets',
  { skip },
  async (t) => {
    const { manifests } = await helmTemplate(t, [VARIANTS['air-gapped']!])
    t.equal(find(manifests, 'ConfigMap')!.data.AIR_GAPPED, 'true')
    const server = IMAGES.find((i) => i.name === 'atrium-server')!
    const images = podSpecs(manifests).flatMap((s) => containers(s).map((c) => c.image))
    t.ok(images.length >= 4)
    for (const image of images) t.equal(image, `registry.corp.example:5000/${server.repository}:${VERSION}`)
    for (const spec of podSpecs(manifests)) t.same(spec.imagePullSecrets, [{ name: 'regcred' }])
  },
)

t.test('existingSecret: the chart makes no Secret and every pod reads the named one', { skip }, async (t) => {
  const { manifests } = await helmTemplate(t, [VARIANTS.existingSecret!])
  t.notOk(find(manifests, 'Secret'))
  const envFroms = podSpecs(manifests.filter((m) => m.kind !== 'Pod')).flatMap((spec) =>
    containers(spec).map((c) => c.envFrom?.[1]),
  )
  t.ok(
    envFroms.length >= 3,
    `the server, its wait-for-migrations step and the migration Job: ${envFroms.length} containers`,
  )
  t.same(
    envFroms,
    envFroms.map(() => ({ secretRef: { name: 'atrium-from-vault' } })),
  )
})

t.test(
  'a first install reading the cluster makes a 32-byte master key, and the Secret is kept when the release is deleted',
  { skip },
  async (t) => {
    const cluster = await fakeCluster(t, [defaultServiceAccount])
    const { code, manifests, stderr } = await helmTemplate(
      t,
      [{ secrets: { DATABASE_URL: 'postgres://a:b@db:5432/atrium', ENCRYPTION_MASTER_KEY: '' } }],
      ['--dry-run=server', '--kubeconfig', cluster.kubeconfig],
    )
    t.equal(code, 0, stderr)
    const secret = find(manifests, 'Secret')!
    t.equal(secret.metadata.annotations!['helm.sh/resource-policy'], 'keep')
    const key = Buffer.from(secret.data.ENCRYPTION_MASTER_KEY, 'base64').toString()
    t.equal(Buffer.from(key, 'base64').length, 32)
    t.equal(Buffer.from(secret.data.DATABASE_URL, 'base64').toString(), 'postgres://a:b@db:5432/atrium')
    t.notOk('REDIS_URL' in secret.data, 'empty secrets are left out')
  },
)

t.test('HPA values: an autoscaler instead of a fixed replica count, a PDB and a TLS Ingress', { skip }, async (t) => {
  const { manifests } = await helmTemplate(t, [VARIANTS.hpa!])
  t.match(find(manifests, 'HorizontalPodAutoscaler')!.spec, {
    minReplicas: 3,
    maxReplicas: 12,
    scaleTargetRef: { kind: 'Deployment', name: 'atrium' },
  })
  t.notOk('replicas' in find(manifests, 'Deployment')!.spec)
  t.equal(find(manifests, 'PodDisruptionBudget')!.spec.minAvailable, 1)
  t.match(find(manifests, 'Ingress')!.spec, {
    tls: [{ hosts: ['atrium.example.com'] }],
    rules: [{ host: 'atrium.example.com' }],
  })
  const one = await helmTemplate(t, [{ replicaCount: 1 }])
  t.notOk(find(one.manifests, 'PodDisruptionBudget'), 'no PDB for a single replica: it would block node drains')
})

t.test('the NetworkPolicy admits the namespace and the listed peers to the HTTP port only', { skip }, async (t) => {
  const peer = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } }
  const { manifests } = await helmTemplate(t, [{ networkPolicy: { enabled: true, ingressFrom: [peer] } }])
  const np = find(manifests, 'NetworkPolicy')!
  t.same(np.spec.ingress[0].from, [{ podSelector: {} }, peer])
  t.same(np.spec.ingress[0].ports, [{ port: 'http', protocol: 'TCP' }])
  t.same(np.spec.policyTypes, ['Ingress'])
})

t.test(
  'with ingress enabled the ingress controller may reach the server; its namespace is a value',
  { skip },
  async (t) => {
    const controller = (ns: string) => ({ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } } })
    const on = { ingress: { enabled: true, host: 'atrium.example.com' } }
    const byDefault = find((await helmTemplate(t, [on])).manifests, 'NetworkPolicy')!
    t.same(byDefault.spec.ingress[0].from, [{ podSelector: {} }, controller('ingress-nginx')])
    const openshift = find(
      (await helmTemplate(t, [{ ...on, networkPolicy: { ingressControllerNamespace: 'openshift-ingress' } }]))
        .manifests,
      'NetworkPolicy',
    )!
    t.same(openshift.spec.ingress[0].from, [{ podSelector: {} }, controller('openshift-ingress')])
    const off = find((await helmTemplate(t, [])).manifests, 'NetworkPolicy')!
    t.same(off.spec.ingress[0].from, [{ podSelector: {} }], 'no ingress, no controller admitted')
  },
)

const jobName = (manifests: Manifest[]) => find(manifests, 'Job')!.metadata.name

t.test(
  'the migration Job is named by chart version, app version and values: the same render twice, a new name exactly when one changes',
  { skip },
  async (t) => {
    const base = jobName((await helmTemplate(t)).manifests)
    t.match(base, /^atrium-migrate-[0-9a-f]{10}$/)
    t.equal(jobName((await helmTemplate(t)).manifests), base, 'helm template is stable')
    t.equal(jobName((await helmTemplate(t, [{}])).manifests), base, 'an empty values file changes nothing')
    t.not(jobName((await helmTemplate(t, [{ env: { LOG_LEVEL: 'debug' } }])).manifests), base, 'values changed')
    t.not(jobName((await helmTemplate(t, [{ image: { tag: '9.9.9' } }])).manifests), base, 'app version changed')
    const copy = join(tempDir(t), 'atrium')
    cpSync(CHART, copy, { recursive: true })
    const chartYaml = join(copy, 'Chart.yaml')
    writeFileSync(chartYaml, readFileSync(chartYaml, 'utf8').replace(/^version: .*$/m, 'version: 99.0.0'))
    t.not(jobName((await helmTemplate(t, [], [], copy)).manifests), base, 'chart version changed')
    const deployment = find((await helmTemplate(t)).manifests, 'Deployment')!
    t.equal(
      deployment.spec.template.spec.initContainers[0].args[0],
      'wait-for-migrations',
      'pods wait for the Job instead of migrating themselves',
    )
  },
)

t.test(
  "a changed setting changes the pods' checksum annotations (a rollout), an unchanged one does not",
  { skip },
  async (t) => {
    const ann = async (values: Record<string, unknown>[]) =>
      find((await helmTemplate(t, values)).manifests, 'Deployment')!.spec.template.metadata.annotations
    const a = await ann([])
    t.same(await ann([]), a)
    t.not((await ann([{ env: { LOG_LEVEL: 'warn' } }]))['checksum/config'], a['checksum/config'])
    t.not((await ann([{ secrets: { LICENSE_KEY: 'x.y.z' } }]))['checksum/secret'], a['checksum/secret'])
  },
)

t.test('values that break the schema fail helm template with a message naming the key', { skip }, async (t) => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ replicaCount: 'two' }, /replicaCount/],
    [{ env: { LOG_LEVEL: 'loud' } }, /LOG_LEVEL/],
    [{ env: { PORT: 9090 } }, /PORT/],
    [{ env: { RATE_LIMIT_MAX: 0 } }, /RATE_LIMIT_MAX/],
    [{ env: { PUBLIC_URL: 'ftp://x' } }, /PUBLIC_URL/],
    [{ imagePullSecret: 'typo' }, /imagePullSecret/],
    [{ image: { digest: 'sha256:short' } }, /digest/],
  ]
  for (const [values, message] of cases) {
    const r = await helmTemplate(t, [values])
    t.not(r.code, 0, JSON.stringify(values))
    t.match(r.stderr, /values don't meet the specifications of the schema/)
    t.match(r.stderr, message)
  }
  const noHost = await helmTemplate(t, [{ ingress: { enabled: true } }])
  t.match(noHost.stderr, /ingress.host is required/)
})

t.test('a private CA and extra environment, volumes and mounts reach every Atrium container', { skip }, async (t) => {
  const { code, manifests, stderr } = await helmTemplate(t, [VARIANTS.extras!])
  t.equal(code, 0, stderr)
  const pods = manifests.filter((m) => m.kind === 'Deployment' || m.kind === 'Job').map((m) => m.spec.template.spec)
  t.equal(pods.length, 2, 'the server and the migration Job')
  for (const pod of pods) {
    t.ok(
      pod.volumes.some((v: Manifest) => v.name === 'tmp'),
      'the chart keeps its own volumes',
    )
    t.ok(
      pod.volumes.some((v: Manifest) => v.name === 'ca-bundle' && v.configMap?.name === 'corp-ca'),
      'the CA bundle is a volume',
    )
    t.ok(
      pod.volumes.some((v: Manifest) => v.name === 'vault'),
      'and the extra volume',
    )
    for (const c of containers(pod)) {
      t.same(
        c.env.map((e: { name: string; value: string }) => [e.name, e.value]),
        [
          ['NODE_EXTRA_CA_CERTS', '/etc/atrium/ca/ca.crt'],
          ['HTTPS_PROXY', 'http://proxy.corp.example:3128'],
        ],
        `${c.name}: the CA for Node, and the extra variable`,
      )
      t.same(
        c.volumeMounts.map((m: { name: string }) => m.name),
        [
          ...c.volumeMounts
            .map((m: { name: string }) => m.name)
            .filter((n: string) => n !== 'ca-bundle' && n !== 'vault'),
          'ca-bundle',
          'vault',
        ],
        `${c.name}: mounted after the chart's own`,
      )
    }
  }
  const none = await helmTemplate(t, [])
  const server = find(none.manifests, 'Deployment')!.spec.template.spec.containers[0]
  t.equal(server.env, undefined, 'nothing added by default')
})

t.test(
  'OpenShift: the user and group may be left to the SCC; commonLabels reach every object; the migration Job is cleaned up',
  { skip },
  async (t) => {
    const { code, manifests, stderr } = await helmTemplate(t, [
      {
        podSecurityContext: { runAsUser: null, runAsGroup: null, fsGroup: null },
        commonLabels: { 'cost-center': 'ai-platform' },
      },
    ])
    t.equal(code, 0, stderr)
    for (const m of manifests)
      t.equal(m.metadata.labels?.['cost-center'], 'ai-platform', `${m.kind} ${m.metadata.name}`)
    const pods = manifests.filter((m) => m.kind === 'Deployment' || m.kind === 'Job').map((m) => m.spec.template.spec)
    for (const pod of pods) {
      t.same(
        pod.securityContext,
        { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
        'no uid, gid or fsGroup: the SCC assigns them',
      )
      for (const c of containers(pod))
        t.match(c.securityContext, {
          runAsNonRoot: true,
          readOnlyRootFilesystem: true,
          allowPrivilegeEscalation: false,
          capabilities: { drop: ['ALL'] },
        })
    }
    t.equal(find(manifests, 'Job')!.spec.ttlSecondsAfterFinished, 86400)
  },
)

t.test(
  'metrics: a ServiceMonitor on the metrics port when asked, and /metrics never behind the Ingress',
  { skip },
  async (t) => {
    const off = await helmTemplate(t, [VARIANTS.hpa!])
    t.notOk(find(off.manifests, 'ServiceMonitor'), 'none by default: the CRD may not exist')
    const { code, manifests, stderr } = await helmTemplate(t, [
      VARIANTS.hpa!,
      { metrics: { serviceMonitor: { enabled: true, labels: { release: 'prometheus' }, interval: '15s' } } },
    ])
    t.equal(code, 0, stderr)
    const monitor = find(manifests, 'ServiceMonitor')!
    t.equal(monitor.apiVersion, 'monitoring.coreos.com/v1')
    t.equal(monitor.metadata.labels!.release, 'prometheus', 'the labels the Prometheus selects by')
    t.same(monitor.spec.endpoints, [
      {
        port: 'metrics',
        path: '/metrics',
        interval: '15s',
        scrapeTimeout: '10s',
        // The job label the shipped alert rules and dashboards select by.
        relabelings: [{ action: 'replace', targetLabel: 'job', replacement: 'atrium' }],
      },
    ])
    const service = find(manifests, 'Service')!
    t.match(monitor.spec.selector.matchLabels, {
      'app.kubernetes.io/name': 'atrium',
      'app.kubernetes.io/instance': 'atrium',
    })
    for (const [k, v] of Object.entries(monitor.spec.selector.matchLabels))
      t.equal(service.metadata.labels![k], v, `the Service carries ${k}`)
    t.same(
      service.spec.ports.map((p: { name: string; targetPort: string }) => [p.name, p.targetPort]),
      [
        ['http', 'http'],
        ['metrics', 'metrics'],
      ],
    )
    t.equal(
      find(manifests, 'ConfigMap', 'atrium-config')!.data.METRICS_PORT,
      '9090',
      'the server serves /metrics on 9090 only',
    )
    const paths = find(manifests, 'Ingress')!.spec.rules.flatMap((r: any) => r.http.paths) // eslint-disable-line @typescript-eslint/no-explicit-any -- parsed YAML
    t.same(
      paths.map((p: { backend: { service: { port: unknown } } }) => p.backend.service.port),
      [{ name: 'http' }],
      'the Ingress routes to the API port only',
    )
    const policy = find(manifests, 'NetworkPolicy')!
    t.same(policy.spec.ingress.find((r: { ports: { port: string }[] }) => r.ports[0]!.port === 'metrics').from, [
      { podSelector: {} },
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
    ])
  },
)

const egressOf = async (t: Test, values: Record<string, unknown>[]) => {
  const r = await helmTemplate(t, values)
  t.equal(r.code, 0, r.stderr)
  return { policy: find(r.manifests, 'NetworkPolicy')!, manifests: r.manifests }
}
const inNamespace = (ns: string) => ({ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } } })

t.test(
  "air-gapped: the NetworkPolicy lets out DNS to the cluster's DNS pods, this namespace's pods, the service networks and OUTBOUND_ALLOWED_NETWORKS only, for every pod of the release",
  { skip },
  async (t) => {
    const connected = await helmTemplate(t, [])
    const open = find(connected.manifests, 'NetworkPolicy')!
    t.same(open.spec.policyTypes, ['Ingress'], 'connected: egress is not restricted')
    const { policy, manifests } = await egressOf(t, [
      {
        airGapped: true,
        env: { OUTBOUND_ALLOWED_NETWORKS: '10.0.0.0/8, fd00::/8' },
        networkPolicy: { servicesCidrs: ['192.168.10.0/24', { cidr: '10.20.0.9/32', ports: [5432, 6379] }] },
      },
    ])
    t.same(policy.spec.policyTypes, ['Ingress', 'Egress'])
    t.same(policy.spec.egress, [
      {
        to: [{ ...inNamespace('kube-system'), podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } }],
        ports: [
          { port: 53, protocol: 'UDP' },
          { port: 53, protocol: 'TCP' },
        ],
      },
      { to: [{ podSelector: {} }] },
      {
        to: [{ ipBlock: { cidr: '10.20.0.9/32' } }],
        ports: [
          { port: 5432, protocol: 'TCP' },
          { port: 6379, protocol: 'TCP' },
        ],
      },
      {
        to: [
          { ipBlock: { cidr: '192.168.10.0/24' } },
          { ipBlock: { cidr: '10.0.0.0/8' } },
          { ipBlock: { cidr: 'fd00::/8' } },
        ],
      },
    ])
    for (const rule of policy.spec.egress as { to?: Manifest[] }[]) {
      t.ok(rule.to?.length, 'every rule names where to: none lets a port out to anywhere')
      t.notOk(
        rule.to!.some((peer) => peer.namespaceSelector && Object.keys(peer.namespaceSelector).length === 0),
        'no rule admits every namespace',
      )
    }
    t.same(policy.spec.podSelector.matchLabels, {
      'app.kubernetes.io/name': 'atrium',
      'app.kubernetes.io/instance': 'atrium',
    })
    for (const m of manifests.filter((m) => ['Deployment', 'Job'].includes(m.kind))) {
      t.match(m.spec.template.metadata.labels, policy.spec.podSelector.matchLabels, `${m.kind} is covered`)
    }
    t.match(
      find(manifests, 'Pod')!.metadata.labels,
      policy.spec.podSelector.matchLabels,
      'the helm test Pod is covered',
    )
  },
)

t.test(
  'air-gapped: the DNS service and the namespaces of in-cluster services are values (OpenShift: openshift-dns on 5353)',
  { skip },
  async (t) => {
    const { policy } = await egressOf(t, [
      { airGapped: true, networkPolicy: { clusterNamespaces: ['databases', 'storage'] } },
      parse(readFileSync(join(CHART, 'ci/openshift-values.yaml'), 'utf8')),
    ])
    t.same(policy.spec.egress, [
      {
        to: [
          {
            ...inNamespace('openshift-dns'),
            podSelector: { matchLabels: { 'dns.operator.openshift.io/daemonset-dns': 'default' } },
          },
        ],
        ports: [
          { port: 5353, protocol: 'UDP' },
          { port: 5353, protocol: 'TCP' },
        ],
      },
      { to: [{ podSelector: {} }, inNamespace('databases'), inNamespace('storage')] },
    ])
    const any = await egressOf(t, [{ airGapped: true, networkPolicy: { dns: { podLabels: { 'k8s-app': null } } } }])
    t.same(any.policy.spec.egress[0].to, [inNamespace('kube-system')], 'no pod labels: the DNS namespace')
    for (const dns of [{ namespace: '' }, { ports: [] }, { ports: [70000] }]) {
      const r = await helmTemplate(t, [{ airGapped: true, networkPolicy: { dns } }])
      t.not(r.code, 0, JSON.stringify(dns))
      t.match(r.stderr, /networkPolicy/)
    }
  },
)

t.test(
  "the installer's air-gapped values let out exactly the site's services: addresses with their ports, the admin's networks, the namespaces of cluster services",
  { skip },
  async (t) => {
    const files = renderHelmFiles(
      {
        AIR_GAPPED: 'true',
        DATABASE_URL: 'postgres://u:p@10.10.0.5:5432/atrium',
        REDIS_URL: 'redis://redis.cache.svc.cluster.local:6379',
        R2_ENDPOINT: 'https://s3.corp.localhost:9000',
      },
      { release: 'atrium', namespace: 'atrium', servicesCidrs: ['10.20.0.0/16'] },
    )
    const { policy } = await egressOf(t, [{ existingSecret: 'atrium-installer-secrets' }, parse(files.values)])
    t.same(policy.spec.egress.slice(1), [
      { to: [{ podSelector: {} }, inNamespace('cache')] },
      { to: [{ ipBlock: { cidr: '10.10.0.5/32' } }], ports: [{ port: 5432, protocol: 'TCP' }] },
      { to: [{ ipBlock: { cidr: '10.20.0.0/16' } }], ports: [{ port: 9000, protocol: 'TCP' }] },
    ])
  },
)

t.test(
  "with the installer's values and Secret, no ConfigMap or Secret shares a name with another",
  { skip },
  async (t) => {
    const files = renderHelmFiles(
      { PUBLIC_URL: 'https://atrium.example.com', DATABASE_URL: 'postgres://a:b@db:5432/atrium' },
      { release: 'atrium', namespace: 'atrium' },
    )
    const { code, manifests, stderr } = await helmTemplate(t, [parse(files.values)])
    t.equal(code, 0, stderr)
    const names = [
      ...manifests.filter((m) => m.kind === 'ConfigMap' || m.kind === 'Secret').map((m) => m.metadata.name),
      parse(files.secret).metadata.name,
    ]
    t.same([...new Set(names)].sort(), [...names].sort(), names.join(', '))
    t.ok(
      names.includes('atrium-config') && names.includes('atrium-installer-secrets'),
      'the release ConfigMap and the installer Secret both there',
    )
  },
)

/** A secret the chart cannot render without: refused with `refusal` when empty, rendered when existingSecret has it. */
async function requiredSecret(t: Test, name: string, refusal: RegExp) {
  const without = await helmTemplate(t, [{ secrets: { [name]: '' } }])
  t.not(without.code, 0)
  t.match(without.stderr, refusal)
  const existing = await helmTemplate(t, [{ secrets: { [name]: '' }, existingSecret: 'atrium-from-vault' }])
  t.equal(existing.code, 0, `or a Secret of the site's own ${existing.stderr}`)
}

t.test('without secrets.DATABASE_URL or existingSecret the chart refuses to render, naming both', { skip }, async (t) =>
  requiredSecret(t, 'DATABASE_URL', /secrets\.DATABASE_URL is required: the PostgreSQL URL .* Or set existingSecret/),
)

t.test(
  'the install notes name exactly the values the server needs and this release leaves empty',
  { skip },
  async (t) => {
    const empty = await helmNotes(t)
    t.match(
      empty,
      /^WARNING: secrets\.REDIS_URL, secrets\.R2_ACCESS_KEY_ID, secrets\.R2_SECRET_ACCESS_KEY, secrets\.LICENSE_KEY, env\.R2_ENDPOINT are empty\.$/m,
    )
    const secrets = { REDIS_URL: 'redis://r:6379', R2_ACCESS_KEY_ID: 'a', R2_SECRET_ACCESS_KEY: 's', LICENSE_KEY: 'l' }
    t.match(
      await helmNotes(t, [{ secrets: { R2_ACCESS_KEY_ID: 'a' } }]),
      /^WARNING: secrets\.REDIS_URL, secrets\.R2_SECRET_ACCESS_KEY, secrets\.LICENSE_KEY, env\.R2_ENDPOINT are empty\.$/m,
      'the S3 secret key is named on its own',
    )
    t.match(
      await helmNotes(t, [{ secrets }]),
      /^WARNING: env\.R2_ENDPOINT is empty\.\nThe server refuses to start without it/m,
    )
    t.notMatch(
      await helmNotes(t, [{ secrets, env: { R2_ENDPOINT: 'https://s3.corp.example' } }]),
      /WARNING/,
      'all given: no warning',
    )
    t.match(
      await helmNotes(t, [
        { existingSecret: 'site-secrets', extraEnvVars: [{ name: 'R2_ENDPOINT', value: 'https://s3.corp.example' }] },
      ]),
      /^Atrium .*\n\n1\. Wait/m,
      'the secrets are in existingSecret and the endpoint in extraEnvVars: nothing to warn about',
    )
  },
)

t.test(
  'a render that cannot read the cluster (GitOps) never makes a master key: it needs one given, and uses it on every render',
  { skip },
  async (t) => {
    await requiredSecret(
      t,
      'ENCRYPTION_MASTER_KEY',
      /secrets\.ENCRYPTION_MASTER_KEY is required when the chart cannot read the cluster \(helm template, GitOps tools such as Argo CD/,
    )
    const key = Buffer.alloc(32, 3).toString('base64')
    const renders = await Promise.all([1, 2].map(() => helmTemplate(t, [{ secrets: { ENCRYPTION_MASTER_KEY: key } }])))
    for (const r of renders)
      t.equal(
        Buffer.from(find(r.manifests, 'Secret')!.data.ENCRYPTION_MASTER_KEY, 'base64').toString(),
        key,
        'the key given, on every render',
      )
  },
)

const defaultServiceAccount = {
  apiVersion: 'v1',
  kind: 'ServiceAccount',
  metadata: { name: 'default', namespace: 'atrium' },
} as Manifest
const liveSecret = (key: string): Manifest =>
  ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'atrium-secrets', namespace: 'atrium' },
    data: { ENCRYPTION_MASTER_KEY: Buffer.from(key).toString('base64') },
  }) as Manifest
const liveDeployment = (version: string): Manifest =>
  ({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'atrium', namespace: 'atrium', labels: { 'app.kubernetes.io/version': version } },
  }) as Manifest
const upgrade = (t: Test, kubeconfig: string, values: Record<string, unknown>[] = []) =>
  helmTemplate(
    t,
    [{ secrets: { ENCRYPTION_MASTER_KEY: '' } }, ...values],
    ['--dry-run=server', '--is-upgrade', '--kubeconfig', kubeconfig],
  )

t.test('an upgrade keeps the master key found in the live Secret, and refuses to change it', { skip }, async (t) => {
  const key = Buffer.alloc(32, 7).toString('base64')
  const cluster = await fakeCluster(t, [liveSecret(key), liveDeployment(VERSION)])
  const r = await upgrade(t, cluster.kubeconfig)
  t.equal(r.code, 0, r.stderr)
  t.ok(cluster.requests.includes('GET /api/v1/namespaces/atrium/secrets/atrium-secrets'), 'helm looked the Secret up')
  t.equal(
    Buffer.from(find(r.manifests, 'Secret')!.data.ENCRYPTION_MASTER_KEY, 'base64').toString(),
    key,
    'the same key, not a new one',
  )
  const again = await upgrade(t, cluster.kubeconfig)
  t.equal(
    find(again.manifests, 'Secret')!.data.ENCRYPTION_MASTER_KEY,
    find(r.manifests, 'Secret')!.data.ENCRYPTION_MASTER_KEY,
  )
  const same = await upgrade(t, cluster.kubeconfig, [{ secrets: { ENCRYPTION_MASTER_KEY: key } }])
  t.equal(same.code, 0, 'repeating the same key is fine')
  const changed = await upgrade(t, cluster.kubeconfig, [
    { secrets: { ENCRYPTION_MASTER_KEY: Buffer.alloc(32, 8).toString('base64') } },
  ])
  t.not(changed.code, 0)
  t.match(changed.stderr, /ENCRYPTION_MASTER_KEY differs from the key in Secret atrium-secrets/)
})

t.test(
  'the upgrade guard refuses going back and skipping versions, and lets allowSkip through',
  { skip },
  async (t) => {
    const [major, minor] = VERSION.split('.').map(Number) as [number, number]
    const from = async (live: string, values: Record<string, unknown>[] = []) =>
      upgrade(t, (await fakeCluster(t, [liveDeployment(live), defaultServiceAccount])).kubeconfig, values)
    t.equal((await from(VERSION)).code, 0, 'the same version (a config change)')
    t.equal((await from(`${major}.${Math.max(minor - 1, 0)}.0`)).code, 0, 'from the previous minor')
    const back = await from(`${major}.${minor + 1}.0`)
    t.match(back.stderr, /going back from .* is not supported/)
    const skipMinor = await from(`${major}.${minor}.0`, [{ image: { tag: `${major}.${minor + 2}.0` } }])
    t.match(skipMinor.stderr, /skips a minor version; upgrade to \d+\.\d+ first/)
    const skipMajor = await from(`${major}.${minor}.0`, [{ image: { tag: `${major + 2}.0.0` } }])
    t.match(skipMajor.stderr, /skips a major version/)
    t.equal(
      (await from(`${major}.${minor}.0`, [{ image: { tag: `${major + 1}.0.0` } }])).code,
      0,
      "to the next major's first release",
    )
    t.equal(
      (
        await from(`${major}.${minor}.0`, [
          { image: { tag: `${major}.${minor + 2}.0` }, upgradeGuard: { allowSkip: true } },
        ])
      ).code,
      0,
      'allowSkip lets it through',
    )
    const install = await helmTemplate(t, [{ image: { tag: '9.0.0' } }])
    t.equal(install.code, 0, 'a first install has nothing to guard')
  },
)

t.test('Chart.yaml lists every image of the bundles and carries the package version', async (t) => {
  const chart = parse(readFileSync(join(CHART, 'Chart.yaml'), 'utf8'))
  t.equal(chart.version, VERSION)
  t.equal(chart.appVersion, VERSION)
  t.same(
    chart.annotations['atrium.dev/images'].split('\n'),
    IMAGES.map((i) => `${i.registry}/${i.repository}:${i.tag}`),
  )
  for (const i of IMAGES) t.notMatch(i.tag, /^latest$/)
})

/** Every pod the chart makes, with its metadata: the Deployment's and the Job's templates, and the helm test Pod. */
const pods = (manifests: Manifest[]) => [
  ...manifests
    .filter((m) => m.kind === 'Deployment' || m.kind === 'Job')
    .map((m) => ({ name: m.kind, metadata: m.spec.template.metadata, spec: m.spec.template.spec })),
  ...manifests.filter((m) => m.kind === 'Pod').map((m) => ({ name: 'Pod', metadata: m.metadata, spec: m.spec })),
]

t.test(
  'podLabels, podAnnotations and commonLabels reach every pod; the selector labels cannot be overridden',
  { skip },
  async (t) => {
    const { code, manifests, stderr } = await helmTemplate(t, [
      {
        podLabels: { 'sidecar.istio.io/inject': 'true', 'app.kubernetes.io/name': 'hijacked' },
        podAnnotations: { 'policies.kyverno.io/exempt': 'no', 'kube-score/ignore': 'everything' },
        commonLabels: { 'cost-center': 'ai-platform' },
      },
    ])
    t.equal(code, 0, stderr)
    const all = pods(manifests)
    t.same(
      all.map((p) => p.name),
      ['Deployment', 'Job', 'Pod'],
    )
    for (const pod of all) {
      t.match(
        pod.metadata.labels,
        { 'sidecar.istio.io/inject': 'true', 'cost-center': 'ai-platform', 'app.kubernetes.io/name': 'atrium' },
        `${pod.name}: labels`,
      )
      t.equal(pod.metadata.annotations['policies.kyverno.io/exempt'], 'no', `${pod.name}: annotations`)
    }
    const test = find(manifests, 'Pod')!
    t.equal(test.metadata.annotations!['helm.sh/hook'], 'test', "the test Pod's own annotations stay")
    t.equal(test.metadata.annotations!['kube-score/ignore'], 'container-image-pull-policy', 'and win')
  },
)

t.test(
  "metrics.grafanaDashboards: a ConfigMap per dashboard file for Grafana's sidecar, its label and folder; none by default",
  { skip },
  async (t) => {
    const dashboards = join(CHART, 'files/monitoring/dashboards')
    const files = readdirSync(dashboards)
      .filter((f) => f.endsWith('.json'))
      .sort()
    t.ok(files.length >= 6, `${files.length} dashboards`)
    const isDashboard = (m: Manifest) => m.kind === 'ConfigMap' && /-dashboard-/.test(m.metadata.name)
    const off = await helmTemplate(t)
    t.equal(off.code, 0, off.stderr)
    t.same(off.manifests.filter(isDashboard), [], 'none by default: not every site runs Grafana')

    const { code, manifests, stderr } = await helmTemplate(t, [
      {
        metrics: {
          grafanaDashboards: {
            enabled: true,
            namespace: 'monitoring',
            labels: { team: 'ai-platform' },
            annotations: { grafana_folder: 'Atrium' },
          },
        },
      },
    ])
    t.equal(code, 0, stderr)
    const maps = manifests.filter(isDashboard)
    t.same(
      maps
        .map((m) => Object.keys(m.data))
        .flat()
        .sort(),
      files,
      'one ConfigMap per file, the file its one key',
    )
    for (const file of files) {
      const m = maps.find((m) => file in m.data)!
      t.equal(m.metadata.name, `atrium-dashboard-${file.replace(/^atrium-/, '').replace(/\.json$/, '')}`)
      t.equal(m.metadata.namespace, 'monitoring', `${file}: where the sidecar looks`)
      t.match(
        m.metadata.labels,
        { grafana_dashboard: '1', team: 'ai-platform', 'app.kubernetes.io/part-of': 'atrium' },
        `${file}: the sidecar's default label beside the ones given, and the chart's`,
      )
      t.same(m.metadata.annotations, { grafana_folder: 'Atrium' }, `${file}: the folder`)
      const text = m.data[file] as string
      t.equal(text, readFileSync(join(dashboards, file), 'utf8').trimEnd(), `${file}: the file as it is`)
      t.equal(JSON.parse(text).uid, file.replace(/\.json$/, ''), `${file}: valid JSON, its uid`)
    }

    const relabelled = await helmTemplate(t, [
      { metrics: { grafanaDashboards: { enabled: true, labels: { grafana_dashboard: null, dashboards: 'atrium' } } } },
    ])
    t.equal(relabelled.code, 0, relabelled.stderr)
    const labels = relabelled.manifests.filter(isDashboard).map((m) => m.metadata.labels!)
    t.equal(labels.length, files.length)
    t.ok(
      labels.every((l) => l.dashboards === 'atrium' && !('grafana_dashboard' in l)),
      "a sidecar of another label: the default's taken away with null",
    )

    const typo = await helmTemplate(t, [{ metrics: { grafanaDashboards: { enable: true } } }])
    t.not(typo.code, 0, 'a misspelt value is refused')
    t.match(typo.stderr, /enable/)
  },
)

t.test(
  'commonAnnotations go on every object, beside its own annotations, which win; not on the pods (podAnnotations)',
  { skip },
  async (t) => {
    const { code, manifests, stderr } = await helmTemplate(t, [
      VARIANTS.hpa!,
      {
        commonAnnotations: { 'owner.corp.example/team': 'ai-platform', 'helm.sh/resource-policy': 'delete' },
        service: { annotations: { 'service.beta.kubernetes.io/internal': 'true' } },
        metrics: { serviceMonitor: { enabled: true } },
        serviceAccount: { annotations: { 'eks.amazonaws.com/role-arn': 'arn:aws:iam::1:role/atrium' } },
      },
    ])
    t.equal(code, 0, stderr)
    t.ok(manifests.length >= 12, `${manifests.length} objects`)
    for (const m of manifests)
      t.equal(m.metadata.annotations?.['owner.corp.example/team'], 'ai-platform', `${m.kind} ${m.metadata.name}`)
    t.equal(find(manifests, 'Service')!.metadata.annotations!['service.beta.kubernetes.io/internal'], 'true')
    t.match(find(manifests, 'ServiceAccount')!.metadata.annotations, { 'eks.amazonaws.com/role-arn': /role\/atrium/ })
    t.equal(
      find(manifests, 'Secret')!.metadata.annotations!['helm.sh/resource-policy'],
      'keep',
      'the master key is kept whatever commonAnnotations say',
    )
    t.notOk(
      'owner.corp.example/team' in find(manifests, 'Deployment')!.spec.template.metadata.annotations,
      'pod templates: podAnnotations only, so a changed commonAnnotation restarts nothing',
    )
  },
)

t.test(
  'global is open for an umbrella chart (global.storageClass); global.imageRegistry is still checked',
  { skip },
  async (t) => {
    const r = await helmTemplate(t, [
      { global: { storageClass: 'fast-ssd', imageRegistry: 'registry.corp.example', postgresql: { auth: {} } } },
    ])
    t.equal(r.code, 0, r.stderr)
    t.match(find(r.manifests, 'Deployment')!.spec.template.spec.containers[0].image, /^registry\.corp\.example\//)
    const bad = await helmTemplate(t, [{ global: { imageRegistry: 'https://registry.corp.example' } }])
    t.not(bad.code, 0)
    t.match(bad.stderr, /imageRegistry/)
  },
)

t.test(
  "existingSecretKeys maps a setting to existingSecret's own key name in every container that reads the settings",
  { skip },
  async (t) => {
    const { code, manifests, stderr } = await helmTemplate(t, [
      { existingSecret: 'vault-synced', existingSecretKeys: { DATABASE_URL: 'db-url', LICENSE_KEY: 'license.jwt' } },
    ])
    t.equal(code, 0, stderr)
    const readers = pods(manifests)
      .filter((p) => p.name !== 'Pod')
      .flatMap((p) => containers(p.spec))
    t.same(
      readers.map((c) => c.name),
      ['wait-for-migrations', 'server', 'migrate'],
    )
    for (const c of readers) {
      t.same(
        c.env,
        [
          { name: 'DATABASE_URL', valueFrom: { secretKeyRef: { name: 'vault-synced', key: 'db-url' } } },
          { name: 'LICENSE_KEY', valueFrom: { secretKeyRef: { name: 'vault-synced', key: 'license.jwt' } } },
        ],
        `${c.name}: the mapped keys`,
      )
      t.same(c.envFrom[1], { secretRef: { name: 'vault-synced' } }, `${c.name}: the other keys by their own names`)
    }
    const without = await helmTemplate(t, [{ existingSecretKeys: { DATABASE_URL: 'db-url' } }])
    t.not(without.code, 0)
    t.match(without.stderr, /existingSecretKeys maps the keys of existingSecret: set existingSecret/)
    for (const keys of [{ DATABASE_URI: 'db-url' }, { PUBLIC_URL: 'url' }, { DATABASE_URL: 'no spaces' }]) {
      const r = await helmTemplate(t, [{ existingSecret: 's', existingSecretKeys: keys }])
      t.not(r.code, 0, `${JSON.stringify(keys)}: refused`)
      t.match(r.stderr, /existingSecretKeys/)
    }
  },
)

t.test(
  'topologySpreadConstraints, dnsPolicy, dnsConfig, initContainers and sidecars render where they belong',
  { skip },
  async (t) => {
    const zone = { maxSkew: 1, topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: 'ScheduleAnyway' }
    const own = { ...zone, topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: { tier: 'ai' } } }
    const dnsConfig = { searches: ['corp.example'], options: [{ name: 'ndots', value: '2' }] }
    const proxy = { name: 'db-proxy', image: 'registry.corp.example/proxy:1', restartPolicy: 'Always' }
    const shipper = { name: 'log-shipper', image: 'registry.corp.example/shipper:1' }
    const { code, manifests, stderr } = await helmTemplate(t, [
      {
        topologySpreadConstraints: [zone, own],
        dnsPolicy: 'ClusterFirst',
        dnsConfig,
        initContainers: [proxy],
        sidecars: [shipper],
      },
    ])
    t.equal(code, 0, stderr)
    const server = find(manifests, 'Deployment')!.spec.template.spec
    t.same(server.topologySpreadConstraints, [
      {
        ...zone,
        labelSelector: {
          matchLabels: {
            'app.kubernetes.io/name': 'atrium',
            'app.kubernetes.io/instance': 'atrium',
            'app.kubernetes.io/component': 'server',
          },
        },
      },
      own,
    ])
    t.same(
      server.initContainers.map((c: { name: string }) => c.name),
      ['db-proxy', 'wait-for-migrations'],
      "the admin's first, so a native sidecar is up before the database is needed",
    )
    t.same(server.initContainers[0], proxy)
    t.same(
      server.containers.map((c: { name: string }) => c.name),
      ['server', 'log-shipper'],
    )
    for (const pod of pods(manifests)) {
      t.equal(pod.spec.dnsPolicy, 'ClusterFirst', `${pod.name}: dnsPolicy`)
      t.same(pod.spec.dnsConfig, dnsConfig, `${pod.name}: dnsConfig`)
    }
    const job = find(manifests, 'Job')!.spec.template.spec
    t.same(
      containers(job).map((c) => c.name),
      ['migrate'],
      'the migration Job runs the migration only',
    )
    t.notOk(job.topologySpreadConstraints)
    const none = find((await helmTemplate(t, [])).manifests, 'Deployment')!.spec.template.spec
    t.notOk(none.dnsConfig || none.dnsPolicy || none.topologySpreadConstraints, 'nothing by default')
    for (const bad of [{ sidecars: [{ name: 'x' }] }, { dnsPolicy: 'Google' }, { topologySpreadConstraints: [{}] }]) {
      const r = await helmTemplate(t, [bad])
      t.not(r.code, 0, JSON.stringify(bad))
      t.match(r.stderr, Object.keys(bad)[0]!)
    }
  },
)
