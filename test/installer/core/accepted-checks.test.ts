// Accepting a failed check is per check: which ids exist, which can never be accepted (the site's
// own services' connectivity and credentials) and why, who accepts, and how the acceptances judge
// the checks that stop a command.
import { userInfo } from 'node:os'
import t from 'tap'
import {
  ACCEPTABLE,
  acceptances,
  acceptor,
  acceptProblem,
  CHECK_IDS,
  isCheckId,
  judge,
  neverAccepted,
  NEVER_ACCEPTED,
  parseAccepted,
  refusals,
  withAccepted,
} from '../../../installer/core/accepted-checks.js'
import { check } from '../../../installer/core/checks/check.js'
import { contextFor, preflightValues } from '../../../installer/core/context.js'
import { runPreflight } from '../../../installer/core/preflight.js'
import { tools } from '../../helpers/installer.js'
import { site } from '../fixtures.js'

const NEVER = [
  'postgres.connect',
  'postgres.privileges',
  'postgres.pooling',
  'redis.connect',
  's3.roundtrip',
  'region.eu-west.roundtrip',
  'region.stores',
  'services.loopback',
  'preflight.deadline',
]

t.test(
  "the site's own services' connectivity and credential checks, and the deadline, can never be accepted",
  async (t) => {
    for (const id of NEVER) {
      t.ok(isCheckId(id), `${id} is a check`)
      t.ok(neverAccepted(id), `${id} is never accepted`)
      t.match(acceptProblem(id), /^cannot be accepted: .+; .+ and run again$/, `${id} says why and the fix`)
    }
    t.match(acceptProblem('postgres.connect'), /cannot start without its own PostgreSQL, Redis and S3/)
    t.match(acceptProblem('preflight.deadline'), /may be exactly the site's own services' connectivity/)
    t.same(
      CHECK_IDS.filter((id) => neverAccepted(id)).sort(),
      NEVER.filter((id) => !id.startsWith('region.eu-west')).sort(),
      'no other check is refused',
    )
    t.same(
      [...NEVER_ACCEPTED].sort(),
      [...NEVER.filter((id) => !id.startsWith('region.eu-west')), 'region.<code>.roundtrip'].sort(),
      'as the admin is told them',
    )
  },
)

t.test('why checks cannot be accepted is said once per reason, naming each check it is said of', async (t) => {
  const lines = refusals([
    'cpu',
    'postgres.connect',
    's3.roundtrip',
    'region.eu-west.roundtrip',
    'preflight.deadline',
    's3.roundtrip',
  ])
  t.equal(lines.length, 2)
  t.match(
    lines[0],
    /^postgres\.connect, s3\.roundtrip, region\.eu-west\.roundtrip cannot be accepted: Atrium cannot start .*; correct the setting \(or start the service\) and run again\.$/,
  )
  t.match(lines[1], /^preflight\.deadline cannot be accepted: a group of checks that never answered/)
  t.same(refusals(['cpu', 'license']), [])
})

t.test('every other check of the preflight may be accepted; an id that is no check is named as such', async (t) => {
  // The machine, the versions and settings of the services, the tools, the cluster and the license.
  for (const id of [...CHECK_IDS.filter((id) => !NEVER.includes(id)), 'region.ap-south.addressing'])
    t.equal(acceptProblem(id), null, id)
  for (const id of ['CPU', 'nope', 'region.mars.addressing', 'region.eu-west.version', 'postgres', ''])
    t.match(
      acceptProblem(id),
      /^not a check of the preflight \(those that may be accepted: cpu, memory, .*, license, region\.<code>\.addressing\)$/,
      id,
    )
  t.notOk(ACCEPTABLE.some((id) => NEVER.includes(id)))
})

t.test('every check the preflight gives has a known id, for compose and for helm', async (t) => {
  const closed = {
    DATABASE_URL: 'postgres://a@127.0.0.1:1/a',
    REDIS_URL: 'redis://127.0.0.1:1',
    R2_ENDPOINT: 'http://127.0.0.1:1',
    R2_ACCESS_KEY_ID: 'a',
    R2_SECRET_ACCESS_KEY: 'b',
    REGION_STORES: JSON.stringify({
      'eu-west': { endpoint: 'http://127.0.0.1:1', bucket: 'b', accessKeyId: 'a', secretAccessKey: 'b' },
    }),
  }
  for (const target of ['compose', 'helm'] as const) {
    const ctx = site(t, { target }, closed)
    // No cluster here: kube.connect fails, and the helm site's services are checked from this machine.
    const checks = await runPreflight(ctx.answers, preflightValues(ctx), {
      runner: tools().runner,
      kubeconfig: '/nonexistent/kubeconfig',
    })
    const ids = checks.map((c) => c.id)
    t.same(
      ids.filter((id) => !isCheckId(id)),
      [],
      `${target}: ${ids.join(', ')}`,
    )
    t.ok(ids.includes('region.eu-west.roundtrip'), `${target}: the region store's own ids`)
    t.ok(ids.includes('postgres.connect'))
  }
  const badRegions = contextFor({ ...site(t).answers, config: { REGION_STORES: '{' } }, { env: {} })
  const checks = await runPreflight(badRegions.answers, preflightValues(badRegions), { runner: tools().runner })
  t.ok(checks.some((c) => c.id === 'region.stores' && c.status === 'fail'))
})

