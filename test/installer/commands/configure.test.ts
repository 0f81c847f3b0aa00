// configure: the checks, then the configuration planned and written, as the context says it is.
// Tools answer through a fake runner, so nothing here needs Docker or a cluster.
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { configure, configureCommand } from '../../../installer/commands/configure.js'
import { answersCommand } from '../../../installer/core/invocation.js'
import { EXIT } from '../../../installer/core/report.js'
import { tools } from '../../helpers/installer.js'
import { tempDir } from '../../helpers/platform.js'
import { acceptor } from '../../../installer/core/accepted-checks.js'
import { loadAnswers } from '../../../installer/core/answers.js'
import { loadContext } from '../../../installer/core/context.js'
import { UNMET_HERE } from '../../helpers/installer.js'
import { problemsOf, site } from '../fixtures.js'

t.test(
  'failed checks stop configure (exit 3) until each is accepted; the answers written record who accepted it and when, and a replay applies them again',
  async (t) => {
    const ctx = site(t)
    const { runner } = tools()
    const stopped = await configureCommand(ctx, { runner })
    t.match(stopped, {
      exitCode: EXIT.checkFailed,
      stopped: 'checks',
      accepted: [],
      written: false,
      changes: [],
      files: [],
      replay: null,
    })
    const failed = [...new Set(stopped.checks.filter((c) => c.status === 'fail').map((c) => c.id))]
    t.ok(failed.includes('license'), `no license: it fails on any machine (failed here: ${failed.join(', ')})`)
    t.notOk(existsSync(ctx.answers.outputDir), 'nothing written')
    const partly = await configureCommand(ctx, { runner, acceptCheck: failed.filter((id) => id !== 'license') })
    t.match(
      partly,
      { exitCode: EXIT.checkFailed, stopped: 'checks', written: false },
      'one not accepted still stops it',
    )
    t.notOk(existsSync(ctx.answers.outputDir), 'nothing written')

    const before = Date.now()
    const written = await configureCommand(ctx, { runner, acceptCheck: [...failed, 'ssd'] })
    t.match(written, {
      exitCode: EXIT.ok,
      stopped: null,
      written: true,
      files: [ctx.files.answers.replace('answers.yaml', '.env'), ctx.files.answers],
    })
    t.same(
      written.accepted.map((a) => a.id),
      failed,
      'the acceptances that let a failed check through; a warning stops nothing without --strict',
    )
    for (const a of written.accepted) {
      t.equal(a.by, acceptor(), `${a.id}: by the user running it`)
      t.ok(Date.parse(a.at) >= before - 1000 && a.at === new Date(a.at).toISOString(), `${a.id}: at ${a.at}`)
    }
    t.equal(written.replay, answersCommand('configure', ctx.files.answers), 'as this installer is started')
    t.ok(existsSync(join(ctx.answers.outputDir, '.env')))
    const recorded = loadAnswers(ctx.files.answers)
    t.same(recorded.problems, [])
    t.same(recorded.answers.acceptedChecks, written.accepted, 'answers.yaml records them, and only those used')
    const answers = readFileSync(ctx.files.answers, 'utf8')

    // The replay: no flag, the recorded acceptances apply; who and when stay the first ones.
    const replay = await configureCommand(loadContext({ answersPath: ctx.files.answers }), { runner })
    t.match(replay, { exitCode: EXIT.ok, written: true })
    t.same(replay.accepted, written.accepted)
    t.equal(readFileSync(ctx.files.answers, 'utf8'), answers, 'the answers written again as they were')
  },
)

t.test('with --strict a warning stops configure (exit 4) until it is accepted too', async (t) => {
  // Nothing to compare the clock with (the bundled MinIO does not run yet): its check warns on any machine.
  const ctx = site(t)
  const { runner } = tools()
  const first = await configureCommand(ctx, { runner, strict: true })
  const ids = (status: string) => [...new Set(first.checks.filter((c) => c.status === status).map((c) => c.id))]
  t.ok(ids('warn').includes('clock'))
  const failedOnly = await configureCommand(ctx, { runner, strict: true, acceptCheck: ids('fail') })
  t.match(failedOnly, { exitCode: EXIT.warningsOnly, stopped: 'checks', written: false })
  const all = await configureCommand(ctx, { runner, strict: true, acceptCheck: [...ids('fail'), ...ids('warn')] })
  t.match(all, { exitCode: EXIT.ok, written: true })
  t.same(all.accepted.map((a) => a.id).sort(), [...ids('fail'), ...ids('warn')].sort())
})

