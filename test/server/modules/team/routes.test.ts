// Team management and invitations through the API, as people use them: an owner signs in with a
// password; members are invited through the API and accept with passwords of their own.
import { createHash } from 'node:crypto'
import t, { type Test } from 'tap'
import { appOn, caller, testApp, type Caller, type TestApp } from '../../../helpers/app.js'
import { suffix } from '../../../helpers/platform.js'
import type { Role } from '../../../../server/domain/permissions.js'
import { apiKeyTags } from '../../../../server/modules/api-keys/keys.js'
import { createKey } from '../../../../server/modules/api-keys/service.js'
import { INVITATION_TTL_SECONDS } from '../../../../server/modules/team/service.js'
import { createTenant } from '../../../../server/modules/tenants/service.js'

// One app (and database) for the file: every test makes its own tenants, which is the isolation
// the product promises anyway. Tests that move the clock build their own.
const app = await testApp(t)
const PASSWORD = 'correct horse battery'
const MEMBERS = '/api/v1/tenant/team/members'

interface Person {
  userId: string
  email: string
  session: string
  access: string
  call: Caller
}

/** Signs in with email and password and exchanges the session for an access token. */
async function signIn(ta: TestApp, email: string): Promise<{ session: string; access: string; call: Caller }> {
  const login = await ta.anonymous('POST', '/api/v1/auth/login', { email, password: PASSWORD })
  if (login.status !== 200) throw new Error(`login failed: ${JSON.stringify(login.body)}`)
  const ex = await ta.anonymous('POST', '/api/v1/auth/exchange', { token: login.body.data.token })
  return {
    session: login.body.data.token,
    access: ex.body.data.accessToken,
    call: caller(ta.app, ex.body.data.accessToken),
  }
}

async function team(ta: TestApp, plan: 'free' | 'pro' | 'growth' | 'enterprise' = 'pro') {
  const email = `owner-${suffix()}@example.com`
  const created = await createTenant(ta.platform, { name: `Acme ${suffix()}`, plan, email, password: PASSWORD })
  const owner: Person = { userId: created.userId, email, ...(await signIn(ta, email)) }
  return { ...created, owner, key: caller(ta.app, created.apiKey) }
}

/** Invites through `by`; returns the new member's id and the invitation token. */
async function invite(by: Caller, role: Role, email = `${role}-${suffix()}@example.com`) {
  const r = await by('POST', MEMBERS, { email, role })
  if (r.status !== 201) throw new Error(`invite failed: ${JSON.stringify(r.body)}`)
  return { userId: r.body.data.member.id as string, email, token: r.body.data.invitation.token as string }
}

/** A member who was invited by `by` and accepted, signed in with an access token. */
async function join(ta: TestApp, by: Caller, role: Role): Promise<Person> {
  const inv = await invite(by, role)
  const accepted = await ta.anonymous('POST', '/api/v1/auth/invitations/accept', {
    token: inv.token,
    password: PASSWORD,
  })
  if (accepted.status !== 200) throw new Error(`accept failed: ${JSON.stringify(accepted.body)}`)
  const ex = await ta.anonymous('POST', '/api/v1/auth/exchange', { token: accepted.body.data.token })
  return {
    userId: inv.userId,
    email: inv.email,
    session: accepted.body.data.token,
    access: ex.body.data.accessToken,
    call: caller(ta.app, ex.body.data.accessToken),
  }
}

const auditOf = (ta: TestApp, tenantId: string) =>
  ta.platform.db.system(
    (sql) => sql<
      {
        action: string
        actor_type: string
        actor_id: string | null
        target_id: string
        details: Record<string, unknown>
      }[]
    >`
    select action, actor_type, actor_id, target_id, details from audit_events where tenant_id = ${tenantId} order by id`,
  )

const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

/** Asks until the answer is no longer 200 (an invalidation crossing Redis takes a moment). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function untilRefused(call: () => Promise<{ status: number; body: any }>) {
  let r = await call()
  for (let i = 0; i < 50 && r.status === 200; i++) {
    await new Promise((res) => setTimeout(res, 20))
    r = await call()
  }
  return r
}

const ACCEPT = '/api/v1/auth/invitations/accept'
const member = (id: string) => `${MEMBERS}/${id}`

function refused(
  t: Test,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  r: { status: number; body: any },
  code: 'FORBIDDEN' | 'VALIDATION_ERROR',
  reason: string | null,
  name: string,
) {
  t.equal(r.status, code === 'FORBIDDEN' ? 403 : 400, name)
  t.equal(r.body.error?.code, code, name)
  if (reason) t.equal(r.body.error?.details?.reason, reason, name)
}

/** A request a case makes, by whom, and the case's name. */
type Attempt = [name: string, by: Caller, method: 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown]

/** Makes each attempt in turn: every one must be refused with `code` for `reason`. */
async function refusedAll(t: Test, code: 'FORBIDDEN' | 'VALIDATION_ERROR', reason: string | null, attempts: Attempt[]) {
  for (const [name, by, method, url, body] of attempts) refused(t, await by(method, url, body), code, reason, name)
}

async function clockedApp(t: Test) {
  const clock = { now: Date.now() }
  const ta = await testApp(t, {}, { now: () => clock.now })
  return { ...ta, clock }
}

