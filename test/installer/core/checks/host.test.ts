// Host checks at, just under and just over every threshold, and the facts read from this machine.
import { createServer, type AddressInfo } from 'node:net'
import { join } from 'node:path'
import t from 'tap'
import { clockCheck, cpuCheck, diskCheck, gatherHost, hostChecks, HOST_LIMITS, memoryCheck, osCheck, portsCheck, ssdCheck } from '../../../../installer/core/checks/host.js'
import type { CheckResult } from '../../../../installer/core/checks/check.js'
import { tempDir } from '../../../helpers/platform.js'

const GiB = 2 ** 30
const GB = 1e9
const status = (r: CheckResult) => r.status

t.test('cpu: under 4 fails, under 8 warns', async (t) => {
  t.same([3, 4, 5, 7, 8, 9].map((n) => status(cpuCheck(n))), ['fail', 'warn', 'warn', 'warn', 'pass', 'pass'])
  t.match(cpuCheck(3), { found: '3 cores', required: '4 minimum, 8 recommended', fix: /at least 4 cores/ })
})

t.test('memory: an "8 GB" machine reporting about 7.5 GiB is accepted; 16 GB accepts 15 GiB', async (t) => {
  const at = (gib: number) => status(memoryCheck(gib * GiB))
  t.equal(at(7.24), 'fail')
  t.equal(at(7.25), 'warn')
  t.equal(at(7.5), 'warn', 'about 7.5 GiB meets the 8 GB minimum')
  t.equal(status(memoryCheck(8 * GB)), 'warn', 'exactly 8 GB (7.45 GiB)')
  t.equal(at(14.99), 'warn')
  t.equal(at(15), 'pass')
  t.equal(at(64), 'pass')
  t.match(memoryCheck(7 * GiB), { found: '7.0 GiB reported by the OS', fix: /at least 8 GB/ })
})

t.test('disk: 100 GB minimum and 500 GB recommended, in decimal gigabytes', async (t) => {
  const at = (gb: number) => status(diskCheck('/data', gb * GB))
  t.same([99.9, 100, 100.1, 499.9, 500, 500.1].map(at), ['fail', 'warn', 'warn', 'warn', 'pass', 'pass'])
  t.match(diskCheck('/data', 42 * GB), { found: '42.0 GB free at /data (1 GB = 10^9 bytes)', fix: /\/data/ })
})

t.test('ssd: a spinning or unknown disk warns', async (t) => {
  t.equal(status(ssdCheck('/d', false)), 'pass')
  t.match(ssdCheck('/d', true), { status: 'warn', found: /spinning/, fix: /PostgreSQL on spinning disks is slow/ })
  t.match(ssdCheck('/d', null), { status: 'warn', found: /could not tell/ })
})

t.test('os: Linux required, Ubuntu 22.04 or newer recommended', async (t) => {
  const linux = (id: string, versionId: string) => osCheck({ platform: 'linux', release: '6.1.0', id, versionId, prettyName: `${id} ${versionId}` })
  t.equal(status(linux('ubuntu', '20.04')), 'warn')
  t.equal(status(linux('ubuntu', '22.04')), 'pass')
  t.equal(status(linux('ubuntu', '24.04')), 'pass')
  t.match(linux('debian', '12'), { status: 'warn', fix: /Ubuntu 22\.04 or newer is recommended/ })
  t.match(osCheck({ platform: 'darwin', release: '23.0.0', id: '', versionId: '', prettyName: '' }), { status: 'fail', found: 'darwin 23.0.0' })
})

t.test('clock: more than 5 s off warns, more than 60 s fails, either direction', async (t) => {
  const { warnMs, failMs } = HOST_LIMITS.clock
  t.same([0, warnMs, warnMs + 1, failMs, failMs + 1].map((ms) => status(clockCheck(ms, 'S3'))), ['pass', 'pass', 'warn', 'warn', 'fail'])
  t.same([-warnMs, -warnMs - 1, -failMs - 1].map((ms) => status(clockCheck(ms, 'S3'))), ['pass', 'warn', 'fail'])
  t.match(clockCheck(-90_000, 'S3'), { found: '-90.0 s behind S3' })
  t.match(clockCheck(null, ''), { status: 'warn', found: /could not compare/, fix: /NTP or chrony/ })
})

t.test('ports: a port something listens on fails and is named; a free one passes', async (t) => {
  const server = createServer().listen(0, '0.0.0.0')
  await new Promise((r) => server.once('listening', r))
  t.teardown(() => server.close())
  const busy = (server.address() as AddressInfo).port
  const probe = createServer().listen(0, '0.0.0.0')
  await new Promise((r) => probe.once('listening', r))
  const free = (probe.address() as AddressInfo).port
  await new Promise((r) => probe.close(r))

  const facts = await gatherHost(tempDir(t), [busy, free])
  t.same(facts.ports.map((p) => [p.port, p.free]), [[busy, false], [free, true]])
  const check = portsCheck(facts.ports)
  t.match(check, { status: 'fail', found: new RegExp(`port ${busy} is in use \\(EADDRINUSE\\)`), fix: new RegExp(`sport = :${busy}`) })
  t.match(portsCheck([{ port: free, free: true }]), { status: 'pass', found: `${free} free` })
})

t.test('the facts of this machine are read, and a data path not created yet is measured at its parent', async (t) => {
  const dir = tempDir(t)
  const facts = await gatherHost(join(dir, 'a', 'b', 'c'), [])
  t.ok(facts.cores >= 1)
  t.ok(facts.memoryBytes > 0)
  t.ok(facts.freeBytes > 0)
  t.equal(facts.measuredPath, dir)
  t.ok(facts.rotational === null || typeof facts.rotational === 'boolean')
  t.equal(facts.os.platform, process.platform)
  const checks = hostChecks(facts, 0)
  t.same(checks.map((c) => c.id), ['cpu', 'memory', 'disk', 'ssd', 'os', 'ports', 'clock'])
  for (const c of checks) {
    t.ok(c.title && c.found && c.required, `${c.id} says what it found and needs`)
    t.equal(c.fix !== '', c.status !== 'pass', `${c.id} has a fix exactly when it did not pass`)
  }
})
