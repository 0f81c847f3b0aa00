// The installer run as an admin runs it, and an answers file naming the test's services: the real
// ones when TEST_* point at them, else addresses where nothing listens (their checks then fail,
// which is what --ignore-failed-checks is for).
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

/** An answers file in a temporary folder; the preflight's S3 round trip creates its bucket, which goes afterwards. */
export async function answersFile(t: Test, target: 'compose' | 'helm', extra = '') {
  const dir = tempDir(t)
  const bucket = services.s3Endpoint ? await freshBucket(t) : `atrium-t-${suffix()}`
  const config = {
    PUBLIC_URL: 'https://atrium.example.com',
    DATABASE_URL: services.databaseUrl || 'postgres://atrium@127.0.0.1:1/atrium',
    REDIS_URL: services.redisUrl || 'redis://127.0.0.1:1',
    R2_ENDPOINT: services.s3Endpoint || 'http://127.0.0.1:1',
    R2_BUCKET: bucket,
    R2_ACCESS_KEY_ID: services.s3AccessKey,
  }
  writeFileSync(
    join(dir, 'answers.yaml'),
    [
      `target: ${target}`,
      `dataPath: ${dir}`,
      `outputDir: ${join(dir, 'out')}`,
      'config:',
      ...Object.entries(config).map(([k, v]) => `  ${k}: "${v}"`),
      '  R2_SECRET_ACCESS_KEY: { env: TEST_S3_SECRET }',
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
