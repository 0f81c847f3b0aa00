// Checks of the machine itself: CPU, memory, disk, SSD, operating system, ports, clock. Grading is
// pure (facts in, CheckResult out) so every threshold is tested exactly; gatherHost reads the
// facts from the OS without running any command itself (which container publishes a busy port is
// asked through the function it is given) and without touching the network beyond this machine's
// own ports (the clock's reference time is measured by the caller).
import { readFile, realpath, stat, statfs } from 'node:fs/promises'
import { createServer } from 'node:net'
import { availableParallelism, release, totalmem } from 'node:os'
import { dirname, resolve } from 'node:path'
import type { Publisher } from '../site.js'
import { check, grade, type CheckResult, type CheckStatus } from './check.js'

/** Binary gibibyte: what the OS reports memory in. */
export const GiB = 2 ** 30
/** Decimal gigabyte: what disk vendors (and our disk thresholds) count in. */
export const GB = 1e9

export const HOST_LIMITS = {
  cpu: { minimum: 4, recommended: 8 },
  // "8 GB" shows up as about 7.5-7.8 GiB (firmware, kernel and devices reserve some), and a VM
  // sized 8000 MB as 7.45 GiB; the floor leaves that margin: 8 GB accepts 7.25 GiB, 16 GB 15 GiB.
  memory: { minimum: 7.25 * GiB, recommended: 15 * GiB },
  disk: { minimum: 100 * GB, recommended: 500 * GB },
  // Beyond a minute, signed tokens, licences and TLS certificates are judged valid or expired wrongly.
  clock: { warnMs: 5_000, failMs: 60_000 },
  ubuntu: { minimumVersion: '22.04' },
} as const

const gib = (bytes: number) => `${(bytes / GiB).toFixed(1)} GiB`
const gb = (bytes: number) => `${(bytes / GB).toFixed(1)} GB`
/** Seconds with up to millisecond precision, so 5.001 s does not read as the 5 s limit. */
const seconds = (ms: number) => `${Number((ms / 1000).toFixed(3))} s`

/** What a graded quantity's check says, given its limits: what was found, what is required and each fix. */
interface QuantityText {
  found: string
  required: string
  fail: string
  warn: string
}

/** A quantity of this machine graded against its minimum and recommended value (HOST_LIMITS). */
function quantityCheck(
  id: 'cpu' | 'memory' | 'disk',
  title: string,
  value: number,
  say: (limits: { minimum: number; recommended: number }) => QuantityText,
): CheckResult {
  const limits = HOST_LIMITS[id]
  const { found, required, fail, warn } = say(limits)
  return check(id, title, grade(value, limits.minimum, limits.recommended), found, required, { fail, warn })
}

export const cpuCheck = (cores: number): CheckResult =>
  quantityCheck('cpu', 'CPU cores', cores, ({ minimum, recommended }) => ({
    found: `${cores} cores`,
    required: `${minimum} minimum, ${recommended} recommended`,
    fail: `Give this machine at least ${minimum} cores (${recommended} for production loads)`,
    warn: `${recommended} cores are recommended for production loads`,
  }))

export const memoryCheck = (totalBytes: number): CheckResult =>
  quantityCheck('memory', 'Memory', totalBytes, ({ minimum, recommended }) => ({
    found: `${gib(totalBytes)} reported by the OS`,
    required: `8 GB minimum (${minimum / GiB} GiB or more reported), 16 GB recommended (${recommended / GiB} GiB or more reported)`,
    fail: 'Give this machine at least 8 GB of memory (16 GB for production loads)',
    warn: '16 GB of memory are recommended for production loads',
  }))

export const diskCheck = (path: string, freeBytes: number): CheckResult =>
  quantityCheck('disk', 'Free disk at the data path', freeBytes, ({ minimum, recommended }) => ({
    found: `${gb(freeBytes)} free at ${path} (1 GB = 10^9 bytes)`,
    required: `${gb(minimum)} free minimum, ${gb(recommended)} recommended`,
    fail: `Free space or mount a larger volume at ${path}, or choose another data path`,
    warn: `${gb(recommended)} free are recommended at ${path} to hold a year of data`,
  }))

