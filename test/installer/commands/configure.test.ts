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
import { problemsOf, site } from '../fixtures.js'

t.test(
  'failed checks stop configure before anything is planned; --ignore-failed-checks carries on and says so',
  async (t) => {
    const ctx = site(t)
    const { runner } = tools()
    const stopped = await configureCommand(ctx, { runner })
    t.match(stopped, {
      exitCode: EXIT.checkFailed,
      stopped: 'checks',
      written: false,
      changes: [],
      files: [],
      replay: null,
    })
    t.notOk(existsSync(ctx.answers.outputDir), 'nothing written')
    const written = await configureCommand(ctx, { runner, ignoreFailed: true })
    t.match(written, {
      exitCode: EXIT.ok,
      stopped: null,
      checksIgnored: true,
      written: true,
      files: [ctx.files.answers.replace('answers.yaml', '.env'), ctx.files.answers],
    })
    t.equal(written.replay, answersCommand('configure', ctx.files.answers), 'as this installer is started')
    t.ok(existsSync(join(ctx.answers.outputDir, '.env')))
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
    const r = await configureCommand(ctx, { runner: tools().runner, ignoreFailed: true })
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
  const r = await configureCommand(ctx, { runner: tools().runner, ignoreFailed: true })
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
