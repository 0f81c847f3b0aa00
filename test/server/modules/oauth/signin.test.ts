// OpenID Connect sign-in, end to end against a real OpenID provider on loopback: Atrium's start,
// the provider's own login and consent pages, its redirect to the callback, authorize, and the
// session that comes out of it.
import { randomUUID } from 'node:crypto'
import t, { type Test } from 'tap'
import { caller, testApp, type TestApp } from '../../../helpers/app.js'
import { suffix } from '../../../helpers/platform.js'
import { checkPage } from '../../../helpers/pages.js'
import { createTenant } from '../../../../server/modules/tenants/service.js'
import { freePort } from '../../../helpers/platform.js'
import { CLIENT_ID, CLIENT_SECRET, signInAtIdp, startIdp, type IdpAccount } from './idp.js'

const PUBLIC_URL = 'http://atrium.test'
const redirectUri = (id: string) => `${PUBLIC_URL}/oauth/${id}/callback`
const idp = await startIdp(t, ['idp', 'idp2', 'jit'].map(redirectUri))

const provider = (extra: Record<string, unknown> = {}) => ({
  id: 'idp',
  name: 'Corporate sign-in',
  issuer: idp.issuer,
  clientId: CLIENT_ID,
  clientSecret: CLIENT_SECRET,
  allowHttp: true,
  ...extra,
})

async function oidcApp(
  t: Test,
  providers: Record<string, unknown>[] = [provider()],
  opts: { now?: () => number } = {},
) {
  return testApp(
    t,
    { PUBLIC_URL, OUTBOUND_ALLOWED_NETWORKS: '127.0.0.0/8', OIDC_PROVIDERS: JSON.stringify(providers) },
    opts,
  )
}

/** Someone the identity provider knows; verified email unless the claims say otherwise. */
function person(claims: IdpAccount = {}) {
  const sub = `u${suffix()}`
  const email = `${sub}@example.com`
  idp.accounts.set(sub, { email, email_verified: true, name: 'Pat Example', ...claims })
  return { sub, email }
}

/** Someone with an Atrium account (the owner of a new tenant) whom the identity provider knows too. */
/** The joinedBy of every user.created event announcing `userId`. */
const userCreated = async (ta: TestApp, userId: string) =>
  (
    await ta.platform.db.system(
      (sql) =>
        sql<
          { by: string }[]
        >`select data->>'joinedBy' as by from webhook_events where type = 'user.created' and data->>'id' = ${userId}`,
    )
  ).map((r) => r.by)

async function member(ta: TestApp) {
  const p = person()
  const tenant = await createTenant(ta.platform, { name: `Acme ${suffix()}`, plan: 'pro', email: p.email })
  return { ...p, ...tenant }
}

/** A browser starts signing in (with its binding cookie, if it has one yet). */
async function start(ta: TestApp, providerId = 'idp', cookie?: string, tenantId?: string) {
  const r = await ta.anonymous(
    'GET',
    `/oauth/${providerId}/start${tenantId ? `?tenantId=${tenantId}` : ''}`,
    undefined,
    cookie ? { cookie } : {},
  )
  if (r.status !== 200) throw new Error(`start failed: ${JSON.stringify(r.body)}`)
  const bound = /atrium_oauth=([A-Za-z0-9]+)/.exec(String(r.headers['set-cookie']))?.[1]
  return { response: r, url: r.body.data.authorizationUrl as string, cookie: `atrium_oauth=${bound}` }
}

/** start, then the person signs in at the provider, which sends the browser back to the callback. */
async function signIn(ta: TestApp, sub: string, providerId = 'idp', cookie?: string, tenantId?: string) {
  const s = await start(ta, providerId, cookie, tenantId)
  const callback = await signInAtIdp(s.url, sub, redirectUri(providerId))
  return { ...s, callback }
}

const authorize = (ta: TestApp, providerId: string, body: unknown, headers: Record<string, string> = {}) =>
  ta.anonymous('POST', `/oauth/${providerId}/authorize`, body, { origin: PUBLIC_URL, ...headers })

/** The callback `s` came back with, posted to authorize by the browser that started it (or one sending `headers`). */
const finish = (
  ta: TestApp,
  s: { callback: URL; cookie: string },
  headers: Record<string, string> = { cookie: s.cookie },
  providerId = 'idp',
) => authorize(ta, providerId, { callbackUrl: s.callback.search }, headers)

