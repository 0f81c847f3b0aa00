// The whole preflight: machine, the services named, the target's tools and the license, in that
// order; the clock compared with a service's Date header.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { DEFAULT_ANSWERS, type Answers } from '../../../installer/core/answers.js'
import {
  clockOffsetFrom,
  loopbackCheck,
  portsFor,
  PREFLIGHT_DEADLINE_MS,
  runPreflight,
} from '../../../installer/core/preflight.js'
import { run, type Runner } from '../../../installer/core/run.js'
import { testLicense, testVendor } from '../../helpers/license.js'
import { services, tempDir } from '../../helpers/platform.js'
import { silentServer } from '../../helpers/silent.js'

async function serve(t: Parameters<typeof tempDir>[0], server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => server.close())
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

t.test('the clock offset comes from the Date header of a service the site reaches', async (t) => {
  const url = await serve(
    t,
    createServer((_req, res) => res.writeHead(200, { date: new Date(Date.now() - 120_000).toUTCString() }).end()),
  )
  const offset = await clockOffsetFrom(url)
  t.ok(offset !== null && offset > 115_000 && offset < 125_000, `about two minutes ahead (${offset} ms)`)
  t.equal(await clockOffsetFrom(undefined), null, 'nothing to ask')
  t.equal(await clockOffsetFrom('http://127.0.0.1:1', 1000), null, 'nobody answering')
})

t.test(
  "compose needs the API and /metrics ports free on this machine, and the bundled MinIO's when the site uses it, each named by its setting; helm needs none",
  async (t) => {
    const a: Answers = { ...DEFAULT_ANSWERS, outputDir: '/srv/atrium', config: {} }
    const own = { R2_ENDPOINT: 'https://s3.corp.example' }
    // Each held by the site's own project (a re-run, an upgrade) is the site's: the site is named with it.
    const api = (port: number) => ({
      port,
      setting: "PORT in the answers' config",
      atriumMayHold: true,
      site: 'atrium',
    })
    const s3 = (port: number) => ({ port, setting: 'ATRIUM_S3_PORT in /srv/atrium/.env', site: 'atrium' })
    const metrics = (port: number) => ({ port, setting: 'ATRIUM_METRICS_PORT in /srv/atrium/.env', site: 'atrium' })
    t.same(portsFor(a, own), [api(8080), metrics(9464)])
    t.same(portsFor(a, { ...own, PORT: '9090', ATRIUM_METRICS_PORT: '9465' }), [api(9090), metrics(9465)])
    t.same(portsFor(a, {}), [api(8080), metrics(9464), s3(9000)], 'the bundled MinIO is published for download links')
    t.same(portsFor(a, { R2_ENDPOINT: 'http://minio:9000', ATRIUM_S3_PORT: '9100' }), [
      api(8080),
      metrics(9464),
      s3(9100),
    ])
    t.same(portsFor({ ...a, target: 'helm' }, {}), [])
    t.same(
      portsFor({ ...a, site: 'blue' }, { ...own, PORT: '9090' }),
      [
        { ...api(9090), site: 'blue' },
        { ...metrics(9464), site: 'blue' },
      ],
      'named',
    )
    t.same(
      portsFor(a, { ...own, ATRIUM_BIND_ADDRESS: '10.1.2.3' }),
      [{ ...api(8080), host: '10.1.2.3' }, metrics(9464)],
      'asked where the site publishes; /metrics is on loopback whatever the address',
    )
    t.same(
      portsFor({ ...a, bindAddress: '127.0.0.1' }, { ...own, ATRIUM_BIND_ADDRESS: '10.1.2.3' }),
      [{ ...api(8080), host: '127.0.0.1' }, metrics(9464)],
      'the answer wins over what is written',
    )
    t.same(
      portsFor(a, { ...own, PORT: 'eighty' }),
      [metrics(9464)],
      'not a port: the configuration says so, the port check does not crash',
    )
  },
)

t.test('compose: a service given as localhost or 127.0.0.1 is warned about, naming the settings and why', async (t) => {
  const a: Answers = { ...DEFAULT_ANSWERS, config: {} }
  const [warned, ...rest] = loopbackCheck(a, {
    DATABASE_URL: 'postgres://a:b@127.0.0.1:5432/atrium',
    REDIS_URL: 'redis://localhost:6379',
    R2_ENDPOINT: 'http://[::1]:9000',
  })
  t.same(rest, [])
  t.match(warned, {
    id: 'services.loopback',
    status: 'warn',
    found: 'DATABASE_URL, REDIS_URL, R2_ENDPOINT name 127.0.0.1, localhost, ::1',
    fix: /^Inside Atrium's container, localhost and 127\.0\.0\.1 are the container itself, not this machine: set DATABASE_URL, REDIS_URL, R2_ENDPOINT to .* unless the containers run with host networking$/,
  })
  t.same(
    loopbackCheck(a, { DATABASE_URL: 'postgres://a:b@db.corp.example:5432/atrium', R2_ENDPOINT: 'http://minio:9000' }),
    [],
    'other hosts are fine',
  )
  t.same(
    loopbackCheck({ ...a, target: 'helm' }, { DATABASE_URL: 'postgres://a:b@127.0.0.1/x' }),
    [],
    'helm: not this check (the services are probed from the cluster)',
  )
})

