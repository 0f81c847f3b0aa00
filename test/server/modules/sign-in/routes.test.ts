import { generateKeyPairSync } from 'node:crypto'
import { SignJWT, base64url } from 'jose'
import t, { type Test } from 'tap'
import { appOn, caller, testApp, type Caller, type TestApp } from '../../../helpers/app.js'
import { suffix } from '../../../helpers/platform.js'
import { REFRESH_RACE_SECONDS } from '../../../../server/modules/sign-in/service.js'
import { accessTokenKeyPair } from '../../../../server/modules/sign-in/tokens.js'
import { createTenant } from '../../../../server/modules/tenants/service.js'
import { hashPassword } from '../../../../server/modules/users/passwords.js'
import { insertUser } from '../../../../server/modules/users/store.js'
import { newId } from '../../../../common/ids.js'

const PASSWORD = 'correct horse battery'

/** An app whose clock the test moves forward. */
async function clockedApp(t: Test) {
  const clock = { now: Date.now() }
  const ta = await testApp(t, {}, { now: () => clock.now })
  return { ...ta, clock }
}

async function owner(ta: TestApp, plan: 'free' | 'pro' | 'growth' | 'enterprise' = 'pro') {
  const email = `owner-${suffix()}@example.com`
  const created = await createTenant(ta.platform, { name: `Acme ${suffix()}`, plan, email, password: PASSWORD })
  return { ...created, email }
}

async function signIn(call: Caller, email: string, password = PASSWORD) {
  const login = await call('POST', '/api/v1/auth/login', { email, password })
  if (login.status !== 200) throw new Error(`login failed: ${JSON.stringify(login.body)}`)
  const ex = await call('POST', '/api/v1/auth/exchange', { token: login.body.data.token })
  return { session: login.body.data.token as string, access: ex.body.data.accessToken as string, login }
}

/** The owner of a new tenant, signed in with a password. */
async function signedIn(ta: TestApp) {
  const o = await owner(ta)
  return { o, ...(await signIn(ta.anonymous, o.email)) }
}

const exchange = (ta: TestApp, token: string) => ta.anonymous('POST', '/api/v1/auth/exchange', { token })

const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

t.test('a user signs in with a password, exchanges the session for an access token and works with it', async (t) => {
  const ta = await testApp(t)
  const o = await owner(ta)
  const login = await ta.anonymous('POST', '/api/v1/auth/login', { email: o.email.toUpperCase(), password: PASSWORD })
  t.equal(login.status, 200)
  t.match(login.body.data, {
    tokenType: 'session',
    token: /^ats_/,
    user: { id: o.userId, role: 'owner' },
    tenant: { id: o.tenantId, plan: 'pro' },
  })
  t.match(String(login.headers['set-cookie']), /atrium_session=ats_\w+;.*HttpOnly/)
  t.match(String(login.headers['set-cookie']), /SameSite=Lax/)
  t.notMatch(String(login.headers['set-cookie']), /Secure/, 'not Secure over plain HTTP')
  t.notOk(login.headers['x-ratelimit-limit'], 'auth endpoints are exempt from the general limit')

  const ex = await exchange(ta, login.body.data.token)
  t.equal(ex.status, 200)
  t.match(ex.body.data, { tokenType: 'Bearer', expiresIn: 900 })
  const [header, payload] = ex.body.data.accessToken
    .split('.')
    .slice(0, 2)
    .map((p: string) => JSON.parse(Buffer.from(p, 'base64url').toString()))
  t.match(header, { alg: 'EdDSA', typ: 'at+jwt', kid: /\S/ })
  t.match(payload, { sub: o.userId, tid: o.tenantId, aud: 'atrium-api', role: 'owner' })
  t.equal(payload.exp - payload.iat, 900)

  const me = await ta.anonymous('GET', '/api/v1/auth/me', undefined, bearer(ex.body.data.accessToken))
  t.equal(me.status, 200)
  t.match(me.body.data, {
    user: { email: o.email },
    tenant: { id: o.tenantId },
    credential: { type: 'access_token', permissions: ['*'] },
  })
  const created = await ta.anonymous('POST', '/api/v1/projects', { name: 'by jwt' }, bearer(ex.body.data.accessToken))
  t.equal(created.status, 201)
  const listed = await caller(ta.app, o.apiKey)('GET', `/api/v1/projects/${created.body.data.id}`)
  t.equal(listed.status, 200, 'the JWT acted in its own tenant')
})