t.test('an owner invites a member, who accepts with a password of their own and is signed in', async (t) => {
  const ta = app
  const tm = await team(ta)
  const email = `Ada-${suffix()}@Example.com`
  const invited = await tm.owner.call('POST', MEMBERS, {
    email: ` ${email} `,
    role: 'member',
    name: 'Ada',
  })
  t.equal(invited.status, 201)
  const { member, invitation } = invited.body.data
  t.match(member, {
    id: String,
    email,
    name: 'Ada',
    role: 'member',
    status: 'invited',
    createdAt: String,
    lastLoginAt: null,
  })
  t.match(invitation.token, /^ati_[A-Za-z0-9]{51}$/, '43 random characters and the 8-character tag')
  const publicUrl = ta.platform.config.PUBLIC_URL.replace(/\/+$/, '')
  t.equal(
    invitation.acceptUrl,
    `${publicUrl}/invitations/accept#token=${invitation.token}`,
    'the token rides in the fragment, out of access logs',
  )
  const expiresIn = Date.parse(invitation.expiresAt) - Date.now()
  t.ok(Math.abs(expiresIn - INVITATION_TTL_SECONDS * 1000) < 60_000, 'expires in 7 days')

  const [stored] = await ta.platform.db.system(
    (sql) =>
      sql<
        { token_hash: Buffer; invited_by: string }[]
      >`select token_hash, invited_by from invitations where user_id = ${member.id}`,
  )
  t.same(
    stored!.token_hash,
    createHash('sha256').update(invitation.token).digest(),
    'only the SHA-256 of the token is stored',
  )
  t.equal(stored!.invited_by, tm.owner.userId)

  const early = await ta.anonymous('POST', '/api/v1/auth/login', { email, password: PASSWORD })
  t.equal(early.body.error.code, 'UNAUTHORIZED', 'an invited member has no password to sign in with yet')

  const accepted = await ta.anonymous('POST', ACCEPT, {
    token: invitation.token,
    password: PASSWORD,
    name: 'Ada Lovelace',
  })
  t.equal(accepted.status, 200)
  t.match(accepted.body.data, {
    token: /^ats_/,
    tokenType: 'session',
    expiresAt: String,
    user: { id: member.id, email, name: 'Ada Lovelace', role: 'member' },
    tenant: { id: tm.tenantId, plan: 'pro' },
  })
  t.match(String(accepted.headers['set-cookie']), /atrium_session=ats_\w+;.*HttpOnly/)
  t.notOk(accepted.headers['x-ratelimit-limit'], 'an auth endpoint: exempt from the general limit')
  const ex = await ta.anonymous('POST', '/api/v1/auth/exchange', { token: accepted.body.data.token })
  const me = await caller(ta.app, ex.body.data.accessToken)('GET', '/api/v1/auth/me')
  t.match(me.body.data, { user: { id: member.id, role: 'member' }, tenant: { id: tm.tenantId } })

  const listed = await tm.owner.call('GET', MEMBERS)
  t.equal(listed.status, 200)
  t.same(
    listed.body.data.map((m: { id: string }) => m.id),
    [tm.owner.userId, member.id],
    'in the order they joined',
  )
  t.match(listed.body.data[1], { status: 'active', name: 'Ada Lovelace', lastLoginAt: String })
  t.equal(listed.body.meta.nextCursor, null)
  t.ok(await signIn(ta, email), 'from now on the member signs in with their password')

  const [session] = await ta.platform.db.system(
    (sql) =>
      sql`select method from identity_sessions where id = (select session_id from session_tokens where hash = ${createHash('sha256').update(accepted.body.data.token).digest()})`,
  )
  t.equal(session!.method, 'invitation')
  const events = await auditOf(ta, tm.tenantId)
  t.match(
    events.filter((e) => e.action.startsWith('team.') || e.action === 'auth.invitation_accepted'),
    [
      {
        action: 'team.member_invited',
        actor_id: tm.owner.userId,
        target_id: member.id,
        details: { email, role: 'member' },
      },
      { action: 'auth.invitation_accepted', actor_type: 'user', actor_id: member.id, target_id: member.id },
    ],
  )
  t.notOk(JSON.stringify(events).includes(invitation.token), 'the token is in no audit event')
})

t.test('an invitation is accepted once, and not after 7 days', async (t) => {
  const ta = await clockedApp(t)
  const tm = await team(ta)
  const first = await invite(tm.owner.call, 'viewer')
  t.equal((await ta.anonymous('POST', ACCEPT, { token: first.token, password: PASSWORD })).status, 200)
  const again = await ta.anonymous('POST', ACCEPT, { token: first.token, password: 'another long password' })
  t.equal(again.status, 401)
  t.equal(again.body.error.code, 'UNAUTHORIZED', 'used')
  t.ok(await signIn(ta, first.email), 'the second attempt changed no password')

  const late = await invite(tm.owner.call, 'viewer')
  ta.clock.now += INVITATION_TTL_SECONDS * 1000 + 1000
  const expired = await ta.anonymous('POST', ACCEPT, { token: late.token, password: PASSWORD })
  t.equal(expired.status, 401)
  t.equal(expired.body.error.code, 'UNAUTHORIZED', 'expired')
  const still = await tm.key('GET', `/api/v1/tenant/team/members/${late.userId}`)
  t.equal(still.body.data.status, 'invited', 'the member waits for a new invitation')

  for (const [name, token] of [
    ['unknown', `ati_${'A'.repeat(43)}`],
    ['made up, with a tag not made here', `ati_${'A'.repeat(51)}`],
    ['malformed', 'ati_short'],
    ['a session token', `ats_${'A'.repeat(43)}`],
  ] as const) {
    const r = await ta.anonymous('POST', ACCEPT, { token, password: PASSWORD })
    t.equal(r.status, 401, name)
    t.equal(r.body.error.code, 'UNAUTHORIZED', name)
  }
})

