// A real webhook receiver on loopback, and the setup most webhook tests share: an app whose worker
// delivers at once and retries within a second, allowed to call loopback over http.
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http'
import type { Test } from 'tap'
import { Webhook } from 'standardwebhooks'
import type { AppOptions } from '../../../../server/app.js'
import { testApp, type TestApp } from '../../../helpers/app.js'
import { listenLoopback } from '../../../helpers/listen.js'

export interface Received {
  headers: IncomingHttpHeaders
  body: string
  /** What the receiver answered. */
  status: number
  at: number
}

/** What the receiver answers to its nth request (0-based): a status, or a function that writes the response. */
export type Answer = number | ((res: ServerResponse, n: number) => void)

export interface Receiver {
  url: string
  port: number
  received: Received[]
  /** Resolves once `n` requests have arrived (however they were answered). */
  waitFor(n: number, timeoutMs?: number): Promise<Received[]>
  /** Requests answered 2xx. */
  succeeded(): Received[]
}

export async function receiver(t: Test, answers: Answer[] | ((n: number) => Answer) = [204]): Promise<Receiver> {
  const received: Received[] = []
  const waiters: { n: number; resolve: () => void }[] = []
  const answerFor = (n: number): Answer =>
    typeof answers === 'function' ? answers(n) : answers[Math.min(n, answers.length - 1)]!
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const n = received.length
      const answer = answerFor(n)
      const entry: Received = {
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        status: 0,
        at: Date.now(),
      }
      received.push(entry)
      if (typeof answer === 'number') {
        entry.status = answer
        res.writeHead(answer, { 'content-type': 'text/plain' }).end(answer >= 300 ? `no thanks (${answer})` : 'ok')
      } else {
        answer(res, n)
        entry.status = res.statusCode
      }
      for (const w of [...waiters])
        if (received.length >= w.n) {
          waiters.splice(waiters.indexOf(w), 1)
          w.resolve()
        }
    })
  })
  const port = await listenLoopback(t, server)
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received,
    succeeded: () => received.filter((r) => r.status >= 200 && r.status < 300),
    waitFor(n, timeoutMs = 20_000) {
      if (received.length >= n) return Promise.resolve(received)
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`receiver got ${received.length} of ${n} requests`)), timeoutMs)
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(timer)
            resolve(received)
          },
        })
      })
    },
  }
}

/** The payload, verified by the reference Standard Webhooks verifier; throws when it does not verify. */
export function verified(
  secret: string,
  r: Received,
): { id: string; type: string; timestamp: string; tenantId: string | null; data: Record<string, unknown> } {
  const wh = secret.startsWith('whsec_') ? new Webhook(secret) : new Webhook(secret, { format: 'raw' })
  return wh.verify(r.body, r.headers as Record<string, string>) as never
}

export const SECRET = 'a-shared-secret-of-32-characters'

/** Fast retries for tests: the real schedule's shape, in tenths of a second. */
export const FAST_SCHEDULE = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]

/** An app that delivers webhooks to loopback over http, retrying fast. */
export function webhookApp(t: Test, overrides: Record<string, string> = {}, opts: AppOptions = {}): Promise<TestApp> {
  return testApp(
    t,
    { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.0/8', WEBHOOK_ALLOW_HTTP: 'true', ...overrides },
    {
      webhookWorker: { pollMs: 50, schedule: FAST_SCHEDULE },
      ...opts,
    },
  )
}

/** Polls `check` until it returns something truthy. */
export async function eventually<T>(
  check: () => Promise<T | null | undefined | false>,
  timeoutMs = 20_000,
): Promise<T> {
  const until = Date.now() + timeoutMs
  for (;;) {
    const v = await check()
    if (v) return v
    if (Date.now() > until) throw new Error('condition not met in time')
    await new Promise((r) => setTimeout(r, 50))
  }
}
