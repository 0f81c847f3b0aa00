import { randomBytes } from 'node:crypto'
import t, { type Test } from 'tap'
import { testApp } from '../../../helpers/app.js'
import { CLI_AUTH_LIMITS } from '../../../../server/modules/cli-auth/routes.js'
import { LOGIN_TTL_SECONDS } from '../../../../server/modules/cli-auth/service.js'
import {
  approvedLogin,
  client,
  complete,
  newState,
  pkcePair,
  randomIp,
  signIn,
  startLogin,
  user,
  type Client,
} from './helpers.js'
import { checkPage } from '../../../helpers/pages.js'
import { countLookups } from '../../../helpers/platform.js'

// One app for the rules that do not move the clock; each test calls from an address of its own.
const h = await testApp(t)
const origin = new URL(h.platform.config.PUBLIC_URL).origin

async function clockedApp(t: Test) {
  const clock = { now: Date.now() }
  const ta = await testApp(t, {}, { now: () => clock.now })
  return { ...ta, clock }
}

const stored = (loginId: string) =>
  h.platform.db
    .system(
      (sql) => sql<
        {
          status: string
          tenant_id: string | null
          user_id: string | null
          approved_ip: string | null
          consumed_at: Date | null
        }[]
      >`
    select status, tenant_id, user_id, approved_ip, consumed_at from cli_logins where login_id = ${loginId}`,
    )
    .then((r) => r[0])

const unknownId = () => randomBytes(32).toString('base64url')

t.test(
  'start gives a pending login: a 208-bit loginId with its tag, the approval page address, a verification code and a 10-minute expiry',
  async (t) => {
    const call = client(h.app)
    const before = Date.now()
    const login = await startLogin(call)
    t.equal(login.response.status, 201)
    t.match(login.loginId, /^[A-Za-z0-9_-]{43}$/)
    t.match(login.verificationCode, /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/)
    t.equal(login.response.body.data.interval, 5)
    const expiresIn = Date.parse(login.expiresAt) - before
    t.ok(
      expiresIn >= LOGIN_TTL_SECONDS * 1000 - 1000 && expiresIn <= LOGIN_TTL_SECONDS * 1000 + 5000,
      'expires 10 minutes after start',
    )
    const url = new URL(login.authUrl)
    t.equal(url.origin + url.pathname, `${origin}/cli/auth/approve`)
    t.equal(url.searchParams.get('loginId'), login.loginId)
    t.equal(url.searchParams.get('state'), login.state)
    t.equal(login.response.headers['cache-control'], 'no-store')
    t.match(login.response.body.meta, { request_id: String, timestamp: String })

    const status = await call('GET', `/cli/auth/status?loginId=${login.loginId}`)
    t.equal(status.status, 200)
    t.same(status.body.data, { status: 'pending', expiresAt: login.expiresAt })
    t.notOk(JSON.stringify(status.body).includes('token'), 'status never carries a token')
  },
)

t.test('start refuses the plain method, a malformed state or challenge and missing client information', async (t) => {
  const call = client(h.app)
  const good = {
    state: newState(),
    codeChallenge: pkcePair().challenge,
    codeChallengeMethod: 'S256',
    cliVersion: '1.0.0',
    platform: 'darwin-arm64',
  }
  const cases: [string, Record<string, unknown>, string][] = [
    ['plain method instead of S256', { ...good, codeChallengeMethod: 'plain' }, 'body.codeChallengeMethod'],
    ['no method', { ...good, codeChallengeMethod: undefined }, 'body.codeChallengeMethod'],
    ['state of 31 bytes', { ...good, state: randomBytes(31).toString('hex') }, 'body.state'],
    ['state in upper case', { ...good, state: newState().toUpperCase() }, 'body.state'],
    ['state that is not hex', { ...good, state: 'z'.repeat(64) }, 'body.state'],
    ['challenge of the wrong length', { ...good, codeChallenge: good.codeChallenge.slice(1) }, 'body.codeChallenge'],
    [
      'challenge in base64 with padding',
      { ...good, codeChallenge: Buffer.from(randomBytes(32)).toString('base64') },
      'body.codeChallenge',
    ],
    ['empty cliVersion', { ...good, cliVersion: '' }, 'body.cliVersion'],
    ['platform over 64 characters', { ...good, platform: 'x'.repeat(65) }, 'body.platform'],
    ['unknown field', { ...good, scope: 'admin' }, 'body.scope'],
  ]
  for (const [name, body, field] of cases) {
    const r = await call('POST', '/cli/auth/start', JSON.parse(JSON.stringify(body)))
    t.equal(r.status, 400, name)
    t.equal(r.body.error.code, 'VALIDATION_ERROR', name)
    t.ok(
      r.body.error.details.errors.some((e: { field: string }) => e.field === field),
      `${name}: names ${field}`,
    )
  }
  const none = await call('POST', '/cli/auth/start')
  t.equal(none.body.error.code, 'VALIDATION_ERROR', 'no body')
})