t.test('a new invitation replaces the old one', async (t) => {
  const ta = await clockedApp(t)
  const tm = await team(ta)
  const inv = await invite(tm.owner.call, 'member')
  ta.clock.now += INVITATION_TTL_SECONDS * 1000 + 1000
  // A week on, the owner's access token has long expired: their key sends the new invitation.
  const resent = await tm.key('POST', `/api/v1/tenant/team/members/${inv.userId}/invitation`)
  t.equal(resent.status, 201)
  t.match(resent.body.data, { member: { id: inv.userId, status: 'invited' }, invitation: { token: /^ati_/ } })
  t.equal(
    Date.parse(resent.body.data.invitation.expiresAt),
    ta.clock.now + INVITATION_TTL_SECONDS * 1000,
    'seven days from now',
  )
  t.equal(
    (await ta.anonymous('POST', ACCEPT, { token: inv.token, password: PASSWORD })).body.error.code,
    'UNAUTHORIZED',
    'the old token is withdrawn',
  )
  t.equal(
    (await ta.anonymous('POST', ACCEPT, { token: resent.body.data.invitation.token, password: PASSWORD })).status,
    200,
  )
  const joined = await tm.key('POST', `/api/v1/tenant/team/members/${inv.userId}/invitation`)
  t.equal(joined.status, 400)
  t.equal(joined.body.error.code, 'VALIDATION_ERROR', 'a member who joined needs no invitation')
  t.equal(joined.body.error.details.reason, 'not_invited')
  const events = (await auditOf(ta, tm.tenantId)).filter((e) => e.action === 'team.member_invited')
  t.match(
    events.map((e) => e.details),
    [{ role: 'member' }, { role: 'member', resent: true }],
  )
})

t.test('two acceptances racing with one token: one wins', async (t) => {
  const ta = app
  const tm = await team(ta)
  const inv = await invite(tm.owner.call, 'member')
  const results = await Promise.all(
    [0, 1].map((i) => ta.anonymous('POST', ACCEPT, { token: inv.token, password: `${PASSWORD} ${i}` })),
  )
  t.same(results.map((r) => r.status).sort(), [200, 401])
  const sessions = await ta.platform.db.system(
    (sql) => sql`select 1 from identity_sessions where user_id = ${inv.userId}`,
  )
  t.equal(sessions.length, 1, 'one session, for the winner')
})

t.test('an acceptance must choose a long enough password', async (t) => {
  const ta = app
  const tm = await team(ta)
  const inv = await invite(tm.owner.call, 'member')
  for (const body of [
    { token: inv.token, password: 'too short' },
    { token: inv.token },
    { password: PASSWORD },
    { token: inv.token, password: PASSWORD, role: 'owner' },
  ]) {
    const r = await ta.anonymous('POST', ACCEPT, body)
    t.equal(r.status, 400, JSON.stringify(Object.keys(body)))
    t.equal(r.body.error.code, 'VALIDATION_ERROR')
  }
  t.equal(
    (await ta.anonymous('POST', ACCEPT, { token: inv.token, password: PASSWORD })).status,
    200,
    'the invitation was not used up by the refusals',
  )
})

t.test('an invitation to a suspended organization cannot be accepted', async (t) => {
  const ta = app
  const tm = await team(ta)
  const inv = await invite(tm.owner.call, 'member')
  await ta.platform.db.system((sql) => sql`update tenants set status = 'suspended' where id = ${tm.tenantId}`)
  const r = await ta.anonymous('POST', ACCEPT, { token: inv.token, password: PASSWORD })
  t.equal(r.status, 403)
  t.equal(r.body.error.code, 'FORBIDDEN')
  t.equal(r.body.error.details.reason, 'tenant_suspended')
})

t.test('inviting a member of this organization again, or a malformed invitation, is a VALIDATION_ERROR', async (t) => {
  const ta = app
  const tm = await team(ta)
  const cases: [string, unknown][] = [
    ["the owner's address in other letters", { email: tm.owner.email.toUpperCase(), role: 'member' }],
    ['not an email', { email: 'not-an-email', role: 'member' }],
    ['unknown role', { email: `x-${suffix()}@example.com`, role: 'superuser' }],
    ['no role', { email: `x-${suffix()}@example.com` }],
    ['unknown field', { email: `x-${suffix()}@example.com`, role: 'member', password: 'chosen for them' }],
    ['name too long', { email: `x-${suffix()}@example.com`, role: 'member', name: 'n'.repeat(201) }],
  ]
  for (const [name, body] of cases) {
    const r = await tm.owner.call('POST', MEMBERS, body)
    t.equal(r.status, 400, name)
    t.equal(r.body.error.code, 'VALIDATION_ERROR', name)
  }
  const listed = await tm.owner.call('GET', MEMBERS)
  t.equal(listed.body.data.length, 1, 'nobody was added')
})

t.test(
  'inviting an address that has an account in another organization reveals nothing and reserves nothing',
  async (t) => {
    const ta = app
    const tm = await team(ta)
    const other = await team(ta)
    const known = await tm.owner.call('POST', MEMBERS, {
      email: other.owner.email.toUpperCase(),
      role: 'viewer',
    })
    const unknown = await tm.owner.call('POST', MEMBERS, {
      email: `nobody-${suffix()}@example.com`,
      role: 'viewer',
    })
    t.equal(known.status, 201, 'invited like anyone else')
    const shape = (r: typeof known) =>
      JSON.stringify(r.body.data, (k, v) => (typeof v === 'string' && k !== 'status' && k !== 'role' ? typeof v : v))
    t.equal(
      shape(known),
      shape(unknown),
      'the answer for an address with an account elsewhere is the one for a new address',
    )
    t.notOk(JSON.stringify(known.body).includes(other.tenantId), 'nothing about the other organization')

    // The person accepts with a password of their own: two accounts, each signed in to apart.
    const accepted = await ta.anonymous('POST', '/api/v1/auth/invitations/accept', {
      token: known.body.data.invitation.token,
      password: 'another long passphrase',
    })
    t.equal(accepted.status, 200)
    t.equal(accepted.body.data.tenant.id, tm.tenantId)
    const here = await ta.anonymous('POST', '/api/v1/auth/login', {
      email: other.owner.email,
      password: 'another long passphrase',
    })
    t.equal(here.body.data.tenant.id, tm.tenantId, 'this password opens the account here')
    const there = await ta.anonymous('POST', '/api/v1/auth/login', { email: other.owner.email, password: PASSWORD })
    t.equal(there.body.data.tenant.id, other.tenantId, 'and the old one the account there')

    // An organization that invited an address first keeps nobody from inviting it too.
    const third = await team(ta)
    t.equal((await third.owner.call('POST', MEMBERS, { email: other.owner.email, role: 'member' })).status, 201)
  },
)

