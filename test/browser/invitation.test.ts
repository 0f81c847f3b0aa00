// The invitation page in a real browser: the acceptUrl an admin gets opens the page, which takes the
// token out of the address bar at once, asks for a password twice, and accepting signs the invitee
// in with an HttpOnly cookie that the API then takes. The same link a second time is refused, and
// the page explains why. axe-core checks the page at each step.
import t from 'tap'
import { browserSession, listeningApp, NO_BROWSER, pageMessage, postFromPage } from '../helpers/browser.js'
import { suffix } from '../helpers/platform.js'

t.setTimeout(300_000)

t.test('the invitation page in a browser', { skip: NO_BROWSER }, async (t) => {
  const h = await listeningApp(t)
  const { base } = h
  const b = await browserSession(t, import.meta.url)

  await t.test('an invitee opens the link, chooses a password and is signed in; the link works once', async (t) => {
    const owner = await h.tenant('pro')
    const tenant = (await owner.call('GET', '/api/v1/tenant')).body.data
    const email = `invitee-${suffix()}@example.com`
    const invited = await owner.call('POST', '/api/v1/tenant/team/members', { email, role: 'member' })
    t.equal(invited.status, 201)
    const acceptUrl = invited.body.data.invitation.acceptUrl as string
    t.match(acceptUrl, `${base}/invitations/accept#token=`)

    const page = await b.page(t)
    const sent: string[] = []
    page.on('request', (r) => sent.push(r.url()))
    await page.goto(acceptUrl)
    await page.locator('#accept').waitFor()
    t.equal(page.url(), `${base}/invitations/accept`, 'the token left the address bar')
    t.notOk(
      sent.some((u) => u.includes('ati_')),
      'and no request carried it in its address',
    )
    t.ok(
      await page.locator('#password').evaluate((e) => e === e.ownerDocument.activeElement),
      'the password field has focus',
    )
    await b.screenshot(page, '1-choose-password')
    await b.axe(page, 'invitation page, form')

    // Two different passwords: the page says so and sends nothing.
    const before = sent.length
    await page.getByLabel('Your name (optional)').fill('Ina Vitee')
    await page.getByLabel(/^Password/).fill('a long enough password')
    await page.getByLabel('Repeat the password').fill('another long password')
    await page.getByRole('button', { name: 'Accept the invitation' }).click()
    t.equal(await pageMessage(page, 'error'), 'The two passwords differ.')
    t.equal(sent.length, before, 'nothing was sent')
    await b.screenshot(page, '2-passwords-differ')
    await b.axe(page, 'invitation page, passwords differ')

    await page.getByLabel('Repeat the password').fill('a long enough password')
    const accepted = page.waitForResponse((r) => r.url().endsWith('/api/v1/auth/invitations/accept'))
    await page.getByRole('button', { name: 'Accept the invitation' }).click()
    t.equal((await accepted).status(), 200)
    t.equal(await pageMessage(page, 'success'), `Welcome, ${email}. You have joined ${tenant.name} and are signed in.`)
    t.ok(await page.locator('#accept').isHidden(), 'the form is gone')
    await b.screenshot(page, '3-joined')
    await b.axe(page, 'invitation page, joined')

    const cookie = (await page.context().cookies()).find((c) => c.name === 'atrium_session')
    t.match(cookie, { httpOnly: true, sameSite: 'Lax' }, 'signed in with an HttpOnly cookie')
    // The page's origin exchanges the cookie for an access token, as the client library does.
    const ex = await postFromPage(page, '/api/v1/auth/exchange', {})
    t.equal(ex.status, 200)
    const me = (
      await owner.call('GET', '/api/v1/auth/me', undefined, {
        authorization: `Bearer ${ex.json.data.accessToken}`,
      })
    ).body.data
    t.match(me, { user: { email, name: 'Ina Vitee' }, tenant: { id: owner.tenantId } }, 'the cookie is a session')

    // The same link again, in another browser: refused, and the page says why.
    const other = await b.page(t)
    await other.goto(acceptUrl)
    await other.getByLabel(/^Password/).fill('yet another password')
    await other.getByLabel('Repeat the password').fill('yet another password')
    await other.getByRole('button', { name: 'Accept the invitation' }).click()
    t.match(await pageMessage(other, 'error'), /^This invitation link is not valid any more/)
    t.notOk(await other.locator('button').isDisabled(), 'the button is usable again')
    await b.screenshot(other, '4-link-used')
    await b.axe(other, 'invitation page, link used')
  })

  await t.test('a link without its token says so', async (t) => {
    const page = await b.page(t)
    await page.goto(`${base}/invitations/accept#tok`)
    t.match(await pageMessage(page, 'error'), /incomplete or damaged/)
    t.ok(await page.locator('#accept').isHidden(), 'no form to fill')
    await b.screenshot(page, '5-damaged-link')
    await b.axe(page, 'invitation page, damaged link')
  })
})
