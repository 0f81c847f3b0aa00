// Every preflight check for an install, in the order an admin fixes things: the machine, the
// services named in the configuration, the tools of the deploy target, the cluster (helm), then
// the license.
import type { VerifyOptions } from '../../licenses/license.js'
import type { Runner } from './run.js'
import type { Answers } from './answers.js'
import { join } from 'node:path'
import { gatherHost, hostChecks, type OwnPortNeed } from './checks/host.js'
import { namedServiceChecks, namesAService, regionStoreChecks } from '../../common/service-checks.js'
import { check, type CheckResult } from './checks/check.js'
import { readRegionStores } from '../../config/schema.js'
import { imageNamed, imageRef } from '../../config/images.js'
import { COMPOSE_VARIABLES } from '../../config/compose-variables.js'
import { hostOf, hostsOf, usesBundled } from './compose-bundle.js'
import { toolChecks } from './checks/tools.js'
import { gatherVolumes, volumesCheck } from './checks/volumes.js'
import { publisherOf } from './site.js'
import { licenseCheck } from './license.js'
import { inSeconds, within } from '../../common/deadline.js'

export interface PreflightOptions {
  runner: Runner
  /** How far this machine's clock is from a reference, when one could be asked (null: unknown). */
  clockOffsetMs?: number | null
  /** The kubeconfig file for helm (default: KUBECONFIG, then ~/.kube/config). */
  kubeconfig?: string
  /** The license's keys and time, for tests; the shipped trusted keys and now otherwise. */
  license?: Omit<VerifyOptions, 'airGapped'>
  /** How long the whole preflight may take (PREFLIGHT_DEADLINE_MS unless told: tests). */
  deadlineMs?: number
  /** Helm: how long the in-cluster check Job may take (30 s unless told: tests). */
  inClusterDeadlineMs?: number
}

/**
 * Ports the target needs free on this machine, each with the setting that moves it: compose
 * publishes the API port; helm none here. A PORT that is no port is left to the configuration's
 * own check, which says what is wrong with it.
 */
export function portsFor(answers: Answers, values: Record<string, string>): OwnPortNeed[] {
  if (answers.target !== 'compose') return []
  // The ports may be held by this site already (a re-run or an upgrade replaces it): its project's containers
  // publish them, and an Atrium is asked where it publishes them.
  const bind = answers.bindAddress || values.ATRIUM_BIND_ADDRESS
  const host = bind ? { host: bind } : {}
  const api = {
    port: Number(values.PORT || '8080'),
    setting: "PORT in the answers' config",
    atriumMayHold: true,
    site: answers.site,
    ...host,
  }
  // The bundled MinIO is published too (download links): when the site uses it, its port must be
  // free. It is a variable of the Compose bundle, kept in the written .env across re-runs.
  const s3 = {
    port: Number(values.ATRIUM_S3_PORT || COMPOSE_VARIABLES.ATRIUM_S3_PORT!.example),
    setting: `ATRIUM_S3_PORT in ${join(answers.outputDir, '.env')}`,
    site: answers.site,
    ...host,
  }
  // /metrics is published on loopback alone (compose/compose.yaml), whatever the bind address.
  const metrics = {
    port: Number(values.ATRIUM_METRICS_PORT || COMPOSE_VARIABLES.ATRIUM_METRICS_PORT!.example),
    setting: `ATRIUM_METRICS_PORT in ${join(answers.outputDir, '.env')}`,
    site: answers.site,
  }
  return [api, metrics, ...(usesBundled(values.R2_ENDPOINT) ? [s3] : [])].filter(
    (p) => Number.isInteger(p.port) && p.port > 0 && p.port < 65536,
  )
}

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|::1)$/i

/**
 * Compose: a service given as localhost or 127.0.0.1 is, inside Atrium's container, the container
 * itself. Warned, not failed: a site running the containers with host networking means it.
 */
export function loopbackCheck(answers: Answers, values: Record<string, string>): CheckResult[] {
  if (answers.target !== 'compose') return []
  const named = (['DATABASE_URL', 'REDIS_URL', 'R2_ENDPOINT'] as const).filter(
    (name) => values[name] && hostsOf(values[name]).some((h) => LOOPBACK.test(h)),
  )
  if (!named.length) return []
  return [
    check(
      'services.loopback',
      'Services on this machine',
      'warn',
      `${named.join(', ')} ${named.length > 1 ? 'name' : 'names'} ${[...new Set(named.map((n) => hostOf(values[n]!)))].join(', ')}`,
      "an address Atrium's container can reach",
      {
        warn: `Inside Atrium's container, localhost and 127.0.0.1 are the container itself, not this machine: set ${named.join(', ')} to this machine's address on the network (or the service's own host name), unless the containers run with host networking`,
      },
    ),
  ]
}

/** The reference clock: the S3 endpoint's (clockOffsetFrom). */
const CLOCK_SOURCE = 'the S3 endpoint'

/**
 * The clock offset from the HTTP Date header of the S3 endpoint (a service the site runs or
 * reaches anyway, so an air-gapped install asks nothing outside). Null when there is none to ask.
 */