t.test(
  'one password opening accounts in several organizations: sign-in asks which, and signs in to the one named',
  async (t) => {
    const ta = app
    const a = await team(ta)
    const b = await team(ta)
    const inv = await invite(b.owner.call, 'member', a.owner.email)
    t.equal(
      (await ta.anonymous('POST', '/api/v1/auth/invitations/accept', { token: inv.token, password: PASSWORD })).status,
      200,
    )
    const ambiguous = await ta.anonymous('POST', '/api/v1/auth/login', { email: a.owner.email, password: PASSWORD })
    t.equal(ambiguous.status, 400)
    t.match(ambiguous.body.error, {
      code: 'VALIDATION_ERROR',
      details: { reason: 'tenant_required', errors: [{ field: 'body.tenantId' }] },
    })
    t.same(
      ambiguous.body.error.details.tenants.map((x: { id: string }) => x.id).sort(),
      [a.tenantId, b.tenantId].sort(),
    )
    const chosen = await ta.anonymous('POST', '/api/v1/auth/login', {
      email: a.owner.email,
      password: PASSWORD,
      tenantId: b.tenantId,
    })
    t.equal(chosen.status, 200)
    t.match(chosen.body.data, { tenant: { id: b.tenantId }, user: { id: inv.userId, role: 'member' } })
    const wrong = await ta.anonymous('POST', '/api/v1/auth/login', {
      email: a.owner.email,
      password: 'not the password',
      tenantId: b.tenantId,
    })
    t.equal(wrong.status, 401)
  },
)

t.test('members are listed a page at a time', async (t) => {
  const ta = app
  const tm = await team(ta)
  const ids = [tm.owner.userId]
  for (const role of ['admin', 'member', 'viewer', 'member'] as const)
    ids.push((await invite(tm.owner.call, role)).userId)
  const seen: string[] = []
  let cursor: string | null = null
  do {
    const r: Awaited<ReturnType<typeof tm.key>> = await tm.key(
      'GET',
      `/api/v1/tenant/team/members?limit=2${cursor ? `&cursor=${cursor}` : ''}`,
    )
    t.equal(r.status, 200)
    t.ok(r.body.data.length <= 2)
    seen.push(...r.body.data.map((m: { id: string }) => m.id))
    cursor = r.body.meta.nextCursor
  } while (cursor)
  t.same(seen, ids)
  for (const q of ['limit=0', 'limit=201', 'cursor=bm90LWEtY3Vyc29y', 'sort=email']) {
    const r = await tm.key('GET', `/api/v1/tenant/team/members?${q}`)
    t.equal(r.body.error.code, 'VALIDATION_ERROR', q)
  }
  const one = await tm.key('GET', `/api/v1/tenant/team/members/${ids[2]}`)
  t.match(one.body.data, { id: ids[2], role: 'member', status: 'invited' })
})

t.test("a token of tenant A does not reach tenant B's members", async (t) => {
  const ta = app
  const a = await team(ta)
  const b = await team(ta)
  const theirs = await join(ta, b.owner.call, 'member')
  const invited = await invite(b.owner.call, 'viewer')
  for (const [method, url, body] of [
    ['GET', `/api/v1/tenant/team/members/${theirs.userId}`, undefined],
    ['PATCH', `/api/v1/tenant/team/members/${theirs.userId}`, { role: 'viewer' }],
    ['PATCH', `/api/v1/tenant/team/members/${theirs.userId}`, { status: 'disabled' }],
    ['DELETE', `/api/v1/tenant/team/members/${theirs.userId}`, undefined],
    ['POST', `/api/v1/tenant/team/members/${invited.userId}/invitation`, undefined],
    ['DELETE', `/api/v1/tenant/team/members/${b.owner.userId}`, undefined],
  ] as const) {
    for (const [who, call] of [
      ['access token', a.owner.call],
      ['API key', a.key],
    ] as const) {
      const r = await call(method, url, body)
      t.equal(r.status, 404, `${who}: ${method} ${url}`)
      t.equal(r.body.error.code, 'RESOURCE_NOT_FOUND')
    }
  }
  const list = await a.owner.call('GET', MEMBERS)
  t.same(
    list.body.data.map((m: { id: string }) => m.id),
    [a.owner.userId],
  )
  t.equal((await theirs.call('GET', '/api/v1/auth/me')).status, 200, "B's member is untouched")
  const still = await b.key('GET', `/api/v1/tenant/team/members/${theirs.userId}`)
  t.match(still.body.data, { role: 'member', status: 'active' })
  const header = await a.owner.call('GET', MEMBERS, undefined, { 'x-tenant-id': b.tenantId })
  t.equal(header.body.error.code, 'VALIDATION_ERROR', 'a tenant header is refused, never followed')
})

t.test('removing an invited member withdraws the invitation', async (t) => {
  const ta = app
  const tm = await team(ta)
  const inv = await invite(tm.owner.call, 'member')
  const removed = await tm.owner.call('DELETE', `/api/v1/tenant/team/members/${inv.userId}`)
  t.equal(removed.status, 200)
  t.same(removed.body.data, { id: inv.userId, removed: true })
  t.equal(
    (await ta.anonymous('POST', ACCEPT, { token: inv.token, password: PASSWORD })).body.error.code,
    'UNAUTHORIZED',
  )
  const left = await ta.platform.db.system((sql) => sql`select 1 from invitations where user_id = ${inv.userId}`)
  t.equal(left.length, 0)
  const again = await tm.owner.call('POST', MEMBERS, { email: inv.email, role: 'viewer' })
  t.equal(again.status, 201, 'the address is free again')
})

