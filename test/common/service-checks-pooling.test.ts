// The preflight's postgres.pooling check against a real PgBouncer (Debian's) in front of the test
// PostgreSQL: what each pooling setup does to Atrium's sessions, and that only a session of its own
// with its startup parameters passes.
import t from 'tap'
import { postgresChecks } from '../../common/service-checks.js'
import { pgbouncer, pgbouncerSkip } from '../helpers/pgbouncer.js'
import { services } from '../helpers/platform.js'

const pooling = async (url: string) => (await postgresChecks(url)).find((c) => c.id === 'postgres.pooling')

t.test(
  'PostgreSQL itself: each connection keeps its session and its startup parameters',
  { skip: !services.databaseUrl && 'needs TEST_DATABASE_URL' },
  async (t) => {
    t.match(await pooling(services.databaseUrl), { status: 'pass' })
  },
)

t.test(
  'PgBouncer by transaction: refused, saying that queries move between sessions and what to set',
  { skip: pgbouncerSkip() },
  async (t) => {
    const found = await pooling(await pgbouncer(t, 'transaction'))
    t.match(found, { status: 'fail', found: /pool_mode = transaction or statement/, fix: /PostgreSQL itself/ })
  },
)

t.test('PgBouncer by statement: refused the same way', { skip: pgbouncerSkip() }, async (t) => {
  t.match(await pooling(await pgbouncer(t, 'statement')), { status: 'fail', found: /moves a connection's queries/ })
})

t.test(
  "PgBouncer by session, as shipped: refused, since it refuses the tenant connections' startup parameter",
  { skip: pgbouncerSkip() },
  async (t) => {
    const found = await pooling(await pgbouncer(t, 'session'))
    t.match(found, { status: 'fail', found: /refuses startup parameters \("unsupported startup parameter/ })
  },
)

t.test(
  'PgBouncer by session told to ignore the parameters: refused, since tenant work would run outside row-level security',
  { skip: pgbouncerSkip() },
  async (t) => {
    const url = await pgbouncer(t, 'session', ['ignore_startup_parameters = statement_timeout, role'])
    const found = await pooling(url)
    t.match(found, { status: 'fail', found: /drops startup parameters.*outside row-level security/ })
    const others = (await postgresChecks(url)).filter((c) => c.id !== 'postgres.pooling')
    t.ok(
      others.every((c) => c.status !== 'fail' || c.id === 'postgres.privileges'),
      'the other checks see PostgreSQL through it',
    )
  },
)
