// How the client authenticates (the server's docs/api.md, "Authentication"). An API key is sent as
// it is. Otherwise the client holds a JWT access token in memory only (never in any storage), counts
// it expired 60 s before its expiresIn elapses, and gets a new one when it is missing or expired:
// from /auth/refresh when it holds a refresh token (the CLI's device login gives one), else by
// exchanging an identity session token (or, in a browser, the session cookie) at /auth/exchange.
// Concurrent calls that find no valid token share one exchange.
import { errorOf, AtriumNetworkError } from './errors.js'

/** The spec's client token expiry buffer. */
export const EXPIRY_BUFFER_MS = 60_000

export interface RefreshedSession {
  /** The new refresh (session) token: the old one is retired by the server. */
  token: string
  expiresAt: string
  /** The access token it came with, and its lifetime in seconds. */
  accessToken: string
  expiresIn: number
}

export interface Credentials {
  /** An API key (svc_sdk_..., svc_ci_..., svc_admin_...). Wins over everything below. */
  apiKey?: string
  /**
   * The identity provider session token to exchange at /auth/exchange, or a function that gives
   * the current one. Leave it out in a browser signed in by cookie: the exchange then uses the cookie.
   */
  sessionToken?: string | (() => string | undefined | Promise<string | undefined>)
  /** A refresh token (a session token the client may rotate): new access tokens come from /auth/refresh. */
  refreshToken?: string
  /** Told of every rotated refresh token, to store it (the CLI writes it to its credentials file). */
  onRefreshToken?: (session: RefreshedSession) => void | Promise<void>
  /** An access token the application already holds, with the seconds it had left when issued. */
  accessToken?: { token: string; expiresIn: number }
  /** No credentials at all: for the open endpoints (the device login itself). */
  anonymous?: boolean
}

interface Held {
  token: string
  /** When it counts as expired: issued + expiresIn - 60 s. */
  staleAt: number
}

export class TokenManager {
  private held: Held | null = null
  private pending: Promise<string> | null = null
  private refreshToken: string | undefined

  constructor(
    private readonly baseUrl: string,
    private readonly credentials: Credentials,
    private readonly fetchImpl: typeof fetch,
    private readonly now: () => number,
  ) {
    this.refreshToken = credentials.refreshToken
    if (credentials.accessToken) this.hold(credentials.accessToken.token, credentials.accessToken.expiresIn)
  }

  /** What the client can send: an API key, a valid access token (obtained first if need be), or nothing. */
  async bearer(): Promise<string | null> {
    if (this.credentials.apiKey) return this.credentials.apiKey
    if (this.credentials.anonymous) return null
    if (this.held && this.now() < this.held.staleAt) return this.held.token
    this.pending ??= this.obtain().finally(() => {
      this.pending = null
    })
    return this.pending
  }

  /** The session is not valid (a 401): forget the tokens, so nothing retries with them. */
  clear(): void {
    this.held = null
    this.refreshToken = undefined
  }

  /** The access token held now, if any (for `whoami`-style tools; never persisted by the library). */
  get current(): { token: string; staleAt: number } | null {
    return this.held ? { ...this.held } : null
  }

  private hold(token: string, expiresIn: number): string {
    this.held = { token, staleAt: this.now() + expiresIn * 1000 - EXPIRY_BUFFER_MS }
    return token
  }

  private async obtain(): Promise<string> {
    if (this.refreshToken) {
      const r = await this.post<{ accessToken: string; expiresIn: number; token: string; expiresAt: string }>(
        '/api/v1/auth/refresh',
        { token: this.refreshToken },
      )
      this.refreshToken = r.token
      await this.credentials.onRefreshToken?.(r)
      return this.hold(r.accessToken, r.expiresIn)
    }
    const source = this.credentials.sessionToken
    const token = typeof source === 'function' ? await source() : source
    const r = await this.post<{ accessToken: string; expiresIn: number }>(
      '/api/v1/auth/exchange',
      token === undefined ? {} : { token },
    )
    return this.hold(r.accessToken, r.expiresIn)
  }

  private async post<T>(path: string, body: unknown): Promise<T> {
    let res: Response
    try {
      res = await this.fetchImpl(new URL(path, this.baseUrl), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        credentials: 'include',
      })
    } catch (err) {
      throw new AtriumNetworkError(`could not reach ${this.baseUrl}: ${(err as Error).message}`, { cause: err })
    }
    if (!res.ok) {
      const e = await errorOf(res)
      if (res.status === 401) this.clear()
      throw e
    }
    return ((await res.json()) as { data: T }).data
  }
}