export function ssdCheck(path: string, rotational: boolean | null): CheckResult {
  const found =
    rotational === null
      ? `could not tell what kind of disk holds ${path}`
      : rotational
        ? `${path} is on a spinning (rotational) disk`
        : `${path} is on an SSD`
  return check('ssd', 'SSD at the data path', rotational === false ? 'pass' : 'warn', found, 'an SSD (recommended)', {
    warn:
      rotational === null
        ? 'Make sure the data path is on SSD storage: PostgreSQL on spinning disks is slow'
        : 'Put the data path on SSD storage: PostgreSQL on spinning disks is slow',
  })
}

export interface OsFacts {
  /** process.platform: linux, darwin, win32... */
  platform: string
  /** Kernel release (os.release()). */
  release: string
  /** ID, VERSION_ID and PRETTY_NAME from /etc/os-release; empty when unknown. */
  id: string
  versionId: string
  prettyName: string
}

/** Whether a dotted version (22.04, 24.10) is at least another: numbers compared part by part. */
function versionAtLeast(version: string, minimum: string): boolean {
  const a = version.split('.').map(Number)
  const b = minimum.split('.').map(Number)
  for (let i = 0; i < b.length; i++) {
    const x = a[i] ?? 0
    const y = b[i] ?? 0
    if (Number.isNaN(x) || x < y) return false
    if (x > y) return true
  }
  return true
}

export function osCheck(os: OsFacts): CheckResult {
  const ubuntu = HOST_LIMITS.ubuntu.minimumVersion
  const required = `Linux; Ubuntu ${ubuntu} or newer recommended`
  if (os.platform !== 'linux') {
    return check('os', 'Operating system', 'fail', `${os.platform} ${os.release}`, required, {
      fail: `Install on a Linux server (Ubuntu ${ubuntu} or newer recommended)`,
    })
  }
  const name = os.prettyName || `${os.id} ${os.versionId}`.trim() || 'Linux (unknown distribution)'
  const isUbuntu = os.id === 'ubuntu'
  return check(
    'os',
    'Operating system',
    isUbuntu && versionAtLeast(os.versionId, ubuntu) ? 'pass' : 'warn',
    `${name} (kernel ${os.release})`,
    required,
    {
      warn: isUbuntu
        ? `Upgrade to Ubuntu ${ubuntu} or newer`
        : `Other Linux distributions work but are not what Atrium is tested on; recommended Ubuntu ${ubuntu}+`,
    },
  )
}

/** A port the site publishes on this machine, and the setting that chooses it (named in the fix). */
export interface PortNeed {
  port: number
  /** Where the admin moves it: "PORT in the answers' config". */
  setting: string
}

export interface PortFact extends PortNeed {
  free: boolean
  /** The error code when listening failed: EADDRINUSE, EACCES... */
  error?: string
  /** In use by an Atrium: its version. */
  atrium?: string
  /** The Compose project and service of the container publishing it, when one does. */
  publisher?: Publisher
  /** The site asking: a port its own project publishes is what the install replaces, not something in the way. */
  site?: string
}

/** Where a port need is probed from, and what of this site may hold it. */
export interface OwnPortNeed extends PortNeed {
  /** The API port: an Atrium holding it is named with its version. */
  atriumMayHold?: boolean
  /** The site's Compose project: a port one of its containers publishes is the site's own (a re-run or an upgrade). */
  site?: string
  /** The address the site publishes on (ATRIUM_BIND_ADDRESS), to ask what listens there; loopback otherwise. */
  host?: string
}

/** The site's own: published by a container of its project (an Atrium elsewhere, another site's, is in the way). */
const isOurs = (p: PortFact) => !p.free && Boolean(p.site) && p.publisher?.project === p.site

const holder = (p: PortFact) =>
  [
    p.publisher ? `the Compose project ${p.publisher.project} (its ${p.publisher.service || 'container'})` : '',
    p.atrium ? `Atrium ${p.atrium}` : '',
  ]
    .filter(Boolean)
    .join(', ')

const portProblem = (p: PortFact) =>
  !p.error || p.error === 'EADDRINUSE'
    ? `port ${p.port} is in use${holder(p) ? ` by ${holder(p)}` : ''}`
    : `port ${p.port} cannot be opened (${p.error})`

const portFix = (p: PortFact) =>
  p.publisher
    ? `Port ${p.port}: another site on this engine publishes it (${p.publisher.project}): choose another port with ${p.setting}`
    : `Port ${p.port}: stop the process using it (find it with: ss -ltnp 'sport = :${p.port}') or choose another port with ${p.setting}`

