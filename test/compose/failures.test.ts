// Day-2 safety on the real engine: a running Compose site, probed on /readyz every 200 ms, and
// changes that fail in each way a site sees (a wrong database password, an S3 that does not answer,
// a migration that fails, an image that is not there, a full disk under the data path, the
// installer killed in the middle of a deploy). For each: how many probes failed during the
// attempt, the configuration files in use byte for byte as before, the data still there, and the
// next run with the right answers succeeding. The site has its own PostgreSQL, Redis and S3 (the
// test's, through proxies on the engine's bridge). Skips without an engine, as the other engine
// tests do (test/helpers/engine.ts).
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { imageNamed, imageRef } from '../../config/images.js'
import { composeArgs } from '../../installer/core/compose-bundle.js'
import { parseAnswers } from '../../installer/core/answers.js'
import { stagingDir } from '../../installer/core/staged.js'
import { bridgeGateway, buildImage, docker, engine, probeReady, stepTimer, trustingImage } from '../helpers/engine.js'
import { faultProxy } from '../helpers/fault-proxy.js'
import { finished, spawnScript } from '../helpers/cli.js'
import { acceptUnmet, installer } from '../helpers/installer.js'
import { testLicense, testVendor } from '../helpers/license.js'
import { freePort, freshBucket, services, suffix, tempDir } from '../helpers/platform.js'
import { clusterSkip, pgCluster } from '../helpers/pg-cluster.js'
import { needsCompose, runTool } from '../helpers/tools.js'

const SERVER = imageNamed('atrium-server')
/** This test's own tag of the server (ATRIUM_VERSION), moved between images to make a case; the release tag is left alone. */
const RELEASED = imageRef({ ...SERVER, tag: `${SERVER.tag}-failures-${suffix()}` })
/** What this machine cannot change and a site may accept (the checks no site may accept stop the install). */
const ACCEPT = acceptUnmet

const found = await engine()
const skip = 'skip' in found ? found.skip : needsCompose() || clusterSkip()
if (!skip) t.setTimeout(1_500_000)

