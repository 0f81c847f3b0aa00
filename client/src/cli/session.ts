// The client a CLI command uses: an API key (--api-key, ATRIUM_API_KEY, or the one `atrium login
// --api-key` stored), else the stored device login. A stale access token is renewed under a lock
// file first: two commands run at once would otherwise both present the same refresh token, and the
// server takes a refresh token presented twice for a copied one and ends the session.
import { mkdirSync, rmdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { delay } from '../delay.js'
import { AtriumClient } from '../index.js'
import { EXPIRY_BUFFER_MS, type RefreshedSession } from '../tokens.js'
import { dataOf, Transport } from '../transport.js'
import { configDir, readStored, writeStored, type Stored } from './credentials.js'

export class NotSignedIn extends Error {}

export interface Target {
  url: string | undefined
  apiKey: string | undefined
}

type Device = Extract<Stored, { kind: 'device' }>

async function locked<T>(env: NodeJS.ProcessEnv, fn: () => Promise<T>): Promise<T> {
  const dir = configDir(env)
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const lock = join(dir, 'refresh.lock')
  for (let i = 0; ; i++) {
    try {
      mkdirSync(lock)
      break
    } catch {
      // A lock left by a process that died holds no one up for long.
      try {
        if (Date.now() - statSync(lock).mtimeMs > 30_000) rmdirSync(lock)
      } catch {
        // gone meanwhile
      }
      if (i > 300) throw new Error(`could not lock ${lock}`)
      await delay(50)
    }
  }
  try {
    return await fn()
  } finally {
    rmdirSync(lock)
  }
}

const saveRefreshed = (stored: Device, r: RefreshedSession, env: NodeJS.ProcessEnv): Device => {
  const next = {
    ...stored,
    accessToken: r.accessToken,
    staleAt: Date.now() + r.expiresIn * 1000 - EXPIRY_BUFFER_MS,
    refreshToken: r.token,
    refreshExpiresAt: r.expiresAt,
  }
  writeStored(next, env)
  return next
}

/** A fresh stored device login: renewed (under the lock) when its access token counts as expired. */
async function fresh(stored: Device, env: NodeJS.ProcessEnv): Promise<Device> {
  if (Date.now() < stored.staleAt) return stored
  return locked(env, async () => {
    const now = readStored(env)
    if (now?.kind === 'device' && now.url === stored.url && Date.now() < now.staleAt) return now
    const t = new Transport({ baseUrl: stored.url, credentials: { anonymous: true } })
    const r = await dataOf(
      t.api.POST('/api/v1/auth/refresh', {
        body: { token: (now as Device | null)?.refreshToken ?? stored.refreshToken },
      }),
    )
    return saveRefreshed(stored, r, env)
  })
}

export async function clientFor(
  target: Target,
  env: NodeJS.ProcessEnv = process.env,
  extra: { onUnauthorized?: () => void } = {},
): Promise<{ client: AtriumClient; url: string; via: 'api-key' | 'device' }> {
  const stored = readStored(env)
  const url = target.url ?? stored?.url
  if (!url) throw new NotSignedIn('no server: pass --url or set ATRIUM_URL, or run `atrium login --url <address>`')
  const apiKey = target.apiKey ?? (stored?.kind === 'api-key' && stored.url === url ? stored.apiKey : undefined)
  if (apiKey) return { client: new AtriumClient({ baseUrl: url, apiKey, ...extra }), url, via: 'api-key' }
  if (stored?.kind !== 'device' || stored.url !== url)
    throw new NotSignedIn(`not signed in to ${url}: run \`atrium login\``)
  let current = await fresh(stored, env)
  const client = new AtriumClient({
    baseUrl: url,
    ...extra,
    credentials: {
      accessToken: { token: current.accessToken, expiresIn: (current.staleAt + EXPIRY_BUFFER_MS - Date.now()) / 1000 },
      refreshToken: current.refreshToken,
      // A long command (a chat, a run followed for long) renews on its own; the file follows.
      onRefreshToken: (r) => {
        current = saveRefreshed(current, r, env)
      },
    },
  })
  return { client, url, via: 'device' }
}
