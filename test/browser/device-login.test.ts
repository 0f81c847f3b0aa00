// The device login end to end in a real browser: the `atrium` CLI starts it and shows a code and an
// address; Chromium opens the approval page there, which shows the same code, refuses a wrong
// password, signs in and approves; the CLI gets its token and stores it. The same link afterwards
// says the login is done. axe-core checks the page at each step.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { browserSession, listeningApp, NO_BROWSER, pageMessage } from '../helpers/browser.js'
import { cliDeviceLogin, ROOT } from '../helpers/cli.js'
import { tempDir } from '../helpers/platform.js'
import { PASSWORD, user } from '../server/modules/cli-auth/helpers.js'

// The CLI runs as its own process, compiled by tsx first, beside Chromium: minutes on a busy machine.
t.setTimeout(600_000)

t.test('the device login in a browser', { skip: NO_BROWSER }, async (t) => {
  const h = await listeningApp(t)
  const b = await browserSession(t, import.meta.url)

  await t.test(
    'the CLI starts a login, the page shows its code, signs in and approves; the CLI gets its token',
    async (t) => {
      const u = await user(h)
      const tenantName = (
        await h.anonymous('GET', '/api/v1/tenant', undefined, { authorization: `Bearer ${u.apiKey}` })
      ).body.data.name

      const config = tempDir(t, 'atrium-cli-')
      const cli = await cliDeviceLogin(h.base, { ATRIUM_CONFIG_DIR: config })
      t.teardown(() => void cli.child.kill())

      const page = await b.page(t)
      await page.goto(cli.authUrl)
      await page.locator('#signin').waitFor()
      t.equal(await page.locator('#code').textContent(), cli.code, 'the page shows the code the terminal shows')
      const version = JSON.parse(readFileSync(join(ROOT, 'client/package.json'), 'utf8')).version
      t.equal(await page.locator('#client').textContent(), `Atrium CLI ${version}`, 'and which client asks')
      t.ok(
        await page.locator('#email').evaluate((e) => e === e.ownerDocument.activeElement),
        'the email field has focus',
      )
      await b.screenshot(page, '1-compare-code-and-sign-in')
      await b.axe(page, 'approval page, sign-in step')

      // A wrong password: the page says so and stays on the sign-in step.
      await page.getByLabel('Email').fill(u.email)
      await page.getByLabel('Password').fill('not the password at all')
      await page.getByRole('button', { name: 'Sign in' }).click()
      t.match(await pageMessage(page, 'error'), /password/)
      t.ok(await page.locator('#signin').isVisible(), 'still asking to sign in')
      t.equal(await page.getByLabel('Password').inputValue(), '', 'the password field is emptied')
      await b.screenshot(page, '2-wrong-password')
      await b.screenshot(page, '2-wrong-password-dark', { dark: true })
      await b.axe(page, 'approval page, sign-in refused')

      await page.getByLabel('Password').fill(PASSWORD)
      await page.getByRole('button', { name: 'Sign in' }).click()
      await page.locator('#approval').waitFor()
      t.equal(await page.locator('#who').textContent(), `Signed in as ${u.email} (${tenantName}).`)
      t.match(
        (await page.context().cookies()).find((c) => c.name === 'atrium_session'),
        { httpOnly: true, sameSite: 'Lax', path: '/' },
        'the session is an HttpOnly cookie',
      )
      t.notMatch(
        await page.evaluate(() => (globalThis as unknown as { document: { cookie: string } }).document.cookie),
        /atrium_session/,
        'which no script reads',
      )
      await b.screenshot(page, '3-approve')
      await b.axe(page, 'approval page, approve step')

      await page.getByRole('button', { name: 'Approve' }).click()
      t.match(await pageMessage(page, 'success'), /^Approved\./)
      await b.screenshot(page, '4-approved')
      await b.axe(page, 'approval page, approved')

      const login = await cli.done
      t.equal(login.code, 0, `the login command ends with 0${login.code ? `: ${login.stderr}` : ''}`)
      t.match(login.stdout, `as ${u.email}`)
      const stored = JSON.parse(readFileSync(join(config, 'credentials.json'), 'utf8'))
      t.match(stored, { url: h.base, kind: 'device', refreshToken: /^ats_/, user: { email: u.email } })
      const me = await fetch(`${h.base}/api/v1/auth/me`, { headers: { authorization: `Bearer ${stored.accessToken}` } })
      t.equal(me.status, 200, "the CLI's token works")
      t.match((await me.json()).data, { user: { email: u.email }, tenant: { id: u.tenantId } })

      // The same link again: the login is done, and the page says so instead of offering to approve.
      await page.goto(cli.authUrl)
      t.match(await pageMessage(page, 'error'), /already been (approved|completed)/)
      t.ok(await page.locator('#approval').isHidden(), 'nothing to approve')
      await b.screenshot(page, '5-link-used')
      await b.axe(page, 'approval page, link used')
    },
  )

  await t.test('a damaged link says so', async (t) => {
    const page = await b.page(t)
    await page.goto(`${h.base}/cli/auth/approve?loginId=x`)
    t.match(await pageMessage(page, 'error'), /incomplete or damaged/)
    t.ok(await page.locator('#signin').isHidden(), 'no form to fill')
    await b.screenshot(page, '6-damaged-link')
    await b.axe(page, 'approval page, damaged link')
  })
})
