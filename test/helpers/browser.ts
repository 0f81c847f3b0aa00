// The browser tests' Chromium: Debian's (apt-get install chromium), driven by playwright-core, which
// brings no browser of its own. Each test gets a fresh profile, saves screenshots under
// .tap/screenshots/<test file>/ (their paths are TAP comments, so a CI log lists them), and runs
// axe-core inside the page: no serious or critical accessibility violation. Without Chromium the
// tests skip and say why.
import { existsSync, mkdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { basename, join, relative } from 'node:path'
import { chromium, type Browser, type Page } from 'playwright-core'
import type { Test } from 'tap'
import { testApp, type TestApp } from './app.js'
import { ROOT } from './cli.js'
import { freePort } from './platform.js'

export const CHROMIUM = '/usr/bin/chromium'

/**
 * Why the browser tests cannot run here, or false. CI installs Chromium (.ci/run), so there they
 * never skip: a missing browser fails them rather than hiding.
 */
export const NO_BROWSER: string | false =
  existsSync(CHROMIUM) || process.env.CI ? false : `no Chromium at ${CHROMIUM}: apt-get install chromium`

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')

/** The impacts axe gives a violation, least to worst; the last two fail a test. */
export const IMPACTS = ['minor', 'moderate', 'serious', 'critical'] as const
export type Impact = (typeof IMPACTS)[number]

export interface Violation {
  id: string
  impact: Impact | null
  help: string
  nodes: { target: unknown[]; failureSummary?: string }[]
}

export interface BrowserSession {
  browser: Browser
  /**
   * A new page in a fresh context (its own cookies and storage), for the test `t` (the session's
   * by default): its errors fail that test, and its screenshots and axe results are reported there.
   */
  page(t?: Test): Promise<Page>
  /**
   * Saves a screenshot as `<name>.png`, of the whole page unless `viewport` (a long page: what is in
   * view), in the dark colour scheme when asked, and names its path in a TAP comment.
   */
  screenshot(page: Page, name: string, o?: { dark?: boolean; viewport?: boolean }): Promise<string>
  /**
   * Runs axe-core on the page in the light and the dark colour scheme (the built-in pages follow the
   * system's), names the counts of violations by impact in a TAP comment for each, and fails on a
   * serious or critical one.
   */
  axe(page: Page, label: string): Promise<Record<'light' | 'dark', Record<Impact, number>>>
}

/**
 * Starts Chromium headless for the test file whose import.meta.url is `testFile`, closed when `t`
 * ends. Call only when NO_BROWSER is false.
 */
export async function browserSession(t: Test, testFile: string): Promise<BrowserSession> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // Tests run as root (CI does), and Chromium refuses to start its sandbox as root: without this
    // it exits with "Running as root without --no-sandbox is not supported". The pages it opens are
    // the test's own, on loopback.
    chromiumSandbox: false,
    // Each launch has a fresh temporary profile; nothing of a previous run is reused.
    args: ['--disable-gpu', '--no-first-run'],
  })
  t.teardown(() => browser.close())
  // Each page reports to the test it was opened for.
  const owners = new WeakMap<Page, Test>()
  const ownerOf = (page: Page) => owners.get(page) ?? t
  const dir = join(ROOT, '.tap', 'screenshots', basename(new URL(testFile).pathname).replace(/\.test\.ts$/, ''))
  mkdirSync(dir, { recursive: true })

  return {
    browser,
    async page(owner = t) {
      const context = await browser.newContext({ viewport: { width: 1024, height: 768 } })
      const page = await context.newPage()
      owners.set(page, owner)
      page.on('pageerror', (err) => owner.fail(`error in the page ${page.url()}: ${err.message}`))
      // Shown, not failed: a page meets 401s on purpose (no session yet, a wrong password).
      page.on('response', (r) => {
        if (r.status() >= 400) owner.comment(`${r.request().method()} ${r.url()}: ${r.status()}`)
      })
      page.on('console', (m) => {
        if (m.type() !== 'error' || m.text().startsWith('Failed to load resource')) return
        // Something the page's Content Security Policy blocked is a part of the page that does not work.
        if (/Content Security Policy/i.test(m.text())) owner.fail(`blocked on ${page.url()}: ${m.text()}`)
        else owner.comment(`console error on ${page.url()}: ${m.text()}`)
      })
      return page
    },
    async screenshot(page, name, o = {}) {
      const file = join(dir, `${name}.png`)
      if (o.dark) await page.emulateMedia({ colorScheme: 'dark' })
      await page.screenshot({ path: file, fullPage: !o.viewport })
      if (o.dark) await page.emulateMedia({ colorScheme: null })
      ownerOf(page).comment(`screenshot ${relative(ROOT, file)}`)
      return file
    },
    async axe(page, label) {
      const owner = ownerOf(page)
      const counts = { light: zero(), dark: zero() }
      for (const colorScheme of ['light', 'dark'] as const) {
        await page.emulateMedia({ colorScheme })
        const violations = await runAxe(page)
        for (const v of violations) counts[colorScheme][v.impact ?? 'minor'] += 1
        const bad = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
        owner.same(bad.map(describe), [], `${label} (${colorScheme}): no serious or critical accessibility violation`)
        for (const v of violations.filter((v) => !bad.includes(v)))
          owner.comment(`axe ${label} (${colorScheme}): ${describe(v)}`)
        const c = counts[colorScheme]
        owner.comment(`axe ${label} (${colorScheme}): ${IMPACTS.map((i) => `${i} ${c[i]}`).join(', ')}`)
      }
      await page.emulateMedia({ colorScheme: null })
      return counts
    },
  }
}

