// What the installer's tests set up alike: a site in a temporary folder, a passphrase file, the
// problems of a refused command, and small HTTP servers standing in for an Atrium or another API.
import { writeFileSync } from 'node:fs'
import { createServer, type RequestListener } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { BadInput } from '../../installer/commands/command.js'
import { DEFAULT_ANSWERS, type Answers } from '../../installer/core/answers.js'
import { contextFor, type Resolved } from '../../installer/core/context.js'
import { tempDir } from '../helpers/platform.js'

type T = Parameters<typeof tempDir>[0]

/** A compose site in a temporary folder, nothing written yet; no license, so the license check fails. */
export function site(t: T, over: Partial<Answers> = {}, config: Answers['config'] = {}): Resolved {
  const dir = tempDir(t)
  return contextFor(
    {
      ...DEFAULT_ANSWERS,
      dataPath: join(dir, 'data'),
      outputDir: join(dir, 'out'),
      ...over,
      config: { PUBLIC_URL: 'https://atrium.example.com', ...config },
    },
    { env: {} },
  )
}

/** A Compose site whose services are those of a running server (its `env`), which listens on `port`. */
export function siteOf(t: T, env: Record<string, string>, port: number): Resolved {
  const names = ['DATABASE_URL', 'R2_ENDPOINT', 'R2_BUCKET', 'R2_ACCESS_KEY_ID', 'R2_SECRET_ACCESS_KEY']
  const config = Object.fromEntries([...names, 'ENCRYPTION_MASTER_KEY'].map((n) => [n, env[n]!]))
  return site(t, {}, { PUBLIC_URL: `http://127.0.0.1:${port}`, PORT: String(port), ...config })
}

export const passphraseFile = (t: T, text = 'the site passphrase, kept apart\n') => {
  const path = join(tempDir(t), 'passphrase')
  writeFileSync(path, text, { mode: 0o600 })
  return path
}

/** The problems of the bad input a command is refused with. */
export const problemsOf = (p: Promise<unknown>) =>
  p.then(
    () => null,
    (err: unknown) => (err instanceof BadInput ? err.problems : err),
  )

/** An HTTP server on a free port of `host`, closed when the test ends. */
export async function listening(t: T, handler?: RequestListener, host = '127.0.0.1') {
  const server = createServer(handler)
  await new Promise<void>((r) => server.listen(0, host, r))
  t.teardown(() => new Promise<void>((r) => server.close(() => r())))
  const port = (server.address() as AddressInfo).port
  return { port, url: `http://127.0.0.1:${port}` }
}

/** A server that answers /readyz, as a deployed Atrium does once it is up. */
export const ready = (t: T) => listening(t, (req, res) => res.writeHead(req.url === '/readyz' ? 200 : 404).end())

/** An API that answers /healthz and /openapi.json as Atrium's public endpoints do, with its own title and version. */
export const apiServer = (t: T, title: string, version: string) =>
  listening(t, (req, res) =>
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify(req.url === '/healthz' ? { data: { status: 'ok' } } : { info: { title, version } })),
  )
