// The Compose bundle's own variables: a password is made only for a bundled service the site runs,
// and kept once written; the volumes a site needs follow the same profiles.
import t from 'tap'
import { BUNDLED_PROFILES } from '../../../config/compose-variables.js'
import { DEFAULT_ANSWERS, type Answers } from '../../../installer/core/answers.js'
import {
  BUNDLE_SECRETS,
  composeBundleValues,
  hostsOf,
  usesBundled,
  profilesInUse,
  SECRET_PROFILES,
  volumesInUse,
} from '../../../installer/core/compose-bundle.js'

const answers: Answers = { ...DEFAULT_ANSWERS, dataPath: '/srv/atrium', config: {} }
const own = {
  DATABASE_URL: 'postgres://atrium:pw@db.corp.example:5432/atrium',
  REDIS_URL: 'redis://:pw@redis.corp.example:6379',
  R2_ENDPOINT: 'https://s3.corp.example',
}

t.test('every password the bundle makes belongs to a bundled service, by its profile', async (t) => {
  t.same(Object.keys(SECRET_PROFILES).sort(), [...BUNDLE_SECRETS].sort())
  for (const profile of Object.values(SECRET_PROFILES)) t.ok(BUNDLED_PROFILES.includes(profile), profile)
})

t.test(
  'passwords are made only for the bundled services the site runs: none for its own PostgreSQL, Redis or S3',
  async (t) => {
    const all = composeBundleValues(answers, {}, null)
    t.same(all.generated.sort(), [...BUNDLE_SECRETS].sort(), 'all bundled: all four')
    t.equal(all.variables.COMPOSE_PROFILES, 'postgres,redis,s3')

    const none = composeBundleValues(answers, own, null)
    t.same(none.generated, [], 'its own of all three: none to back up')
    for (const name of BUNDLE_SECRETS) t.notOk(name in none.variables, `no ${name} in .env`)
    t.equal(none.variables.COMPOSE_PROFILES, '')
    t.same(none.settings, {}, 'nothing points Atrium at a bundled service')

    const ownDatabase = composeBundleValues(answers, { DATABASE_URL: own.DATABASE_URL }, null)
    t.same(ownDatabase.generated.sort(), ['MINIO_ATRIUM_PASSWORD', 'MINIO_ROOT_PASSWORD', 'REDIS_PASSWORD'])
    t.equal(ownDatabase.variables.COMPOSE_PROFILES, 'redis,s3')
    const ownStore = composeBundleValues(answers, { R2_ENDPOINT: own.R2_ENDPOINT }, null)
    t.same(ownStore.generated.sort(), ['POSTGRES_PASSWORD', 'REDIS_PASSWORD'])
  },
)

t.test(
  "a password once written is kept, a service's the site no longer runs too (its volume holds data made with it)",
  async (t) => {
    const first = composeBundleValues(answers, {}, null)
    const existing = { ...first.variables, ...first.settings }
    const moved = composeBundleValues(answers, own, existing)
    t.same(moved.generated, [], 'nothing new')
    for (const name of BUNDLE_SECRETS) t.equal(moved.variables[name], first.variables[name], `${name} kept`)
    t.equal(moved.variables.COMPOSE_PROFILES, '')
    const back = composeBundleValues(answers, { DATABASE_URL: '' }, { ...moved.variables, ...own })
    t.same(back.generated, [], 'back to the bundled PostgreSQL: its first password, not a new one')
    t.equal(back.settings.DATABASE_URL, `postgres://atrium:${first.variables.POSTGRES_PASSWORD}@postgres:5432/atrium`)
  },
)

t.test("the volumes a site needs: Atrium's data, and each bundled service's it runs", async (t) => {
  t.same(volumesInUse({ COMPOSE_PROFILES: 'postgres,redis,s3' }), ['data', 'postgres', 'redis', 'minio'])
  t.same(volumesInUse({ COMPOSE_PROFILES: '' }), ['data'], 'its own PostgreSQL, Redis and S3')
  t.same(volumesInUse({ COMPOSE_PROFILES: 'redis, s3' }), ['data', 'redis', 'minio'])
  t.same(volumesInUse({}), ['data', 'postgres', 'redis', 'minio'], 'a .env from before profiles runs them all')
  t.same(volumesInUse(composeBundleValues(answers, own, null).variables), ['data'], 'as the written configuration says')
  t.same(profilesInUse({ COMPOSE_PROFILES: 's3,unknown' }), ['s3'])
})

t.test(
  'a Redis Sentinel or Cluster URL is read as its list of hosts: never the bundled Redis, a loopback host found',
  async (t) => {
    t.equal(
      usesBundled('redis+sentinel://redis:26379/atrium'),
      false,
      'the bundle runs one Redis server, not Sentinels',
    )
    t.same(hostsOf('redis+cluster://localhost,h2:6379'), ['localhost', 'h2'])
    t.equal(usesBundled('redis://:pw@redis:6379'), true)
  },
)
