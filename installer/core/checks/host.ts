// Checks of the machine itself: CPU, memory, disk, SSD, operating system, ports, clock. Grading is
// pure (facts in, CheckResult out) so every threshold is tested exactly; gatherHost reads the
// facts from the OS without running any command (commands go through deploy/run.ts only).
import { readFileSync } from 'node:fs'
import { stat, statfs } from 'node:fs/promises'
import { createServer } from 'node:net'
import { availableParallelism, release, totalmem } from 'node:os'
import { dirname, resolve } from 'node:path'
import { grade, type CheckResult, type CheckStatus } from './check.js'

const GiB = 2 ** 30
const GB = 1e9

export const HOST_LIMITS = {
  cpu: { minimum: 4, recommended: 8 },
  // An "8 GB" machine reports about 7.3-7.8 GiB to the OS (firmware, kernel and a GPU reserve
  // some), so the thresholds leave that margin: 8 GB accepts 7.25 GiB, 16 GB accepts 15 GiB.
  memory: { minimum: 7.25 * GiB, recommended: 15 * GiB },
  // Disk vendors count decimal gigabytes; so do we, and say so.
  disk: { minimum: 100 * GB, recommended: 500 * GB },
  clock: { warnMs: 5_000, failMs: 60_000 },
  ubuntu: { minimumVersion: 22.04 },
} as const

const gib = (bytes: number) => `${(bytes / GiB).toFixed(1)} GiB`
const gb = (bytes: number) => `${(bytes / GB).toFixed(1)} GB`

function result(id: string, title: string, status: CheckStatus, found: string, required: string, fix: { warn?: string; fail?: string }): CheckResult {
  return { id, title, status, found, required, fix: status === 'pass' ? '' : (status === 'fail' ? fix.fail : fix.warn) ?? fix.fail ?? fix.warn ?? '' }
}

export function cpuCheck(cores: number): CheckResult {
  const { minimum, recommended } = HOST_LIMITS.cpu
  return result('cpu', 'CPU cores', grade(cores, minimum, recommended), `${cores} cores`, `${minimum} minimum, ${recommended} recommended`, {
    fail: `Give this machine at least ${minimum} cores (${recommended} for production loads)`,
    warn: `${recommended} cores are recommended for production loads`,
  })
}

export function memoryCheck(totalBytes: number): CheckResult {
  const { minimum, recommended } = HOST_LIMITS.memory
  return result('memory', 'Memory', grade(totalBytes, minimum, recommended), `${gib(totalBytes)} reported by the OS`, `8 GB minimum (${minimum / GiB} GiB or more reported), 16 GB recommended (${recommended / GiB} GiB)`, {
    fail: 'Give this machine at least 8 GB of memory',
    warn: '16 GB of memory are recommended for production loads',
  })
}

export function diskCheck(path: string, freeBytes: number): CheckResult {
  const { minimum, recommended } = HOST_LIMITS.disk
  return result('disk', 'Free disk at the data path', grade(freeBytes, minimum, recommended), `${gb(freeBytes)} free at ${path} (1 GB = 10^9 bytes)`, '100 GB minimum, 500 GB recommended', {
    fail: `Free space or mount a larger volume at ${path}, or choose another data path`,
    warn: `500 GB are recommended at ${path} for a year of data`,
  })
}

export function ssdCheck(path: string, rotational: boolean | null): CheckResult {
  const status: CheckStatus = rotational === false ? 'pass' : 'warn'
  const found = rotational === null ? `could not tell what kind of disk holds ${path}` : rotational ? `${path} is on a spinning (rotational) disk` : `${path} is on an SSD`
  return result('ssd', 'SSD at the data path', status, found, 'an SSD (recommended)', {
    warn: rotational === null ? 'Make sure the data path is on SSD storage' : 'Put the data path on SSD storage: PostgreSQL on spinning disks is slow',
  })
}

export interface OsFacts { platform: string; release: string; id: string; versionId: string; prettyName: string }

export function osCheck(os: OsFacts): CheckResult {
  const required = 'Linux; Ubuntu 22.04 or newer recommended'
  if (os.platform !== 'linux') {
    return result('os', 'Operating system', 'fail', `${os.platform} ${os.release}`, required, { fail: 'Install on a Linux server (Ubuntu 22.04 or newer recommended)' })
  }
  const name = os.prettyName || `${os.id} ${os.versionId}`.trim() || 'Linux (unknown distribution)'
  const ubuntuOk = os.id === 'ubuntu' && Number(os.versionId) >= HOST_LIMITS.ubuntu.minimumVersion
  return result('os', 'Operating system', ubuntuOk ? 'pass' : 'warn', `${name} (kernel ${os.release})`, required, {
    warn: os.id === 'ubuntu' ? 'Upgrade to Ubuntu 22.04 or newer' : 'Other Linux distributions work but are not what Atrium is tested on; Ubuntu 22.04 or newer is recommended',
  })
}

export interface PortFact { port: number; free: boolean; error?: string }

