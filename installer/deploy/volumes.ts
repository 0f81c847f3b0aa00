// The Compose site's external volumes in the deploy: refused before anything changes when one of
// the site's name points elsewhere (core/checks/volumes.ts says why and what to do), then each
// looked for and made when missing, bound to its folder under the data path. External, so that
// `docker compose down -v` can never delete the data.
import type { Answers } from '../core/answers.js'
import { gatherVolumes, volumesRefusal } from '../core/checks/volumes.js'
import type { Command, Runner } from '../core/run.js'
import { siteVolumes, VOLUME_FOLDERS } from '../core/site.js'

/**
 * Each volume of the folders the site uses (compose-bundle.ts volumesInUse: a bundled service it does not run needs
 * none) looked for, then created (skipped when it exists: the refusal below has seen it is this site's).
 */
export function volumeCommands(
  answers: Pick<Answers, 'site' | 'dataPath'>,
  folders: readonly string[] = VOLUME_FOLDERS,
): Command[] {
  const used = siteVolumes(answers).filter((v) => folders.includes(v.folder))
  return used.flatMap(({ name, device }): Command[] => [
    { file: 'docker', args: ['volume', 'inspect', name], title: `Look for the volume ${name}`, probe: true },
    {
      file: 'docker',
      args: [
        'volume',
        'create',
        '--driver',
        'local',
        '--opt',
        'type=none',
        '--opt',
        'o=bind',
        '--opt',
        `device=${device}`,
        name,
      ],
      title: `Create the volume ${name} in ${device}`,
    },
  ])
}

/** Null when every volume of the site's name is missing or bound where the data path says; else why nothing is deployed. */
export async function volumesProblem(
  answers: Pick<Answers, 'site' | 'dataPath'>,
  runner: Runner,
): Promise<string | null> {
  const refused = volumesRefusal(await gatherVolumes(answers, runner))
  return refused && `Nothing deployed: ${refused}`
}
