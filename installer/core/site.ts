// A Compose site's name and everything that carries it: the Compose project (its containers and
// network), the external volumes that hold its data, and the engine's word on which project
// publishes a port. Two sites on one engine differ by name, ports and data path; a site installed
// before sites were named is `atrium`, so its project and volumes keep their names.
import { join, resolve } from 'node:path'
import type { Runner } from './run.js'

/** The name of a site whose answers give none: the project and volume names Atrium always had. */
export const DEFAULT_SITE = 'atrium'

/**
 * A Compose project name (lowercase letters, digits, dashes and underscores, starting with a letter or digit), short
 * enough that its volume and container names stay readable.
 */
const SITE_NAME = /^[a-z0-9][a-z0-9_-]{0,39}$/

/** Null for a name a site can have, else what is wrong with it. */
export function siteProblem(name: string): string | null {
  return SITE_NAME.test(name)
    ? null
    : `site: "${name}" cannot name a site: use up to 40 lowercase letters, digits, dashes and underscores, starting with a letter or digit (it names the Compose project and the volumes)`
}

/** The folders under the data path the site's external volumes are bound to, one per volume. */
export const VOLUME_FOLDERS = ['postgres', 'redis', 'minio', 'data'] as const
export type VolumeFolder = (typeof VOLUME_FOLDERS)[number]

export interface SiteVolume {
  /** `<site>-<folder>`: what compose.yaml names it (`name: ${ATRIUM_SITE}-<folder>`). */
  name: string
  folder: VolumeFolder
  /** Where it must be bound: `<dataPath>/<folder>`, absolute. */
  device: string
}

/** The site's external volumes, each bound to its folder under the data path (the disk the preflight measured). */
export function siteVolumes(answers: { site: string; dataPath: string }): SiteVolume[] {
  return VOLUME_FOLDERS.map((folder) => ({
    name: `${answers.site}-${folder}`,
    folder,
    device: join(resolve(answers.dataPath), folder),
  }))
}

/** The Compose project and service of a container, from its labels. */
export interface Publisher {
  project: string
  service: string
}

/**
 * Which Compose project's container publishes the host port (`docker ps --filter publish=`), or null when no
 * container does or the engine cannot say: then whatever holds the port is no site's.
 */
export async function publisherOf(port: number, runner: Runner): Promise<Publisher | null> {
  const r = await runner(
    'docker',
    [
      'ps',
      '--filter',
      `publish=${port}`,
      '--format',
      '{{.Label "com.docker.compose.project"}} {{.Label "com.docker.compose.service"}}',
    ],
    { timeoutMs: 15_000 },
  )
  if (r.exitCode !== 0) return null
  const [project = '', service = ''] = (r.stdout.trim().split('\n')[0] ?? '').split(' ')
  return project ? { project, service } : null
}
