// The page script of test/browser/client-library.test.ts: @atrium/client as an application bundles
// it (esbuild, for browsers), loaded into a page on the API's own origin. It exposes what the test
// drives as `harness`, and writes each step into the page, which the test's screenshots show.
import { AtriumClient, AtriumError, login, type ChatMessage } from '../../client/src/index.js'

// The few DOM parts used here (the project's types are Node's, without the DOM library).
interface Node_ {
  textContent: string | null
  append(...nodes: (Node_ | string)[]): void
}
declare const document: {
  cookie: string
  getElementById(id: string): Node_ | null
  createElement(tag: string): Node_
}
declare const location: { origin: string }

function log(text: string) {
  const li = document.createElement('li')
  li.textContent = text
  document.getElementById('log')!.append(li)
}

/** The error a call ended with, as the test reads it. */
export interface Failed {
  error: { name: string; code?: string; status?: number; unauthorized?: boolean; message: string }
}
const failed = (e: unknown): Failed => {
  const err = e as Error
  return e instanceof AtriumError
    ? { error: { name: err.name, code: e.code, status: e.status, unauthorized: e.unauthorized, message: e.message } }
    : { error: { name: err.name, message: err.message } }
}

// The client's clock (its `now` option): the test moves it to a token's 60 s mark.
let clock = 0
let unauthorized = 0
let client: AtriumClient | null = null
const reply = {
  deltas: [] as string[],
  reconnects: [] as (string | undefined)[],
  done: null as ChatMessage | null,
  error: null as Failed | null,
}
const c = () => {
  if (!client) throw new Error('newClient() first')
  return client
}

export const harness = {
  setClock(ms: number) {
    clock = ms
  },
  /** Signs in with email and password: the server answers with the HttpOnly session cookie. */
  async signIn(email: string, password: string): Promise<string> {
    const s = await login(location.origin, { email, password })
    log(`signed in as ${s.user.email}; the session is an HttpOnly cookie`)
    return s.user.email
  },
  /** Whether a script can read the session cookie (it must not). */
  cookieReadable: () => /(^|;\s*)atrium_session=/.test(document.cookie),
  /** A client with no credential of its own: it exchanges the browser's cookie for access tokens. */
  newClient() {
    client = new AtriumClient({
      baseUrl: location.origin,
      now: () => clock,
      onUnauthorized: () => {
        unauthorized++
        log('the server answered 401: tokens cleared, the application is told')
      },
    })
    log('a client on this origin, signed in by the cookie')
  },
  async me(): Promise<{ email: string | null; tenantId: string | null } | Failed> {
    try {
      const me = await c().me()
      log(`me: ${me.user?.email} in tenant ${me.tenant?.id}`)
      return { email: me.user?.email ?? null, tenantId: me.tenant?.id ?? null }
    } catch (e) {
      log(`me: ${(e as Error).message}`)
      return failed(e)
    }
  },
  /** Three calls at once with no token yet. */
  async concurrent(): Promise<number> {
    const r = await Promise.all([c().me(), c().tenant.get(), c().projects.list().next()])
    log('three calls at once')
    return r.length
  },
  held: () => c().accessToken,
  unauthorized: () => unauthorized,
  /** Opens a chat session, sends `content`, and follows the reply on the stream (in the background). */
  async startReply(content: string): Promise<{ sessionId: string; replyId: string }> {
    const session = await c().chat.createSession({ title: 'From a browser' })
    const sent = await c().chat.send(session.id, content)
    log(`sent "${content}"; the reply streams below`)
    const out = document.getElementById('reply')!
    const it = c().chat.reply(session.id, sent.replyId, {
      onReconnect: (last) => {
        reply.reconnects.push(last)
        log(`the stream dropped; resuming after event ${last}`)
      },
    })
    void (async () => {
      try {
        let r = await it.next()
        while (!r.done) {
          reply.deltas.push(r.value)
          out.textContent = reply.deltas.join('')
          r = await it.next()
        }
        reply.done = r.value
        log(`the reply is complete: ${reply.deltas.length} deltas`)
      } catch (e) {
        reply.error = failed(e)
        log(`the reply failed: ${(e as Error).message}`)
      }
    })()
    return { sessionId: session.id, replyId: sent.replyId }
  },
  reply: () => reply,
}

export type Harness = typeof harness
;(globalThis as unknown as { harness: Harness }).harness = harness
