// The volumes of a site's name, as the real engine describes them: missing ones pass (the install
// makes them), ones bound to their folder under the data path pass, and one that exists bound
// anywhere else (another site's data path, a deleted folder, a plain Docker volume) fails, naming
// it, where it points and what to do. Needs a container engine; skips and says why without one.
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { gatherVolumes, volumeFact, volumesCheck, volumesRefusal } from '../../../../installer/core/checks/volumes.js'
import { run } from '../../../../installer/core/run.js'
import { siteVolumes } from '../../../../installer/core/site.js'
import { docker } from '../../../helpers/engine.js'
import { suffix, tempDir } from '../../../helpers/platform.js'

const info = await docker(['info', '--format', '{{.ServerVersion}}'], 15_000)
const skip = info.code === 0 ? false : `no container engine: docker info failed (${info.stderr.trim().split('\n')[0]})`

/** A site of its own name (no real site has it), whose volumes go when the test ends. */
function testSite(t: Test) {
  const site = { site: `t${suffix()}`, dataPath: join(tempDir(t), 'data') }
  t.teardown(() => docker(['volume', 'rm', '--force', ...siteVolumes(site).map((v) => v.name)]))
  return site
}
const create = (name: string, device?: string) =>
  docker([
    'volume',
    'create',
    ...(device ? ['--driver', 'local', '--opt', 'type=none', '--opt', 'o=bind', '--opt', `device=${device}`] : []),
    name,
  ])

t.test('missing volumes and volumes bound under the data path are the site’s', { skip }, async (t) => {
  const site = testSite(t)
  const fresh = await gatherVolumes(site, run)
  t.same(
    fresh.map((f) => f.state),
    ['missing', 'missing', 'missing', 'missing'],
  )
  t.match(volumesCheck(fresh), { id: 'volumes', status: 'pass', found: /-postgres, .*-data to be made$/ })
  const [postgres, redis] = siteVolumes(site)
  await create(postgres!.name, postgres!.device)
  await create(redis!.name, join(site.dataPath, '.', 'redis'))
  const some = await gatherVolumes(site, run)
  t.same(
    some.map((f) => f.state),
    ['bound', 'bound', 'missing', 'missing'],
    'the same folder however the path was spelt',
  )
  t.match(volumesCheck(some), {
    status: 'pass',
    found: `${postgres!.name}, ${redis!.name} bound under the data path; ${site.site}-minio, ${site.site}-data to be made`,
  })
  t.equal(volumesRefusal(some), null)
})

t.test(
  "a volume of the site's name bound elsewhere, or not bound at all, fails with its name, where it points and the fix",
  { skip },
  async (t) => {
    const site = testSite(t)
    const [postgres, , minio] = siteVolumes(site)
    const other = join(tempDir(t), 'other-site')
    await create(postgres!.name, join(other, 'postgres'))
    await create(minio!.name)
    const facts = await gatherVolumes(site, run)
    t.same(
      facts.map((f) => f.state),
      ['elsewhere', 'missing', 'elsewhere', 'missing'],
    )
    const c = volumesCheck(facts)
    t.equal(c.status, 'fail')
    t.equal(
      c.found,
      `${postgres!.name} bound to ${other}/postgres, not ${postgres!.device}; ${minio!.name} driver local, no bind, not ${minio!.device}`,
    )
    t.match(c.fix, `${postgres!.name}, ${minio!.name} exist and are not bound under this site's data path`)
    t.match(c.fix, `docker volume rm ${postgres!.name} ${minio!.name}`)
    t.match(
      c.fix,
      `or choose another site name (site in the answers) or, if that is this site's data, dataPath ${other}`,
    )
    t.equal(volumesRefusal(facts), `${c.found}. ${c.fix}`, 'the deploy refuses with the same words')
  },
)

t.test('an engine that cannot say is not taken for an empty one', async (t) => {
  const [volume] = siteVolumes({ site: 'blue', dataPath: '/srv/blue' })
  const down = volumeFact(volume!, {
    exitCode: 1,
    stdout: '',
    stderr: 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?',
  })
  t.match(down, { state: 'unknown', detail: /Cannot connect to the Docker daemon/ })
  t.match(volumesCheck([down]), { status: 'warn', fix: /Start Docker/ })
  t.equal(volumesRefusal([down]), null, "the deploy's first docker command then fails with the engine's own words")
  t.match(volumeFact(volume!, { exitCode: 0, stdout: 'version 99.0.0', stderr: '' }), { state: 'unknown' })
})