export async function clockOffsetFrom(url: string | undefined, timeoutMs = 5000): Promise<number | null> {
  if (!url) return null
  try {
    const before = Date.now()
    const res = await fetch(url, { method: 'HEAD', signal: AbortSignal.timeout(timeoutMs) })
    const after = Date.now()
    const date = res.headers.get('date')
    if (!date) return null
    // The header has whole seconds: compare with the middle of the round trip.
    return (before + after) / 2 - Date.parse(date)
  } catch {
    return null
  }
}

/**
 * The whole preflight ends within this whatever the network does: every probe has a shorter
 * deadline of its own (5 s per service step, 10 s per cluster request, 15 s per tool), and the
 * groups run side by side; a group still running here is reported as a failed check.
 */
export const PREFLIGHT_DEADLINE_MS = 55_000

/** A group of checks, or one failed check saying which group did not finish, and why that matters. */
const finished = (title: string, deadlineMs: number, work: Promise<CheckResult[]>): Promise<CheckResult[]> =>
  within(deadlineMs, title, work).catch((err: unknown) => [
    check(
      'preflight.deadline',
      `${title} finished`,
      'fail',
      (err as { code?: string }).code === 'ETIMEDOUT'
        ? `${title}: no answer in ${inSeconds(deadlineMs)}`
        : `${title} could not run: ${(err as Error).message}`,
      `every check of ${title} answered within ${inSeconds(deadlineMs)}`,
      'Something on the network path accepts connections and never answers: check the hosts and ports in the configuration, proxies and firewalls, then run the preflight again',
    ),
  ])

export async function runPreflight(
  answers: Answers,
  values: Record<string, string>,
  opts: PreflightOptions,
): Promise<CheckResult[]> {
  const deadline = opts.deadlineMs ?? PREFLIGHT_DEADLINE_MS
  // Asked once: the clock check grades it, and the license is judged by the time it gives.
  const clockOffset =
    opts.clockOffsetMs !== undefined ? Promise.resolve(opts.clockOffsetMs) : clockOffsetFrom(values.R2_ENDPOINT)
  // Helm: the machine running the installer is not where Atrium runs; the cluster's nodes are measured instead.
  const host = async () => {
    if (answers.target === 'helm') return []
    return hostChecks(
      await gatherHost(answers.dataPath, portsFor(answers, values), (port) => publisherOf(port, opts.runner)),
      await clockOffset,
      CLOCK_SOURCE,
    )
  }
  // Compose: the engine, and the volumes of the site's name on it (each this site's, or missing).
  const tools = async () => [
    ...(await toolChecks(answers.target, opts.runner)),
    ...(answers.target === 'compose' ? [volumesCheck(await gatherVolumes(answers, opts.runner))] : []),
  ]
  const fromHere = async () => [...loopbackCheck(answers, values), ...(await namedServiceChecks(values))]
  const regionsFromHere = () => regionStoreChecks(readRegionStores(values.REGION_STORES))
  // Helm: from where Atrium will run, a Job in the namespace (services and region stores at once);
  // from here, saying why, when it cannot run there (no namespace yet, the image not pulled in time).
  const fromCluster = async () => {
    const { inClusterServiceChecks } = await import('./checks/in-cluster.js')
    const image = imageRef(imageNamed('atrium-server'), answers.registry)
    const r = await inClusterServiceChecks(values, {
      namespace: answers.namespace,
      image,
      kubeconfig: opts.kubeconfig,
      deadlineMs: opts.inClusterDeadlineMs,
    })
    if ('checks' in r)
      return [
        check(
          'services.where',
          'Where the services are checked from',
          'pass',
          `a pod in ${answers.namespace}, as Atrium will reach them`,
          'from inside the cluster',
          '',
        ),
        ...r.checks,
      ]
    const why = check(
      'services.where',
      'Where the services are checked from',
      'warn',
      `this machine: ${r.unavailable}`,
      'from inside the cluster',
      `The pods may reach them by other routes: run the preflight again once ${answers.namespace} exists and the server image can be pulled there`,
    )
    const [here, regions] = await Promise.all([fromHere(), regionsFromHere()])
    return [why, ...here, ...regions]
  }
  const helm = answers.target === 'helm' && namesAService(values)
  const services = helm ? fromCluster : fromHere
  const regionChecks = async () => (helm ? [] : regionsFromHere())
  // Helm: the cluster from the admin's kubeconfig (KUBECONFIG or ~/.kube/config).
  // Loaded only for helm: the Kubernetes client takes over a second to load.
  const cluster = async () =>
    answers.target === 'helm'
      ? (await import('./checks/kube.js')).kubeChecks(answers.namespace, { kubeconfig: opts.kubeconfig })
      : []
  const license = async () => [
    await licenseCheck(
      values.LICENSE_KEY,
      { ...opts.license, airGapped: answers.mode === 'air-gapped' },
      { offsetMs: await clockOffset, source: CLOCK_SOURCE },
    ),
  ]
  // Side by side, reported in the order an admin fixes things.
  const groups = await Promise.all([
    finished('the machine', deadline, host()),
    finished('the services', deadline, services()),
    finished('the region stores', deadline, regionChecks()),
    finished('the tools', deadline, tools()),
    finished('the cluster', deadline, cluster()),
    finished('the license', deadline, license()),
  ])
  return groups.flat()
}