t.test('an unknown loginId is RESOURCE_NOT_FOUND on every endpoint; a malformed one is VALIDATION_ERROR', async (t) => {
  const call = client(h.app)
  const { cookie } = await signIn(call, (await user(h)).email)
  const id = unknownId()
  for (const [method, url, body, headers] of [
    ['GET', `/cli/auth/status?loginId=${id}`, undefined, {}],
    ['GET', `/cli/auth/info?loginId=${id}`, undefined, {}],
    ['POST', '/cli/auth/complete', { loginId: id, state: newState() }, { cookie }],
    ['POST', '/cli/auth/token', { loginId: id, codeVerifier: pkcePair().verifier }, {}],
  ] as const) {
    const r = await call(method, url, body, headers)
    t.equal(r.status, 404, `${method} ${url.split('?')[0]}`)
    t.equal(r.body.error.code, 'RESOURCE_NOT_FOUND')
  }
  for (const url of [
    '/cli/auth/status?loginId=short',
    '/cli/auth/info?loginId=' + 'a'.repeat(44),
    '/cli/auth/status',
  ]) {
    const r = await call('GET', url)
    t.equal(r.body.error.code, 'VALIDATION_ERROR', url)
  }
  const verifier = await call('POST', '/cli/auth/token', { loginId: id, codeVerifier: 'too-short' })
  t.equal(verifier.body.error.code, 'VALIDATION_ERROR', 'a verifier under 43 characters')
})

t.test('info shows the approval page the verification code and the requesting client', async (t) => {
  const ip = randomIp()
  const call = client(h.app, ip)
  const login = await startLogin(call, { cliVersion: '2.0.0-beta.1', platform: 'windows-x64' })
  const info = await client(h.app)('GET', `/cli/auth/info?loginId=${login.loginId}`)
  t.equal(info.status, 200)
  t.same(info.body.data, {
    loginId: login.loginId,
    verificationCode: login.verificationCode,
    cliVersion: '2.0.0-beta.1',
    platform: 'windows-x64',
    requesterIp: ip,
    status: 'pending',
    createdAt: info.body.data.createdAt,
    expiresAt: login.expiresAt,
  })
  t.equal(Date.parse(login.expiresAt) - Date.parse(info.body.data.createdAt), LOGIN_TTL_SECONDS * 1000)
  t.notOk(info.body.data.state, 'never the state')
})

t.test('complete without a session is UNAUTHORIZED and the login stays pending', async (t) => {
  const call = client(h.app)
  const login = await startLogin(call)
  const none = await complete(call, login)
  t.equal(none.status, 401)
  t.equal(none.body.error.code, 'UNAUTHORIZED')
  for (const [what, headers] of [
    ['a made-up session cookie', { cookie: 'atrium_session=ats_' + 'x'.repeat(43) }],
    ['an unsigned access token', { authorization: 'Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.' }],
    ['not a Bearer credential', { authorization: 'Basic dXNlcjpwYXNz' }],
  ] as const)
    t.equal((await complete(call, login, headers)).body.error.code, 'UNAUTHORIZED', what)
  t.equal((await stored(login.loginId))!.status, 'pending')
})

