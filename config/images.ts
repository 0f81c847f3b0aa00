// Every container image the bundles use, in one place: the Compose bundle and the chart reference
// them, Chart.yaml lists them (artifacthub.io/images), and the air-gap kit saves, loads and pushes
// exactly these. Tags are pinned (never `latest`) so an install is the same on every site.
import { VERSION } from '../common/version.js'

export interface Image {
  /** Compose service or chart component that runs it. */
  name: string
  /** Where it is published; an air-gapped site replaces this with its private registry. */
  registry: string
  repository: string
  tag: string
  /** Which bundles use it. */
  usedBy: readonly ('compose' | 'helm')[]
}

export const IMAGES: readonly Image[] = [
  {
    name: 'atrium-server',
    registry: 'docker.io',
    repository: 'atrium/atrium-server',
    tag: VERSION,
    usedBy: ['compose', 'helm'],
  },
  {
    name: 'postgres',
    registry: 'docker.io',
    repository: 'library/postgres',
    tag: '17.6-bookworm',
    usedBy: ['compose'],
  },
  { name: 'redis', registry: 'docker.io', repository: 'library/redis', tag: '7.4.5-bookworm', usedBy: ['compose'] },
  {
    name: 'minio',
    registry: 'quay.io',
    repository: 'minio/minio',
    tag: 'RELEASE.2025-09-07T16-13-09Z',
    usedBy: ['compose'],
  },
  {
    name: 'minio-mc',
    registry: 'quay.io',
    repository: 'minio/mc',
    tag: 'RELEASE.2025-08-13T08-35-41Z',
    usedBy: ['compose'],
  },
]

/** registry/repository:tag, with the registry replaced when one is given (air-gapped sites). */
export const imageRef = (image: Image, registry?: string): string =>
  `${registry || image.registry}/${image.repository}:${image.tag}`

export const imageNamed = (name: string): Image => {
  const image = IMAGES.find((i) => i.name === name)
  if (!image) throw new Error(`no image named ${name}`)
  return image
}

/** A registry as global.imageRegistry and ATRIUM_REGISTRY take it: host[:port][/path], no scheme. */
export const REGISTRY_RE = /^[a-zA-Z0-9.-]+(:[0-9]+)?(\/[a-zA-Z0-9._/-]+)?$/

/** Null when `registry` is one; else what is wrong, said of `what` (the flag, the answer or the field). */
export const registryProblem = (registry: string, what = '--registry'): string | null =>
  REGISTRY_RE.test(registry)
    ? null
    : registry.includes('@')
      ? // Credentials here would go on docker's and helm's command lines (and into the chart's values): never echoed.
        `${what} must be host[:port][/path], without credentials (docker login keeps them for the push; a cluster pulls with imagePullSecrets): got "<redacted>@${registry.slice(registry.lastIndexOf('@') + 1)}"`
      : `${what} must be host[:port][/path] without a scheme, e.g. registry.corp.example:5000/atrium (got "${registry}")`
