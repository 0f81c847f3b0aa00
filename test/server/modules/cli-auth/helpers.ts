// What the device login tests share: a CLI's secrets, a caller that can pose as any client
// address (limits count per address), a user who can sign in, and a started login.
import { createHash, randomBytes, randomInt } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { caller, type Called, type Caller, type TestApp } from '../../../helpers/app.js'
import { suffix } from '../../../helpers/platform.js'
import { createTenant } from '../../../../server/modules/tenants/service.js'

export const PASSWORD = 'correct horse battery'

export const newState = () => randomBytes(32).toString('hex')

/** A PKCE pair as a CLI makes it (RFC 7636: 32 random bytes, base64url). */
export function pkcePair() {
  const verifier = randomBytes(32).toString('base64url')
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') }
}

/** An address of its own per test, so the per-address limits of one test do not spend another's. */
export const randomIp = () => `10.${randomInt(256)}.${randomInt(256)}.${randomInt(1, 255)}`

export type Client = Caller

/** A caller with no credential of its own, calling from `ip`. */
export const client = (app: FastifyInstance, ip = randomIp()): Client => caller(app, undefined, ip)

export async function user(ta: TestApp, plan: 'free' | 'pro' | 'growth' | 'enterprise' = 'pro') {
  const email = `cli-${suffix()}@example.com`
  const created = await createTenant(ta.platform, { name: `Acme ${suffix()}`, plan, email, password: PASSWORD })
  return { ...created, email }
}

/** Signs in like the approval page does: the session cookie, plus an access token for Bearer use. */
export async function signIn(call: Client, email: string) {
  const login = await call('POST', '/api/v1/auth/login', { email, password: PASSWORD })
  if (login.status !== 200) throw new Error(`login failed: ${JSON.stringify(login.body)}`)
  const session = login.body.data.token as string
  const ex = await call('POST', '/api/v1/auth/exchange', { token: session })
  return { session, cookie: `atrium_session=${session}`, access: ex.body.data.accessToken as string }
}

export interface StartedLogin {
  loginId: string
  authUrl: string
  verificationCode: string
  expiresAt: string
  state: string
  verifier: string
  response: Called
}

export async function startLogin(call: Client, over: Record<string, unknown> = {}): Promise<StartedLogin> {
  const state = newState()
  const { verifier, challenge } = pkcePair()
  const response = await call('POST', '/cli/auth/start', {
    state,
    codeChallenge: challenge,
    codeChallengeMethod: 'S256',
    cliVersion: '1.4.2',
    platform: 'linux-x64',
    ...over,
  })
  if (response.status !== 201) throw new Error(`start failed: ${JSON.stringify(response.body)}`)
  return {
    ...(response.body.data as { loginId: string; authUrl: string; verificationCode: string; expiresAt: string }),
    state,
    verifier,
    response,
  }
}

/** Asks to approve `login` (with its own state unless `state` is given), sending `headers` as the credentials. */
export const complete = (
  call: Client,
  login: Pick<StartedLogin, 'loginId' | 'state'>,
  headers: Record<string, string> = {},
  state = login.state,
) => call('POST', '/cli/auth/complete', { loginId: login.loginId, state }, headers)

/** Starts a login and approves it as the signed-in user holding `cookie`. */
export async function approvedLogin(call: Client, cookie: string): Promise<StartedLogin> {
  const login = await startLogin(call)
  const done = await complete(call, login, { cookie })
  if (done.status !== 200) throw new Error(`complete failed: ${JSON.stringify(done.body)}`)
  return login
}