t.test(
  "an id that is no check, or a check of the site's own services' connectivity and credentials, is bad input before any check runs",
  async (t) => {
    const { runner, calls } = tools()
    const problems = await problemsOf(
      configureCommand(site(t), {
        runner,
        acceptCheck: ['cpu', 'cpus', 'postgres.connect', 'region.eu-west.roundtrip', 'preflight.deadline'],
      }),
    )
    t.match(problems, [
      /^--accept-check cpus: not a check of the preflight \(those that may be accepted: cpu, /,
      /^--accept-check postgres\.connect: cannot be accepted: Atrium cannot start without its own PostgreSQL, Redis and S3 answering to these settings: a deploy past this check replaces the running site with one that cannot serve; correct the setting \(or start the service\) and run again$/,
      /^--accept-check region\.eu-west\.roundtrip: cannot be accepted: /,
      /^--accept-check preflight\.deadline: cannot be accepted: a group of checks that never answered/,
    ])
    t.equal((problems as string[]).length, 4)
    t.same(calls, [], 'no check ran')
  },
)

t.test(
  'configure keeps what the context says is written, whatever is on disk: the context is read once, before',
  async (t) => {
    const key = Buffer.alloc(32, 3).toString('base64')
    // Nothing on disk, but the context holds a written configuration: the plan must follow it.
    const ctx = {
      ...site(t),
      existing: {
        ENCRYPTION_MASTER_KEY: key,
        POSTGRES_PASSWORD: 'p'.repeat(48),
        REDIS_PASSWORD: 'r'.repeat(48),
        MINIO_ROOT_PASSWORD: 'm'.repeat(48),
        MINIO_ATRIUM_PASSWORD: 'a'.repeat(48),
      },
    }
    const r = await configureCommand(ctx, { runner: tools().runner, acceptCheck: UNMET_HERE })
    t.same(r.generated, [], 'no secret made again')
    t.notOk(
      r.changes.some((c) => c.name === 'ENCRYPTION_MASTER_KEY'),
      'the master key is not a change',
    )
    t.match(readFileSync(join(ctx.answers.outputDir, '.env'), 'utf8'), `ENCRYPTION_MASTER_KEY=${key}`)
  },
)

t.test('problems in the context or the configuration stop configure with exit 2, nothing written', async (t) => {
  const ctx = {
    ...site(t, {}, { PORT: 'eighty' }),
    problems: ['config.LICENSE_KEY: the environment variable X is not set'],
  }
  const r = await configureCommand(ctx, { runner: tools().runner, acceptCheck: UNMET_HERE })
  t.match(r, { exitCode: EXIT.badInput, stopped: 'problems', written: false })
  t.match(r.problems, ['config.LICENSE_KEY: the environment variable X is not set', /PORT must be a whole number/])
  t.notOk(existsSync(ctx.answers.outputDir))
})

t.test(
  'air-gapped helm with a service named by host name and no servicesCidrs: bad input naming the answer, before any check, nothing written',
  async (t) => {
    const dir = tempDir(t)
    const answers = join(dir, 'answers.yaml')
    const lines = ['target: helm', 'mode: air-gapped', `outputDir: ${join(dir, 'out')}`, 'config:']
    // A host under .localhost: outside the cluster by the rule, and loopback were it ever looked up (it is not).
    writeFileSync(answers, [...lines, '  DATABASE_URL: postgres://u:db-secret@db.corp.localhost/atrium'].join('\n'))
    // The bad input is thrown while the context is resolved: no check (no connection) has started.
    const problems = await problemsOf(
      Promise.resolve().then(() => configure.run({ flags: { answers, yes: true }, action: undefined, progress: {} })),
    )
    t.match(problems, [/^servicesCidrs: DATABASE_URL \(db\.corp\.localhost\) is named by host name/])
    t.notMatch(JSON.stringify(problems), /db-secret/)
    t.notOk(existsSync(join(dir, 'out')))
  },
)
