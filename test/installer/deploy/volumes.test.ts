// The deploy's part in the site's volumes: each looked for and made when missing, bound under the
// data path; and, before anything changes, a volume of the site's name that points elsewhere
// refused whatever checks were ignored (asked of the real engine; skipped with the reason without one).
import { join } from 'node:path'
import t from 'tap'
import { run } from '../../../installer/core/run.js'
import { volumeCommands, volumesProblem } from '../../../installer/deploy/volumes.js'
import { docker } from '../../helpers/engine.js'
import { suffix, tempDir } from '../../helpers/platform.js'

t.test('each volume is looked for, then made bound to its folder when missing', async (t) => {
  const commands = volumeCommands({ site: 'blue', dataPath: '/data/blue' })
  t.same(
    commands.slice(0, 2).map((c) => ({ line: [c.file, ...c.args].join(' '), probe: Boolean(c.probe) })),
    [
      { line: 'docker volume inspect blue-postgres', probe: true },
      {
        line: 'docker volume create --driver local --opt type=none --opt o=bind --opt device=/data/blue/postgres blue-postgres',
        probe: false,
      },
    ],
  )
  t.equal(commands.length, 8, 'postgres, redis, minio and data')
})

const info = await docker(['info', '--format', '{{.ServerVersion}}'], 15_000)
const skip = info.code === 0 ? false : `no container engine: docker info failed (${info.stderr.trim().split('\n')[0]})`

t.test("a volume of the site's name bound elsewhere stops the deploy before anything changes", { skip }, async (t) => {
  const site = { site: `t${suffix()}`, dataPath: join(tempDir(t), 'data') }
  t.teardown(() => docker(['volume', 'rm', '--force', `${site.site}-data`]))
  t.equal(await volumesProblem(site, run), null, 'none of them exists: the deploy makes them')
  const elsewhere = join(tempDir(t), 'gone', 'data')
  const made = await docker([
    'volume',
    'create',
    ...['--driver', 'local', '--opt', 'type=none', '--opt', 'o=bind', '--opt', `device=${elsewhere}`],
    `${site.site}-data`,
  ])
  t.equal(made.code, 0, made.stderr)
  t.match(
    await volumesProblem(site, run),
    new RegExp(
      `^Nothing deployed: ${site.site}-data bound to ${elsewhere}, not ${join(site.dataPath, 'data')}\\. ${site.site}-data exists .*docker volume rm ${site.site}-data`,
    ),
  )
})
