// The whole device login as a user runs it, over a real listening server: a CLI-like client and a
// browser-like client (with a cookie jar, sending Origin like a browser's fetch) talk HTTP to it.
import { createHash, randomBytes } from 'node:crypto'
import t from 'tap'
import { testApp } from '../../../helpers/app.js'
import { freePort } from '../../../helpers/platform.js'
import { PASSWORD, user } from './helpers.js'

/** A browser's part: a cookie jar, and Origin on requests its scripts make, as fetch sends it. */
function browser(origin: string) {
  const jar = new Map<string, string>()
  return {
    jar,
    async fetch(url: string, init: { method?: string; body?: unknown; script?: boolean } = {}) {
      const headers: Record<string, string> = { 'user-agent': 'Mozilla/5.0 (test browser)' }
      if (jar.size) headers.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ')
      if (init.script) Object.assign(headers, { origin, 'sec-fetch-site': 'same-origin' })
      if (init.body !== undefined) headers['content-type'] = 'application/json'
      const res = await fetch(url, {
        method: init.method ?? 'GET',
        headers,
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
      })
      for (const c of res.headers.getSetCookie()) {
        const [pair] = c.split(';')
        const eq = pair!.indexOf('=')
        jar.set(pair!.slice(0, eq), pair!.slice(eq + 1))
      }
      return res
    },
  }
}

t.test('a CLI logs in through the browser: start, poll, sign in, approve, redeem once, use the token', async (t) => {
  const port = await freePort()
  const origin = `http://127.0.0.1:${port}`
  const ta = await testApp(t, { PUBLIC_URL: origin })
  await ta.app.listen({ host: '127.0.0.1', port })
  const u = await user(ta)

  // The CLI: a verifier it keeps to itself, its challenge and a state go to start.
  const verifier = randomBytes(32).toString('base64url')
  const state = randomBytes(32).toString('hex')
  const cli = (path: string, body?: unknown) =>
    fetch(
      `${origin}${path}`,
      body === undefined
        ? {}
        : {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'user-agent': 'atrium-cli/1.4.2' },
            body: JSON.stringify(body),
          },
    )
  const started = await cli('/cli/auth/start', {
    state,
    codeChallenge: createHash('sha256').update(verifier).digest('base64url'),
    codeChallengeMethod: 'S256',
    cliVersion: '1.4.2',
    platform: 'linux-x64',
  })
  t.equal(started.status, 201)
  const { loginId, authUrl, verificationCode, interval } = (await started.json()).data
  t.ok(authUrl.startsWith(`${origin}/cli/auth/approve?`), 'authUrl is the approval page on this server')
  t.equal(interval, 5)
  const poll = async () =>
    (await (await cli(`/cli/auth/status?loginId=${encodeURIComponent(loginId)}`)).json()).data.status
  t.equal(await poll(), 'pending')

  // The browser opens authUrl: the page, its script, then what the script asks for.
  const b = browser(origin)
  const page = await b.fetch(authUrl)
  t.equal(page.status, 200)
  t.match(page.headers.get('content-security-policy'), /default-src 'self'/)
  const html = await page.text()
  t.match(html, /Approve/)
  const scriptUrl = new URL(/<script src="([^"]+)"/.exec(html)![1]!, authUrl).toString()
  t.equal(scriptUrl, `${origin}/cli/auth/approve.js`)
  t.equal((await b.fetch(scriptUrl)).status, 200)
  const pageParams = new URL(authUrl).searchParams

  const notSignedIn = await b.fetch(`${origin}/api/v1/auth/exchange`, { method: 'POST', body: {}, script: true })
  t.equal(notSignedIn.status, 401, 'the page learns it must show the sign-in form')

  const info = await b.fetch(`${origin}/cli/auth/info?loginId=${encodeURIComponent(pageParams.get('loginId')!)}`, {
    script: true,
  })
  const shown = (await info.json()).data
  t.equal(shown.verificationCode, verificationCode, 'the browser shows the code the terminal shows')
  t.match(shown, { cliVersion: '1.4.2', platform: 'linux-x64', requesterIp: '127.0.0.1', status: 'pending' })

  const signedIn = await b.fetch(`${origin}/api/v1/auth/login`, {
    method: 'POST',
    body: { email: u.email, password: PASSWORD },
    script: true,
  })
  t.equal(signedIn.status, 200)
  t.ok(b.jar.get('atrium_session')?.startsWith('ats_'), 'the browser holds the session cookie')
  t.equal(await poll(), 'pending', 'signing in alone approves nothing')

  const approved = await b.fetch(`${origin}/cli/auth/complete`, {
    method: 'POST',
    body: { loginId: pageParams.get('loginId'), state: pageParams.get('state') },
    script: true,
  })
  t.equal(approved.status, 200)
  t.equal((await approved.json()).data.status, 'approved')

  // The CLI sees the approval and redeems the login with its verifier.
  t.equal(await poll(), 'approved')
  const redeemed = await cli('/cli/auth/token', { loginId, codeVerifier: verifier })
  t.equal(redeemed.status, 200)
  const { data } = await redeemed.json()
  t.match(data, {
    tokenType: 'Bearer',
    user: { id: u.userId, email: u.email, role: 'owner' },
    tenant: { id: u.tenantId, plan: 'pro' },
  })
  t.equal(await poll(), 'consumed')

  const me = await fetch(`${origin}/api/v1/auth/me`, { headers: { authorization: `Bearer ${data.token}` } })
  t.equal(me.status, 200)
  t.match((await me.json()).data, {
    user: { id: u.userId, email: u.email },
    tenant: { id: u.tenantId },
    credential: { type: 'access_token' },
  })
  const projects = await fetch(`${origin}/api/v1/projects`, { headers: { authorization: `Bearer ${data.token}` } })
  t.equal(projects.status, 200, 'the token works on the API like any user token')

  const again = await cli('/cli/auth/token', { loginId, codeVerifier: verifier })
  t.equal(again.status, 400)
  t.match((await again.json()).error, { code: 'VALIDATION_ERROR', details: { status: 'consumed' } })
})