t.test(
  'a running Compose site stays up through every failed change, and the next right run succeeds',
  { skip },
  async (t: Test) => {
    const base = 'base' in found ? found.base : ''
    const { step, record } = stepTimer(t, 'failure matrix')
    const vendor = testVendor()
    const built = await step('docker build', () => buildImage(t, base))
    if ('error' in built) return t.fail(built.error)
    await step('the release image', () => trustingImage(t, built.image, vendor, RELEASED))
    const good = (await docker(['image', 'inspect', '--format', '{{.Id}}', RELEASED])).stdout.trim()
    t.teardown(() => docker(['image', 'rm', '--force', RELEASED]))

    // The site's folder on a small disk of its own, so that the disk can be filled (a tmpfs: root only).
    const dir = tempDir(t)
    const site = join(dir, 'site')
    mkdirSync(site)
    const mounted = (await runTool('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', site])).code === 0
    if (mounted) t.teardown(() => runTool('umount', ['--lazy', site]))

    const gateway = await bridgeGateway()
    // The site's PostgreSQL asks for a password (the shared test server trusts every connection: a wrong one would pass).
    const cluster = await pgCluster(t, ['host all all 127.0.0.1/32 scram-sha-256'])
    await cluster.psql(`create role atrium login superuser password 'site-db-password'`)
    await cluster.psql('create database atrium owner atrium')
    const database = `postgres://atrium:site-db-password@127.0.0.1:${cluster.port}/atrium`
    const [db, redis, s3] = await Promise.all([
      faultProxy(t, database, gateway),
      faultProxy(t, services.redisUrl, gateway),
      faultProxy(t, services.s3Endpoint, gateway),
    ])
    const port = await freePort()
    const api = `http://127.0.0.1:${port}`
    const name = `atrium-f${suffix()}`
    const answersPath = join(dir, 'answers.yaml')
    const answers = (over: Record<string, string> = {}) => {
      const config: Record<string, string> = {
        PORT: `"${port}"`,
        PUBLIC_URL: `"${api}"`,
        DATABASE_URL: '{ env: SITE_DATABASE_URL }',
        REDIS_URL: `"${redis.via(services.redisUrl)}"`,
        R2_ENDPOINT: `"${s3.via(services.s3Endpoint).replace(/\/$/, '')}"`,
        R2_BUCKET: `"${bucket}"`,
        R2_ACCESS_KEY_ID: `"${services.s3AccessKey}"`,
        R2_SECRET_ACCESS_KEY: '{ env: SITE_S3_SECRET }',
        LICENSE_KEY: '{ env: SITE_LICENSE_KEY }',
        ...over,
      }
      writeFileSync(
        answersPath,
        [
          'target: compose',
          'mode: air-gapped',
          `site: ${name}`,
          `dataPath: ${join(site, 'data')}`,
          `outputDir: ${join(site, 'out')}`,
          'tenantName: Failures',
          'adminEmail: admin@example.com',
          'config:',
          ...Object.entries(config).map(([k, v]) => `  ${k}: ${v}`),
        ].join('\n') + '\n',
      )
    }
    const bucket = await freshBucket(t)
    const env = {
      SITE_DATABASE_URL: db.via(database),
      SITE_S3_SECRET: services.s3SecretKey,
      SITE_LICENSE_KEY: await testLicense(vendor),
      ATRIUM_VERSION: RELEASED.slice(RELEASED.lastIndexOf(':') + 1),
      ATRIUM_METRICS_PORT: String(await freePort()),
    }
    answers()
    const args = () => composeArgs(parseAnswers(readFileSync(answersPath, 'utf8')).answers, join(site, 'out', '.env'))
    t.teardown(async () => {
      await docker([...args(), 'down', '--volumes', '--remove-orphans', '--timeout', '10'], 120_000)
      const volumes = (await docker(['volume', 'ls', '--quiet', '--filter', `name=^${name}-`])).stdout.split('\n')
      if (volumes.filter(Boolean).length) await docker(['volume', 'rm', '--force', ...volumes.filter(Boolean)])
    })
    const install = (extra: string[] = [], e: Record<string, string> = env) =>
      installer(['install', '--answers', answersPath, '--yes', '--skip-backup', ...ACCEPT, '--json', ...extra], e)
    const report = (r: { stdout: string }) =>
      JSON.parse(r.stdout || '{}') as { exitCode: number; error: string | null; firstAdmin: { apiKey: string } | null }

    const first = await step('install', () => install())
    const installed = report(first)
    if (first.code !== 0) return t.fail(`the first install failed: ${installed.error ?? first.stderr}`)
    const auth = { authorization: `Bearer ${installed.firstAdmin!.apiKey}`, 'content-type': 'application/json' }
    const made = await fetch(`${api}/api/v1/projects`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ name: 'Kept through every failure', language: 'typescript' }),
    })
    t.equal(made.status, 201, 'a project to keep')
    const projects = async () =>
      (
        (await (await fetch(`${api}/api/v1/projects`, { headers: auth })).json()) as { data: { name: string }[] }
      ).data.map((p) => p.name)
    const configFiles = () =>
      Object.fromEntries(['.env', 'answers.yaml'].map((f) => [f, readFileSync(join(site, 'out', f), 'utf8')]))

    /**
     * One failed change: probed throughout, then the files, the data and the next run with the right answers checked.
     * `expect` is what the failed run must say; `prepare` and `undo` make and unmake the fault.
     */
    async function failure(
      title: string,
      o: {
        prepare?: () => Promise<void> | void
        run?: () => Promise<{ code: number | null; stdout: string; stderr: string }>
        expect: RegExp
        undo?: () => Promise<void> | void
        /** The failure comes after the switch (the old site is put back, or the next run brings it back). */
        afterSwitch?: boolean
      },
    ) {
      await t.test(title, async (t) => {
        const before = configFiles()
        await o.prepare?.()
        const watch = probeReady(api)
        const started = performance.now()
        const r = await (o.run ?? (() => install()))()
        const attempt = await watch.stop()
        // The JSON report (checks, error, problems) and anything said on stderr.
        const said = `${r.stdout}\n${r.stderr}`
        t.not(r.code, 0, 'the change failed')
        t.match(said, o.expect, 'and says why')
        await o.undo?.()
        if (o.afterSwitch)
          t.comment(
            `${title}: ${attempt.failed} of ${attempt.total} probes failed, longest outage ${attempt.longestMs} ms`,
          )
        else t.equal(attempt.failed, 0, `no probe failed during the attempt (${attempt.total} probes)`)
        t.same(configFiles(), before, 'the configuration files in use are byte for byte as before')
        const watchNext = probeReady(api)
        const next = await install()
        const after = await watchNext.stop()
        t.equal(
          next.code,
          0,
          `the next run with the right answers succeeds${next.code ? `: ${report(next).error}` : ''}`,
        )
        t.same(await projects(), ['Kept through every failure'], 'the data is untouched')
        t.notOk(existsSync(stagingDir(join(site, 'out'))), 'nothing staged is left')
        record(
          `${title}: ${((performance.now() - started) / 1000).toFixed(1)} s, ${attempt.failed}/${attempt.total} probes failed during the attempt, ${after.failed}/${after.total} during the next run`,
        )
      })
    }

    await failure('a wrong database password', {
      run: () =>
        install([], { ...env, SITE_DATABASE_URL: db.via(database).replace('site-db-password', 'wrong-password') }),
      expect: /password authentication failed/,
    })

    await failure('an S3 that does not answer', {
      prepare: () => answers({ R2_ENDPOINT: `"http://${gateway}:1"` }),
      expect: /s3\.roundtrip|S3/,
      undo: () => answers(),
    })

    // A release whose migrations fail: the tag the bundle runs moved to it.
    const broken = tempDir(t)
    writeFileSync(join(broken, '0999_broken.sql'), 'alter table no_such_table add column x integer;\n')
    writeFileSync(join(broken, 'Dockerfile'), `FROM ${good}\nCOPY 0999_broken.sql /app/server/platform/migrations/\n`)
    await failure('a migration that fails', {
      prepare: async () => {
        t.equal((await docker(['build', '-t', RELEASED, broken], 120_000)).code, 0, 'the broken release builds')
      },
      expect: /The migrations failed; the running site was not touched[\s\S]*no_such_table/,
      undo: async () => {
        await docker(['tag', good, RELEASED])
      },
    })

    await failure('an image that is not there', {
      prepare: async () => {
        t.equal(
          (await docker(['image', 'rm', '--force', RELEASED])).code,
          0,
          'untagged (the running container keeps it)',
        )
      },
      expect: /the engine does not have [^;]*atrium-server/,
      undo: async () => {
        await docker(['tag', good, RELEASED])
      },
    })

    if (mounted) {
      const filler = join(site, 'filler')
      await failure('a full disk under the data path', {
        prepare: () => {
          try {
            writeFileSync(filler, Buffer.alloc(64 * 1024 * 1024))
          } catch {
            // Full: what was written stays, and the disk has no room left.
          }
        },
        expect: /no space left|ENOSPC|disk is full/i,
        undo: () => rmSync(filler, { force: true }),
      })
    } else t.comment('full disk: not run (mounting a tmpfs needs root)')

    await failure('the installer killed (SIGKILL) in the middle of a deploy', {
      prepare: () => answers({ LOG_LEVEL: 'debug' }),
      run: async () => {
        const child = spawnScript(
          'installer/cli.ts',
          ['install', '--answers', answersPath, '--yes', '--skip-backup', ...ACCEPT],
          env,
        )
        child.stdout!.on('data', (chunk: Buffer) => {
          if (chunk.toString().includes('Start Atrium and wait')) child.kill('SIGKILL')
        })
        const r = await finished(child)
        return { ...r, code: r.code ?? 137, stderr: `${r.stderr}\n(killed by SIGKILL)` }
      },
      expect: /killed by SIGKILL/,
      afterSwitch: true,
    })
  },
)
