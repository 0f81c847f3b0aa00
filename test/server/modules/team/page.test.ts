// The invitation page as a browser meets it: the acceptUrl an admin gets opens a page whose assets
// and API call resolve from its own address, under strict headers, and accepting there signs in.
import { readFileSync } from 'node:fs'
import t from 'tap'
import { caller, testApp } from '../../../helpers/app.js'
import { checkPage } from '../../../helpers/pages.js'
import { suffix } from '../../../helpers/platform.js'
import { MIN_PASSWORD_LENGTH } from '../../../../server/modules/tenants/service.js'

const ta = await testApp(t)

async function invitation() {
  const owner = await ta.tenant('pro')
  const email = `invitee-${suffix()}@example.com`
  const r = await owner.call('POST', '/api/v1/tenant/team/members', { email, role: 'member' })
  t.equal(r.status, 201)
  return { email, acceptUrl: new URL(r.body.data.invitation.acceptUrl as string) }
}

t.test('the acceptUrl opens a static page that keeps the token out of requests, caches and frames', async (t) => {
  const { acceptUrl } = await invitation()
  t.match(acceptUrl.hash, /^#token=ati_/, 'the token travels in the fragment, which browsers never send')
  await checkPage(t, ta.anonymous, acceptUrl, { 'accept.js': /^text\/javascript/, '../pages/atrium.css': /^text\/css/ })
})

t.test('the page script posts to the accept endpoint, and that signs the invitee in with a cookie', async (t) => {
  const { email, acceptUrl } = await invitation()
  const script = (await ta.anonymous('GET', new URL('accept.js', acceptUrl).pathname)).raw.toString()
  t.match(script, /replaceState/, 'the token leaves the address bar at once')
  t.notMatch(script, /localStorage|sessionStorage|document\.cookie/, 'nothing in script-readable storage')
  t.match(
    script,
    new RegExp(`MIN_LENGTH = ${MIN_PASSWORD_LENGTH}\\b`),
    'the page asks for the length the server requires',
  )
  const endpoint = /new URL\('([^']+)', window\.location\.href\)/.exec(script)?.[1]
  t.ok(endpoint, 'the script names its endpoint relative to the page')
  const path = new URL(endpoint!, acceptUrl).pathname
  t.equal(path, '/api/v1/auth/invitations/accept')

  const token = new URLSearchParams(acceptUrl.hash.slice(1)).get('token')!
  const accepted = await ta.anonymous('POST', path, {
    token,
    password: 'x'.repeat(MIN_PASSWORD_LENGTH),
    name: 'Ina Vitee',
  })
  t.equal(accepted.status, 200)
  t.equal(accepted.body.data.user.email, email)
  t.match(String(accepted.headers['set-cookie']), /atrium_session=.*HttpOnly/i)
  const me = await caller(ta.app)('POST', '/api/v1/auth/exchange', { token: accepted.body.data.token })
  t.equal(me.status, 200, 'the session the page got works')

  const again = await ta.anonymous('POST', path, { token, password: 'y'.repeat(MIN_PASSWORD_LENGTH) })
  t.equal(again.status, 401)
  t.equal(again.body.error.code, 'UNAUTHORIZED', 'the link works once')
  t.ok(script.includes('UNAUTHORIZED:'), 'and the page explains that answer by its code')
})

t.test('the page is not in the OpenAPI document', async (t) => {
  const doc = (await ta.anonymous('GET', '/openapi.json')).body
  t.notOk(Object.keys(doc.paths).some((p) => p.startsWith('/invitations') || p.startsWith('/pages')))
})

t.test('the page files on disk are the ones served', async (t) => {
  const served = (await ta.anonymous('GET', '/invitations/accept')).raw.toString()
  t.equal(served, readFileSync(new URL('../../../../server/modules/team/accept.html', import.meta.url), 'utf8'))
})