t.test('complete with the wrong state is FORBIDDEN (CSRF) and the login stays pending', async (t) => {
  const call = client(h.app)
  const { cookie } = await signIn(call, (await user(h)).email)
  const login = await startLogin(call)
  const wrong = await complete(call, login, { cookie, origin }, newState())
  t.equal(wrong.status, 403)
  t.equal(wrong.body.error.code, 'FORBIDDEN')
  t.equal(wrong.body.error.details.reason, 'state_mismatch')
  const malformed = await complete(call, login, { cookie, origin }, 'not-hex')
  t.equal(malformed.body.error.code, 'VALIDATION_ERROR')
  t.equal((await stored(login.loginId))!.status, 'pending')
  t.equal((await call('GET', `/cli/auth/status?loginId=${login.loginId}`)).body.data.status, 'pending')
})

t.test('complete with the session cookie from another origin or site is FORBIDDEN', async (t) => {
  const call = client(h.app)
  const { cookie } = await signIn(call, (await user(h)).email)
  const login = await startLogin(call)
  const body = { loginId: login.loginId, state: login.state }
  const crossOrigin = await call('POST', '/cli/auth/complete', body, { cookie, origin: 'https://attacker.example' })
  t.equal(crossOrigin.status, 403)
  t.equal(crossOrigin.body.error.code, 'FORBIDDEN')
  t.equal(crossOrigin.body.error.details.reason, 'csrf')
  const crossSite = await call('POST', '/cli/auth/complete', body, { cookie, 'sec-fetch-site': 'cross-site' })
  t.equal(crossSite.body.error.code, 'FORBIDDEN')
  const textPlain = await call('POST', '/cli/auth/complete', JSON.stringify(body), {
    cookie,
    'content-type': 'text/plain',
  })
  t.equal(textPlain.body.error.code, 'VALIDATION_ERROR', 'a form-encoded (text/plain) body is not JSON')
  t.equal((await stored(login.loginId))!.status, 'pending')
})

t.test('an API key cannot approve a CLI login', async (t) => {
  const call = client(h.app)
  const u = await user(h)
  const login = await startLogin(call)
  const r = await complete(call, login, { authorization: `Bearer ${u.apiKey}` })
  t.equal(r.status, 403)
  t.equal(r.body.error.code, 'FORBIDDEN')
  t.equal(r.body.error.details.reason, 'api_key')
  t.match(r.body.error.message, /API key/)
  t.equal((await stored(login.loginId))!.status, 'pending')
})

t.test(
  'a signed-in user approves with the session cookie; the approval is audited with the client and address; approving twice fails',
  async (t) => {
    const ip = randomIp()
    const browser = client(h.app, ip)
    const u = await user(h)
    const { cookie } = await signIn(browser, u.email)
    const cliIp = randomIp()
    const login = await startLogin(client(h.app, cliIp))
    const done = await complete(browser, login, { cookie, origin })
    t.equal(done.status, 200)
    t.match(done.body.data, { loginId: login.loginId, status: 'approved', approvedAt: String })
    t.match(await stored(login.loginId), {
      status: 'approved',
      tenant_id: u.tenantId,
      user_id: u.userId,
      approved_ip: ip,
    })
    t.equal((await browser('GET', `/cli/auth/status?loginId=${login.loginId}`)).body.data.status, 'approved')

    const [event] = await h.platform.db.system(
      (sql) => sql<
        {
          actor_type: string
          actor_id: string
          target_type: string
          target_id: string
          ip: string
          details: Record<string, unknown>
        }[]
      >`
    select actor_type, actor_id, target_type, target_id, ip, details from audit_events
     where tenant_id = ${u.tenantId} and action = 'cli_login.approved'`,
    )
    t.match(event, {
      actor_type: 'user',
      actor_id: u.userId,
      target_type: 'cli_login',
      target_id: login.loginId.slice(0, 12),
      ip,
      details: {
        cliVersion: '1.4.2',
        platform: 'linux-x64',
        requesterIp: cliIp,
        verificationCode: login.verificationCode,
      },
    })

    const again = await complete(browser, login, { cookie, origin })
    t.equal(again.status, 400)
    t.equal(again.body.error.code, 'VALIDATION_ERROR')
    t.equal(again.body.error.details.status, 'approved')
  },
)

