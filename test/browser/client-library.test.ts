// @atrium/client in a real browser, as its README promises: bundled for browsers (esbuild) and
// loaded into a page on the API's own origin, it signs in by the HttpOnly cookie, exchanges it for
// access tokens held in memory, calls the API, renews its token at the 60 s mark (an injected
// clock), clears its tokens on a 401, and follows a chat reply whose connection is cut mid-reply,
// resuming with Last-Event-ID so that every delta arrives once. The API server serves the page
// itself, behind a proxy that can cut connections, so that everything is one origin.
import { build } from 'esbuild'
import type { Page } from 'playwright-core'
import t, { type Test } from 'tap'
import { AtriumClient } from '../../client/src/index.js'
import { testApp, type TestApp } from '../helpers/app.js'
import { browserSession, NO_BROWSER, postFromPage, type BrowserSession } from '../helpers/browser.js'
import { ROOT } from '../helpers/cli.js'
import { fakeLlm } from '../helpers/fake-llm.js'
import { faultProxy, type FaultProxy } from '../helpers/fault-proxy.js'
import { freePort } from '../helpers/platform.js'
import { PASSWORD, user } from '../server/modules/cli-auth/helpers.js'
import type { Harness } from './client-page.js'

t.setTimeout(300_000)

const PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <title>@atrium/client in a browser</title>
    <script src="client-page.js" defer></script>
  </head>
  <body>
    <main>
      <h1>@atrium/client in a browser</h1>
      <ol id="log"></ol>
      <h2>Reply</h2>
      <p id="reply"></p>
    </main>
  </body>
</html>
`

/** Calls the page's harness (test/browser/client-page.ts) and gives its answer. */
function call<K extends keyof Harness>(
  page: Page,
  name: K,
  ...args: Parameters<Harness[K]>
): Promise<Awaited<ReturnType<Harness[K]>>> {
  return page.evaluate(
    ({ name, args }) =>
      (globalThis as unknown as { harness: Record<string, (...a: unknown[]) => unknown> }).harness[name]!(
        ...args,
      ) as never,
    { name, args: args as unknown[] },
  )
}

interface Setup {
  base: string
  proxy: FaultProxy
  h: TestApp
  b: BrowserSession
}

async function setup(t: Test): Promise<Setup> {
  const bundle = await build({
    entryPoints: [`${ROOT}test/browser/client-page.ts`],
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target: 'es2022',
    write: false,
    logLevel: 'error',
  })
  const script = bundle.outputFiles[0]!.text
  const port = await freePort()
  // The page's origin is the proxy's, and PUBLIC_URL names it, as it names a site's address.
  const proxy = await faultProxy(t, { host: '127.0.0.1', port })
  const base = `http://127.0.0.1:${proxy.port}`
  const h = await testApp(
    t,
    { PUBLIC_URL: base, OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' },
    {
      jobs: { pollMs: 50 },
      routes: (app) => {
        const open = { config: { auth: false, rateLimit: false }, schema: { hide: true } }
        app.get('/test-client/', open, async (_req, reply) => reply.type('text/html; charset=utf-8').send(PAGE))
        app.get('/test-client/client-page.js', open, async (_req, reply) =>
          reply.type('text/javascript; charset=utf-8').send(script),
        )
      },
    },
  )
  await h.app.listen({ host: '127.0.0.1', port })
  return { base, proxy, h, b: await browserSession(t, import.meta.url) }
}

async function openPage(t: Test, s: Setup): Promise<Page> {
  const page = await s.b.page(t)
  await page.goto(`${s.base}/test-client/`)
  await page.waitForFunction(() => 'harness' in globalThis)
  return page
}

