// The installer run as an admin runs it, and an answers file naming the test's services: the real
// ones when TEST_* point at them, else either addresses where nothing listens (their checks then
// fail, and cannot be accepted: the install is refused) or, for Compose, none (the bundled ones,
// which nothing checks before they run). What a test machine lacks (its size, the license only the
// vendor signs) is accepted check by check, as an admin would.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Test } from 'tap'
import type { Runner } from '../../installer/core/run.js'
import { finished, spawnScript } from './cli.js'
import { freshBucket, services, suffix, tempDir } from './platform.js'

/**
 * Every tool is installed, new enough, and every command it is asked to run works; the calls are kept. No container
 * publishes a port, except those `published` names: port to the Compose project whose server publishes it.
 */
export function tools(o: { published?: Record<number, string> } = {}) {
  const calls: string[] = []
  const runner: Runner = async (file, args) => {
    const command = [file, ...args].join(' ')
    calls.push(command)
    const publish = file === 'docker' && args[0] === 'ps' ? /publish=(\d+)/.exec(args.join(' '))?.[1] : undefined
    const project = publish && o.published?.[Number(publish)]
    const stdout = publish !== undefined ? (project ? `${project} server` : '') : 'version 99.0.0'
    return { command, exitCode: 0, stdout, stderr: '', notFound: false, timedOut: false }
  }
  return { runner, calls }
}

export const installer = (args: string[], env: Record<string, string> = {}, o: { cwd?: string } = {}) =>
  finished(spawnScript('installer/cli.ts', args, env, o))

/**
 * The checks a test machine may fail that a test of something else accepts (--accept-check): its
 * size, its tools, the cluster it has not, and the license, which only the vendor can sign. Each is
 * accepted only when it fails; none of them is a check of the site's own services.
 */
export const UNMET_HERE = [
  'cpu',
  'memory',
  'disk',
  'ports',
  'tools.docker',
  'tools.compose',
  'tools.helm',
  'kube.connect',
  'license',
]

/** UNMET_HERE as the command line accepts them. */
export const acceptUnmet = UNMET_HERE.flatMap((id) => ['--accept-check', id])

/** All of the test's services are real ones: only then can a configuration that names them be written. */
export const realServices = Boolean(services.databaseUrl && services.redisUrl && services.s3Endpoint)
export const NEEDS_SERVICES =
  "needs TEST_DATABASE_URL, TEST_REDIS_URL and TEST_S3_ENDPOINT: the checks of a site's own services cannot be accepted"

/** The settings of the test's real services (realServices), with a fresh bucket of its own. */
export const realSettings = async (t: Test) => ({
  DATABASE_URL: services.databaseUrl,
  REDIS_URL: services.redisUrl,
  R2_ENDPOINT: services.s3Endpoint,
  R2_BUCKET: await freshBucket(t),
  R2_ACCESS_KEY_ID: services.s3AccessKey,
  R2_SECRET_ACCESS_KEY: services.s3SecretKey,
})

/**
 * An answers file in a temporary folder; the preflight's S3 round trip creates its bucket, which goes afterwards. A
 * service the test has no real one of is named where nothing listens, or with `bundled` (Compose) left out, so that
 * the bundled one is used.
 */
export async function answersFile(t: Test, target: 'compose' | 'helm', extra = '', o: { bundled?: boolean } = {}) {
  const dir = tempDir(t)
  const bucket = services.s3Endpoint ? await freshBucket(t) : `atrium-t-${suffix()}`
  const named = (real: string, closed: string) => (real || o.bundled ? real : closed)
  const s3 = named(services.s3Endpoint, 'http://127.0.0.1:1')
  const config = {
    PUBLIC_URL: 'https://atrium.example.com',
    DATABASE_URL: named(services.databaseUrl, 'postgres://atrium@127.0.0.1:1/atrium'),
    REDIS_URL: named(services.redisUrl, 'redis://127.0.0.1:1'),
    ...(s3 && { R2_ENDPOINT: s3, R2_BUCKET: bucket, R2_ACCESS_KEY_ID: services.s3AccessKey }),
  }
  writeFileSync(
    join(dir, 'answers.yaml'),
    [
      `target: ${target}`,
      `dataPath: ${dir}`,
      `outputDir: ${join(dir, 'out')}`,
      'config:',
      ...Object.entries(config)
        .filter(([, v]) => v)
        .map(([k, v]) => `  ${k}: "${v}"`),
      ...(s3 ? ['  R2_SECRET_ACCESS_KEY: { env: TEST_S3_SECRET }'] : []),
      extra,
    ].join('\n'),
  )
  return {
    dir,
    answers: join(dir, 'answers.yaml'),
    out: join(dir, 'out'),
    env: { TEST_S3_SECRET: services.s3SecretKey },
  }
}