t.test('two approvals racing for one login: exactly one succeeds, the other says approved', async (t) => {
  const call = client(h.app)
  const { cookie } = await signIn(call, (await user(h)).email)
  const login = await startLogin(call)
  const results = await Promise.all([1, 2, 3].map(() => complete(call, login, { cookie })))
  t.equal(results.filter((r) => r.status === 200).length, 1)
  for (const r of results.filter((x) => x.status !== 200))
    t.match(r.body.error, { code: 'VALIDATION_ERROR', details: { status: 'approved' } })
  const [audited] = await h.platform.db.system(
    (sql) => sql<{ n: number }[]>`
    select count(*)::int as n from audit_events where action = 'cli_login.approved' and target_id = ${login.loginId.slice(0, 12)}`,
  )
  t.equal(audited!.n, 1, 'audited once')
})

t.test('behind a path prefix, authUrl keeps the prefix of PUBLIC_URL', async (t) => {
  const ta = await testApp(t, { PUBLIC_URL: 'https://atrium.example.com/ai/' })
  const login = await startLogin(client(ta.app))
  t.match(
    login.authUrl,
    /^https:\/\/atrium\.example\.com\/ai\/cli\/auth\/approve\?loginId=[\w-]{43}&state=[0-9a-f]{64}$/,
  )
})

t.test('a signed-in user can approve with a Bearer access token instead of the cookie', async (t) => {
  const call = client(h.app)
  const u = await user(h)
  const { access } = await signIn(call, u.email)
  const login = await startLogin(call)
  const done = await complete(call, login, { authorization: `Bearer ${access}`, origin: 'https://elsewhere.example' })
  t.equal(done.status, 200, 'a Bearer token is not an ambient credential: no origin check needed')
  t.match(await stored(login.loginId), { status: 'approved', user_id: u.userId })
})

t.test('token with a verifier that does not match the challenge is UNAUTHORIZED and consumes nothing', async (t) => {
  const call = client(h.app)
  const { cookie } = await signIn(call, (await user(h)).email)
  const login = await approvedLogin(call, cookie)
  const wrong = await call('POST', '/cli/auth/token', { loginId: login.loginId, codeVerifier: pkcePair().verifier })
  t.equal(wrong.status, 401)
  t.equal(wrong.body.error.code, 'UNAUTHORIZED')
  const loginIdAsVerifier = await call('POST', '/cli/auth/token', {
    loginId: login.loginId,
    codeVerifier: login.loginId,
  })
  t.equal(loginIdAsVerifier.body.error.code, 'UNAUTHORIZED', 'the loginId is no verifier')
  t.equal((await stored(login.loginId))!.status, 'approved')
  const right = await call('POST', '/cli/auth/token', { loginId: login.loginId, codeVerifier: login.verifier })
  t.equal(right.status, 200, 'the right verifier still works')
})

t.test('token before approval is VALIDATION_ERROR with status pending', async (t) => {
  const call = client(h.app)
  const login = await startLogin(call)
  const r = await call('POST', '/cli/auth/token', { loginId: login.loginId, codeVerifier: login.verifier })
  t.equal(r.status, 400)
  t.equal(r.body.error.code, 'VALIDATION_ERROR')
  t.equal(r.body.error.details.status, 'pending')
})

