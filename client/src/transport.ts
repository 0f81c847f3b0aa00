// Every request of the client goes through send(): it adds the credential, sends cookies along (the
// spec's CSRF rule), waits out a 429 as the server says (Retry-After, else X-RateLimit-Reset) up
// to a limit, clears the tokens on a 401, and turns a request that got no answer into an
// AtriumNetworkError. The typed API (openapi-fetch) uses it as its fetch.
import createClient, { type Client } from 'openapi-fetch'
import { AtriumNetworkError, errorOf } from './errors.js'
import type { paths } from './openapi.js'
import { TokenManager, type Credentials } from './tokens.js'

export interface TransportOptions {
  /** The Atrium server, for example https://atrium.example.com */
  baseUrl: string
  credentials?: Credentials
  /** How many times a 429 is retried after the wait the server asks for (default 2). */
  maxRetries?: number
  /** A 429 that asks for a longer wait than this is not retried (default 60 s). */
  maxRetryWaitMs?: number
  /** Called when the server answers 401 (tokens are already cleared): send the user to login. */
  onUnauthorized?: () => void
  fetch?: typeof fetch
  /** The clock, in ms since the epoch (tests inject one). */
  now?: () => number
  /** How to wait (tests inject one). */
  sleep?: (ms: number) => Promise<void>
  /** Sent with every request, for example a User-Agent. */
  headers?: Record<string, string>
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Seconds as the server gives them in Retry-After or X-RateLimit-Reset, as ms; null if neither. */
export function retryWaitMs(res: Response): number | null {
  for (const name of ['retry-after', 'x-ratelimit-reset']) {
    const v = res.headers.get(name)
    if (v !== null && /^\d+(\.\d+)?$/.test(v.trim())) return Math.ceil(Number(v) * 1000)
  }
  return null
}

export class Transport {
  readonly baseUrl: string
  readonly tokens: TokenManager
  /** The typed API: every route of the server's OpenAPI document, by path and method. */
  readonly api: Client<paths>
  private readonly fetchImpl: typeof fetch
  private readonly sleep: (ms: number) => Promise<void>

  constructor(private readonly o: TransportOptions) {
    this.baseUrl = o.baseUrl.replace(/\/+$/, '')
    this.fetchImpl = o.fetch ?? ((...args) => globalThis.fetch(...args))
    this.sleep = o.sleep ?? sleep
    this.tokens = new TokenManager(this.baseUrl, o.credentials ?? {}, this.fetchImpl, o.now ?? Date.now)
    this.api = createClient<paths>({
      baseUrl: this.baseUrl,
      fetch: (req: Request) => this.send(req),
      credentials: 'include',
    })
  }

  /**
   * Sends a request with the credential. `retry: false` for a body that can be read once (a
   * streamed upload): a 429 is then returned rather than retried.
   */
  async send(req: Request, opts: { retry?: boolean } = {}): Promise<Response> {
    const retry = opts.retry ?? true
    const max = this.o.maxRetries ?? 2
    for (let attempt = 0; ; attempt++) {
      // A body can be read once: a request that may be sent again sends a copy. One without a body is reused.
      const r = retry && req.body !== null ? req.clone() : req
      for (const [k, v] of Object.entries(this.o.headers ?? {})) r.headers.set(k, v)
      const bearer = await this.tokens.bearer()
      if (bearer) r.headers.set('authorization', `Bearer ${bearer}`)
      let res: Response
      try {
        res = await this.fetchImpl(r)
      } catch (err) {
        if ((err as Error).name === 'AbortError') throw err
        throw new AtriumNetworkError(`could not reach ${this.baseUrl}: ${(err as Error).message}`, { cause: err })
      }
      if (res.status === 401 && bearer && !this.o.credentials?.apiKey) {
        this.tokens.clear()
        this.o.onUnauthorized?.()
      }
      if (res.status === 429 && retry && attempt < max) {
        const wait = retryWaitMs(res) ?? 1000
        if (wait <= (this.o.maxRetryWaitMs ?? 60_000)) {
          await res.body?.cancel()
          await this.sleep(wait)
          continue
        }
      }
      return res
    }
  }

  /** A request to `path` (already encoded) with send()'s handling; throws AtriumError unless 2xx. */
  async request(method: string, path: string, init: RequestInit & { retry?: boolean } = {}): Promise<Response> {
    const { retry, ...rest } = init
    const req = new Request(this.baseUrl + path, {
      ...rest,
      method,
      credentials: 'include',
      ...(rest.body instanceof ReadableStream ? { duplex: 'half' } : {}),
    } as RequestInit)
    const res = await this.send(req, retry === undefined ? {} : { retry })
    if (!res.ok) throw await errorOf(res)
    return res
  }
}

/** The `data` of a typed call's envelope; the AtriumError of its error envelope. */
export async function dataOf<R extends { data?: unknown; error?: unknown; response: Response }>(
  call: Promise<R>,
): Promise<NonNullable<R['data']> extends { data: infer D } ? D : never> {
  // 204 No Content (a delete): nothing to unwrap.
  return ((await envelopeOf(call)) as unknown as { data: never } | undefined)?.data as never
}

/** The whole envelope of a typed call (lists: data and meta.nextCursor). */
export async function envelopeOf<R extends { data?: unknown; error?: unknown; response: Response }>(
  call: Promise<R>,
): Promise<NonNullable<R['data']>> {
  const r = await call
  if (!r.response.ok)
    throw await errorOf(r.response.bodyUsed ? new Response(JSON.stringify(r.error), r.response) : r.response)
  return r.data as NonNullable<R['data']>
}

/** Every item of a cursor-paged list, page after page, as the caller iterates. */
export async function* eachOf<T>(
  page: (cursor: string | undefined) => Promise<{ data: T[]; meta: { nextCursor?: string | null } }>,
): AsyncGenerator<T> {
  let cursor: string | undefined
  do {
    const p = await page(cursor)
    yield* p.data
    cursor = p.meta.nextCursor ?? undefined
  } while (cursor)
}