t.test('members and viewers can read the team but not manage anyone', async (t) => {
  const ta = app
  const tm = await team(ta)
  const m = await join(ta, tm.owner.call, 'member')
  const v = await join(ta, tm.owner.call, 'viewer')
  for (const [name, who] of [
    ['member', m],
    ['viewer', v],
  ] as const) {
    const other = who === m ? v : m
    t.equal((await who.call('GET', MEMBERS)).status, 200, `${name} lists the team`)
    for (const [method, url, body] of [
      ['POST', MEMBERS, { email: `x-${name}@example.com`, role: 'viewer' }],
      ['PATCH', member(other.userId), { role: 'viewer' }],
      ['PATCH', member(other.userId), { status: 'disabled' }],
      ['DELETE', member(other.userId), undefined],
      ['POST', `${member(other.userId)}/invitation`, undefined],
      ['PATCH', member(who.userId), { role: 'admin' }],
    ] as const) {
      const r = await who.call(method, url, body)
      refused(t, r, 'FORBIDDEN', null, `${name}: ${method} ${url}`)
      t.equal(r.body.error.details.required, 'team:manage')
    }
  }
  const noTeam = await ta.platform.db.system((sql) =>
    createKey(sql, apiKeyTags(ta.platform.secrets), {
      tenantId: tm.tenantId,
      type: 'sdk',
      permissions: ['projects:read'],
    }),
  )
  const r = await caller(ta.app, noTeam.key)('GET', MEMBERS)
  refused(t, r, 'FORBIDDEN', null, 'a key without team:read')
  t.equal(r.body.error.details.required, 'team:read')
})

t.test('only an owner may grant, take away or act on the owner role', async (t) => {
  const ta = app
  const tm = await team(ta)
  const admin = await join(ta, tm.owner.call, 'admin')
  const m = await join(ta, tm.owner.call, 'member')
  await refusedAll(t, 'FORBIDDEN', 'owner_only', [
    ['admin invites an owner', admin.call, 'POST', MEMBERS, { email: 'boss@example.com', role: 'owner' }],
    ['admin promotes to owner', admin.call, 'PATCH', member(m.userId), { role: 'owner' }],
    ['admin demotes the owner', admin.call, 'PATCH', member(tm.owner.userId), { role: 'admin' }],
    ['admin disables the owner', admin.call, 'PATCH', member(tm.owner.userId), { status: 'disabled' }],
    ['admin removes the owner', admin.call, 'DELETE', member(tm.owner.userId)],
    ['even a change to nothing', admin.call, 'PATCH', member(tm.owner.userId), { role: 'owner' }],
  ])
  t.equal((await tm.owner.call('GET', '/api/v1/auth/me')).status, 200, 'the owner is untouched')

  const promoted = await tm.owner.call('PATCH', member(m.userId), { role: 'owner' })
  t.equal(promoted.status, 200)
  t.equal(promoted.body.data.role, 'owner')
  const invited = await tm.owner.call('POST', MEMBERS, {
    email: `co-${Date.now()}@example.com`,
    role: 'owner',
  })
  t.equal(invited.status, 201, 'an owner invites an owner')
  const second = await signIn(ta, m.email)
  const demoted = await second.call('PATCH', member(tm.owner.userId), { role: 'admin' })
  t.equal(demoted.status, 200, 'an owner demotes another owner')
  const events = (await auditOf(ta, tm.tenantId)).filter((e) => e.action === 'team.member_role_changed')
  t.match(
    events.map((e) => e.details),
    [
      { from: 'member', to: 'owner' },
      { from: 'owner', to: 'admin' },
    ],
  )
})

t.test('admins manage admins, members and viewers', async (t) => {
  const ta = app
  const tm = await team(ta)
  const admin = await join(ta, tm.owner.call, 'admin')
  const other = await join(ta, admin.call, 'admin')
  const m = await join(ta, admin.call, 'member')
  t.equal((await admin.call('PATCH', member(m.userId), { role: 'viewer' })).body.data.role, 'viewer')
  t.equal((await admin.call('PATCH', member(m.userId), { role: 'admin' })).body.data.role, 'admin')
  t.equal((await admin.call('PATCH', member(other.userId), { status: 'disabled' })).body.data.status, 'disabled')
  t.equal((await admin.call('PATCH', member(other.userId), { status: 'active' })).body.data.status, 'active')
  t.equal((await admin.call('DELETE', member(other.userId))).status, 200)
  const gone = await admin.call('GET', member(other.userId))
  t.equal(gone.body.error.code, 'RESOURCE_NOT_FOUND')
  const twice = await admin.call('DELETE', member(other.userId))
  t.equal(twice.body.error.code, 'RESOURCE_NOT_FOUND')
  t.same(
    (await auditOf(ta, tm.tenantId))
      .filter((e) => e.action.startsWith('team.') && e.actor_id === admin.userId)
      .map((e) => e.action),
    [
      'team.member_invited',
      'team.member_invited',
      'team.member_role_changed',
      'team.member_role_changed',
      'team.member_disabled',
      'team.member_enabled',
      'team.member_removed',
    ],
  )
})