t.test('the access token is verified with the public keys the server publishes', async (t) => {
  const ta = await testApp(t)
  const { o, access } = await signedIn(ta)
  const jwks = await ta.anonymous('GET', '/api/v1/auth/jwks.json')
  t.equal(jwks.status, 200)
  t.match(jwks.body.keys, [{ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' }])
  t.notOk(jwks.body.keys[0].d, 'never the private part')
  const { createLocalJWKSet, jwtVerify } = await import('jose')
  const { payload } = await jwtVerify(access, createLocalJWKSet(jwks.body), { audience: 'atrium-api' })
  t.equal(payload.sub, o.userId)
})

t.test('wrong credentials are 401 whether or not the email exists; a disabled account is 403', async (t) => {
  const ta = await testApp(t)
  const o = await owner(ta)
  const wrong = await ta.anonymous('POST', '/api/v1/auth/login', { email: o.email, password: 'not the password' })
  t.equal(wrong.status, 401)
  t.equal(wrong.body.error.code, 'UNAUTHORIZED')
  const unknown = await ta.anonymous('POST', '/api/v1/auth/login', {
    email: `nobody-${suffix()}@example.com`,
    password: PASSWORD,
  })
  t.equal(unknown.body.error.code, 'UNAUTHORIZED')
  t.equal(
    unknown.body.error.message,
    wrong.body.error.message,
    'the same answer: nothing tells whether the address has an account',
  )
  t.notOk(wrong.headers['set-cookie'])

  await ta.platform.db.system((sql) => sql`update users set status = 'disabled' where id = ${o.userId}`)
  const disabled = await ta.anonymous('POST', '/api/v1/auth/login', { email: o.email, password: PASSWORD })
  t.equal(disabled.status, 403)
  t.equal(disabled.body.error.code, 'FORBIDDEN')
  t.equal(disabled.body.error.details.reason, 'account_disabled')
  const disabledWrong = await ta.anonymous('POST', '/api/v1/auth/login', {
    email: o.email,
    password: 'not the password',
  })
  t.equal(disabledWrong.body.error.code, 'UNAUTHORIZED', 'a wrong password does not learn that the account is disabled')

  const noPassword = await createTenant(ta.platform, { name: 'no password', email: `np-${suffix()}@example.com` })
  t.ok(noPassword.userId)
  const none = await ta.anonymous('POST', '/api/v1/auth/login', { email: `np-x@example.com`, password: PASSWORD })
  t.equal(none.body.error.code, 'UNAUTHORIZED')
})

t.test('a suspended tenant cannot sign in or use its sessions', async (t) => {
  const ta = await testApp(t)
  const { o, session } = await signedIn(ta)
  await ta.platform.db.system((sql) => sql`update tenants set status = 'suspended' where id = ${o.tenantId}`)
  const login = await ta.anonymous('POST', '/api/v1/auth/login', { email: o.email, password: PASSWORD })
  t.equal(login.body.error.code, 'FORBIDDEN')
  t.equal(login.body.error.details.reason, 'tenant_suspended')
  t.equal((await exchange(ta, session)).body.error.code, 'UNAUTHORIZED')
})

t.test('access tokens that are expired, tampered with or not ours are refused', async (t) => {
  const ta = await clockedApp(t)
  const { access } = await signedIn(ta)
  const { privateKey } = accessTokenKeyPair(ta.platform.secrets)
  const issuer = ta.platform.config.PUBLIC_URL.replace(/\/+$/, '')
  const [h, p] = access.split('.') as [string, string]
  const header = JSON.parse(Buffer.from(h, 'base64url').toString())
  const claims = JSON.parse(Buffer.from(p, 'base64url').toString())
  const sign = (over: Record<string, unknown>, head: Record<string, unknown> = header, key = privateKey) =>
    new SignJWT({ ...claims, ...over }).setProtectedHeader(head as { alg: string }).sign(key)
  const refused = async (name: string, token: string) => {
    const r = await ta.anonymous('GET', '/api/v1/auth/me', undefined, bearer(token))
    t.equal(r.status, 401, name)
    t.equal(r.body.error.code, 'UNAUTHORIZED', name)
  }

  t.equal(
    (await ta.anonymous('GET', '/api/v1/auth/me', undefined, bearer(await sign({})))).status,
    200,
    'the re-signed original is fine',
  )
  await refused(
    'tampered payload',
    `${h}.${Buffer.from(JSON.stringify({ ...claims, role: 'owner', tid: newId() })).toString('base64url')}.${access.split('.')[2]}`,
  )
  await refused('wrong audience', await sign({ aud: 'another-api' }))
  await refused('wrong issuer', await sign({ iss: 'https://evil.example' }))
  await refused('no session claim', await sign({ sid: undefined }))
  await refused('wrong typ', await sign({}, { ...header, typ: 'JWT' }))
  await refused('unknown key id', await sign({}, { ...header, kid: 'other' }))
  const alien = generateKeyPairSync('ed25519').privateKey
  await refused('signed by another key', await sign({}, header, alien))
  await refused('alg none', `${base64url.encode(JSON.stringify({ alg: 'none', typ: 'at+jwt' }))}.${p}.`)
  const hsKey = new TextEncoder().encode(
    JSON.stringify((await ta.anonymous('GET', '/api/v1/auth/jwks.json')).body.keys[0]),
  )
  await refused(
    'HS256 keyed with the public key',
    await new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid: header.kid }).sign(hsKey),
  )
  await refused('not yet valid', await sign({ iat: claims.iat, nbf: claims.iat + 3600 }))
  await refused('another issuer-signed session that does not exist', await sign({ sid: newId() }))
  t.equal(issuer.length > 0, true)

  ta.clock.now += 901_000
  await refused('expired', access)
})

t.test("a token of tenant A does not reach tenant B's resources", async (t) => {
  const ta = await testApp(t)
  const a = await owner(ta)
  const b = await owner(ta)
  const theirs = await caller(ta.app, b.apiKey)('POST', '/api/v1/projects', { name: 'B only' })
  const { access } = await signIn(ta.anonymous, a.email)
  for (const [method, url] of [
    ['GET', `/api/v1/projects/${theirs.body.data.id}`],
    ['PATCH', `/api/v1/projects/${theirs.body.data.id}`],
    ['DELETE', `/api/v1/projects/${theirs.body.data.id}`],
  ] as const) {
    const r = await ta.anonymous(method, url, method === 'PATCH' ? { name: 'mine now' } : undefined, bearer(access))
    t.equal(r.status, 404, `${method} ${url}`)
    t.equal(r.body.error.code, 'RESOURCE_NOT_FOUND')
  }
  const list = await ta.anonymous('GET', '/api/v1/projects', undefined, bearer(access))
  t.same(list.body.data, [])
  const header = await ta.anonymous('GET', '/api/v1/projects', undefined, {
    ...bearer(access),
    'x-tenant-id': b.tenantId,
  })
  t.equal(header.body.error.code, 'VALIDATION_ERROR', 'a tenant header is refused, never followed')
})

t.test("a user's role decides what their access token may do", async (t) => {
  const ta = await testApp(t)
  const o = await owner(ta)
  const email = `viewer-${suffix()}@example.com`
  await ta.platform.db.system(async (sql) =>
    insertUser(sql, {
      id: newId(),
      tenantId: o.tenantId,
      email,
      name: 'V',
      role: 'viewer',
      passwordHash: await hashPassword(PASSWORD),
    }),
  )
  const { access } = await signIn(ta.anonymous, email)
  t.equal((await ta.anonymous('GET', '/api/v1/projects', undefined, bearer(access))).status, 200)
  const write = await ta.anonymous('POST', '/api/v1/projects', { name: 'nope' }, bearer(access))
  t.equal(write.status, 403)
  t.equal(write.body.error.code, 'FORBIDDEN')
  t.equal(write.body.error.details.required, 'projects:write')
})

t.test('logout ends the session and every access token minted from it, on every replica', async (t) => {
  const ta = await testApp(t)
  const other = await appOn(t, ta.platform)
  const { o, session, access } = await signedIn(ta)
  t.equal(
    (await other.anonymous('GET', '/api/v1/auth/me', undefined, bearer(access))).status,
    200,
    'the other replica has it cached',
  )
  const out = await ta.anonymous('POST', '/api/v1/auth/logout', undefined, bearer(access))
  t.equal(out.status, 200)
  t.match(String(out.headers['set-cookie']), /atrium_session=;/)
  for (const [name, app] of [
    ['this replica', ta],
    ['the other replica', other],
  ] as const) {
    let r = await app.anonymous('GET', '/api/v1/auth/me', undefined, bearer(access))
    for (let i = 0; i < 50 && r.status === 200; i++) {
      await new Promise((res) => setTimeout(res, 20)) // the message crosses Redis
      r = await app.anonymous('GET', '/api/v1/auth/me', undefined, bearer(access))
    }
    t.equal(r.body.error.code, 'UNAUTHORIZED', name)
  }
  t.equal((await exchange(ta, session)).body.error.code, 'UNAUTHORIZED', 'the session token is dead too')
  t.equal(
    (await ta.anonymous('POST', '/api/v1/auth/logout', { token: session })).body.error.code,
    'UNAUTHORIZED',
    'a second logout has nothing to end',
  )
  t.equal((await ta.anonymous('POST', '/api/v1/auth/logout')).body.error.code, 'UNAUTHORIZED', 'no session named')
  const key = await ta.anonymous('POST', '/api/v1/auth/logout', undefined, bearer(o.apiKey))
  t.equal(key.body.error.code, 'UNAUTHORIZED', 'an API key has no session to end')
})

t.test('refresh rotates the session token, and a copied old token ends the session', async (t) => {
  const ta = await clockedApp(t)
  const { o, session } = await signedIn(ta)
  const r1 = await ta.anonymous('POST', '/api/v1/auth/refresh', { token: session })
  t.equal(r1.status, 200)
  t.match(r1.body.data, { token: /^ats_/, tokenType: 'Bearer', expiresIn: 900, accessToken: /^eyJ/ })
  t.not(r1.body.data.token, session)
  t.equal((await ta.anonymous('GET', '/api/v1/auth/me', undefined, bearer(r1.body.data.accessToken))).status, 200)

  ta.clock.now += (REFRESH_RACE_SECONDS + 1) * 1000 // past the window of a refresh race: a copy
  const reused = await ta.anonymous('POST', '/api/v1/auth/refresh', { token: session })
  t.equal(reused.status, 401)
  t.equal(reused.body.error.code, 'UNAUTHORIZED')
  const after = await exchange(ta, r1.body.data.token)
  t.equal(after.body.error.code, 'UNAUTHORIZED', 'the reuse ended the whole session, the new token with it')
  const me = await ta.anonymous('GET', '/api/v1/auth/me', undefined, bearer(r1.body.data.accessToken))
  t.equal(me.body.error.code, 'UNAUTHORIZED', 'and its access tokens')
  const events = await ta.platform.db.system(
    (sql) => sql`select action from audit_events where tenant_id = ${o.tenantId} order by id`,
  )
  t.same(
    events.map((e) => e.action),
    ['auth.login', 'auth.session_token_reused'],
  )
})

t.test('two refreshes racing with one token: one wins, the other is told so, and the session lives on', async (t) => {
  const ta = await testApp(t)
  const o = await owner(ta)
  let { session } = await signIn(ta.anonymous, o.email)
  // Repeated: the loser may read the token before or after the winner retired it.
  for (let round = 0; round < 10; round++) {
    const results = await Promise.all(
      [0, 1].map(() => ta.anonymous('POST', '/api/v1/auth/refresh', { token: session })),
    )
    t.same(results.map((r) => r.status).sort(), [200, 401], `round ${round}: one wins`)
    const loser = results.find((r) => r.status === 401)!
    t.match(loser.body.error, { code: 'UNAUTHORIZED', details: { reason: 'token_rotated' } })
    session = results.find((r) => r.status === 200)!.body.data.token
    const still = await exchange(ta, session)
    t.equal(still.status, 200, `round ${round}: the winner's token still works: the race did not end the session`)
  }
  const events = await ta.platform.db.system(
    (sql) =>
      sql`select action from audit_events where tenant_id = ${o.tenantId} and action = 'auth.session_token_reused'`,
  )
  t.same(events, [], 'no race was taken for a copied token')
})

t.test('a session expires after its lifetime', async (t) => {
  const ta = await clockedApp(t)
  const { session } = await signedIn(ta)
  ta.clock.now += ta.platform.config.SESSION_TTL_HOURS * 3600_000 + 1000
  t.equal((await exchange(ta, session)).body.error.code, 'UNAUTHORIZED')
})

t.test('the browser uses its session cookie, from our own origin only', async (t) => {
  const ta = await testApp(t)
  const { session } = await signedIn(ta)
  const cookie = { cookie: `atrium_session=${session}` }
  const origin = new URL(ta.platform.config.PUBLIC_URL).origin
  const same = await ta.anonymous('POST', '/api/v1/auth/exchange', undefined, { ...cookie, origin })
  t.equal(same.status, 200)
  const cross = await ta.anonymous('POST', '/api/v1/auth/exchange', undefined, {
    ...cookie,
    origin: 'https://evil.example',
  })
  t.equal(cross.status, 403)
  t.equal(cross.body.error.code, 'FORBIDDEN')
  t.equal(cross.body.error.details.reason, 'csrf')
  const site = await ta.anonymous('POST', '/api/v1/auth/logout', undefined, {
    ...cookie,
    'sec-fetch-site': 'cross-site',
  })
  t.equal(site.body.error.code, 'FORBIDDEN')
  const form = await ta.anonymous('POST', '/api/v1/auth/logout', 'token=x', {
    ...cookie,
    origin,
    'content-type': 'application/x-www-form-urlencoded',
  })
  t.equal(form.status, 415, 'a cross-site form cannot post here')
  const refreshed = await ta.anonymous('POST', '/api/v1/auth/refresh', undefined, { ...cookie, origin })
  t.equal(refreshed.status, 200)
  t.match(
    String(refreshed.headers['set-cookie']),
    new RegExp(`atrium_session=${refreshed.body.data.token}`),
    'the rotated token replaces the cookie',
  )
  const out = await ta.anonymous('POST', '/api/v1/auth/logout', undefined, {
    cookie: `atrium_session=${refreshed.body.data.token}`,
    origin,
  })
  t.equal(out.status, 200)
  const none = await ta.anonymous('POST', '/api/v1/auth/exchange')
  t.equal(none.body.error.code, 'UNAUTHORIZED')
})

t.test('malformed sign-in requests are validation errors', async (t) => {
  const ta = await testApp(t)
  for (const body of [
    {},
    { email: 'a@b.c' },
    { email: 'a@b.c', password: 'x', extra: 1 },
    { email: 5, password: 'x' },
  ]) {
    const r = await ta.anonymous('POST', '/api/v1/auth/login', body)
    t.equal(r.body.error.code, 'VALIDATION_ERROR', JSON.stringify(body))
  }
  const badToken = await exchange(ta, 'ats_short')
  t.equal(badToken.body.error.code, 'UNAUTHORIZED')
  const get = await ta.anonymous('GET', '/api/v1/auth/login')
  t.equal(get.status, 405)
})

t.test('/auth/me describes an API key', async (t) => {
  const ta = await testApp(t)
  const tenant = await ta.tenant('pro')
  const me = await tenant.call('GET', '/api/v1/auth/me')
  t.equal(me.status, 200)
  t.match(me.body.data, {
    user: { id: tenant.userId, role: 'owner' },
    tenant: { id: tenant.tenantId },
    credential: { type: 'api_key', permissions: ['*'] },
  })
  const anon = await ta.anonymous('GET', '/api/v1/auth/me')
  t.equal(anon.body.error.code, 'UNAUTHORIZED')
})