t.test(
  'token gives an access token, a refresh token, the user and the tenant, once; a second exchange is VALIDATION_ERROR consumed',
  async (t) => {
    const call = client(h.app)
    const u = await user(h, 'growth')
    const { cookie } = await signIn(call, u.email)
    const login = await approvedLogin(call, cookie)
    const r = await call('POST', '/cli/auth/token', { loginId: login.loginId, codeVerifier: login.verifier })
    t.equal(r.status, 200)
    t.match(r.body.data, {
      token: /^eyJ/,
      tokenType: 'Bearer',
      expiresIn: 900,
      refreshToken: /^ats_/,
      refreshExpiresAt: String,
      user: { id: u.userId, email: u.email, role: 'owner' },
      tenant: { id: u.tenantId, plan: 'growth' },
    })
    t.equal(r.headers['cache-control'], 'no-store')
    t.match(await stored(login.loginId), { status: 'consumed', consumed_at: Date })
    t.equal((await call('GET', `/cli/auth/status?loginId=${login.loginId}`)).body.data.status, 'consumed')

    const me = await call('GET', '/api/v1/auth/me', undefined, { authorization: `Bearer ${r.body.data.token}` })
    t.equal(me.status, 200)
    t.match(me.body.data, { user: { id: u.userId }, tenant: { id: u.tenantId }, credential: { type: 'access_token' } })
    const [session] = await h.platform.db.system(
      (sql) => sql<{ method: string }[]>`select method from identity_sessions where id = ${me.body.data.credential.id}`,
    )
    t.equal(session!.method, 'cli', 'a session of its own, marked as a CLI login')
    const refreshed = await call('POST', '/api/v1/auth/refresh', { token: r.body.data.refreshToken })
    t.equal(refreshed.status, 200, 'the refresh token renews access')

    const second = await call('POST', '/cli/auth/token', { loginId: login.loginId, codeVerifier: login.verifier })
    t.equal(second.status, 400)
    t.equal(second.body.error.code, 'VALIDATION_ERROR')
    t.equal(second.body.error.details.status, 'consumed')
    const [logins] = await h.platform.db.system(
      (sql) => sql<{ n: number }[]>`
    select count(*)::int as n from audit_events where tenant_id = ${u.tenantId} and action = 'auth.login' and details->>'method' = 'cli'`,
    )
    t.equal(logins!.n, 1, 'one CLI sign-in in the audit log')
  },
)

t.test('two token calls racing for one login: exactly one succeeds', async (t) => {
  const call = client(h.app)
  const { cookie } = await signIn(call, (await user(h)).email)
  for (let round = 0; round < 3; round++) {
    const login = await approvedLogin(call, cookie)
    const results = await Promise.all(
      [1, 2, 3].map(() => call('POST', '/cli/auth/token', { loginId: login.loginId, codeVerifier: login.verifier })),
    )
    const won = results.filter((r) => r.status === 200)
    t.equal(won.length, 1, `round ${round + 1}: one winner`)
    for (const r of results.filter((x) => x.status !== 200)) {
      t.equal(r.body.error.code, 'VALIDATION_ERROR')
      t.equal(r.body.error.details.status, 'consumed')
    }
  }
})

t.test('a disabled user cannot redeem the login they approved', async (t) => {
  const call = client(h.app)
  const u = await user(h)
  const { cookie } = await signIn(call, u.email)
  const login = await approvedLogin(call, cookie)
  await h.platform.db.system((sql) => sql`update users set status = 'disabled' where id = ${u.userId}`)
  const r = await call('POST', '/cli/auth/token', { loginId: login.loginId, codeVerifier: login.verifier })
  t.equal(r.status, 403)
  t.equal(r.body.error.code, 'FORBIDDEN')
  t.equal((await stored(login.loginId))!.status, 'approved', 'nothing consumed')
})

t.test(
  'a login expires 10 minutes after start, pending or approved: status, complete and token say expired',
  async (t) => {
    const ta = await clockedApp(t)
    const call = client(ta.app)
    const { cookie } = await signIn(call, (await user(ta)).email)
    const pending = await startLogin(call)
    const approved = await approvedLogin(call, cookie)

    ta.clock.now += LOGIN_TTL_SECONDS * 1000 - 1000
    t.equal(
      (await call('GET', `/cli/auth/status?loginId=${pending.loginId}`)).body.data.status,
      'pending',
      'still pending a second before',
    )
    ta.clock.now += 2000 // 10 minutes and 1 second after start

    for (const login of [pending, approved]) {
      const status = await call('GET', `/cli/auth/status?loginId=${login.loginId}`)
      t.equal(status.body.data.status, 'expired')
      const info = await call('GET', `/cli/auth/info?loginId=${login.loginId}`)
      t.equal(info.body.data.status, 'expired')
      const token = await call('POST', '/cli/auth/token', { loginId: login.loginId, codeVerifier: login.verifier })
      t.equal(token.status, 400)
      t.equal(token.body.error.code, 'VALIDATION_ERROR')
      t.equal(token.body.error.details.status, 'expired')
    }
    const completed = await complete(call, pending, { cookie })
    t.equal(completed.status, 400)
    t.equal(completed.body.error.code, 'VALIDATION_ERROR')
    t.equal(completed.body.error.details.status, 'expired')
  },
)

