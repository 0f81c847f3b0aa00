// The few browser pages the API serves itself (CLI approval, OpenID Connect callback, invitation
// acceptance): static HTML and a script from our own origin, one shared style sheet, and the same
// strict headers on all of them. The pages hold no data of their own; their scripts read what they
// need from the address and ask the API, so nothing a requester chose is written into HTML here.
import { readFileSync } from 'node:fs'
import type { FastifyReply } from 'fastify'
import fp from 'fastify-plugin'

// No inline script or style, no outside origin, no framing: a button inside someone else's frame
// could be clicked by a user who never meant to (clickjacking).
export const PAGE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ')

export const PAGE_HEADERS = {
  'content-security-policy': PAGE_CSP,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  // Page addresses carry secrets (a login's state, an authorization code): keep them out of
  // Referer headers and caches.
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
}

export const PAGE_TYPES = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
} as const

/** Reads a page asset that sits beside the module given by its import.meta.url, once at start-up. */
export function readAsset(moduleUrl: string, name: string): string {
  return readFileSync(new URL(`./${name}`, moduleUrl), 'utf8')
}

export function sendPage(reply: FastifyReply, type: keyof typeof PAGE_TYPES, body: string) {
  return reply.headers(PAGE_HEADERS).type(PAGE_TYPES[type]).send(body)
}

/** Pages answer without credentials and outside the API's rate limit (they are static). */
export const PAGE_ROUTE = { auth: false, rateLimit: false } as const

const STYLE = readAsset(import.meta.url, 'page.css')

/**
 * 'atrium-pages': the style sheet every page links to (relative to its own path, so a path prefix
 * works). Modules that serve pages depend on it.
 */
export const pagesPlugin = fp(
  async (app) => {
    app.get(
      '/pages/atrium.css',
      {
        config: PAGE_ROUTE,
        schema: { hide: true, summary: 'Style sheet of the built-in pages' },
      },
      async (_req, reply) => sendPage(reply, 'css', STYLE),
    )
  },
  { name: 'atrium-pages' },
)
