// What every built-in page must be (server/http/pages.ts): static HTML under strict headers, no
// inline code or outside assets, and assets linked relative to the page that the server serves.
import type { Test } from 'tap'
import type { Caller } from './app.js'

/** Fetches the page at `url` and each asset it links; returns the page's HTML and scripts by name. */
export async function checkPage(
  t: Test,
  call: Caller,
  url: URL,
  assets: Record<string, RegExp>,
): Promise<{ html: string; assets: Record<string, string> }> {
  const page = await call('GET', url.pathname + url.search)
  t.equal(page.status, 200)
  t.match(page.headers['content-type'], /^text\/html/)
  t.match(page.headers['content-security-policy'], /default-src 'self'/)
  t.match(page.headers['content-security-policy'], /script-src 'self'/)
  t.match(page.headers['content-security-policy'], /frame-ancestors 'none'/)
  t.equal(page.headers['x-frame-options'], 'DENY')
  t.equal(page.headers['referrer-policy'], 'no-referrer')
  t.equal(page.headers['cache-control'], 'no-store')
  const html = page.raw.toString()
  t.notMatch(html, /https?:\/\//, 'no outside assets')
  t.notMatch(html, /<script>|<style>|\son[a-z]+=/i, 'no inline script, style or handlers')
  const bodies: Record<string, string> = {}
  // Relative links, so a deployment under a path prefix works.
  for (const [ref, type] of Object.entries(assets)) {
    t.ok(html.includes(`"${ref}"`), `the page links ${ref}`)
    const r = await call('GET', new URL(ref, url).pathname)
    t.equal(r.status, 200, ref)
    t.match(r.headers['content-type'], type)
    t.equal(r.headers['x-content-type-options'], 'nosniff')
    bodies[ref] = r.raw.toString()
  }
  return { html, assets: bodies }
}
