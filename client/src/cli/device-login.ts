// The device login (the server's docs/identity.md, "CLI device login"): start with a random state and a PKCE S256
// challenge, show the verification code and the approval address (and open it in a browser when
// there is one), poll the status at the interval the server gives, and redeem the approved login
// with the verifier, once.
import { spawn } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { arch, platform } from 'node:os'
import { delay } from '../delay.js'
import { AtriumError } from '../errors.js'
import type { paths } from '../openapi.js'
import { dataOf, Transport } from '../transport.js'

export type Issued = NonNullable<
  paths['/cli/auth/token']['post']
>['responses'][200]['content']['application/json']['data']

export interface DeviceLoginOptions {
  baseUrl: string
  cliVersion: string
  /** Shows the code and address to the user. */
  show: (started: { verificationCode: string; authUrl: string; expiresAt: string }) => void
  openBrowser: boolean
  signal?: AbortSignal
}

/** Opens `url` in the user's browser, if this machine has one to open; never fails the login. */
export function openInBrowser(url: string): boolean {
  if (process.platform === 'linux' && !process.env.DISPLAY && !process.env.WAYLAND_DISPLAY) return false
  const [cmd, args] =
    process.platform === 'darwin'
      ? ['open', [url]]
      : process.platform === 'win32'
        ? ['cmd', ['/c', 'start', '""', url]]
        : ['xdg-open', [url]]
  try {
    const child = spawn(cmd as string, args as string[], { stdio: 'ignore', detached: true })
    child.on('error', () => {})
    child.unref()
    return true
  } catch {
    return false
  }
}

export async function deviceLogin(o: DeviceLoginOptions): Promise<Issued> {
  const t = new Transport({
    baseUrl: o.baseUrl,
    credentials: { anonymous: true },
    headers: { 'user-agent': `atrium-cli/${o.cliVersion}` },
  })
  const verifier = randomBytes(32).toString('base64url')
  const state = randomBytes(32).toString('hex')
  const started = await dataOf(
    t.api.POST('/cli/auth/start', {
      body: {
        state,
        codeChallenge: createHash('sha256').update(verifier).digest('base64url'),
        codeChallengeMethod: 'S256',
        cliVersion: o.cliVersion,
        platform: `${platform()}-${arch()}`,
      },
    }),
  )
  o.show(started)
  if (o.openBrowser) openInBrowser(started.authUrl)
  for (;;) {
    await delay(started.interval * 1000, o.signal)
    const { status } = await dataOf(t.api.GET('/cli/auth/status', { params: { query: { loginId: started.loginId } } }))
    if (status === 'approved') break
    if (status !== 'pending')
      throw new AtriumError('VALIDATION_ERROR', `the login is ${status}: run \`atrium login\` again`, 400, { status })
  }
  return dataOf(t.api.POST('/cli/auth/token', { body: { loginId: started.loginId, codeVerifier: verifier } }))
}
