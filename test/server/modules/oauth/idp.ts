// A real OpenID provider (oidc-provider) on 127.0.0.1, and a browser-like client that signs in at
// it by following redirects by hand and filling in its (development) login and consent forms.
import http from 'node:http'
import { isIP, type AddressInfo } from 'node:net'
import { exportJWK, generateKeyPair } from 'jose'
import type { Test } from 'tap'

// oidc-provider ships no type declarations: it is loaded by a name TypeScript does not resolve,
// and typed as narrowly as these tests use it.
interface ProviderConfiguration {
  clients: Record<string, unknown>[]
  jwks: { keys: Record<string, unknown>[] }
  ttl: Record<string, number>
  pkce: { required: () => boolean }
  claims: Record<string, string[]>
  cookies: { keys: string[] }
  features: Record<string, { enabled: boolean }>
  findAccount: (
    ctx: unknown,
    sub: string,
  ) => Promise<{ accountId: string; claims: () => Promise<Record<string, unknown>> } | undefined>
}
const OIDC_PROVIDER = 'oidc-provider'
const { default: Provider } = (await import(OIDC_PROVIDER)) as {
  default: new (issuer: string, configuration: ProviderConfiguration) => { callback(): http.RequestListener }
}

export const CLIENT_ID = 'atrium'
export const CLIENT_SECRET = 'atrium-client-secret-for-tests-only'

export interface IdpAccount {
  email?: string
  email_verified?: boolean
  name?: string
}

export interface Idp {
  issuer: string
  /** Accounts by subject; tests add their people here. */
  accounts: Map<string, IdpAccount>
  /** Requests the provider has received (to show that a refused provider was never contacted). */
  requests: () => number
}

/**
 * `host` names the issuer; the provider listens on it when it is an address (a container reaches it on the engine's
 * bridge), else on 127.0.0.1.
 */
export async function startIdp(t: Test, redirectUris: string[], port = 0, host = '127.0.0.1'): Promise<Idp> {
  let handler: http.RequestListener = (_req, res) => res.end()
  let count = 0
  const server = http.createServer((req, res) => {
    count++
    handler(req, res)
  })
  await new Promise<void>((resolve) => server.listen(port, isIP(host) ? host : '127.0.0.1', resolve))
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  const issuer = `http://${host}:${(server.address() as AddressInfo).port}`
  const accounts = new Map<string, IdpAccount>()
  const { privateKey } = await generateKeyPair('RS256', { extractable: true })
  const provider = new Provider(issuer, {
    jwks: { keys: [{ ...(await exportJWK(privateKey)), kid: 'test', use: 'sig', alg: 'RS256' }] },
    ttl: { AccessToken: 600, AuthorizationCode: 60, Grant: 600, IdToken: 600, Interaction: 600, Session: 600 },
    clients: [
      {
        client_id: CLIENT_ID,
        client_secret: CLIENT_SECRET,
        redirect_uris: redirectUris,
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    pkce: { required: () => true },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    cookies: { keys: ['oidc-provider-test-cookie-key'] },
    features: { devInteractions: { enabled: true } },
    async findAccount(_ctx, sub) {
      const a = accounts.get(sub)
      return a ? { accountId: sub, claims: async () => ({ sub, ...a }) } : undefined
    },
  })
  handler = provider.callback()
  return { issuer, accounts, requests: () => count }
}

/** A minimal cookie jar: enough for one site that sets cookies on a few paths. */
class Jar {
  private cookies = new Map<string, string>()
  take(res: Response) {
    for (const line of res.headers.getSetCookie()) {
      const [pair = '', ...attrs] = line.split(';')
      const i = pair.indexOf('=')
      const name = pair.slice(0, i).trim()
      const value = pair.slice(i + 1).trim()
      const gone =
        !value ||
        attrs.some(
          (a) => /^\s*max-age=0\s*$/i.test(a) || (/^\s*expires=/i.test(a) && Date.parse(a.split('=')[1]!) < Date.now()),
        )
      if (gone) this.cookies.delete(name)
      else this.cookies.set(name, value)
    }
  }
  header() {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ')
  }
}

/**
 * Signs `accountId` in at the provider, starting from the authorization URL Atrium gave, and
 * returns the URL the provider redirects the browser to (the callback, with code and state).
 */
export async function signInAtIdp(authorizationUrl: string, accountId: string, redirectUri: string): Promise<URL> {
  const jar = new Jar()
  let next: { url: string; form?: URLSearchParams } = { url: authorizationUrl }
  for (let step = 0; step < 12; step++) {
    const res = await fetch(next.url, {
      method: next.form ? 'POST' : 'GET',
      redirect: 'manual',
      headers: { cookie: jar.header(), ...(next.form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
      ...(next.form ? { body: next.form.toString() } : {}),
    })
    jar.take(res)
    const location = res.headers.get('location')
    if (location) {
      const url = new URL(location, next.url)
      if (url.href.startsWith(redirectUri)) return url
      next = { url: url.href }
      continue
    }
    const html = await res.text()
    if (res.status !== 200) throw new Error(`identity provider answered ${res.status}: ${html.slice(0, 500)}`)
    // The development interaction pages: a login form, then a consent form, both posting back to the page.
    const prompt = /name="prompt" value="(\w+)"/.exec(html)?.[1]
    const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1]
    if (!prompt || !action) throw new Error(`unexpected page at the identity provider: ${html.slice(0, 500)}`)
    const form = new URLSearchParams({ prompt })
    if (prompt === 'login') {
      form.set('login', accountId)
      form.set('password', 'any')
    }
    next = { url: new URL(action.replace(/&amp;/g, '&'), next.url).href, form }
  }
  throw new Error('too many steps at the identity provider')
}