export function portsCheck(ports: readonly PortFact[]): CheckResult {
  const busy = ports.filter((p) => !p.free)
  const list = ports.map((p) => p.port).join(', ')
  return result('ports', 'Ports free', busy.length ? 'fail' : 'pass',
    ports.length === 0 ? 'no port is needed on this machine' : busy.length ? busy.map((p) => `port ${p.port} is in use${p.error ? ` (${p.error})` : ''}`).join('; ') : `${list} free`,
    ports.length ? `ports ${list} free` : 'none',
    { fail: `Stop what uses ${busy.map((p) => p.port).join(', ')} (see: ss -ltnp 'sport = :${busy[0]?.port}') or choose another port` })
}

export function clockCheck(offsetMs: number | null, source: string): CheckResult {
  const { warnMs, failMs } = HOST_LIMITS.clock
  const required = `within ${warnMs / 1000} s of ${source || 'a reference clock'} (more than ${failMs / 1000} s breaks sign-in tokens and licenses)`
  if (offsetMs === null) {
    return result('clock', 'Clock', 'warn', 'could not compare with a reference clock', required, {
      warn: 'Make sure NTP or chrony keeps this clock right (air-gapped sites: point it at an internal time server)',
    })
  }
  const off = Math.abs(offsetMs)
  const status: CheckStatus = off > failMs ? 'fail' : off > warnMs ? 'warn' : 'pass'
  return result('clock', 'Clock', status, `${(offsetMs / 1000).toFixed(1)} s ${offsetMs >= 0 ? 'ahead of' : 'behind'} ${source}`, required, {
    fail: 'Set the clock right and keep it so with NTP or chrony',
    warn: 'Enable NTP or chrony so the clock stays right',
  })
}

export interface HostFacts {
  cores: number
  memoryBytes: number
  dataPath: string
  /** The folder actually measured: the data path or its nearest existing parent. */
  measuredPath: string
  freeBytes: number
  rotational: boolean | null
  os: OsFacts
  ports: PortFact[]
}

/** The nearest folder that exists, so a data path not created yet is measured where it will live. */
async function existingAncestor(path: string): Promise<string> {
  let p = resolve(path)
  for (;;) {
    try {
      await stat(p)
      return p
    } catch {
      const parent = dirname(p)
      if (parent === p) return p
      p = parent
    }
  }
}

const readText = (path: string) => {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return null
  }
}

/** Whether the block device under `path` spins: /sys/dev/block/MAJ:MIN, or its parent disk for a partition. */
async function rotationalAt(path: string): Promise<boolean | null> {
  const dev = (await stat(path)).dev
  // Linux encodes dev_t as major (bits 8-19 and 32-43) and minor (bits 0-7 and 20-31).
  const major = ((dev >> 8) & 0xfff) | (Math.floor(dev / 2 ** 32) & ~0xfff)
  const minor = (dev & 0xff) | ((dev >> 12) & ~0xff)
  const base = `/sys/dev/block/${major}:${minor}`
  const flag = readText(`${base}/queue/rotational`) ?? readText(`${base}/../queue/rotational`)
  return flag === null ? null : flag.trim() === '1'
}

function osRelease(): Pick<OsFacts, 'id' | 'versionId' | 'prettyName'> {
  const text = readText('/etc/os-release') ?? ''
  const field = (key: string) => new RegExp(`^${key}=("?)(.*)\\1$`, 'm').exec(text)?.[2] ?? ''
  return { id: field('ID'), versionId: field('VERSION_ID'), prettyName: field('PRETTY_NAME') }
}

/** Whether anything listens on the port: we try to listen on every interface and close at once. */
export function probePort(port: number): Promise<PortFact> {
  return new Promise((done) => {
    const server = createServer()
    server.once('error', (err: NodeJS.ErrnoException) => done({ port, free: false, error: err.code }))
    server.listen({ port, host: '0.0.0.0', exclusive: true }, () => server.close(() => done({ port, free: true })))
  })
}

export async function gatherHost(dataPath: string, ports: readonly number[]): Promise<HostFacts> {
  const measuredPath = await existingAncestor(dataPath)
  const fs = await statfs(measuredPath)
  return {
    cores: availableParallelism(),
    memoryBytes: totalmem(),
    dataPath,
    measuredPath,
    freeBytes: fs.bavail * fs.bsize,
    rotational: await rotationalAt(measuredPath).catch(() => null),
    os: { platform: process.platform, release: release(), ...osRelease() },
    ports: await Promise.all(ports.map(probePort)),
  }
}

/** Every host check, in a fixed order. */
export function hostChecks(facts: HostFacts, clockOffsetMs: number | null, clockSource = 'the S3 endpoint'): CheckResult[] {
  return [
    cpuCheck(facts.cores),
    memoryCheck(facts.memoryBytes),
    diskCheck(facts.measuredPath, facts.freeBytes),
    ssdCheck(facts.measuredPath, facts.rotational),
    osCheck(facts.os),
    portsCheck(facts.ports),
    clockCheck(clockOffsetMs, clockSource),
  ]
}