t.test('logins are deleted a day after they expire, when later logins start', async (t) => {
  const ta = await clockedApp(t)
  const call = client(ta.app)
  const old = await startLogin(call)
  ta.clock.now += LOGIN_TTL_SECONDS * 1000 + 23 * 3600 * 1000
  const recent = await startLogin(call)
  t.equal(
    (await call('GET', `/cli/auth/status?loginId=${old.loginId}`)).body.data.status,
    'expired',
    'kept for a day after expiry',
  )
  ta.clock.now += 3600 * 1000 + 1000 // a day and a second past its expiry
  await startLogin(call)
  const gone = await call('GET', `/cli/auth/status?loginId=${old.loginId}`)
  t.equal(gone.status, 404)
  t.equal(gone.body.error.code, 'RESOURCE_NOT_FOUND')
  t.equal((await call('GET', `/cli/auth/status?loginId=${recent.loginId}`)).status, 200, 'younger logins stay')
})

t.test(
  `start is limited per address: one over ${CLI_AUTH_LIMITS.startPerIp} a minute is RATE_LIMIT_EXCEEDED with Retry-After`,
  async (t) => {
    const call = client(h.app)
    for (let i = 0; i < CLI_AUTH_LIMITS.startPerIp; i++) await startLogin(call)
    const state = newState()
    const over = await call('POST', '/cli/auth/start', {
      state,
      codeChallenge: pkcePair().challenge,
      codeChallengeMethod: 'S256',
      cliVersion: '1',
      platform: 'linux',
    })
    t.equal(over.status, 429)
    t.equal(over.body.error.code, 'RATE_LIMIT_EXCEEDED')
    t.match(over.headers['retry-after'], /^\d+$/)
    t.equal(over.headers['x-ratelimit-remaining'], '0')
    const other = await startLogin(client(h.app))
    t.equal(other.response.status, 201, 'another address is not affected')
  },
)

t.test(
  `complete is limited per loginId: after ${CLI_AUTH_LIMITS.completePerLogin} tries from any addresses, RATE_LIMIT_EXCEEDED`,
  async (t) => {
    const u = await user(h)
    const { cookie } = await signIn(client(h.app), u.email)
    const login = await startLogin(client(h.app))
    for (let i = 0; i < CLI_AUTH_LIMITS.completePerLogin; i++) {
      const r = await complete(client(h.app), login, { cookie }, newState())
      t.equal(r.body.error.code, 'FORBIDDEN', `guess ${i + 1} from a fresh address`)
    }
    const over = await complete(client(h.app), login, { cookie })
    t.equal(over.status, 429)
    t.equal(over.body.error.code, 'RATE_LIMIT_EXCEEDED')
    t.ok(Number(over.headers['retry-after']) >= 1)
    t.equal((await stored(login.loginId))!.status, 'pending', 'even the right state waits out the limit')
  },
)