t.test(
  'an API key with * acts like an admin, never like an owner; a narrower key only on the roles it covers',
  async (t) => {
    const ta = app
    const tm = await team(ta)
    const full = await ta.platform.db.system((sql) =>
      createKey(sql, apiKeyTags(ta.platform.secrets), { tenantId: tm.tenantId, type: 'ci', permissions: ['*'] }),
    )
    const key = caller(ta.app, full.key)
    const admin = await join(ta, key, 'admin')
    t.equal((await key('PATCH', member(admin.userId), { role: 'member' })).status, 200, 'a * key manages admins')
    await refusedAll(t, 'FORBIDDEN', 'owner_only', [
      ['* key invites an owner', key, 'POST', MEMBERS, { email: 'o@example.com', role: 'owner' }],
      ['* key promotes to owner', key, 'PATCH', member(admin.userId), { role: 'owner' }],
      ['* key demotes the owner', key, 'PATCH', member(tm.owner.userId), { role: 'admin' }],
      ['* key removes the owner', key, 'DELETE', member(tm.owner.userId)],
      ["the owner's own * key is no owner either", tm.key, 'PATCH', member(tm.owner.userId), { status: 'disabled' }],
    ])

    const narrow = await ta.platform.db.system((sql) =>
      createKey(sql, apiKeyTags(ta.platform.secrets), {
        tenantId: tm.tenantId,
        type: 'ci',
        permissions: ['team:manage', 'team:read', 'projects:read', 'agents:read', 'chat:read', 'settings:read'],
      }),
    )
    const hr = caller(ta.app, narrow.key)
    const viewer = await join(ta, hr, 'viewer')
    t.equal(viewer.userId.length, 36, 'it invites viewers, whose permissions it holds')
    await refusedAll(t, 'FORBIDDEN', 'role_not_covered', [
      ['narrow key invites a member', hr, 'POST', MEMBERS, { email: 'm@example.com', role: 'member' }],
      ['narrow key promotes a viewer', hr, 'PATCH', member(viewer.userId), { role: 'member' }],
      ['narrow key disables a member', hr, 'PATCH', member(admin.userId), { status: 'disabled' }],
    ])
    t.equal((await hr('PATCH', member(viewer.userId), { status: 'disabled' })).status, 200, 'it disables a viewer')
    const events = await auditOf(ta, tm.tenantId)
    t.match(
      events.filter((e) => e.action === 'team.member_disabled'),
      [{ actor_type: 'api_key', actor_id: narrow.id, target_id: viewer.userId }],
    )
  },
)

t.test('nobody changes themselves, except an owner stepping down while another owner remains', async (t) => {
  const ta = app
  const tm = await team(ta)
  const admin = await join(ta, tm.owner.call, 'admin')
  await refusedAll(t, 'FORBIDDEN', 'self', [
    ['admin demotes themselves', admin.call, 'PATCH', member(admin.userId), { role: 'member' }],
    ['admin disables themselves', admin.call, 'PATCH', member(admin.userId), { status: 'disabled' }],
    ['admin removes themselves', admin.call, 'DELETE', member(admin.userId)],
  ])
  const adminKey = await ta.platform.db.system((sql) =>
    createKey(sql, apiKeyTags(ta.platform.secrets), {
      tenantId: tm.tenantId,
      userId: admin.userId,
      type: 'sdk',
      permissions: ['*'],
    }),
  )
  refused(
    t,
    await caller(ta.app, adminKey.key)('DELETE', member(admin.userId)),
    'FORBIDDEN',
    'self',
    "admin's key removes its own user",
  )

  await refusedAll(t, 'VALIDATION_ERROR', 'last_owner', [
    ['the only owner steps down', tm.owner.call, 'PATCH', member(tm.owner.userId), { role: 'admin' }],
    ['the only owner leaves', tm.owner.call, 'DELETE', member(tm.owner.userId)],
  ])
  refused(
    t,
    await tm.owner.call('PATCH', member(tm.owner.userId), { status: 'disabled' }),
    'FORBIDDEN',
    'self',
    'an owner disables themselves',
  )

  const co = await join(ta, tm.owner.call, 'owner')
  refused(
    t,
    await tm.owner.call('PATCH', member(tm.owner.userId), { status: 'disabled' }),
    'FORBIDDEN',
    'self',
    'not even with another owner',
  )
  const down = await tm.owner.call('PATCH', member(tm.owner.userId), { role: 'admin' })
  t.equal(down.status, 200, 'an owner steps down while another owner remains')
  t.equal(down.body.data.role, 'admin')
  const after = await tm.owner.call('GET', '/api/v1/auth/me')
  t.equal(after.body.error.code, 'UNAUTHORIZED', 'their sessions ended with the change')
  const again = await signIn(ta, tm.owner.email)
  refused(
    t,
    await again.call('PATCH', member(co.userId), { role: 'admin' }),
    'FORBIDDEN',
    'owner_only',
    'now an admin, they cannot touch the owner',
  )
  refused(
    t,
    await co.call('DELETE', member(co.userId)),
    'VALIDATION_ERROR',
    'last_owner',
    'the remaining owner cannot leave',
  )

  await co.call('PATCH', member(tm.owner.userId), { role: 'owner' })
  const back = await signIn(ta, tm.owner.email)
  t.equal(
    (await back.call('DELETE', member(tm.owner.userId))).status,
    200,
    'an owner leaves while another owner remains',
  )
  t.equal(
    (await ta.anonymous('POST', '/api/v1/auth/login', { email: tm.owner.email, password: PASSWORD })).body.error.code,
    'UNAUTHORIZED',
    'the account is gone',
  )
})

t.test('the last active owner cannot be demoted, disabled or removed, even by two owners at once', async (t) => {
  const ta = app
  const tm = await team(ta)
  const co = await join(ta, tm.owner.call, 'owner')
  t.equal((await tm.owner.call('PATCH', member(co.userId), { status: 'disabled' })).status, 200)
  await refusedAll(t, 'VALIDATION_ERROR', 'last_owner', [
    ['a disabled owner does not count', tm.owner.call, 'PATCH', member(tm.owner.userId), { role: 'viewer' }],
    ['nor for leaving', tm.owner.call, 'DELETE', member(tm.owner.userId)],
  ])
  t.equal(
    (await tm.owner.call('PATCH', member(co.userId), { status: 'active' })).status,
    200,
    'an owner enables an owner',
  )

  const second = await signIn(ta, co.email)
  // Both credentials are in memory, so both requests get past authentication before either
  // change commits: the database alone decides between them.
  for (const who of [tm.owner, second]) t.equal((await who.call('GET', '/api/v1/auth/me')).status, 200)
  const results = await Promise.all([
    tm.owner.call('PATCH', member(co.userId), { role: 'admin' }),
    second.call('PATCH', member(tm.owner.userId), { role: 'admin' }),
  ])
  t.same(results.map((r) => r.status).sort(), [200, 400], 'one demotion wins; the other would leave no owner')
  t.equal(results.find((r) => r.status === 400)!.body.error.details.reason, 'last_owner')
  const owners = await ta.platform.db.system(
    (sql) => sql`select id from users where tenant_id = ${tm.tenantId} and role = 'owner' and status = 'active'`,
  )
  t.equal(owners.length, 1, 'exactly one owner remains')
})

