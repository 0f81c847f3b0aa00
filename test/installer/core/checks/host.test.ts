// Host checks at, just under and just over every threshold, and the facts read from this machine.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer, type AddressInfo, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { apiServer } from '../../fixtures.js'
import t, { type Test } from 'tap'
import type { CheckResult, CheckStatus } from '../../../../installer/core/checks/check.js'
import {
  atriumOn,
  clockCheck,
  cpuCheck,
  devMajorMinor,
  diskCheck,
  gatherHost,
  GB,
  GiB,
  HOST_LIMITS,
  hostChecks,
  memoryCheck,
  osCheck,
  parseOsRelease,
  portsCheck,
  ssdCheck,
  type OsFacts,
} from '../../../../installer/core/checks/host.js'
import { serverProcess } from '../../../helpers/cli.js'
import { freePort, testEnv } from '../../../helpers/platform.js'

/** Asserts the shape every result must have, then gives its status. */
function statusOf(t: Test, r: CheckResult): CheckStatus {
  t.ok(r.id && r.title && r.found && r.required, `${r.id}: says what it checked, found and needs`)
  t.equal(
    r.fix !== '',
    r.status !== 'pass',
    `${r.id}: has a fix exactly when it did not pass (${r.status}: ${r.found})`,
  )
  return r.status
}

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'atrium-host-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A server listening on an ephemeral port of `host`, closed when the test ends. */
async function listening(t: Test, host: string): Promise<number> {
  const server: Server = createServer()
  await new Promise<void>((ok) => server.listen(0, host, ok))
  t.teardown(() => new Promise<void>((ok) => server.close(() => ok())))
  return (server.address() as AddressInfo).port
}

t.test('cpu: under 4 cores fails, under 8 warns, 8 or more passes', async (t) => {
  t.same(
    [3, 4, 5, 7, 8, 9].map((n) => statusOf(t, cpuCheck(n))),
    ['fail', 'warn', 'warn', 'warn', 'pass', 'pass'],
  )
  t.match(cpuCheck(3), { id: 'cpu', found: '3 cores', required: '4 minimum, 8 recommended', fix: /at least 4 cores/ })
})

