// A site's name and what carries it: the volumes under its data path, and which Compose project
// the engine says publishes a port (asked of the real engine, with a container labelled as Compose
// labels its own; skipped with the reason without an engine or an image to run).
import t from 'tap'
import { run } from '../../../installer/core/run.js'
import { DEFAULT_SITE, publisherOf, siteProblem, siteVolumes } from '../../../installer/core/site.js'
import { docker } from '../../helpers/engine.js'
import { freePort, suffix } from '../../helpers/platform.js'

t.test("a site's volumes carry its name and are bound to its folders under the data path", async (t) => {
  t.same(siteVolumes({ site: 'blue', dataPath: '/srv/blue/' }), [
    { name: 'blue-postgres', folder: 'postgres', device: '/srv/blue/postgres' },
    { name: 'blue-redis', folder: 'redis', device: '/srv/blue/redis' },
    { name: 'blue-minio', folder: 'minio', device: '/srv/blue/minio' },
    { name: 'blue-data', folder: 'data', device: '/srv/blue/data' },
  ])
  t.same(
    siteVolumes({ site: DEFAULT_SITE, dataPath: '/var/lib/atrium' }).map((v) => v.name),
    ['atrium-postgres', 'atrium-redis', 'atrium-minio', 'atrium-data'],
    'a site named before sites were keeps the volumes it has',
  )
  t.equal(siteProblem('blue-2'), null)
  t.match(siteProblem('Blue'), /^site: "Blue" cannot name a site/)
})

const images = await docker(['image', 'ls', '--format', '{{.Repository}}:{{.Tag}}'], 15_000)
// The base image the image tests build on (.ci/engine.sh), or the server image: both have sleep.
const image = images.stdout.split('\n').find((i) => /^atrium-(node-base|server):/.test(i) && !i.includes('<none>'))
const skip =
  images.code !== 0
    ? `no container engine: docker image ls failed (${images.stderr.trim().split('\n')[0]})`
    : !image
      ? 'the engine holds neither atrium-node-base nor atrium-server to run a container from (bash .ci/engine.sh makes one)'
      : false

t.test(
  'the engine names the Compose project and service of the container publishing a port; none for a free one',
  { skip },
  async (t) => {
    const port = await freePort()
    t.same(await publisherOf(port, run), null, 'nothing publishes it')
    const project = `t${suffix()}`
    const started = await docker([
      'run',
      '--detach',
      '--rm',
      '--entrypoint',
      'sleep',
      '--publish',
      `127.0.0.1:${port}:80`,
      '--label',
      `com.docker.compose.project=${project}`,
      '--label',
      'com.docker.compose.service=server',
      image!,
      '120',
    ])
    t.equal(started.code, 0, started.stderr)
    t.teardown(() => docker(['rm', '--force', started.stdout.trim()]))
    t.same(await publisherOf(port, run), { project, service: 'server' })
    t.same(await publisherOf(await freePort(), run), null, 'and only that port')
  },
)