/**
 * A test app listening on loopback, PUBLIC_URL its own address (`base`), as a browser reaches a site:
 * the addresses it gives out (an approval link, an invitation, the docs' server) are that one.
 */
export async function listeningApp(
  t: Test,
  env: Record<string, string> = {},
  opts: Parameters<typeof testApp>[2] = {},
): Promise<TestApp & { base: string }> {
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const h = await testApp(t, { PUBLIC_URL: base, ...env }, opts)
  await h.app.listen({ host: '127.0.0.1', port })
  return { ...h, base }
}

/** The text of a built-in page's status line (#message) once it shows a message of `kind`. */
export async function pageMessage(page: Page, kind: 'error' | 'success'): Promise<string> {
  await page.locator(`#message.${kind}`).waitFor()
  return (await page.locator('#message').textContent()) ?? ''
}

export interface PageAnswer {
  status: number
  json: any // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON from the API under test
}

/** A POST of `body` as JSON that the page's own script makes (with its cookies), and the answer. */
export function postFromPage(page: Page, path: string, body: unknown): Promise<PageAnswer> {
  return page.evaluate(
    async ({ path, body }) => {
      const r = await fetch(path, {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
      return { status: r.status, json: await r.json().catch(() => null) }
    },
    { path, body },
  )
}

const zero = () => Object.fromEntries(IMPACTS.map((i) => [i, 0])) as Record<Impact, number>

/**
 * axe-core's violations on the page as it is now. Its source is evaluated through the DevTools
 * protocol, which the page's Content Security Policy (no inline script) does not apply to, so the
 * page is tested under its real policy.
 */
async function runAxe(page: Page): Promise<Violation[]> {
  await page.evaluate(AXE_SOURCE)
  return page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: Violation[] }> } }).axe
    const r = await axe.run()
    return r.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => ({ target: n.target, failureSummary: n.failureSummary })),
    }))
  })
}

/** A violation in a line: its impact, rule, help, and the first few elements with what is wrong there. */
const describe = (v: Violation) => {
  const shown = v.nodes
    .slice(0, 3)
    .map((n) => `${JSON.stringify(n.target)} ${(n.failureSummary ?? '').replace(/\s+/g, ' ')}`)
  const more = v.nodes.length > shown.length ? ` (and ${v.nodes.length - shown.length} more)` : ''
  return `${v.impact ?? 'no impact'} ${v.id} (${v.help}) on ${v.nodes.length}: ${shown.join('; ')}${more}`
}