t.test('memory: an "8 GB" machine reporting about 7.5 GiB is accepted; "16 GB" accepts 15 GiB', async (t) => {
  const at = (bytes: number) => statusOf(t, memoryCheck(bytes))
  t.equal(HOST_LIMITS.memory.minimum, 7.25 * GiB)
  t.equal(HOST_LIMITS.memory.recommended, 15 * GiB)
  t.equal(at(7 * GiB), 'fail')
  t.equal(at(7.25 * GiB - 1), 'fail', 'one byte under the minimum')
  t.equal(at(7.25 * GiB), 'warn', 'at the minimum')
  t.equal(at(7.25 * GiB + 1), 'warn')
  t.equal(at(7.5 * GiB), 'warn', 'about 7.5 GiB meets the 8 GB minimum')
  t.equal(at(8 * GiB), 'warn', '8 GiB of DIMMs fully visible')
  t.equal(at(8 * GB), 'warn', 'exactly 8 decimal GB (7.45 GiB), a VM sized 8000 MB, is accepted')
  t.equal(at(15 * GiB - 1), 'warn')
  t.equal(at(15 * GiB), 'pass', 'about 15 GiB meets the 16 GB recommendation')
  t.equal(at(15 * GiB + 1), 'pass')
  t.equal(at(16 * GB), 'warn', 'exactly 16 decimal GB is 14.9 GiB, under the 15 GiB recommendation')
  t.match(memoryCheck(7 * GiB), {
    found: '7.0 GiB reported by the OS',
    required: /8 GB minimum \(7\.25 GiB.*16 GB recommended \(15 GiB/,
    fix: /at least 8 GB/,
  })
  t.equal(memoryCheck(64 * GiB).fix, '')
})

t.test('disk: 100 GB minimum and 500 GB recommended, in decimal gigabytes', async (t) => {
  const at = (gb: number) => statusOf(t, diskCheck('/data', gb * GB))
  t.same([99.9, 100, 100.1, 499.9, 500, 500.1].map(at), ['fail', 'warn', 'warn', 'warn', 'pass', 'pass'])
  t.equal(statusOf(t, diskCheck('/data', 100 * GB - 1)), 'fail', 'one byte under 100 GB')
  t.match(diskCheck('/data', 42 * GB), {
    found: '42.0 GB free at /data (1 GB = 10^9 bytes)',
    required: '100.0 GB free minimum, 500.0 GB recommended',
    fix: /\/data/,
  })
})

t.test('ssd: an SSD passes; a spinning disk or one that cannot be told warns', async (t) => {
  t.equal(statusOf(t, ssdCheck('/d', false)), 'pass')
  t.equal(statusOf(t, ssdCheck('/d', true)), 'warn')
  t.equal(statusOf(t, ssdCheck('/d', null)), 'warn')
  t.match(ssdCheck('/d', true), { found: /\/d is on a spinning/, fix: /PostgreSQL on spinning disks is slow/ })
  t.match(ssdCheck('/d', null), { found: /could not tell/ })
})

t.test('os: Linux required, Ubuntu 22.04 or newer recommended', async (t) => {
  const linux = (id: string, versionId: string, prettyName = `${id} ${versionId}`): OsFacts => ({
    platform: 'linux',
    release: '6.1.0',
    id,
    versionId,
    prettyName,
  })
  const at = (os: OsFacts) => statusOf(t, osCheck(os))
  t.equal(at(linux('ubuntu', '20.04')), 'warn')
  t.equal(at(linux('ubuntu', '21.10')), 'warn')
  t.equal(at(linux('ubuntu', '22.04')), 'pass')
  t.equal(at(linux('ubuntu', '22.10')), 'pass')
  t.equal(at(linux('ubuntu', '24.04')), 'pass')
  t.equal(at(linux('debian', '12')), 'warn')
  t.equal(at(linux('rhel', '9.4')), 'warn')
  t.equal(at(linux('', '', '')), 'warn', 'a Linux without /etc/os-release')
  t.match(osCheck(linux('ubuntu', '20.04')), { found: 'ubuntu 20.04 (kernel 6.1.0)', fix: /Upgrade to Ubuntu 22\.04/ })
  t.match(osCheck(linux('debian', '12', 'Debian GNU/Linux 12 (bookworm)')), {
    found: /^Debian GNU\/Linux 12/,
    fix: /recommended Ubuntu 22\.04\+/,
  })
  for (const platform of ['darwin', 'win32']) {
    const os = { platform, release: '23.0.0', id: '', versionId: '', prettyName: '' }
    t.equal(at(os), 'fail', platform)
    t.match(osCheck(os), { found: `${platform} 23.0.0`, fix: /Linux server/ })
  }
})

t.test('os-release: ID, VERSION_ID and PRETTY_NAME, quoted or not', async (t) => {
  const text = 'NAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\nID_LIKE=debian\nPRETTY_NAME=\'Ubuntu 24.04.1 LTS\'\n'
  t.same(parseOsRelease(text), { id: 'ubuntu', versionId: '24.04', prettyName: 'Ubuntu 24.04.1 LTS' })
  t.same(parseOsRelease(''), { id: '', versionId: '', prettyName: '' })
})

t.test('device numbers split as Linux encodes them, so sysfs is found for any disk', async (t) => {
  // glibc's makedev, the encoding stat() reports.
  const makedev = (major: bigint, minor: bigint) =>
    (minor & 0xffn) | ((major & 0xfffn) << 8n) | ((minor & ~0xffn) << 12n) | ((major & ~0xfffn) << 32n)
  t.same(devMajorMinor(0xfe00n), { major: 254, minor: 0 }, 'virtio disk vda')
  for (const [major, minor] of [
    [8, 1],
    [259, 300],
    [0x12abc, 0x56734],
  ] as const) {
    t.same(devMajorMinor(makedev(BigInt(major), BigInt(minor))), { major, minor }, `${major}:${minor}`)
  }
})

t.test('clock: more than 5 s off warns, more than 60 s fails, in either direction', async (t) => {
  const at = (ms: number) => statusOf(t, clockCheck(ms, 'the S3 endpoint'))
  t.same([0, 5_000, 5_001, 60_000, 60_001].map(at), ['pass', 'pass', 'warn', 'warn', 'fail'])
  t.same([-5_000, -5_001, -60_000, -60_001].map(at), ['pass', 'warn', 'warn', 'fail'])
  t.match(clockCheck(5_001, 'S3'), {
    found: '5.001 s ahead of S3',
    required: /within 5 s of S3.*60 s.*tokens, licences and TLS/,
  })
  t.match(clockCheck(-90_000, 'S3'), { found: '90 s behind S3', fix: /NTP or chrony/ })
  t.equal(statusOf(t, clockCheck(null, '')), 'warn')
  t.match(clockCheck(null, ''), {
    found: /could not compare with a reference/,
    fix: /air-gapped sites: make sure NTP\/chrony runs/,
  })
})

t.test('ports: a port something listens on fails and is named; free ports pass', async (t) => {
  const busy = await listening(t, '0.0.0.0')
  const loopbackOnly = await listening(t, '127.0.0.1')
  const probe = createServer()
  await new Promise<void>((ok) => probe.listen(0, '0.0.0.0', ok))
  const free = (probe.address() as AddressInfo).port
  await new Promise<void>((ok) => probe.close(() => ok()))

  const setting = "PORT in the answers' config"
  const facts = await gatherHost(
    tempDir(t),
    [busy, loopbackOnly, free, free].map((port) => ({ port, setting })),
  )
  t.same(
    facts.ports.map((p) => [p.port, p.free]),
    [
      [busy, false],
      [loopbackOnly, false],
      [free, true],
    ],
    'a loopback-only listener also holds the port; a port asked twice is probed once',
  )
  const check = portsCheck(facts.ports)
  t.equal(statusOf(t, check), 'fail')
  t.equal(check.id, 'ports')
  t.match(check, {
    found: new RegExp(`port ${busy} is in use; port ${loopbackOnly} is in use`),
    fix: new RegExp(
      `Port ${busy}: stop the process.*ss -ltnp 'sport = :${busy}'.*choose another port with PORT in the answers' config`,
    ),
  })
  t.match(check.fix, `sport = :${loopbackOnly}`)
  t.notMatch(check.found, String(free))

  t.equal(statusOf(t, portsCheck(facts.ports.filter((p) => p.free))), 'pass')
  t.match(portsCheck([{ port: free, setting, free: true }]), { found: `${free} free`, required: `ports ${free} free` })
  t.equal(statusOf(t, portsCheck([])), 'pass', 'nothing to listen on')
  t.match(portsCheck([{ port: 80, setting, free: false, error: 'EACCES' }]), {
    found: 'port 80 cannot be opened (EACCES)',
  })
})

t.test('the facts of this machine are read, and a data path not created yet is measured at its parent', async (t) => {
  const dir = tempDir(t)
  const here = await gatherHost(dir, [])
  t.equal(here.measuredPath, dir)
  t.ok(here.cores >= 1)
  t.ok(here.memoryBytes > 0)
  t.ok(here.freeBytes > 0)
  t.ok(here.rotational === null || typeof here.rotational === 'boolean')
  t.equal(here.os.platform, process.platform)
  t.ok(here.os.release)
  const osRelease =
    process.platform === 'linux' && existsSync('/etc/os-release')
      ? parseOsRelease(readFileSync('/etc/os-release', 'utf8'))
      : { id: '', versionId: '', prettyName: '' }
  t.match(here.os, osRelease, 'ID, VERSION_ID and PRETTY_NAME as /etc/os-release has them (empty without one)')

  const later = await gatherHost(join(dir, 'a', 'b', 'c'), [])
  t.equal(later.dataPath, join(dir, 'a', 'b', 'c'))
  t.equal(later.measuredPath, dir)
  t.ok(later.freeBytes > 0)

  const checks = hostChecks(later, 0)
  t.same(
    checks.map((c) => c.id),
    ['cpu', 'memory', 'disk', 'ssd', 'os', 'ports', 'clock'],
  )
  for (const c of checks) statusOf(t, c)
  t.equal(hostChecks(later, null).at(-1)?.status, 'warn', 'an unknown clock offset warns')
})

t.test(
  "a port the site's own Compose project publishes is what an upgrade replaces; another site's, or an Atrium outside it, is in the way",
  async (t) => {
    const atrium = await serverProcess(t, await testEnv(t, { PORT: '0' }))
    const version = JSON.parse(await (await fetch(`${atrium.base}/openapi.json`)).text()).info.version as string
    t.equal(await atriumOn(atrium.port), version)
    const api = { setting: "PORT in the answers' config", atriumMayHold: true, site: 'blue' }
    // What the engine says publishes the port (core/site.ts asks `docker ps --filter publish=`; test/compose/sites.test.ts
    // runs it against real sites).
    const publishedBy =
      (project: string | null, service = 'server') =>
      async () =>
        project ? { project, service } : null
    const ours = await gatherHost(tempDir(t), [{ port: atrium.port, ...api }], publishedBy('blue'))
    t.match(ours.ports, [
      {
        port: atrium.port,
        free: false,
        atrium: version,
        site: 'blue',
        publisher: { project: 'blue', service: 'server' },
      },
    ])
    t.match(portsCheck(ours.ports), {
      status: 'pass',
      found: `${atrium.port} in use by this site's server (Atrium ${version}), which the install replaces`,
      required: `ports ${atrium.port} free, or held by this site (blue) itself`,
    })

    // Another site on the engine: in the way, whatever answers there, and the fix is another port.
    const other = portsCheck(
      (await gatherHost(tempDir(t), [{ port: atrium.port, ...api }], publishedBy('green'))).ports,
    )
    t.equal(statusOf(t, other), 'fail')
    t.match(other, {
      found: `port ${atrium.port} is in use by the Compose project green (its server), Atrium ${version}`,
      fix: `Port ${atrium.port}: another site on this engine publishes it (green): choose another port with PORT in the answers' config`,
    })
    // An Atrium no container publishes (started by hand, or the engine cannot say) is no site's to replace.
    const loose = portsCheck((await gatherHost(tempDir(t), [{ port: atrium.port, ...api }], publishedBy(null))).ports)
    t.match(loose, { status: 'fail', found: `port ${atrium.port} is in use by Atrium ${version}`, fix: /ss -ltnp/ })
    t.match(portsCheck((await gatherHost(tempDir(t), [{ port: atrium.port, ...api }])).ports), { status: 'fail' })

    // Something else that answers HTTP on the port is not Atrium.
    const { port: otherPort } = await apiServer(t, 'Other API', '1.0.0')
    t.equal(await atriumOn(otherPort), null)
    t.match(portsCheck((await gatherHost(tempDir(t), [{ port: otherPort, ...api }], publishedBy(null))).ports), {
      status: 'fail',
      found: `port ${otherPort} is in use`,
    })
    // And a port Atrium cannot hold (MinIO's) is not asked for an Atrium.
    t.match((await gatherHost(tempDir(t), [{ port: atrium.port, setting: 'ATRIUM_S3_PORT in .env' }])).ports, [
      { free: false, atrium: undefined },
    ])
    // The site's bundled MinIO, published by its project: its own too.
    const s3 = { port: otherPort, setting: 'ATRIUM_S3_PORT in .env', site: 'blue' }
    t.match(portsCheck((await gatherHost(tempDir(t), [s3], publishedBy('blue', 'minio'))).ports), {
      status: 'pass',
      found: `${otherPort} in use by this site's minio, which the install replaces`,
    })
  },
)

t.test(
  "Atrium's /metrics on the metrics port is this site's when its Compose project publishes it; published by no site, or by another, it is in the way",
  async (t) => {
    const metricsPort = await freePort()
    await serverProcess(t, await testEnv(t, { PORT: '0', METRICS_PORT: String(metricsPort) }))
    const metrics = { port: metricsPort, setting: 'ATRIUM_METRICS_PORT in .env', site: 'blue' }
    const publishedBy = (project: string | null) => async () => (project ? { project, service: 'server' } : null)
    const ours = await gatherHost(tempDir(t), [metrics], publishedBy('blue'))
    t.match(ours.ports, [{ port: metricsPort, free: false, atrium: undefined, publisher: { project: 'blue' } }])
    t.match(portsCheck(ours.ports), {
      status: 'pass',
      found: `${metricsPort} in use by this site's server, which the install replaces`,
    })
    t.match(portsCheck((await gatherHost(tempDir(t), [metrics], publishedBy(null))).ports), {
      status: 'fail',
      found: `port ${metricsPort} is in use`,
      fix: /ATRIUM_METRICS_PORT in \.env/,
    })
    t.match(portsCheck((await gatherHost(tempDir(t), [metrics], publishedBy('green'))).ports), {
      status: 'fail',
      fix: `Port ${metricsPort}: another site on this engine publishes it (green): choose another port with ATRIUM_METRICS_PORT in .env`,
    })
  },
)