t.test('who accepts: the admin behind sudo, else the user running the installer', async (t) => {
  t.equal(acceptor({ SUDO_USER: 'alice', USER: 'root' }), 'alice')
  t.equal(acceptor({ USER: 'someone-else' }), userInfo().username)
  t.same(
    acceptances(['cpu', 'cpu'], 'alice', new Date('2026-01-31T09:30:00Z')),
    [{ id: 'cpu', by: 'alice', at: '2026-01-31T09:30:00.000Z' }],
    'one acceptance per id, stamped with the time',
  )
})

t.test('an accepted check no longer stops a command; one that is not, or never may be, still does', async (t) => {
  const cpu = check('cpu', 'CPU cores', 'fail', '2 cores', '4 cores', 'more cores')
  const pg = check('postgres.connect', 'PostgreSQL reachable', 'fail', 'authentication failed', 'a server', 'fix it')
  const ssd = check('ssd', 'SSD', 'warn', 'spinning', 'an SSD', 'an SSD')
  const pass = check('memory', 'Memory', 'pass', '32 GB', '8 GB', '')
  const byAlice = { id: 'cpu', by: 'alice', at: '2026-01-31T09:30:00.000Z' }
  t.same(judge([pass, cpu, ssd], [byAlice], false), { accepted: [byAlice], open: [] })
  t.same(judge([pass, cpu, ssd], [], false), { accepted: [], open: [cpu] })
  t.same(judge([cpu, ssd], [byAlice], true), { accepted: [byAlice], open: [ssd] }, '--strict: the warning stops it')
  t.same(
    judge([pass], [byAlice], false),
    { accepted: [], open: [] },
    'an acceptance of a check that passed is not used',
  )
  const forged = { id: 'postgres.connect', by: 'mallory', at: '2026-01-31T09:30:00.000Z' }
  t.same(judge([cpu, pg], [byAlice, forged], false), { accepted: [byAlice], open: [pg] }, 'never, whatever a file says')
})

t.test('acceptances recorded keep who first accepted and when; new ones are added', async (t) => {
  const first = { id: 'cpu', by: 'alice', at: '2026-01-31T09:30:00.000Z' }
  const later = { id: 'cpu', by: 'bob', at: '2026-02-01T10:00:00.000Z' }
  const disk = { id: 'disk', by: 'bob', at: '2026-02-01T10:00:00.000Z' }
  t.same(withAccepted([first], [later, disk]), [first, disk])
  t.same(withAccepted([], [disk]), [disk])
})

t.test("answers.yaml's acceptances are read strictly: each {id, by, at}, every problem with where it is", async (t) => {
  const ok = { id: 'cpu', by: 'alice', at: '2026-01-31T09:30:00.000Z' }
  t.same(parseAccepted([ok]), { value: [ok], problems: [] })
  t.same(parseAccepted('cpu'), { value: [], problems: ['acceptedChecks: must be a list of {id, by, at}'] })
  const r = parseAccepted([
    ok,
    'cpu',
    { id: 'cpu', by: 'alice' },
    { ...ok, extra: 1 },
    { ...ok, id: 'postgres.connect' },
    { ...ok, id: 'nope' },
    { ...ok, by: ' ' },
    { ...ok, at: 'yesterday' },
    { ...ok, at: 7 },
  ])
  t.same(r.value, [ok])
  t.match(r.problems, [
    'acceptedChecks[1]: must be {id, by, at}: the check, who accepted it and when',
    'acceptedChecks[2]: must be {id, by, at}: the check, who accepted it and when',
    'acceptedChecks[3]: must be {id, by, at}: the check, who accepted it and when',
    /^acceptedChecks\[4\]\.id postgres\.connect: cannot be accepted: /,
    /^acceptedChecks\[5\]\.id nope: not a check of the preflight/,
    'acceptedChecks[6].by: must name who accepted cpu',
    'acceptedChecks[7].at: must be the time cpu was accepted, ISO 8601 (2026-01-31T09:30:00.000Z)',
    'acceptedChecks[8]: must be {id, by, at}: the check, who accepted it and when',
  ])
})
