// preflight: its checks, their status and the exit code they make. Tools answer through a fake
// runner, so nothing here needs Docker or a cluster.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { configureCommand } from '../../../installer/commands/configure.js'
import { preflightCommand } from '../../../installer/commands/preflight.js'
import { contextFor } from '../../../installer/core/context.js'
import { EXIT } from '../../../installer/core/report.js'
import { tools, UNMET_HERE } from '../../helpers/installer.js'
import { listening, site } from '../fixtures.js'

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

t.test(
  "the preflight checks the bundled MinIO's port as written in .env, and names that setting when the port is taken",
  async (t) => {
    const { port } = await listening(t, undefined, '0.0.0.0')
    const first = site(t)
    await configureCommand(first, { runner: tools().runner, acceptCheck: UNMET_HERE })
    // The admin moves MinIO's published port in the written .env; a re-run keeps it and checks it.
    const env = join(first.answers.outputDir, '.env')
    writeFileSync(env, readFileSync(env, 'utf8').replace(/^ATRIUM_S3_PORT=.*$/m, `ATRIUM_S3_PORT=${port}`))
    const again = contextFor(first.answers, { env: {} })
    const r = await preflightCommand(again, { runner: tools().runner })
    t.match(
      r.checks.find((c) => c.id === 'ports'),
      {
        status: 'fail',
        found: new RegExp(`port ${port} is in use`),
        fix: new RegExp(`choose another port with ATRIUM_S3_PORT in ${env.replace(/[.]/g, '\\.')}`),
      },
    )
  },
)
