// Whether the engine's volumes of this site's name are this site's: a volume that exists is used
// only if it is bound where the answers' data path says, since Compose mounts a volume by name and
// never looks at where it points (one left by another site, or bound to a deleted folder, would
// put the data where the preflight never measured, or fail at the mount). Read through the command
// runner; grading is pure.
import { dirname, resolve } from 'node:path'
import type { Runner } from '../run.js'
import { siteVolumes, type SiteVolume } from '../site.js'
import { check, type CheckResult } from './check.js'

/** What `docker volume inspect` says of one of the site's volumes. */
export interface VolumeFact {
  volume: SiteVolume
  /** Missing: created by the deploy. Bound: as the installer makes it. Elsewhere: it exists and is not. */
  state: 'missing' | 'bound' | 'elsewhere' | 'unknown'
  /** Elsewhere: where and how it is bound, in words; unknown: why the engine could not say. */
  detail?: string
}

interface Inspected {
  Driver?: string
  Options?: Record<string, string> | null
}

/** One volume's state from `docker volume inspect NAME`'s result. */
export function volumeFact(
  volume: SiteVolume,
  r: { exitCode: number | null; stdout: string; stderr: string },
): VolumeFact {
  if (r.exitCode !== 0)
    return /no such volume/i.test(r.stderr)
      ? { volume, state: 'missing' }
      : { volume, state: 'unknown', detail: (r.stderr || r.stdout).trim().split('\n')[0] || `exit ${r.exitCode}` }
  let found: Inspected
  try {
    found = (JSON.parse(r.stdout) as Inspected[])[0] ?? {}
  } catch {
    return { volume, state: 'unknown', detail: `docker volume inspect printed no volume: ${r.stdout.slice(0, 80)}` }
  }
  const o = found.Options ?? {}
  const bound = found.Driver === 'local' && o.type === 'none' && o.o === 'bind' && o.device
  if (bound && resolve(o.device!) === volume.device) return { volume, state: 'bound' }
  return {
    volume,
    state: 'elsewhere',
    detail: bound
      ? `bound to ${o.device}`
      : `driver ${found.Driver ?? '?'}${
          Object.keys(o).length
            ? ` with ${Object.entries(o)
                .map(([k, v]) => `${k}=${v}`)
                .join(', ')}`
            : ', no bind'
        }`,
  }
}

/** Asks the engine about each of the site's volumes. */
export async function gatherVolumes(
  answers: { site: string; dataPath: string },
  runner: Runner,
): Promise<VolumeFact[]> {
  return Promise.all(
    siteVolumes(answers).map(async (volume) =>
      volumeFact(volume, await runner('docker', ['volume', 'inspect', volume.name], { timeoutMs: 15_000 })),
    ),
  )
}

/** For a volume bound to `<dir>/<its folder>`: that dir, a data path that would make it this site's. */
const dataPathOf = (f: VolumeFact) => {
  const device = /^bound to (.*)$/.exec(f.detail ?? '')?.[1]
  return device && device.endsWith(`/${f.volume.folder}`) ? dirname(device) : null
}

/** What to do about volumes of this site's name that point elsewhere: each named, with where it points. */
export function volumesFix(elsewhere: readonly VolumeFact[]): string {
  const names = elsewhere.map((f) => f.volume.name)
  const paths = [...new Set(elsewhere.map(dataPathOf).filter(Boolean))]
  return [
    `${names.join(', ')} ${names.length > 1 ? 'exist' : 'exists'} and ${names.length > 1 ? 'are' : 'is'} not bound under this site's data path: they may be another site's`,
    `remove ${names.length > 1 ? 'them' : 'it'} (docker volume rm ${names.join(' ')}: the folders they point at are not touched) once nothing needs them`,
    `or choose another site name (site in the answers)${paths.length ? ` or, if that is this site's data, dataPath ${paths.join(' or ')}` : ' or data path (dataPath)'}`,
  ].join('; ')
}

/** The preflight's check: every volume of the site's name missing (the deploy makes it) or bound where it belongs. */
export function volumesCheck(facts: readonly VolumeFact[]): CheckResult {
  const elsewhere = facts.filter((f) => f.state === 'elsewhere')
  const unknown = facts.filter((f) => f.state === 'unknown')
  const bound = facts.filter((f) => f.state === 'bound').map((f) => f.volume.name)
  const missing = facts.filter((f) => f.state === 'missing').map((f) => f.volume.name)
  const required = `each of ${facts.map((f) => f.volume.name).join(', ')} missing (made by the install) or bound to its folder under ${facts[0] ? dirname(facts[0].volume.device) : 'the data path'}`
  const title = "The site's volumes"
  if (elsewhere.length)
    return check(
      'volumes',
      title,
      'fail',
      elsewhere.map((f) => `${f.volume.name} ${f.detail}, not ${f.volume.device}`).join('; '),
      required,
      volumesFix(elsewhere),
    )
  if (unknown.length)
    return check(
      'volumes',
      title,
      'warn',
      `the engine did not say: ${unknown.map((f) => `${f.volume.name} (${f.detail})`).join('; ')}`,
      required,
      'Start Docker and make sure this user may use it, then run the checks again',
    )
  const found = [
    bound.length ? `${bound.join(', ')} bound under the data path` : '',
    missing.length ? `${missing.join(', ')} to be made` : '',
  ]
  return check('volumes', title, 'pass', found.filter(Boolean).join('; '), required, '')
}

/**
 * Why a deploy must not use these volumes, or null: the refusal the deploy itself makes, whatever checks were
 * ignored, since Compose would mount a volume that points elsewhere without a word. An engine that cannot say is left
 * to the deploy's own first command, which then fails with the engine's words.
 */
export function volumesRefusal(facts: readonly VolumeFact[]): string | null {
  const elsewhere = facts.filter((f) => f.state === 'elsewhere')
  if (!elsewhere.length) return null
  const c = volumesCheck(elsewhere)
  return `${c.found}. ${c.fix}`
}