export function portsCheck(ports: readonly PortFact[]): CheckResult {
  const busy = ports.filter((p) => !p.free && !isOurs(p))
  const ours = ports
    .filter(isOurs)
    .map(
      (p) =>
        `${p.port} in use by this site's ${p.publisher!.service || 'container'}${p.atrium ? ` (Atrium ${p.atrium})` : ''}, which the install replaces`,
    )
  const list = ports.map((p) => p.port).join(', ')
  const freeOnes = ports.filter((p) => p.free).map((p) => p.port)
  const found =
    ports.length === 0
      ? 'no port is needed on this machine'
      : busy.length
        ? [...busy.map(portProblem), ...ours].join('; ')
        : [...ours, ...(freeOnes.length ? [`${freeOnes.join(', ')} free`] : [])].join('; ')
  const site = ports.find((p) => p.site)?.site
  return check(
    'ports',
    'Ports free',
    busy.length ? 'fail' : 'pass',
    found,
    ports.length ? `ports ${list} free${site ? `, or held by this site (${site}) itself` : ''}` : 'none',
    { fail: busy.map(portFix).join('; ') },
  )
}

/**
 * @param offsetMs this machine's clock minus the reference (positive: this machine is ahead);
 *   null when no reference could be asked.
 * @param source the reference, for people: "the S3 endpoint", "ntp.example.org".
 */
export function clockCheck(offsetMs: number | null, source: string): CheckResult {
  const { warnMs, failMs } = HOST_LIMITS.clock
  const reference = source || 'a reference clock'
  const required = `within ${seconds(warnMs)} of ${reference} (beyond ${seconds(failMs)}, sign-in tokens, licences and TLS certificates break)`
  if (offsetMs === null) {
    return check('clock', 'Clock', 'warn', 'could not compare with a reference', required, {
      warn: 'Make sure NTP or chrony keeps this clock right (air-gapped sites: make sure NTP/chrony runs, against an internal time server)',
    })
  }
  const off = Math.abs(offsetMs)
  const status: CheckStatus = off > failMs ? 'fail' : off > warnMs ? 'warn' : 'pass'
  return check(
    'clock',
    'Clock',
    status,
    `${seconds(off)} ${offsetMs >= 0 ? 'ahead of' : 'behind'} ${reference}`,
    required,
    {
      fail: 'Set the clock right and keep it so with NTP or chrony',
      warn: 'Enable NTP or chrony so the clock stays right',
    },
  )
}

export interface HostFacts {
  cores: number
  memoryBytes: number
  dataPath: string
  /** The folder actually measured: the data path or its nearest existing parent. */
  measuredPath: string
  freeBytes: number
  /** Whether the disk under measuredPath spins; null when the OS does not say (overlay, tmpfs...). */
  rotational: boolean | null
  os: OsFacts
  ports: PortFact[]
}

/** The nearest path that exists, so a data path not created yet is measured where it will live. */
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

const readText = (path: string) => readFile(path, 'utf8').catch(() => null)

/** Linux's dev_t split as glibc does: major in bits 8-19 and 32-43, minor in bits 0-7 and 20-31. */
export function devMajorMinor(dev: bigint): { major: number; minor: number } {
  return {
    major: Number(((dev >> 8n) & 0xfffn) | ((dev >> 32n) & 0xfffff000n)),
    minor: Number((dev & 0xffn) | ((dev >> 12n) & 0xffffff00n)),
  }
}

/** Whether the block device under `path` spins, from sysfs; a partition asks its parent disk. */
async function rotationalAt(path: string): Promise<boolean | null> {
  const { major, minor } = devMajorMinor((await stat(path, { bigint: true })).dev)
  // A symlink into /sys/devices/...; missing for filesystems without a block device (major 0).
  const device = await realpath(`/sys/dev/block/${major}:${minor}`)
  const isPartition = (await readText(`${device}/partition`)) !== null
  const flag = await readText(`${isPartition ? dirname(device) : device}/queue/rotational`)
  return flag === null ? null : flag.trim() === '1'
}