t.test('disabling a member stops their access token at once, on every replica', async (t) => {
  const ta = app
  const replica = await appOn(t, ta.platform)
  const tm = await team(ta)
  const m = await join(ta, tm.owner.call, 'member')
  t.equal(
    (await replica.anonymous('GET', '/api/v1/projects', undefined, bearer(m.access))).status,
    200,
    'the other replica has the token cached',
  )
  const disabled = await tm.owner.call('PATCH', member(m.userId), { status: 'disabled' })
  t.equal(disabled.status, 200)
  t.match(disabled.body.data, { id: m.userId, status: 'disabled', role: 'member' })

  const here = await m.call('GET', '/api/v1/projects')
  t.equal(here.status, 401, 'refused right away on this replica')
  t.equal(here.body.error.code, 'UNAUTHORIZED')
  const there = await untilRefused(() => replica.anonymous('GET', '/api/v1/projects', undefined, bearer(m.access)))
  t.equal(there.body.error.code, 'UNAUTHORIZED', 'and on the other')
  t.equal(
    (await ta.anonymous('POST', '/api/v1/auth/exchange', { token: m.session })).body.error.code,
    'UNAUTHORIZED',
    'the session is over',
  )
  const login = await ta.anonymous('POST', '/api/v1/auth/login', { email: m.email, password: PASSWORD })
  t.equal(login.status, 403)
  t.equal(login.body.error.details.reason, 'account_disabled')

  t.equal((await tm.owner.call('PATCH', member(m.userId), { status: 'active' })).status, 200)
  t.ok(await signIn(ta, m.email), 'enabled again, they sign in')
  const events = (await auditOf(ta, tm.tenantId)).filter((e) => /disabled|enabled/.test(e.action))
  t.match(events, [
    { action: 'team.member_disabled', target_id: m.userId, details: { sessionsRevoked: 1 } },
    { action: 'team.member_enabled', target_id: m.userId },
  ])
})

t.test("a role change ends the member's sessions; signed in again, they have the new role's permissions", async (t) => {
  const ta = app
  const tm = await team(ta)
  const m = await join(ta, tm.owner.call, 'member')
  t.equal((await m.call('POST', '/api/v1/projects', { name: 'as a member' })).status, 201)
  const changed = await tm.owner.call('PATCH', member(m.userId), { role: 'viewer' })
  t.equal(changed.body.data.role, 'viewer')
  t.equal(
    (await m.call('POST', '/api/v1/projects', { name: 'stale token' })).body.error.code,
    'UNAUTHORIZED',
    'the old token stops at once',
  )
  const again = await signIn(ta, m.email)
  const write = await again.call('POST', '/api/v1/projects', { name: 'as a viewer' })
  t.equal(write.status, 403)
  t.equal(write.body.error.code, 'FORBIDDEN')
  t.equal(write.body.error.details.required, 'projects:write')
  t.equal((await again.call('GET', '/api/v1/projects')).status, 200, 'reading is still theirs')
  const same = await tm.owner.call('PATCH', member(m.userId), { role: 'viewer' })
  t.equal(same.status, 200)
  t.equal((await again.call('GET', '/api/v1/projects')).status, 200, 'a change to nothing ends no session')
  const events = (await auditOf(ta, tm.tenantId)).filter((e) => e.action === 'team.member_role_changed')
  t.match(events, [
    {
      actor_id: tm.owner.userId,
      target_id: m.userId,
      details: { from: 'member', to: 'viewer', sessionsRevoked: 1, apiKeysRevoked: [] },
    },
  ])
})

t.test('a demotion revokes the API keys holding more than the new role; disabling revokes them all', async (t) => {
  const ta = app
  const tm = await team(ta)
  const admin = await join(ta, tm.owner.call, 'admin')
  const keyOf = (permissions: string[]) =>
    ta.platform.db.system((sql) =>
      createKey(sql, apiKeyTags(ta.platform.secrets), {
        tenantId: tm.tenantId,
        userId: admin.userId,
        type: 'sdk',
        permissions,
      }),
    )
  const [all, write, read] = await Promise.all([
    keyOf(['*']),
    keyOf(['projects:write', 'projects:read']),
    keyOf(['projects:read']),
  ])
  const use = (k: { key: string }): Caller => caller(ta.app, k.key)
  for (const k of [all, write, read])
    t.equal((await use(k)('GET', '/api/v1/projects')).status, 200, 'every key works before')

  await tm.owner.call('PATCH', member(admin.userId), { role: 'viewer' })
  t.equal((await use(all)('GET', '/api/v1/tenant')).body.error.code, 'UNAUTHORIZED', 'the * key is revoked')
  t.equal((await use(write)('GET', '/api/v1/projects')).body.error.code, 'UNAUTHORIZED', 'the write key is revoked')
  t.equal(
    (await use(read)('GET', '/api/v1/projects')).status,
    200,
    "the read-only key is within a viewer's permissions",
  )
  const changed = (await auditOf(ta, tm.tenantId)).find((e) => e.action === 'team.member_role_changed')
  t.same([...(changed!.details.apiKeysRevoked as string[])].sort(), [all.id, write.id].sort())

  await tm.owner.call('PATCH', member(admin.userId), { status: 'disabled' })
  t.equal(
    (await use(read)('GET', '/api/v1/projects')).body.error.code,
    'UNAUTHORIZED',
    'disabled: no key of theirs works',
  )
})