t.test(
  `status is limited per loginId (${CLI_AUTH_LIMITS.statusPerLogin} a minute) and token per loginId (${CLI_AUTH_LIMITS.tokenPerLogin})`,
  async (t) => {
    const login = await startLogin(client(h.app))
    const call: Client = client(h.app)
    for (let i = 0; i < CLI_AUTH_LIMITS.statusPerLogin; i++) {
      const r = await call('GET', `/cli/auth/status?loginId=${login.loginId}`)
      if (r.status !== 200) t.fail(`poll ${i + 1} was ${r.status}`)
    }
    const over = await client(h.app)('GET', `/cli/auth/status?loginId=${login.loginId}`)
    t.equal(over.status, 429)
    t.equal(over.body.error.code, 'RATE_LIMIT_EXCEEDED')
    t.equal(
      (await client(h.app)('GET', `/cli/auth/status?loginId=${(await startLogin(client(h.app))).loginId}`)).status,
      200,
      'other logins poll on',
    )

    for (let i = 0; i < CLI_AUTH_LIMITS.tokenPerLogin; i++) {
      const r = await client(h.app)('POST', '/cli/auth/token', {
        loginId: login.loginId,
        codeVerifier: pkcePair().verifier,
      })
      t.equal(r.body.error.code, 'UNAUTHORIZED', `verifier guess ${i + 1}`)
    }
    const guessOver = await client(h.app)('POST', '/cli/auth/token', {
      loginId: login.loginId,
      codeVerifier: login.verifier,
    })
    t.equal(guessOver.body.error.code, 'RATE_LIMIT_EXCEEDED')
  },
)

t.test('the approval page is self-contained: a strict CSP, no framing, no outside assets', async (t) => {
  const call = client(h.app)
  const login = await startLogin(call)
  const url = new URL(login.authUrl)
  const { html, assets } = await checkPage(t, call, url, {
    'approve.js': /^text\/javascript/,
    '../../pages/atrium.css': /^text\/css/,
  })
  t.notOk(html.includes(login.loginId), 'the server writes nothing of the request into the page')
  const script = assets['approve.js']!
  t.match(script, /credentials: 'same-origin'/)
  t.match(script, /'complete'/, 'approves through POST /cli/auth/complete')
  t.notMatch(script, /localStorage|sessionStorage|document\.cookie/, 'no token in script-readable storage')
  const broken = await call('GET', '/cli/auth/approve')
  t.equal(broken.status, 200, 'a link without its parameters still gets the page, which explains')
})

t.test('the device login endpoints are in the OpenAPI document with their errors; the page is not', async (t) => {
  const doc = (await client(h.app)('GET', '/openapi.json')).body
  const ops: [string, string, string[]][] = [
    ['/cli/auth/start', 'post', ['201', '400', '429']],
    ['/cli/auth/status', 'get', ['200', '400', '404', '429']],
    ['/cli/auth/info', 'get', ['200', '400', '404', '429']],
    ['/cli/auth/complete', 'post', ['200', '400', '401', '403', '404', '429']],
    ['/cli/auth/token', 'post', ['200', '400', '401', '403', '404', '429']],
  ]
  for (const [path, method, codes] of ops) {
    const op = doc.paths[path]?.[method]
    t.ok(op, `${method.toUpperCase()} ${path}`)
    t.same(
      Object.keys(op.responses)
        .filter((c) => c !== '500')
        .sort(),
      codes.sort(),
      `${path} responses`,
    )
  }
  t.same(doc.paths['/cli/auth/start'].post.security, [], 'start needs no credential')
  t.notOk(doc.paths['/cli/auth/approve'], 'the HTML page is hidden')
})

t.test(
  "a loginId not made here is refused without a lookup; one client guessing does not hold up another's login from the same address",
  async (t) => {
    const ta = await testApp(t, {}, { signInFailures: { max: 5 } })
    const ip = randomIp() // one office, one address
    const guesser = client(ta.app, ip)
    const colleague = client(ta.app, ip)
    const login = await startLogin(colleague)
    const counted = countLookups(ta.platform.db)
    const statuses: number[] = []
    for (let i = 0; i < 8; i++) statuses.push((await guesser('GET', `/cli/auth/status?loginId=${unknownId()}`)).status)
    t.same(statuses, [404, 404, 404, 404, 404, 429, 429, 429], 'guesses are failures of the address')
    t.equal(counted.lookups, 0, 'none was looked up')
    const polled = await colleague('GET', `/cli/auth/status?loginId=${login.loginId}`)
    t.equal(polled.status, 200, 'the real login from the same address is served')
    t.equal(polled.body.data.status, 'pending')
  },
)
