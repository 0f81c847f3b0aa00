import { Writable } from 'node:stream'
import t from 'tap'
import { buildApp } from '../../../server/app.js'
import { createLogger, lazyRequestLogger } from '../../../server/logger.js'
import { openPlatform } from '../../../server/platform/index.js'
import { createTenant } from '../../../server/modules/tenants/service.js'
import { caller } from '../../helpers/app.js'
import { configFrom, suffix, testEnv } from '../../helpers/platform.js'

const lines: string[] = []
const sink = new Writable({
  write(chunk, _enc, done) {
    lines.push(chunk.toString())
    done()
  },
})
const config = configFrom(await testEnv(t, { LOG_LEVEL: 'debug' }))
const platform = await openPlatform(config, createLogger('debug', sink))
t.teardown(() => platform.close())
const app = await buildApp(platform)
t.teardown(() => app.close())
const { apiKey } = await createTenant(platform, {
  name: 'Logs',
  email: `l-${suffix()}@example.com`,
  password: 'a long enough password',
})

t.test('requests are logged without credentials', async (t) => {
  const call = caller(app, apiKey)
  await call('GET', '/api/v1/projects', undefined, { cookie: 'session=abc123secret', 'x-request-id': 'log-test-1' })
  await call('POST', '/api/v1/projects', { name: 'logged', secret: 'hunter2' })
  await caller(app)('GET', '/api/v1/projects', undefined, { authorization: `Bearer ${apiKey}x` })
  await caller(app)('GET', '/blobs/x.zip?expires=1&filename=x&signature=SIGNATURE-VALUE')
  const text = lines.join('')
  t.match(text, /"requestId":"log-test-1"/, 'request id in the log')
  t.match(text, /"url":"\/api\/v1\/projects","status":200/)
  t.notMatch(text, new RegExp(apiKey.slice(7)), 'no API key')
  t.notMatch(text, /abc123secret/, 'no cookie')
  t.notMatch(text, /hunter2/, 'no body secrets')
  t.notMatch(text, /SIGNATURE-VALUE/, 'no link signatures')
  t.match(text, /signature=\[redacted\]/)
})

t.test('a proxy the server does not trust is pointed out once, with what to configure', async (t) => {
  const call = caller(app)
  await call('GET', '/api/v1/projects', undefined, { 'x-forwarded-for': '203.0.113.9' })
  await call('GET', '/api/v1/projects', undefined, { 'x-forwarded-for': '203.0.113.10' })
  const warnings = lines.filter((l) => l.includes('TRUSTED_PROXIES is empty'))
  t.equal(warnings.length, 1)
  t.match(warnings[0], /"level":40/)
})

t.test(
  "a request's logger is made only when the request logs at an enabled level, and carries its request id",
  async (t) => {
    const out: string[] = []
    const parent = createLogger(
      'warn',
      new Writable({
        write(chunk, _enc, done) {
          out.push(chunk.toString())
          done()
        },
      }),
    )
    let children = 0
    const childOf = parent.child.bind(parent)
    parent.child = ((...args: Parameters<typeof parent.child>) => (children++, childOf(...args))) as typeof parent.child
    const quiet = lazyRequestLogger(parent, { requestId: 'req-quiet' }, {})
    quiet.info('not at this level')
    quiet.debug('nor this')
    t.equal(children, 0, 'nothing logged: no child made')
    t.equal(quiet.level, 'warn')
    t.notOk(quiet.isLevelEnabled('info'))
    const loud = lazyRequestLogger(parent, { requestId: 'req-loud' }, {})
    loud.warn({ authorization: 'Bearer x' }, 'something to say')
    loud.error('and more')
    t.equal(children, 1, 'one child, made on the first line')
    t.match(out[0], /"requestId":"req-loud".*"msg":"something to say"/)
    t.equal(out.length, 2)
    const route = lazyRequestLogger(parent, { requestId: 'req-route' }, { level: 'error' })
    route.warn('below the level the route asked for')
    t.equal(out.length, 2, "a route's own level is honoured")
  },
)