/** ID, VERSION_ID and PRETTY_NAME from the text of /etc/os-release (values may be quoted). */
export function parseOsRelease(text: string): Pick<OsFacts, 'id' | 'versionId' | 'prettyName'> {
  const field = (key: string) => new RegExp(`^${key}=(["']?)(.*)\\1\\s*$`, 'm').exec(text)?.[2] ?? ''
  return { id: field('ID'), versionId: field('VERSION_ID'), prettyName: field('PRETTY_NAME') }
}

/** Whether the port is free: we try to listen on every interface and close at once. */
export function probePort(need: PortNeed): Promise<PortFact> {
  return new Promise((done) => {
    const server = createServer()
    server.once('error', (err: NodeJS.ErrnoException) => done({ ...need, free: false, error: err.code }))
    server.listen({ port: need.port, host: '0.0.0.0' }, () => server.close(() => done({ ...need, free: true })))
  })
}

/** An HTTP URL on the host (an IPv6 address in brackets) and port. */
const httpAt = (host: string, port: number, path: string) =>
  `http://${host.includes(':') ? `[${host}]` : host}:${port}${path}`

/**
 * Atrium's version when what listens on the port is Atrium: its liveness answers as Atrium's does
 * and its API description names it (both public, the same for every instance). Null otherwise, or
 * when nothing answers within the time.
 */
export async function atriumOn(port: number, timeoutMs = 2000, host = '127.0.0.1'): Promise<string | null> {
  const get = async (path: string, ms: number) => {
    const res = await fetch(httpAt(host, port, path), { signal: AbortSignal.timeout(ms), redirect: 'manual' })
    return res.ok ? ((await res.json()) as Record<string, unknown>) : null
  }
  try {
    const live = (await get('/healthz', timeoutMs)) as { data?: { status?: string } } | null
    if (live?.data?.status !== 'ok') return null
    // A server that answered its liveness is given longer for its API description: a fresh one builds
    // it on the first request, which on a busy machine took over 2 s, and the holder then went unnamed.
    const info = (
      (await get('/openapi.json', Math.max(timeoutMs, 10_000))) as {
        info?: { title?: string; version?: string }
      } | null
    )?.info
    return info?.title === 'Atrium API' && typeof info.version === 'string' ? info.version : null
  } catch {
    return null
  }
}

/** Which Compose project's container publishes a port (core/site.ts publisherOf, through the command runner). */
export type PublisherOf = (port: number) => Promise<Publisher | null>

/**
 * probePort, then, for a port in use, what holds it: the container publishing it (whose project says whether it is
 * this site's), and on the API port the Atrium answering there.
 */
async function probeOwnPort(need: OwnPortNeed, publisherOf?: PublisherOf): Promise<PortFact> {
  const { atriumMayHold, host, site, ...rest } = need
  const fact: PortFact = { ...(await probePort(rest)), ...(site && { site }) }
  if (fact.free) return fact
  const at = host && host !== '0.0.0.0' && host !== '::' ? host : '127.0.0.1'
  const [publisher, version] = await Promise.all([
    publisherOf?.(fact.port) ?? null,
    atriumMayHold ? atriumOn(fact.port, 2000, at) : null,
  ])
  return { ...fact, ...(publisher && { publisher }), ...(version && { atrium: version }) }
}

export async function gatherHost(
  dataPath: string,
  ports: readonly OwnPortNeed[],
  publisherOf?: PublisherOf,
): Promise<HostFacts> {
  const measuredPath = await existingAncestor(dataPath)
  const fs = await statfs(measuredPath)
  return {
    cores: availableParallelism(),
    memoryBytes: totalmem(),
    dataPath,
    measuredPath,
    freeBytes: fs.bavail * fs.bsize,
    rotational: await rotationalAt(measuredPath).catch(() => null),
    os: {
      platform: process.platform,
      release: release(),
      ...parseOsRelease((await readText('/etc/os-release')) ?? ''),
    },
    // Deduplicated: probing one port twice at once would see itself as busy.
    ports: await Promise.all(
      ports.filter((p, i) => ports.findIndex((q) => q.port === p.port) === i).map((p) => probeOwnPort(p, publisherOf)),
    ),
  }
}

/** Every host check, in a fixed order: cpu, memory, disk, ssd, os, ports, clock. */
export function hostChecks(
  facts: HostFacts,
  clockOffsetMs: number | null,
  clockSource = 'the S3 endpoint',
): CheckResult[] {
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
