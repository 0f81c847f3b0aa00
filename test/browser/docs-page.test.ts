// The API docs (/docs, Swagger UI from the package, no outside asset) in a real browser: the page
// loads the server's OpenAPI document, a reader authorizes with an API key and makes one "try it
// out" call, which reaches the API with the key and shows the answer. axe-core checks the page.
import t from 'tap'
import { browserSession, listeningApp, NO_BROWSER } from '../helpers/browser.js'

t.setTimeout(300_000)

t.test('the docs load, and "try it out" with an API key calls the API', { skip: NO_BROWSER }, async (t) => {
  const h = await listeningApp(t)
  const { base } = h
  const b = await browserSession(t, import.meta.url)
  const tn = await h.tenant('pro')

  const page = await b.page()
  const outside: string[] = []
  page.on('request', (r) => {
    if (!r.url().startsWith(`${base}/`) && !r.url().startsWith('data:')) outside.push(r.url())
  })
  await page.goto(`${base}/docs`)
  await page.locator('.swagger-ui .info .title').waitFor()
  t.match(await page.locator('.swagger-ui .info .title').textContent(), /^Atrium API/)
  const path = '/api/v1/tenant'
  const operation = page.locator('.opblock.opblock-get', { has: page.locator(`[data-path="${path}"]`) })
  await operation.waitFor()
  t.ok((await page.locator('.opblock').count()) > 50, 'every operation is listed')
  await b.screenshot(page, '1-loaded', { viewport: true })
  await b.axe(page, 'docs, loaded')

  await page.locator('.swagger-ui .btn.authorize').first().click()
  const dialog = page.locator('.dialog-ux .modal-ux')
  await dialog.locator('input').first().fill(tn.apiKey)
  await dialog.getByRole('button', { name: 'Authorize', exact: true }).click()
  await b.screenshot(page, '2-authorized', { viewport: true })
  await b.axe(page, 'docs, authorize dialog')
  await dialog.locator('.auth-btn-wrapper').getByRole('button', { name: 'Close' }).click()

  await operation.locator('.opblock-summary').first().click()
  await operation.getByRole('button', { name: 'Try it out' }).click()
  const called = page.waitForRequest((r) => r.url() === `${base}${path}`)
  await operation.getByRole('button', { name: 'Execute' }).click()
  const request = await called
  t.equal(request.headers().authorization, `Bearer ${tn.apiKey}`, 'the call carries the key')
  const status = operation.locator('.live-responses-table .response .response-col_status').first()
  await status.waitFor()
  t.equal((await status.textContent())?.trim(), '200')
  const body = await operation.locator('.live-responses-table .response-col_description pre').first().textContent()
  t.match(JSON.parse(body ?? 'null'), { data: { id: tn.tenantId, plan: 'pro' } }, 'the answer is shown')
  await status.scrollIntoViewIfNeeded()
  await b.screenshot(page, '3-tried-out', { viewport: true })
  await b.axe(page, 'docs, a call made')
  t.same(outside, [], 'nothing loaded from another origin')
})
