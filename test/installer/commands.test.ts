// The commands act on the context they are given (what is written, the first tenant) and return
// plain reports. Tools answer through a fake runner, so nothing here needs Docker or a cluster.
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import t from 'tap'
import { BadInput, configureCommand, imagesCommand, installCommand, preflightCommand, type Progress } from '../../installer/commands.js'
import { DEFAULT_ANSWERS, type Answers } from '../../installer/core/answers.js'
import { contextFor, type Resolved } from '../../installer/core/context.js'
import { EXIT } from '../../installer/core/report.js'
import { writeChecksum } from '../../installer/deploy/airgap.js'
import type { Runner } from '../../installer/deploy/run.js'
import { IMAGES } from '../../config/images.js'
import { tempDir } from '../helpers/platform.js'

/** Every tool is installed, new enough, and every command it is asked to run works. */
function tools() {
  const calls: string[] = []
  const runner: Runner = async (file, args) => {
    const command = [file, ...args].join(' ')
    calls.push(command)
    return { command, exitCode: 0, stdout: 'version 99.0.0', stderr: '', notFound: false, timedOut: false }
  }
  return { runner, calls }
}

/** A compose site in a temporary folder, nothing written yet; no license, so the license check fails. */
function site(t: Parameters<typeof tempDir>[0], over: Partial<Answers> = {}, config: Answers['config'] = {}): Resolved {
  const dir = tempDir(t)
  return contextFor({ ...DEFAULT_ANSWERS, dataPath: join(dir, 'data'), outputDir: join(dir, 'out'), ...over, config: { PUBLIC_URL: 'https://atrium.example.com', ...config } }, { env: {} })
}

t.test('preflight reports its checks, their status and the exit code they make', async (t) => {
  const r = await preflightCommand(site(t), { runner: tools().runner })
  t.match(r, { command: 'preflight', exitCode: EXIT.checkFailed, status: 'fail' })
  t.match(
    r.checks.find((c) => c.id === 'license'),
    { status: 'fail', found: 'missing' },
  )
  t.match(
    r.checks.find((c) => c.id === 'tools.docker'),
    { status: 'pass', found: '99.0.0' },
  )
})

t.test('failed checks stop configure before anything is planned; --ignore-failed-checks carries on and says so', async (t) => {
  const ctx = site(t)
  const { runner } = tools()
  const stopped = await configureCommand(ctx, { runner })
  t.match(stopped, { exitCode: EXIT.checkFailed, stopped: 'checks', written: false, changes: [], files: [], replay: null })
  t.notOk(existsSync(ctx.answers.outputDir), 'nothing written')
  const written = await configureCommand(ctx, { runner, ignoreFailed: true })
  t.match(written, { exitCode: EXIT.ok, stopped: null, checksIgnored: true, written: true, files: [ctx.files.answers.replace('answers.yaml', '.env'), ctx.files.answers] })
  t.equal(written.replay, `npm run --silent installer -- configure --answers ${ctx.files.answers} --yes`)
  t.ok(existsSync(join(ctx.answers.outputDir, '.env')))
})

t.test('configure keeps what the context says is written, whatever is on disk: the context is read once, before', async (t) => {
  const key = Buffer.alloc(32, 3).toString('base64')
  // Nothing on disk, but the context holds a written configuration: the plan must follow it.
  const ctx = {
    ...site(t),
    existing: { ENCRYPTION_MASTER_KEY: key, POSTGRES_PASSWORD: 'p'.repeat(48), REDIS_PASSWORD: 'r'.repeat(48), MINIO_ROOT_PASSWORD: 'm'.repeat(48), MINIO_ATRIUM_PASSWORD: 'a'.repeat(48) },
  }
  const r = await configureCommand(ctx, { runner: tools().runner, ignoreFailed: true })
  t.same(r.generated, [], 'no secret made again')
  t.notOk(
    r.changes.some((c) => c.name === 'ENCRYPTION_MASTER_KEY'),
    'the master key is not a change',
  )
  t.match(readFileSync(join(ctx.answers.outputDir, '.env'), 'utf8'), `ENCRYPTION_MASTER_KEY=${key}`)
})

t.test('problems in the context or the configuration stop configure with exit 2, nothing written', async (t) => {
  const ctx = { ...site(t, {}, { PORT: 'eighty' }), problems: ['config.LICENSE_KEY: the environment variable X is not set'] }
  const r = await configureCommand(ctx, { runner: tools().runner, ignoreFailed: true })
  t.match(r, { exitCode: EXIT.badInput, stopped: 'problems', written: false })
  t.match(r.problems, ['config.LICENSE_KEY: the environment variable X is not set', /PORT must be a whole number/])
  t.notOk(existsSync(ctx.answers.outputDir))
})