t.test('every check runs, in the order an admin fixes things, and a good license passes', async (t) => {
  const vendor = testVendor('t')
  const keys = vendor.keys
  const LICENSE_KEY = await testLicense(vendor, { maxTenants: 5, airGapAllowed: false })
  const noTools: Runner = (file, args, opts) => run(file, args, { ...opts, env: { PATH: tempDir(t) } })
  const answers: Answers = { ...DEFAULT_ANSWERS, target: 'helm', dataPath: tempDir(t), config: {} }
  // The real Redis when there is one; else an address where nothing listens, checked all the same.
  const values = { LICENSE_KEY, REDIS_URL: services.redisUrl || 'redis://127.0.0.1:1' }
  const kubeconfig = join(tempDir(t), 'no-kubeconfig')
  const checks = await runPreflight(answers, values, {
    runner: noTools,
    clockOffsetMs: 0,
    license: { keys },
    kubeconfig,
  })
  const ids = checks.map((c) => c.id)
  const redis = services.redisUrl ? ['redis.connect', 'redis.version', 'redis.eviction'] : ['redis.connect']
  const kube = ids.filter((id) => id.startsWith('kube.'))
  t.same(
    ids,
    ['services.where', ...redis, 'tools.helm', ...kube, 'license'],
    'services (from here: no cluster to run them in), tools, cluster, license: not the machine running the installer, which is not where Atrium runs',
  )
  t.ok(kube.length > 0)
  t.equal(checks.find((c) => c.id === 'redis.connect')!.status, services.redisUrl ? 'pass' : 'fail')
  t.notOk(
    ids.some((id) => id.startsWith('postgres') || id.startsWith('s3')),
    'services not named are not checked',
  )
  t.match(
    checks.find((c) => c.id === 'tools.helm'),
    { status: 'fail', found: /not installed/ },
  )
  t.match(
    checks.find((c) => c.id === 'kube.connect'),
    { status: 'fail', found: /cannot read the kubeconfig/ },
    'the cluster is checked for helm',
  )
  t.match(checks.at(-1), { id: 'license', status: 'pass', found: /Licensed to Acme/ })

  const airGapped = await runPreflight({ ...answers, mode: 'air-gapped' }, values, {
    runner: noTools,
    clockOffsetMs: 0,
    license: { keys },
    kubeconfig,
  })
  t.match(airGapped.at(-1), { id: 'license', status: 'fail', found: 'air gap not allowed' })
})

t.test(
  'under a clock set back 90 days, the clock check fails and so does the license, judged by the same reference time',
  async (t) => {
    const vendor = testVendor('t')
    // Valid for 10 more days by this machine's clock; long expired by the reference's.
    const LICENSE_KEY = await testLicense(vendor, { expiresAt: new Date(Date.now() + 10 * 86_400_000) })
    const ahead = await serve(
      t,
      createServer((_req, res) =>
        res.writeHead(403, { date: new Date(Date.now() + 90 * 86_400_000).toUTCString() }).end(),
      ),
    )
    const answers: Answers = { ...DEFAULT_ANSWERS, dataPath: tempDir(t), config: {} }
    const noTools: Runner = (file, args, opts) => run(file, args, { ...opts, env: { PATH: tempDir(t) } })
    const checks = await runPreflight(
      answers,
      { LICENSE_KEY, R2_ENDPOINT: ahead },
      { runner: noTools, license: vendor },
    )
    t.match(
      checks.find((c) => c.id === 'clock'),
      { status: 'fail', found: /^77(75|76)\d{3}(\.\d+)? s behind the S3 endpoint$/ },
    )
    t.match(
      checks.find((c) => c.id === 'license'),
      {
        status: 'fail',
        found:
          /grace period ended on .* \(judged by the S3 endpoint's clock, which this machine's is 90 days behind\)$/,
      },
    )
    const control = await runPreflight(
      answers,
      { LICENSE_KEY, R2_ENDPOINT: ahead },
      { runner: noTools, license: vendor, clockOffsetMs: 0 },
    )
    t.match(
      control.find((c) => c.id === 'license'),
      { status: 'pass' },
      'the same key on a clock that is right passes',
    )
  },
)