const auditOf = (ta: TestApp, tenantId: string) =>
  ta.platform.db.system(
    (sql) => sql<{ action: string; actor_id: string | null; target_type: string; details: Record<string, unknown> }[]>`
    select action, actor_id, target_type, details from audit_events where tenant_id = ${tenantId} order by id`,
  )

t.test('a user signs in with the identity provider end to end, and the session works', async (t) => {
  const ta = await oidcApp(t)
  const m = await member(ta)

  const list = await ta.anonymous('GET', '/oauth/providers')
  t.equal(list.status, 200)
  t.same(list.body.data, [{ id: 'idp', name: 'Corporate sign-in', startUrl: `${PUBLIC_URL}/oauth/idp/start` }])

  const s = await start(ta)
  t.match(
    String(s.response.headers['set-cookie']),
    /^atrium_oauth=[A-Za-z0-9]{43}; Max-Age=600; Path=\/oauth; HttpOnly; SameSite=Lax$/,
  )
  t.equal(s.response.headers['cache-control'], 'no-store')
  const auth = new URL(s.url)
  t.equal(auth.origin, idp.issuer, "the provider's own authorization endpoint")
  t.match(Object.fromEntries(auth.searchParams), {
    client_id: CLIENT_ID,
    response_type: 'code',
    redirect_uri: redirectUri('idp'),
    scope: 'openid email profile',
    code_challenge_method: 'S256',
    code_challenge: /^[\w-]{43}$/,
    state: /^[\w-]{43}$/,
    nonce: /^[\w-]{43}$/,
  })
  const expiresIn = Date.parse(s.response.body.data.expiresAt) - Date.now()
  t.ok(expiresIn > 590_000 && expiresIn <= 600_000, 'ten minutes to finish')
  const stored = await ta.platform.db.system(
    (sql) => sql<{ state_hash: Buffer }[]>`select state_hash from oauth_states`,
  )
  t.equal(stored.length, 1)
  t.not(stored[0]!.state_hash.toString(), auth.searchParams.get('state'), 'the state is stored only as a hash')

  const callback = await signInAtIdp(s.url, m.sub, redirectUri('idp'))
  t.ok(callback.searchParams.get('code'), 'the provider sent a code back')

  // The browser lands on the callback page, whose script posts the query to authorize.
  const { assets } = await checkPage(
    t,
    ta.anonymous,
    new URL(`${callback.pathname}${callback.search}`, 'http://atrium.test'),
    {
      '../callback.js': /^text\/javascript/,
      '../../pages/atrium.css': /^text\/css/,
    },
  )
  t.match(assets['../callback.js'], /fetch\('authorize'/)

  const r = await authorize(ta, 'idp', { callbackUrl: callback.search }, { cookie: s.cookie })
  t.equal(r.status, 200, JSON.stringify(r.body))
  t.match(r.body.data, {
    tokenType: 'session',
    token: /^ats_/,
    user: { id: m.userId, email: m.email, role: 'owner' },
    tenant: { id: m.tenantId, plan: 'pro' },
  })
  t.match(String(r.headers['set-cookie']), /atrium_session=ats_\w+;.*HttpOnly/)
  t.notOk(r.headers['x-ratelimit-limit'], 'exempt from the general limit like the other auth endpoints')

  const ex = await ta.anonymous('POST', '/api/v1/auth/exchange', { token: r.body.data.token })
  t.equal(ex.status, 200)
  const me = await caller(ta.app, ex.body.data.accessToken)('GET', '/api/v1/auth/me')
  t.equal(me.status, 200)
  t.match(me.body.data, { user: { id: m.userId }, tenant: { id: m.tenantId }, credential: { type: 'access_token' } })

  const [session] = await ta.platform.db.system(
    (sql) => sql<{ method: string }[]>`select method from identity_sessions where user_id = ${m.userId}`,
  )
  t.equal(session!.method, 'oidc')
  const events = await auditOf(ta, m.tenantId)
  t.match(
    events.filter((e) => e.action === 'auth.login'),
    [{ actor_id: m.userId, target_type: 'session', details: { method: 'oidc', provider: 'idp' } }],
  )
})

t.test('authorize also takes the full callback URL, or code, state and iss as fields', async (t) => {
  const ta = await oidcApp(t)
  const m = await member(ta)
  const a = await signIn(ta, m.sub)
  const full = await authorize(ta, 'idp', { callbackUrl: a.callback.href }, { cookie: a.cookie })
  t.equal(full.status, 200, JSON.stringify(full.body))

  const b = await signIn(ta, m.sub, 'idp', a.cookie)
  t.equal(b.cookie, a.cookie, 'a browser keeps its binding value across sign-ins')
  const q = b.callback.searchParams
  const fields = await authorize(
    ta,
    'idp',
    { code: q.get('code'), state: q.get('state'), iss: q.get('iss') },
    { cookie: b.cookie },
  )
  t.equal(fields.status, 200, JSON.stringify(fields.body))

  const both = await authorize(ta, 'idp', { callbackUrl: b.callback.search, state: 'x' }, { cookie: b.cookie })
  t.equal(both.body.error.code, 'VALIDATION_ERROR')
  const none = await authorize(ta, 'idp', {}, { cookie: b.cookie })
  t.equal(none.status, 400)
  t.match(none.body.error, { code: 'VALIDATION_ERROR', details: { errors: [{ field: 'state' }] } })
  const extra = await authorize(ta, 'idp', { state: 'x', password: 'y' }, { cookie: b.cookie })
  t.equal(extra.body.error.code, 'VALIDATION_ERROR', 'unknown fields are refused')
})

t.test('a state completes one sign-in only', async (t) => {
  const ta = await oidcApp(t)
  const m = await member(ta)
  const a = await signIn(ta, m.sub)
  t.equal((await finish(ta, a)).status, 200)
  const again = await finish(ta, a)
  t.equal(again.status, 400)
  t.match(again.body.error, { code: 'VALIDATION_ERROR', details: { reason: 'state_invalid' } })
  const madeUp = await authorize(ta, 'idp', { code: 'x', state: 'made-up' }, { cookie: a.cookie })
  t.match(madeUp.body.error, { code: 'VALIDATION_ERROR', details: { reason: 'state_invalid' } })

  // Two presentations at once: one wins.
  const b = await signIn(ta, m.sub, 'idp', a.cookie)
  const raced = await Promise.all([1, 2].map(() => finish(ta, b)))
  t.same(raced.map((r) => r.status).sort(), [200, 400])
})

t.test('a sign-in completes only in the browser that started it (login CSRF)', async (t) => {
  const ta = await oidcApp(t)
  const m = await member(ta)
  const a = await signIn(ta, m.sub)
  // Another browser (an attacker's page handing the victim its callback) has no binding cookie, or its own.
  const without = await finish(ta, a, {})
  t.equal(without.status, 403)
  t.match(without.body.error, { code: 'FORBIDDEN', details: { reason: 'browser_mismatch' } })
  const forged = await finish(ta, a, { cookie: 'atrium_oauth=not-even-well-formed' })
  t.match(forged.body.error, { code: 'FORBIDDEN', details: { reason: 'browser_mismatch' } })
  t.equal((await finish(ta, a)).status, 200, 'a refusal without a binding leaves the state to its browser')

  const b = await signIn(ta, m.sub)
  const other = await start(ta) // a second browser, with a binding value of its own
  t.not(other.cookie, b.cookie)
  const mismatch = await finish(ta, b, { cookie: other.cookie })
  t.equal(mismatch.status, 403)
  t.match(mismatch.body.error, { code: 'FORBIDDEN', details: { reason: 'browser_mismatch' } })
  const after = await finish(ta, b)
  t.match(
    after.body.error,
    { code: 'VALIDATION_ERROR', details: { reason: 'state_invalid' } },
    'a state shown by the wrong browser is spent',
  )
})

t.test('authorize refuses cross-origin requests and GET', async (t) => {
  const ta = await oidcApp(t)
  const m = await member(ta)
  const a = await signIn(ta, m.sub)
  const cross = await finish(ta, a, { cookie: a.cookie, origin: 'https://evil.example' })
  t.equal(cross.status, 403)
  t.match(cross.body.error, { code: 'FORBIDDEN', details: { reason: 'csrf' } })
  const site = await finish(ta, a, { cookie: a.cookie, 'sec-fetch-site': 'cross-site' })
  t.match(site.body.error, { code: 'FORBIDDEN', details: { reason: 'csrf' } })
  const form = await authorize(ta, 'idp', a.callback.search.slice(1), {
    cookie: a.cookie,
    'content-type': 'application/x-www-form-urlencoded',
  })
  t.equal(form.status, 415, 'a cross-site form cannot post JSON')
  const get = await ta.anonymous('GET', `/oauth/idp/authorize${a.callback.search}`, undefined, { cookie: a.cookie })
  t.equal(get.status, 405)
  t.equal(get.body.error.code, 'METHOD_NOT_ALLOWED')
  t.equal((await finish(ta, a)).status, 200, 'none of these used up the state')
})

t.test('unknown providers and states of another provider are refused', async (t) => {
  const ta = await oidcApp(t, [provider(), provider({ id: 'idp2', name: 'Second' })])
  const m = await member(ta)
  for (const [method, url] of [
    ['GET', '/oauth/nope/start'],
    ['POST', '/oauth/nope/authorize'],
    ['GET', '/oauth/nope/callback'],
  ] as const) {
    const r = await ta.anonymous(method, url, method === 'POST' ? { state: 'x' } : undefined, { origin: PUBLIC_URL })
    t.equal(r.status, 404, url)
    t.equal(r.body.error.code, 'RESOURCE_NOT_FOUND', url)
  }
  const a = await signIn(ta, m.sub, 'idp')
  const wrong = await authorize(ta, 'idp2', { callbackUrl: a.callback.search }, { cookie: a.cookie })
  t.equal(wrong.status, 400)
  t.match(wrong.body.error, { code: 'VALIDATION_ERROR', details: { reason: 'state_provider_mismatch' } })
})

t.test('a sign-in not completed within ten minutes has expired', async (t) => {
  const clock = { now: Date.now() }
  const ta = await oidcApp(t, [provider()], { now: () => clock.now })
  const m = await member(ta)
  const a = await signIn(ta, m.sub)
  clock.now += 600_000
  const late = await finish(ta, a)
  t.equal(late.status, 400)
  t.match(late.body.error, { code: 'VALIDATION_ERROR', details: { reason: 'state_expired' } })

  const b = await signIn(ta, m.sub, 'idp', a.cookie)
  clock.now += 599_000
  t.equal((await finish(ta, b)).status, 200, 'just in time')
  await start(ta, 'idp', a.cookie)
  const expired = await ta.platform.db.system(
    (sql) => sql`select 1 from oauth_states where expires_at <= ${new Date(clock.now)}`,
  )
  t.equal(expired.length, 0, 'starting a sign-in sweeps out expired ones')
})

t.test('a code the identity provider does not honour, or an error it sends back, is 401', async (t) => {
  const ta = await oidcApp(t)
  const m = await member(ta)
  const a = await signIn(ta, m.sub)
  const q = a.callback.searchParams
  const tampered = await authorize(
    ta,
    'idp',
    { code: `${q.get('code')}x`, state: q.get('state'), iss: q.get('iss') },
    { cookie: a.cookie },
  )
  t.equal(tampered.status, 401)
  t.match(tampered.body.error, { code: 'UNAUTHORIZED', details: { reason: 'idp_error', error: 'invalid_grant' } })
  const again = await finish(ta, a)
  t.match(
    again.body.error,
    { code: 'VALIDATION_ERROR', details: { reason: 'state_invalid' } },
    'the failed attempt used the state up',
  )

  const b = await start(ta, 'idp', a.cookie)
  const state = new URL(b.url).searchParams.get('state')!
  const denied = await authorize(
    ta,
    'idp',
    { error: 'access_denied', error_description: 'The user said no', state, iss: idp.issuer },
    { cookie: b.cookie },
  )
  t.equal(denied.status, 401)
  t.match(denied.body.error, { code: 'UNAUTHORIZED', details: { reason: 'idp_error', error: 'access_denied' } })
  t.notOk(denied.headers['set-cookie'])
})

t.test('the email address must be shared and verified by the identity provider', async (t) => {
  const ta = await oidcApp(t)
  const m = await member(ta)
  idp.accounts.set(m.sub, { email: m.email, email_verified: false })
  const a = await signIn(ta, m.sub)
  const unverified = await finish(ta, a)
  t.equal(unverified.status, 403)
  t.match(unverified.body.error, { code: 'FORBIDDEN', details: { reason: 'email_unverified' } })

  idp.accounts.set(m.sub, { email_verified: true })
  const b = await signIn(ta, m.sub, 'idp', a.cookie)
  const missing = await finish(ta, b)
  t.match(missing.body.error, { code: 'FORBIDDEN', details: { reason: 'email_missing' } })
  t.same(
    (await auditOf(ta, m.tenantId)).filter((e) => e.action === 'auth.login'),
    [],
  )
})

t.test('without just-in-time creation, an address with no account is refused', async (t) => {
  const ta = await oidcApp(t)
  const stranger = person()
  const a = await signIn(ta, stranger.sub)
  const r = await finish(ta, a)
  t.equal(r.status, 403)
  t.match(r.body.error, { code: 'FORBIDDEN', details: { reason: 'no_account' } })
  const users = await ta.platform.db.system((sql) => sql`select 1 from users where lower(email) = ${stranger.email}`)
  t.equal(users.length, 0)
})

t.test(
  "a disabled account is refused; an invited one joins through the invitation's link, not through a provider serving every tenant",
  async (t) => {
    const ta = await oidcApp(t)
    const m = await member(ta)
    await ta.platform.db.system((sql) => sql`update users set status = 'disabled' where id = ${m.userId}`)
    const a = await signIn(ta, m.sub)
    const disabled = await finish(ta, a)
    t.equal(disabled.status, 403)
    t.match(disabled.body.error, { code: 'FORBIDDEN', details: { reason: 'account_disabled' } })
    t.match(
      (await auditOf(ta, m.tenantId)).filter((e) => e.action === 'auth.login_failed'),
      [{ details: { method: 'oidc', provider: 'idp', reason: 'account_disabled' } }],
    )

    await ta.platform.db.system((sql) => sql`update tenants set status = 'suspended' where id = ${m.tenantId}`)
    await ta.platform.db.system((sql) => sql`update users set status = 'active' where id = ${m.userId}`)
    const s = await signIn(ta, m.sub, 'idp', a.cookie)
    const suspended = await finish(ta, s)
    t.match(suspended.body.error, { code: 'FORBIDDEN', details: { reason: 'tenant_suspended' } })
    await ta.platform.db.system((sql) => sql`update tenants set status = 'active' where id = ${m.tenantId}`)

    const owner = caller(ta.app, m.apiKey)
    const invitee = person()
    const invited = await owner('POST', '/api/v1/tenant/team/members', { email: invitee.email, role: 'viewer' })
    t.equal(invited.status, 201, JSON.stringify(invited.body))
    const b = await signIn(ta, invitee.sub, 'idp', a.cookie)
    const pending = await finish(ta, b)
    t.equal(pending.status, 403, 'a provider serving every tenant accepts no invitation')
    t.match(pending.body.error, { code: 'FORBIDDEN', details: { reason: 'invitation_pending' } })
    const accept = await ta.anonymous('POST', '/api/v1/auth/invitations/accept', {
      token: invited.body.data.invitation.token,
      password: 'correct horse battery',
    })
    t.equal(accept.status, 200, "the invitation's link joins")
    const c = await signIn(ta, invitee.sub, 'idp', a.cookie)
    const joined = await finish(ta, c)
    t.equal(joined.status, 200, JSON.stringify(joined.body))
    t.match(joined.body.data.user, { email: invitee.email, role: 'viewer' })
    t.same(await userCreated(ta, joined.body.data.user.id), ['invitation'], 'joining announces user.created once')
  },
)

t.test("a provider bound to a tenant accepts its own tenant's invitation on the first sign-in", async (t) => {
  const tenantId = randomUUID()
  const ta = await oidcApp(t, [provider({ id: 'jit', tenantId, defaultRole: 'viewer' })])
  await ta.platform.db.system(
    (sql) => sql`insert into tenants (id, name, plan) values (${tenantId}, 'Bound Corp', 'enterprise')`,
  )
  const invitee = person()
  const [{ id: userId } = { id: '' }] = await ta.platform.db.system(
    (sql) => sql<{ id: string }[]>`
    insert into users (id, tenant_id, email, role, status) values (${randomUUID()}, ${tenantId}, ${invitee.email}, 'member', 'invited') returning id`,
  )
  const a = await signIn(ta, invitee.sub, 'jit')
  const joined = await authorize(ta, 'jit', { callbackUrl: a.callback.search }, { cookie: a.cookie })
  t.equal(joined.status, 200, JSON.stringify(joined.body))
  t.match(joined.body.data, { user: { id: userId, role: 'member' }, tenant: { id: tenantId } })
  t.ok(
    (await auditOf(ta, tenantId)).some((e) => e.action === 'auth.invitation_accepted' && e.details.provider === 'jit'),
  )
})

t.test(
  'no tenant pulls someone in by inviting their address first: a provider serving every tenant signs in only accounts in use, and asks which when there are several',
  async (t) => {
    const ta = await oidcApp(t)
    const own = await member(ta) // the person's own organization, where they work
    const rogue = await member(ta)
    // Another organization invites the same address: it learns nothing and reserves nothing.
    const invited = await caller(ta.app, rogue.apiKey)('POST', '/api/v1/tenant/team/members', {
      email: own.email,
      role: 'admin',
    })
    t.equal(invited.status, 201)
    const a = await signIn(ta, own.sub)
    const r = await finish(ta, a)
    t.equal(r.status, 200)
    t.equal(r.body.data.tenant.id, own.tenantId, 'signed in where they work, not where they were invited')
    const [rogueAccount] = await ta.platform.db.system(
      (sql) =>
        sql<
          { status: string }[]
        >`select status from users where tenant_id = ${rogue.tenantId} and email = ${own.email}`,
    )
    t.equal(rogueAccount!.status, 'invited', 'the invitation was not accepted on their behalf')

    // Once they accept it themselves, they have two accounts: the sign-in asks which, and names them.
    t.equal(
      (
        await ta.anonymous('POST', '/api/v1/auth/invitations/accept', {
          token: invited.body.data.invitation.token,
          password: 'correct horse battery',
        })
      ).status,
      200,
    )
    const b = await signIn(ta, own.sub, 'idp', a.cookie)
    const ambiguous = await finish(ta, b)
    t.equal(ambiguous.status, 403)
    t.match(ambiguous.body.error.details, { reason: 'tenant_required' })
    t.same(
      ambiguous.body.error.details.tenants.map((x: { id: string }) => x.id).sort(),
      [own.tenantId, rogue.tenantId].sort(),
    )
    const c = await signIn(ta, own.sub, 'idp', a.cookie, rogue.tenantId)
    const chosen = await finish(ta, c)
    t.equal(chosen.status, 200)
    t.equal(chosen.body.data.tenant.id, rogue.tenantId, 'the chosen one')
  },
)

t.test(
  "a provider bound to a tenant creates first-time users there, and signs in that tenant's people only",
  async (t) => {
    const tenantId = randomUUID()
    const ta = await oidcApp(t, [provider({ id: 'jit', tenantId, defaultRole: 'viewer' }), provider()])
    await ta.platform.db.system(
      (sql) => sql`insert into tenants (id, name, plan) values (${tenantId}, 'Bound Corp', 'enterprise')`,
    )

    const newcomer = person({ name: 'New Comer' })
    const a = await signIn(ta, newcomer.sub, 'jit')
    const first = await authorize(ta, 'jit', { callbackUrl: a.callback.search }, { cookie: a.cookie })
    t.equal(first.status, 200, JSON.stringify(first.body))
    t.match(first.body.data, {
      user: { email: newcomer.email, name: 'New Comer', role: 'viewer' },
      tenant: { id: tenantId, name: 'Bound Corp' },
    })
    const b = await signIn(ta, newcomer.sub, 'jit', a.cookie)
    const second = await authorize(ta, 'jit', { callbackUrl: b.callback.search }, { cookie: b.cookie })
    t.equal(second.body.data.user.id, first.body.data.user.id, 'the second sign-in finds the account the first made')
    const events = await auditOf(ta, tenantId)
    t.equal(events.filter((e) => e.action === 'auth.user_provisioned').length, 1)
    t.equal(events.filter((e) => e.action === 'auth.login').length, 2)
    t.same(
      await userCreated(ta, first.body.data.user.id),
      ['oidc'],
      'provisioning announces user.created once; signing in again does not',
    )

    // The provider of tenant A vouches for tenant A only: an address with an account in tenant B
    // gets an account of its own in A, never B's.
    const other = await member(ta)
    const c = await signIn(ta, other.sub, 'jit', a.cookie)
    const inA = await authorize(ta, 'jit', { callbackUrl: c.callback.search }, { cookie: c.cookie })
    t.equal(inA.status, 200)
    t.equal(inA.body.data.tenant.id, tenantId)
    t.not(inA.body.data.user.id, other.userId, 'not the account of tenant B')
    const d = await signIn(ta, other.sub, 'idp', a.cookie, other.tenantId)
    const inB = await finish(ta, d)
    t.equal(inB.status, 200, 'the deployment-wide provider signs them in to B when they choose it')
    t.equal(inB.body.data.user.id, other.userId)
  },
)

t.test('an identity provider that cannot be reached is 503, and is tried again next time', async (t) => {
  const port = await freePort()
  const issuer = `http://127.0.0.1:${port}`
  const ta = await oidcApp(t, [
    provider({ id: 'later', name: 'Later', issuer }),
    provider({ id: 'misnamed', name: 'Misnamed', issuer: `${idp.issuer}/realms/none` }),
  ])
  const r = await ta.anonymous('GET', '/oauth/later/start')
  t.equal(r.status, 503)
  t.match(r.body.error, {
    code: 'SERVICE_UNAVAILABLE',
    message: /Later could not be reached \(discovery\)/,
    details: { provider: 'later', reason: 'unreachable' },
  })
  t.notOk(r.headers['set-cookie'])
  const misnamed = await ta.anonymous('GET', '/oauth/misnamed/start')
  t.match(misnamed.body.error, {
    code: 'SERVICE_UNAVAILABLE',
    message: /Misnamed gave an unusable answer \(discovery\)/,
    details: { reason: 'invalid_provider_response' },
  })

  const later = await startIdp(t, [redirectUri('later')], port)
  const m = await member(ta)
  later.accounts.set(m.sub, { email: m.email, email_verified: true })
  const s = await start(ta, 'later')
  t.ok(s.url.startsWith(issuer), 'a failed discovery is not cached')
  const callback = await signInAtIdp(s.url, m.sub, redirectUri('later'))
  t.equal((await authorize(ta, 'later', { callbackUrl: callback.search }, { cookie: s.cookie })).status, 200)
})

t.test('in connected mode a loopback identity provider must be inside OUTBOUND_ALLOWED_NETWORKS', async (t) => {
  const before = idp.requests()
  const port = new URL(idp.issuer).port
  const ta = await testApp(t, {
    PUBLIC_URL,
    OIDC_PROVIDERS: JSON.stringify([provider({ issuer: `http://localhost:${port}` })]),
  })
  const r = await ta.anonymous('GET', '/oauth/idp/start')
  t.equal(r.status, 503)
  t.match(r.body.error, {
    code: 'SERVICE_UNAVAILABLE',
    message: /may not be contacted: loopback address outside OUTBOUND_ALLOWED_NETWORKS/,
    details: { reason: 'outbound_refused' },
  })
  t.equal(idp.requests(), before, 'never contacted')
})

t.test('the OpenAPI document lists the JSON routes and leaves the page out', async (t) => {
  const ta = await oidcApp(t)
  const doc = (await ta.anonymous('GET', '/openapi.json')).body
  t.ok(doc.paths['/oauth/providers'].get)
  t.ok(doc.paths['/oauth/{provider}/start'].get.responses['503'])
  const post = doc.paths['/oauth/{provider}/authorize'].post
  t.ok(post.requestBody.content['application/json'].schema.properties.callbackUrl)
  for (const code of ['200', '400', '401', '403', '404', '503']) t.ok(post.responses[code], code)
  t.notOk(doc.paths['/oauth/{provider}/callback'])
  t.notOk(doc.paths['/oauth/callback.js'])
})