t.test('removing a member revokes their API keys and sessions and deletes the account', async (t) => {
  const ta = app
  const replica = await appOn(t, ta.platform)
  const tm = await team(ta)
  const m = await join(ta, tm.owner.call, 'member')
  const k = await ta.platform.db.system((sql) =>
    createKey(sql, apiKeyTags(ta.platform.secrets), {
      tenantId: tm.tenantId,
      userId: m.userId,
      type: 'sdk',
      permissions: ['projects:read'],
    }),
  )
  t.equal(
    (await replica.anonymous('GET', '/api/v1/projects', undefined, bearer(k.key))).status,
    200,
    'cached on the other replica',
  )

  const removed = await tm.owner.call('DELETE', member(m.userId))
  t.equal(removed.status, 200)
  t.equal((await m.call('GET', '/api/v1/projects')).body.error.code, 'UNAUTHORIZED', 'their access token stops')
  t.equal((await caller(ta.app, k.key)('GET', '/api/v1/projects')).body.error.code, 'UNAUTHORIZED', 'their key stops')
  const there = await untilRefused(() => replica.anonymous('GET', '/api/v1/projects', undefined, bearer(k.key)))
  t.equal(there.body.error.code, 'UNAUTHORIZED', 'on every replica')
  t.equal(
    (await ta.anonymous('POST', '/api/v1/auth/login', { email: m.email, password: PASSWORD })).body.error.code,
    'UNAUTHORIZED',
  )
  const [key] = await ta.platform.db.system((sql) => sql`select user_id, revoked_at from api_keys where id = ${k.id}`)
  t.equal(key!.user_id, null)
  t.ok(key!.revoked_at, 'the key stays revoked after its user is gone')
  const users = await ta.platform.db.system((sql) => sql`select 1 from users where id = ${m.userId}`)
  t.equal(users.length, 0)
  const events = (await auditOf(ta, tm.tenantId)).filter((e) => e.action === 'team.member_removed')
  t.match(events, [
    { target_id: m.userId, details: { email: m.email, role: 'member', apiKeysRevoked: [k.id], sessionsRevoked: 1 } },
  ])
})

t.test("an invited member's status cannot change until they join; their role can", async (t) => {
  const ta = app
  const tm = await team(ta)
  const inv = await invite(tm.owner.call, 'member')
  await refusedAll(t, 'VALIDATION_ERROR', 'invited', [
    ['activate without accepting', tm.owner.call, 'PATCH', member(inv.userId), { status: 'active' }],
    ['disable an invitation', tm.owner.call, 'PATCH', member(inv.userId), { status: 'disabled' }],
  ])
  const r = await tm.owner.call('PATCH', member(inv.userId), { role: 'admin' })
  t.match(r.body.data, { role: 'admin', status: 'invited' })
  const accepted = await ta.anonymous('POST', '/api/v1/auth/invitations/accept', {
    token: inv.token,
    password: PASSWORD,
  })
  t.equal(accepted.body.data.user.role, 'admin', 'they join with the role they have now')
})

t.test('malformed member changes are VALIDATION_ERROR; unknown members are RESOURCE_NOT_FOUND', async (t) => {
  const ta = app
  const tm = await team(ta)
  const m = await join(ta, tm.owner.call, 'member')
  for (const [name, url, body] of [
    ['empty change', member(m.userId), {}],
    ['unknown role', member(m.userId), { role: 'root' }],
    ['status invited', member(m.userId), { status: 'invited' }],
    ['unknown field', member(m.userId), { role: 'viewer', email: 'new@example.com' }],
    ['not a uuid', member('42'), { role: 'viewer' }],
  ] as const) {
    refused(t, await tm.owner.call('PATCH', url, body), 'VALIDATION_ERROR', null, name)
  }
  const unknown = '01900000-0000-7000-8000-000000000000'
  for (const [method, body] of [
    ['GET', undefined],
    ['PATCH', { role: 'viewer' }],
    ['DELETE', undefined],
  ] as const) {
    const r = await tm.owner.call(method, member(unknown), body)
    t.equal(r.status, 404, method)
    t.equal(r.body.error.code, 'RESOURCE_NOT_FOUND', method)
  }
})

t.test('the OpenAPI document describes the team routes with their schemas and errors', async (t) => {
  const doc = (await app.anonymous('GET', '/openapi.json')).body
  const paths = doc.paths as Record<
    string,
    Record<string, { responses: Record<string, unknown>; security?: unknown[] }>
  >
  const expected: [string, string, string[]][] = [
    ['get', MEMBERS, ['200', '400', '401', '403', '429']],
    ['post', MEMBERS, ['201', '400', '401', '403', '429']],
    ['get', '/api/v1/tenant/team/members/{userId}', ['200', '403', '404']],
    ['patch', '/api/v1/tenant/team/members/{userId}', ['200', '400', '403', '404']],
    ['delete', '/api/v1/tenant/team/members/{userId}', ['200', '403', '404']],
    ['post', '/api/v1/tenant/team/members/{userId}/invitation', ['201', '403', '404']],
    ['post', '/api/v1/auth/invitations/accept', ['200', '400', '401', '403']],
  ]
  for (const [method, path, codes] of expected) {
    const op = paths[path]?.[method]
    t.ok(op, `${method.toUpperCase()} ${path}`)
    for (const c of codes) t.ok(op?.responses[c], `${method.toUpperCase()} ${path} declares ${c}`)
  }
  t.same(paths['/api/v1/auth/invitations/accept']!.post!.security, [], 'accepting needs no credential')
})