t.test('install --dry-run lists every command; a first tenant the context knows is not made again', async (t) => {
  const ctx = site(t, { adminEmail: 'admin@example.com' })
  const { runner, calls } = tools()
  const dry = await installCommand(ctx, { runner, ignoreFailed: true, dryRun: true })
  t.match(dry, { command: 'install', exitCode: EXIT.ok, written: false, stage: null, steps: [] })
  t.match(dry.deploy.at(-1), { title: 'Run the admin CLI: create-tenant', command: /.*/ })
  t.ok(dry.deploy.at(-1)!.command.includes('<generated>'), 'the password is not made on a dry run')
  t.notOk(
    calls.some((c) => c.includes('compose') && !c.endsWith('version')),
    'a dry run runs no deploy command',
  )
  const known = { ...ctx, firstAdmin: { tenantId: 't-1', userId: 'u-1', email: 'admin@example.com' } }
  const again = await installCommand(known, { runner, ignoreFailed: true, dryRun: true })
  t.notOk(
    again.deploy.some((c) => c.command.includes('create-tenant')),
    'no second tenant',
  )
})

t.test('install --images refuses a damaged tarball before it loads or starts anything', async (t) => {
  const kit = join(tempDir(t), 'kit.tar')
  writeFileSync(kit, 'layers')
  await writeChecksum(kit)
  writeFileSync(kit, 'layers, cut short')
  const { runner, calls } = tools()
  const r = await installCommand(site(t), { runner, ignoreFailed: true, images: kit })
  t.match(r, { exitCode: EXIT.error, stage: 'deploy', deployed: false, error: /^Nothing deployed: the images tarball .* is damaged or incomplete/ })
  t.same(
    calls.filter((c) => !c.includes(' version')),
    [],
    "no docker command ran (only the preflight read the tools' versions)",
  )
})

t.test('install shows its configuration before the deploy starts, then deploys and waits for /readyz', async (t) => {
  const server = createServer((req, res) => res.writeHead(req.url === '/readyz' ? 200 : 404).end())
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise<void>((r) => server.close(() => r())))
  const port = (server.address() as AddressInfo).port
  const ctx = site(t, {}, { PORT: String(port) })
  const events: string[] = []
  const progress: Progress = { configured: (r) => events.push(`configured ${r.written}`), step: (s) => events.push(`${s.result ? 'end' : 'start'} ${s.command.title}`) }
  const r = await installCommand(ctx, { runner: tools().runner, ignoreFailed: true }, progress)
  t.equal(events[0], 'configured true', 'the configuration part first')
  t.match(events.slice(1, 3), ['start Validate the Compose files with the configuration', 'end Validate the Compose files with the configuration'])
  t.match(r, { exitCode: EXIT.ok, stage: 'done', deployed: true, ready: true, url: 'https://atrium.example.com', firstAdmin: null, error: null })
  t.ok(r.steps.length > 0 && r.steps.every((s) => s.exitCode === 0 || s.skipped), 'every step ran or was made unnecessary')
  t.match(r.summary, ['Atrium is ready at https://atrium.example.com.', /No first tenant was created/])
})

t.test('images: list, a dry run, a run with each step, and bad input for what is missing', async (t) => {
  const list = await imagesCommand('list')
  t.equal(list.images.length, IMAGES.length)
  t.match(list.images[0], { ref: /:/ })
  const { runner, calls } = tools()
  const kit = join(tempDir(t), 'kit.tar')
  writeFileSync(kit, 'layers')
  await writeChecksum(kit)
  const dry = await imagesCommand('load', { images: kit, dryRun: true, runner })
  t.same(dry.commands, [{ title: `Load the images from ${kit}`, command: ['docker', 'load', '--input', kit] }])
  t.same(calls, [], 'a dry run runs nothing')
  const loaded = await imagesCommand('load', { images: kit, runner })
  t.match(loaded, { action: 'load', ok: true, exitCode: EXIT.ok, steps: [{ command: `docker load --input ${kit}`, exitCode: 0, skipped: false }] })
  const failing: Runner = async (file, args) => ({ command: [file, ...args].join(' '), exitCode: 1, stdout: '', stderr: 'no space left', notFound: false, timedOut: false })
  t.match(await imagesCommand('load', { images: kit, runner: failing }), { ok: false, exitCode: EXIT.error, error: `Failed at: docker load --input ${kit}\nno space left` })
  const unchecked = await imagesCommand('load', { images: '/media/kit.tar', runner })
  t.match(unchecked, { ok: false, exitCode: EXIT.error, error: /the images tarball \/media\/kit\.tar does not exist/, steps: [] })
  const missing = await imagesCommand('save').catch((err: unknown) => err)
  t.ok(missing instanceof BadInput, 'bad input (exit 2), not an error of the installer')
  t.match(missing, { problems: ['images save needs --output FILE (the tarball to write)'] })
  await t.rejects(imagesCommand('push', { registry: 'https://x' }), { message: /without a scheme/ })
  await t.rejects(imagesCommand('burn'), { message: /unknown images command burn/ })
})