t.test('@atrium/client in a page', { skip: NO_BROWSER }, async (t) => {
  const s = await setup(t)
  const llm = await fakeLlm(t)

  await t.test('signed in by cookie, it exchanges, calls, and renews its token at the 60 s mark', async (t) => {
    const u = await user(s.h)
    const page = await openPage(t, s)
    const exchanges: { body: string | null; expiresIn: Promise<number> }[] = []
    page.on('request', (r) => {
      if (r.url() !== `${s.base}/api/v1/auth/exchange`) return
      exchanges.push({
        body: r.postData(),
        expiresIn: r.response().then(async (res) => (await res!.json()).data.expiresIn as number),
      })
    })

    t.equal(await call(page, 'signIn', u.email, PASSWORD), u.email)
    t.notOk(await call(page, 'cookieReadable'), 'no script reads the session cookie')
    const T0 = Date.parse('2026-11-27T12:00:00Z')
    await call(page, 'setClock', T0)
    await call(page, 'newClient')
    t.equal(await call(page, 'held'), null, 'no token before the first call')

    t.equal(await call(page, 'concurrent'), 3)
    t.equal(exchanges.length, 1, 'three calls without a token: one exchange')
    t.equal(exchanges[0]!.body, '{}', 'which sends no token: the cookie is the session')
    const me = await call(page, 'me')
    t.same(me, { email: u.email, tenantId: u.tenantId })
    t.equal(exchanges.length, 1, 'a held token is reused')

    const held = (await call(page, 'held'))!
    const expiresIn = await exchanges[0]!.expiresIn
    t.ok(expiresIn > 60, `a lifetime of ${expiresIn} s`)
    t.equal(held.staleAt, T0 + expiresIn * 1000 - 60_000, 'counted expired 60 s before its expiresIn')
    await call(page, 'setClock', held.staleAt - 1)
    t.same(await call(page, 'me'), me)
    t.equal(exchanges.length, 1, 'one ms before the 60 s mark: the same token')
    t.equal((await call(page, 'held'))!.token, held.token)
    await call(page, 'setClock', held.staleAt)
    t.same(await call(page, 'me'), me)
    t.equal(exchanges.length, 2, 'at the 60 s mark: exchanged again')
    t.not((await call(page, 'held'))!.token, held.token, 'for a new token')
    await s.b.screenshot(page, '1-exchange-and-renewal')
  })

  await t.test('a 401 clears the tokens and tells the application', async (t) => {
    const u = await user(s.h)
    const page = await openPage(t, s)
    await call(page, 'signIn', u.email, PASSWORD)
    await call(page, 'newClient')
    t.same(await call(page, 'me'), { email: u.email, tenantId: u.tenantId })
    t.ok(await call(page, 'held'))

    // Another tab of the same browser signs out: the session, and the tokens minted from it, end.
    const tab = await page.context().newPage()
    await tab.goto(`${s.base}/test-client/`)
    const out = (await postFromPage(tab, '/api/v1/auth/logout', {})).status
    t.equal(out, 200, 'signed out in another tab')

    const refused = await call(page, 'me')
    t.match(refused, { error: { name: 'AtriumError', code: 'UNAUTHORIZED', status: 401, unauthorized: true } })
    t.equal(await call(page, 'held'), null, 'the tokens are gone')
    t.equal(await call(page, 'unauthorized'), 1, 'the application was told')
    const again = await call(page, 'me')
    t.match(again, { error: { code: 'UNAUTHORIZED' } }, 'the next call finds no session either')
    await s.b.screenshot(page, '2-unauthorized')
  })

  await t.test('a chat reply streams; cut mid-reply, it resumes with Last-Event-ID, every delta once', async (t) => {
    const u = await user(s.h)
    await new AtriumClient({ baseUrl: s.base, apiKey: u.apiKey }).tenant.updateLlmSettings({
      provider: 'openai-compatible',
      baseUrl: llm.url,
      model: 'chat-model',
      apiKey: 'sk-browser-test-000000',
    })
    const page = await openPage(t, s)
    const streams: (string | undefined)[] = []
    page.on('request', (r) => {
      if (/\/api\/v1\/chat\/sessions\/[^/]+\/stream$/.test(r.url())) streams.push(r.headers()['last-event-id'])
    })
    await call(page, 'signIn', u.email, PASSWORD)
    await call(page, 'newClient')

    const text = 'one two three four five six seven eight nine ten'
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    // The model holds the rest of the reply after 'four ' until the connection is back.
    llm.push({ text, hold: (piece) => (piece === 4 ? gate : undefined) })
    const sent = await call(page, 'startReply', 'count to ten')
    await page.waitForFunction(() =>
      (globalThis as unknown as { harness: Harness }).harness.reply().deltas.join('').includes('four'),
    )
    s.proxy.cut()
    // The page notices the drop (and keeps trying while the network is down) before it comes back.
    await page.waitForFunction(
      () => (globalThis as unknown as { harness: Harness }).harness.reply().reconnects.length > 0,
    )
    s.proxy.restore()
    release()
    await page.waitForFunction(() => {
      const r = (globalThis as unknown as { harness: Harness }).harness.reply()
      return r.done !== null || r.error !== null
    })
    const r = await call(page, 'reply')
    t.equal(r.error, null)
    t.equal(r.deltas.join(''), text, 'every delta once, in order')
    t.match(r.done, { id: sent.replyId, content: text }, 'the saved reply is the text')
    const resumedAfter = r.reconnects[0]
    t.ok(resumedAfter, `the page resumed after event ${resumedAfter}`)
    t.equal(streams[0], undefined, 'the first connection asks from the start')
    t.ok(streams.includes(resumedAfter), 'a later one sent Last-Event-ID with the last event the page had')
    await s.b.screenshot(page, '3-chat-resumed')
  })
})
