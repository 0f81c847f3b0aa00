// The Kubernetes cluster for the Helm tests (test/charts/cluster.test.ts): the single-node one that
// .ci/kube.sh builds from Kubernetes' sources and starts (CI does). Where none answers, those tests
// skip and say why. Images reach its containerd from the engine (docker save | ctr import): the
// cluster pulls nothing, as at an air-gapped site with its registry already filled.
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { Test } from 'tap'
import type { Ran } from './cli.js'
import { findTool, runTool } from './tools.js'

/** Where .ci/kube.sh keeps the cluster's state (ATRIUM_KUBE_STATE there). */
const STATE = process.env.ATRIUM_KUBE_STATE ?? '/var/lib/atrium-kube'
const CONTAINERD = '/run/atrium-kube/containerd.sock'
/** The node's address on the cluster's bridge: pods reach the host there (.ci/kube.sh NODE_IP). */
export const NODE_IP = '10.244.0.1'

export interface Cluster {
  kubeconfig: string
  /** kubectl and the other binaries of the cluster's version. */
  bin: string
  /** The environment the installer and Helm run in: this cluster's kubeconfig, its kubectl on PATH. */
  env: Record<string, string>
}

export async function cluster(): Promise<{ skip: string } | Cluster> {
  if (process.env.TEST_CLUSTER_UNAVAILABLE) return { skip: `no cluster: ${process.env.TEST_CLUSTER_UNAVAILABLE}` }
  const kubeconfig = process.env.TEST_KUBECONFIG ?? join(STATE, 'admin.kubeconfig')
  const bin = join(dirname(kubeconfig), 'bin')
  if (!existsSync(kubeconfig) || !existsSync(join(bin, 'kubectl')))
    return { skip: `no cluster: no ${kubeconfig} (bash .ci/kube.sh up builds and starts one, as root)` }
  if (!findTool('ctr')) return { skip: "no cluster: no ctr (containerd's client, which puts images into the cluster)" }
  const c: Cluster = {
    kubeconfig,
    bin,
    env: { KUBECONFIG: kubeconfig, PATH: `${bin}:${process.env.PATH ?? ''}` },
  }
  const ready = await kubectl(c, ['get', '--raw', '/readyz'], 15_000)
  if (ready.code !== 0 || ready.stdout.trim() !== 'ok')
    return {
      skip: `no cluster: its API server does not answer /readyz (${(ready.stderr || ready.stdout).trim().slice(0, 300)}); bash .ci/kube.sh up starts it`,
    }
  return c
}

export const kubectl = (c: Cluster, args: string[], timeoutMs = 60_000, input?: string): Promise<Ran> =>
  runTool(join(c.bin, 'kubectl'), args, { env: c.env, timeoutMs, input })

/** `kubectl ... -o json`, parsed; throws with kubectl's words when it fails. */
export async function kubeJson<T>(c: Cluster, args: string[]): Promise<T> {
  const r = await kubectl(c, [...args, '-o', 'json'])
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr.trim()}`)
  return JSON.parse(r.stdout) as T
}

/** ctr on the cluster's containerd, in the namespace the kubelet's images live in. */
const CTR = ['--address', CONTAINERD, '--namespace', 'k8s.io']
const ctr = (args: string[]) => runTool('ctr', [...CTR, ...args])

/**
 * The engine's image `tag` put into the cluster's containerd as `name` (the engine's tag stays the caller's own, so
 * that another test tagging `name` in the engine meanwhile changes nothing here); gone from containerd at the test's
 * end, every name of it (the cluster collects no image by itself: .ci/kube.sh).
 */
export async function loadImage(t: Test, tag: string, name: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const save = spawn('docker', ['save', tag], { stdio: ['ignore', 'pipe', 'pipe'] })
    const load = spawn('ctr', [...CTR, 'images', 'import', '-'], {
      stdio: ['pipe', 'ignore', 'pipe'],
    })
    let errors = ''
    const failed = (err: Error) => (errors += `${err.message}\n`)
    save.on('error', failed)
    load.on('error', failed)
    load.stdin.on('error', failed) // ctr gone before the archive ended: its exit says why
    save.stderr.on('data', (d: Buffer) => (errors += d.toString()))
    load.stderr.on('data', (d: Buffer) => (errors += d.toString()))
    save.stdout.pipe(load.stdin)
    const ended = (p: ReturnType<typeof spawn>) => new Promise<number | null>((r) => p.on('close', r))
    void Promise.all([ended(save), ended(load)]).then(([saved, loaded]) =>
      saved === 0 && loaded === 0
        ? resolve()
        : reject(new Error(`docker save ${tag} (exit ${saved}) | ctr import (exit ${loaded}): ${errors.trim()}`)),
    )
  })
  // docker save names a local tag docker.io/library/<tag>.
  const imported = tag.includes('/') ? tag : `docker.io/library/${tag}`
  t.teardown(() => removeImage(name))
  const tagged = await ctr(['images', 'tag', '--force', imported, name])
  if (tagged.code !== 0) throw new Error(`ctr images tag ${imported} ${name}: ${tagged.stderr}`)
  await ctr(['images', 'rm', imported])
}

/** Every name containerd holds for the image `name` names (the kubelet adds its sha256: one), so its layers go too. */
async function removeImage(name: string): Promise<void> {
  const rows = (await ctr(['images', 'ls'])).stdout
    .split('\n')
    .slice(1)
    .map((l) => l.split(/\s+/))
  const digest = rows.find(([ref]) => ref === name)?.[2]
  if (!digest) return
  const names = rows.filter((r) => r[2] === digest).map(([ref]) => ref!)
  await ctr(['images', 'rm', ...names])
}

/** A pod's containers as `kubectl get pods -o json` gives them: which are ready, how often restarted. */
export interface PodItem {
  metadata: { name: string; labels?: Record<string, string>; creationTimestamp: string; deletionTimestamp?: string }
  spec: { containers: { image: string }[]; nodeName?: string }
  status: {
    phase: string
    podIP?: string
    conditions?: { type: string; status: string }[]
    containerStatuses?: {
      name: string
      ready: boolean
      restartCount: number
      image: string
      state: Record<string, { reason?: string; exitCode?: number }>
      lastState: Record<string, { reason?: string; exitCode?: number }>
    }[]
  }
}

/** Ready, and not on its way out (a terminating pod stays Ready while it drains). */
export const podReady = (p: PodItem) =>
  !p.metadata.deletionTimestamp && Boolean(p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))

/** `fn` until it returns something other than undefined, every 500 ms, at most `ms`. */
export async function until<T>(ms: number, fn: () => Promise<T | undefined>): Promise<T | undefined> {
  const end = Date.now() + ms
  for (;;) {
    const v = await fn()
    if (v !== undefined || Date.now() > end) return v
    await new Promise((r) => setTimeout(r, 500))
  }
}
