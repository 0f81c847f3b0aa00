// The service checks of a Helm site run where Atrium will run: inside the cluster. The admin's
// workstation may reach PostgreSQL, Redis and S3 by other routes than the pods (or not at all), so
// the preflight starts a short-lived Job of the server image in the namespace that runs the same
// checks (`check-services`, server/cli.ts, common/service-checks.ts) and reads their JSON from the
// pod's log. The settings travel in a Secret of their own (never in the Job's spec, which more
// people may read), owned by the Job; both are deleted when the result is read, whatever happened,
// and go by themselves after the Job ends should this process be killed first.
import { randomBytes } from 'node:crypto'
import { BatchV1Api, CoreV1Api, type V1Job, type V1Pod } from '@kubernetes/client-node'
import type { CheckResult } from '../../../common/checks.js'
import { SERVICE_SETTINGS } from '../../../common/service-checks.js'
import { inSeconds } from '../../../common/deadline.js'
import { openCluster, requestsWithin, statusOf, type KubeCheckOptions } from './kube.js'

export interface InClusterOptions extends KubeCheckOptions {
  namespace: string
  /** The server image, as the release will run it (the site's registry when air-gapped). */
  image: string
  /**
   * How long the Job may take, image pull included (30 s: within the preflight's deadline, with time to clean up and
   * check from here).
   */
  deadlineMs?: number
  /** How often its state is read. */
  pollMs?: number
}

const LABELS = {
  'app.kubernetes.io/name': 'atrium',
  'app.kubernetes.io/component': 'preflight',
  'app.kubernetes.io/managed-by': 'atrium-installer',
}

/**
 * The Job: one try, no service account token, non-root, read-only, small; gone on its own after 5 minutes should the
 * installer be killed.
 */
export function checkJob(name: string, image: string, deadlineSeconds: number): V1Job {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, labels: LABELS },
    spec: {
      backoffLimit: 0,
      activeDeadlineSeconds: deadlineSeconds,
      ttlSecondsAfterFinished: 300,
      template: {
        metadata: { labels: LABELS },
        spec: {
          restartPolicy: 'Never',
          automountServiceAccountToken: false,
          securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [
            {
              name: 'check',
              image,
              args: ['check-services'],
              envFrom: [{ secretRef: { name } }],
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                capabilities: { drop: ['ALL'] },
              },
              resources: {
                requests: { cpu: '50m', memory: '64Mi' },
                limits: { cpu: '500m', memory: '256Mi', 'ephemeral-storage': '64Mi' },
              },
            },
          ],
        },
      },
    },
  }
}

/** Why a pod has not run, from its container's state (ImagePullBackOff, ErrImagePull...), when it says. */
const waitingReason = (pod: V1Pod | undefined) => {
  const waiting = pod?.status?.containerStatuses?.[0]?.state?.waiting
  return waiting?.reason ? `${waiting.reason}${waiting.message ? `: ${waiting.message}` : ''}` : null
}

/**
 * The service checks as a pod in `namespace` sees them; or why they could not run there (no
 * cluster, no namespace yet, the image not pulled in time...), for the caller to check from here.
 */
export async function inClusterServiceChecks(
  values: Readonly<Record<string, string>>,
  o: InClusterOptions,
): Promise<{ checks: CheckResult[] } | { unavailable: string }> {
  const opened = openCluster(o)
  if ('failure' in opened) return { unavailable: opened.failure.found }
  const deadlineMs = o.deadlineMs ?? 30_000
  const until = Date.now() + deadlineMs
  const { limit, ask } = requestsWithin(Math.min(10_000, deadlineMs))
  const core = opened.kc.makeApiClient(CoreV1Api)
  const batch = opened.kc.makeApiClient(BatchV1Api)
  const { namespace } = o
  try {
    await ask('the namespace', core.readNamespace({ name: namespace }, limit))
  } catch (err) {
    return {
      unavailable:
        statusOf(err) === 404
          ? `the namespace ${namespace} does not exist yet (the install creates it)`
          : `cannot read the namespace ${namespace} (${statusOf(err) ?? (err as Error).message})`,
    }
  }
  const name = `atrium-preflight-${randomBytes(4).toString('hex')}`
  // The settings the checks read, and nothing else.
  const settings = Object.fromEntries(SERVICE_SETTINGS.filter((k) => values[k]).map((k) => [k, values[k]!]))
  // Set before each create: one that timed out here may still have been made there, and is deleted all the same.
  let jobMade = false
  let secretMade = false
  try {
    // The Job first, then the Secret owned by it: whatever happens to this process (Ctrl-C, a lost
    // connection), the Job goes after it ends (ttlSecondsAfterFinished) and takes the Secret with it.
    // The pod waits for the Secret to exist.
    jobMade = true
    const job = await ask(
      'the Job',
      batch.createNamespacedJob({ namespace, body: checkJob(name, o.image, Math.ceil(deadlineMs / 1000)) }, limit),
    )
    const owner = { apiVersion: 'batch/v1', kind: 'Job', name, uid: job.metadata?.uid ?? '', blockOwnerDeletion: false }
    secretMade = true
    await ask(
      'the Secret',
      core.createNamespacedSecret(
        {
          namespace,
          body: {
            apiVersion: 'v1',
            kind: 'Secret',
            metadata: { name, labels: LABELS, ownerReferences: [owner] },
            type: 'Opaque',
            stringData: settings,
          },
        },
        limit,
      ),
    )
    let pod: V1Pod | undefined
    for (;;) {
      const job = await ask('the Job', batch.readNamespacedJob({ name, namespace }, limit))
      const done = (job.status?.succeeded ?? 0) > 0 || (job.status?.failed ?? 0) > 0
      pod = (await ask('the pod', core.listNamespacedPod({ namespace, labelSelector: `job-name=${name}` }, limit)))
        .items[0]
      if (done) break
      if (Date.now() > until) {
        const reason = waitingReason(pod)
        return {
          unavailable: `the check Job ${name} did not finish in ${inSeconds(deadlineMs)}${reason ? ` (${reason})` : pod ? ` (pod ${pod.status?.phase ?? 'pending'})` : ' (no pod was scheduled)'}`,
        }
      }
      await new Promise((r) => setTimeout(r, o.pollMs ?? 1000))
    }
    if (!pod?.metadata?.name) return { unavailable: `the check Job ${name} ended without a pod to read` }
    const log = await ask(
      'the log',
      core.readNamespacedPodLog({ name: pod.metadata.name, namespace, container: 'check' }, limit),
    )
    // The result is the last line that is one (the log holds stderr too: a late warning is not it).
    const lines = String(log).trim().split('\n')
    const line = [...lines].reverse().find((l) => l.startsWith('{"checks"')) ?? lines.at(-1) ?? ''
    try {
      const checks = (JSON.parse(line) as { checks: CheckResult[] }).checks
      return { checks: checks.map((c) => ({ ...c, found: `${c.found} (from a pod in ${namespace})` })) }
    } catch {
      return { unavailable: `the check Job ${name} printed no result: ${line.slice(-300) || 'nothing'}` }
    }
  } catch (err) {
    return {
      unavailable: `the check Job could not run in ${namespace} (${statusOf(err) ? `HTTP ${statusOf(err)}` : (err as Error).message})`,
    }
  } finally {
    // Best effort, each on its own: a failure to delete one leaves the other to go.
    if (jobMade)
      await batch.deleteNamespacedJob({ name, namespace, propagationPolicy: 'Background' }, limit).catch(() => {})
    if (secretMade) await core.deleteNamespacedSecret({ name, namespace }, limit).catch(() => {})
  }
}
