// The sign-in guard on steps that take a credential from anonymous callers (here a session token at
// exchange): made-up credentials are refused from memory and count against their address; an
// address past its limit is answered 429 for its failures, and a real credential from it still works.
import t from 'tap'
import { testApp } from '../../helpers/app.js'
import { countLookups, suffix } from '../../helpers/platform.js'
import { randomBase62 } from '../../../common/ids.js'
import { createTenant } from '../../../server/modules/tenants/service.js'

const PASSWORD = 'correct horse battery'

t.test(
  'made-up session tokens cost no lookup, count against the address, and do not lock out a real one from it',
  async (t) => {
    const ta = await testApp(t, {}, { signInFailures: { max: 3 } })
    const email = `owner-${suffix()}@example.com`
    await createTenant(ta.platform, { name: `Acme ${suffix()}`, email, password: PASSWORD })
    const at = (ip: string) => async (url: string, payload: unknown) => {
      const r = await ta.app.inject({ method: 'POST', url, payload: payload as object, remoteAddress: ip })
      return { status: r.statusCode, body: r.json() }
    }
    const office = at('10.9.0.1')
    const session = (await office('/api/v1/auth/login', { email, password: PASSWORD })).body.data.token as string

    const counted = countLookups(ta.platform.db)
    const statuses: number[] = []
    for (let i = 0; i < 5; i++)
      statuses.push((await office('/api/v1/auth/exchange', { token: `ats_${randomBase62(51)}` })).status)
    t.same(statuses, [401, 401, 401, 429, 429])
    t.equal(counted.lookups, 0, 'no made-up token was looked up')

    const real = await office('/api/v1/auth/exchange', { token: session })
    t.equal(real.status, 200, 'a real session token from the same address is served')
    t.equal(counted.lookups, 1)
    t.equal(
      (await at('10.9.0.2')('/api/v1/auth/exchange', { token: `ats_${randomBase62(51)}` })).status,
      401,
      'another address has its own count',
    )
  },
)

t.test('a token of the format before tags is looked up only while its address is within the limit', async (t) => {
  const ta = await testApp(t, {}, { signInFailures: { max: 2 } })
  const call = async (ip: string) =>
    (
      await ta.app.inject({
        method: 'POST',
        url: '/api/v1/auth/exchange',
        payload: { token: `ats_${randomBase62(43)}` },
        remoteAddress: ip,
      })
    ).statusCode
  t.same([await call('10.9.1.1'), await call('10.9.1.1'), await call('10.9.1.1')], [401, 401, 429])
})

t.test('a real but dead session token costs one lookup, then is refused from memory for a while', async (t) => {
  const ta = await testApp(t)
  const email = `owner-${suffix()}@example.com`
  await createTenant(ta.platform, { name: `Acme ${suffix()}`, email, password: PASSWORD })
  const call = async (url: string, payload: unknown) => {
    const r = await ta.app.inject({ method: 'POST', url, payload: payload as object, remoteAddress: '10.9.2.1' })
    return { status: r.statusCode, body: r.json() }
  }
  const session = (await call('/api/v1/auth/login', { email, password: PASSWORD })).body.data.token as string
  t.equal((await call('/api/v1/auth/logout', { token: session })).status, 200)
  const counted = countLookups(ta.platform.db)
  for (let i = 0; i < 5; i++) t.equal((await call('/api/v1/auth/exchange', { token: session })).status, 401)
  t.equal(counted.lookups, 1, 'one lookup found it dead')
})

t.test("logging out by session token is not held back by other clients using up the address's API limit", async (t) => {
  const ta = await testApp(t, { RATE_LIMIT_MAX: '2' })
  const email = `owner-${suffix()}@example.com`
  await createTenant(ta.platform, { name: `Acme ${suffix()}`, email, password: PASSWORD })
  const call = (method: 'GET' | 'POST', url: string, payload?: unknown) =>
    ta.app.inject({ method, url, remoteAddress: '10.9.3.1', ...(payload ? { payload: payload as object } : {}) })
  const session = (await call('POST', '/api/v1/auth/login', { email, password: PASSWORD })).json().data.token as string
  for (let i = 0; i < 3; i++) await call('GET', '/api/v1/projects')
  t.equal((await call('GET', '/api/v1/projects')).statusCode, 429, 'the address has used up its API limit')
  t.equal((await call('POST', '/api/v1/auth/logout', { token: session })).statusCode, 200)
})