t.test(
  'each region of REGION_STORES gets its store checked; REGION_STORES that does not parse fails with why',
  async (t) => {
    const answers: Answers = { ...DEFAULT_ANSWERS, dataPath: tempDir(t), config: {} }
    const noTools: Runner = (file, args, opts) => run(file, args, { ...opts, env: { PATH: tempDir(t) } })
    const opts = { runner: noTools, clockOffsetMs: 0, license: { keys: [] }, kubeconfig: join(tempDir(t), 'none') }
    // Nothing listens at the region's address: its round trip fails as unreachable, named for the region.
    const down = JSON.stringify({
      'eu-north': {
        endpoint: 'http://127.0.0.1:1',
        bucket: 'atrium-eu',
        accessKeyId: 'k',
        secretAccessKey: 'never-shown',
      },
    })
    const checks = await runPreflight(answers, { REGION_STORES: down }, opts)
    const region = checks.find((c) => c.id === 'region.eu-north.roundtrip')
    t.match(region, {
      status: 'fail',
      title: 'Region eu-north store reachable',
      found: /not reachable at 127\.0\.0\.1:1/,
    })
    t.notMatch(JSON.stringify(checks), /never-shown/)
    const broken = await runPreflight(answers, { REGION_STORES: '{"mars": {}}' }, opts)
    t.match(
      broken.find((c) => c.id === 'region.stores'),
      { status: 'fail', found: /region mars/, fix: 'Correct REGION_STORES' },
    )
  },
)

// The bound: a whole preflight ends within 60 s whatever the network does. Each probe fails
// at its own deadline (5 s for a service step, 10 s for the cluster), long before.
t.test(
  'a silent S3 endpoint and a silent Kubernetes API server end the preflight with failed checks within 60 s',
  { timeout: 60_000 },
  async (t) => {
    const s3 = await silentServer(t)
    const api = await silentServer(t)
    const kubeconfig = join(tempDir(t), 'config')
    writeFileSync(
      kubeconfig,
      `apiVersion: v1
kind: Config
clusters: [{ name: silent, cluster: { server: "${api.url('https')}", insecure-skip-tls-verify: true } }]
users: [{ name: admin, user: { token: t0ken } }]
contexts: [{ name: silent, context: { cluster: silent, user: admin } }]
current-context: silent
`,
    )
    const noTools: Runner = (file, args, opts) => run(file, args, { ...opts, env: { PATH: tempDir(t) } })
    const answers: Answers = { ...DEFAULT_ANSWERS, target: 'helm', dataPath: tempDir(t), config: {} }
    const values = {
      R2_ENDPOINT: s3.url('http'),
      R2_BUCKET: 'atrium',
      R2_ACCESS_KEY_ID: 'atrium',
      R2_SECRET_ACCESS_KEY: 'secret-key',
    }
    const checks = await runPreflight(answers, values, { runner: noTools, kubeconfig })
    t.match(
      checks.find((c) => c.id === 's3.roundtrip'),
      { status: 'fail', found: `no answer from 127.0.0.1:${s3.port} in 5 s`, fix: /Start the S3 store|host and port/ },
    )
    t.match(
      checks.find((c) => c.id === 'kube.connect'),
      { status: 'fail', found: `${api.url('https')} did not answer in 10 s` },
    )
    t.notOk(
      checks.some((c) => c.id === 'preflight.deadline'),
      'every probe ended at its own deadline',
    )
    t.ok((await s3.allClosed()) && (await api.allClosed()), 'no connection left open to hold the installer')
  },
)

t.test('a group of checks still running at the preflight deadline is reported as a failed check', async (t) => {
  const hung: Runner = () => new Promise(() => {}) // a tool that never returns, whatever its own timeout says
  const answers: Answers = { ...DEFAULT_ANSWERS, target: 'compose', dataPath: tempDir(t), config: {} }
  const checks = await runPreflight(answers, { PORT: '0' }, { runner: hung, clockOffsetMs: 0, deadlineMs: 300 })
  t.match(
    checks.filter((c) => c.id === 'preflight.deadline'),
    [
      {
        status: 'fail',
        title: 'the tools finished',
        found: 'the tools: no answer in 0.3 s',
        fix: /accepts connections and never answers/,
      },
    ],
  )
  t.ok(
    checks.some((c) => c.id === 'disk'),
    'the groups that finished are reported as they are',
  )
  t.ok(PREFLIGHT_DEADLINE_MS < 60_000)
})
