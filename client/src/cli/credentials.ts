// Where the CLI keeps its login: credentials.json in the user's config folder ($ATRIUM_CONFIG_DIR,
// else $XDG_CONFIG_HOME/atrium or ~/.config/atrium; %APPDATA%\atrium on Windows), mode 0600 in a
// 0700 folder, so other users of the machine cannot read it. A device login stores its access token
// with the time it counts as expired, and the refresh token that renews it; an API key login stores
// the key. Writes go to a temporary file renamed over the old one, so a crash never leaves half a file.
import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'

export interface StoredUser {
  id: string
  email: string
  name: string
}
export interface StoredTenant {
  id: string
  name: string
  plan: string
}

export type Stored =
  | { url: string; kind: 'api-key'; apiKey: string }
  | {
      url: string
      kind: 'device'
      accessToken: string
      /** ms since the epoch when the access token counts as expired (60 s before it does). */
      staleAt: number
      refreshToken: string
      refreshExpiresAt: string
      user: StoredUser
      tenant: StoredTenant
    }

export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.ATRIUM_CONFIG_DIR) return env.ATRIUM_CONFIG_DIR
  if (process.platform === 'win32' && env.APPDATA) return join(env.APPDATA, 'atrium')
  return join(env.XDG_CONFIG_HOME || join(homedir(), '.config'), 'atrium')
}

export const credentialsFile = (env: NodeJS.ProcessEnv = process.env) => join(configDir(env), 'credentials.json')

export function readStored(env: NodeJS.ProcessEnv = process.env): Stored | null {
  try {
    return JSON.parse(readFileSync(credentialsFile(env), 'utf8')) as Stored
  } catch {
    return null
  }
}

export function writeStored(stored: Stored, env: NodeJS.ProcessEnv = process.env): void {
  const dir = configDir(env)
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const file = credentialsFile(env)
  const tmp = `${file}.${process.pid}.tmp`
  writeFileSync(tmp, JSON.stringify(stored, null, 2) + '\n', { mode: 0o600 })
  chmodSync(tmp, 0o600)
  renameSync(tmp, file)
}

export function removeStored(env: NodeJS.ProcessEnv = process.env): boolean {
  const file = credentialsFile(env)
  const had = readStored(env) !== null
  rmSync(file, { force: true })
  return had
}
