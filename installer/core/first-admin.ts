// The first tenant and its owner, made once through the admin CLI inside the running server. The
// password is generated here and shown once in the summary; only the ids are kept (state.json,
// 0600), so a re-run knows it is done and never makes a second tenant.
import { randomBytes } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Answers } from './answers.js'
import { writePrivateFile } from './config-file.js'

export interface FirstAdmin {
  tenantId: string
  userId: string
  email: string
}
export interface Created extends FirstAdmin {
  password: string
  apiKey: string
}

/** Where the first tenant's ids are kept: beside the configuration. */
export const statePath = (answers: Pick<Answers, 'outputDir'>) => join(answers.outputDir, 'state.json')

export function readFirstAdmin(answers: Answers): FirstAdmin | null {
  if (!existsSync(statePath(answers))) return null
  const state = JSON.parse(readFileSync(statePath(answers), 'utf8')) as { firstAdmin?: FirstAdmin }
  return state.firstAdmin ?? null
}

export function recordFirstAdmin(answers: Answers, admin: FirstAdmin): void {
  writePrivateFile(
    statePath(answers),
    JSON.stringify({ firstAdmin: { tenantId: admin.tenantId, userId: admin.userId, email: admin.email } }, null, 2) +
      '\n',
  )
}

/** 24 random characters: well over the server's minimum, and typeable. */
export const newPassword = (): string => randomBytes(18).toString('base64url')

/**
 * The admin CLI's create-tenant arguments, each value joined to its flag: a name that starts with "-" would otherwise
 * be read as a flag of its own, and refused. The password is not one of them: it goes on standard input
 * (passwordInput), since a command line is seen by every user of the machine (ps) and by `docker events`.
 */
export const createTenantArgs = (answers: Answers): string[] => [
  'create-tenant',
  `--name=${answers.tenantName}`,
  '--plan=enterprise',
  `--email=${answers.adminEmail}`,
  '--password-stdin',
]

/** The password as create-tenant --password-stdin reads it: one line. */
export const passwordInput = (password: string): string => `${password}\n`

/** Reads create-tenant's one JSON line; null when the output is not it. */
export function parseCreated(stdout: string, answers: Answers, password: string): Created | null {
  const line = stdout.trim().split('\n').at(-1) ?? ''
  try {
    const r = JSON.parse(line) as { tenantId?: unknown; userId?: unknown; apiKey?: unknown }
    if (typeof r.tenantId !== 'string' || typeof r.userId !== 'string' || typeof r.apiKey !== 'string') return null
    return { tenantId: r.tenantId, userId: r.userId, apiKey: r.apiKey, email: answers.adminEmail, password }
  } catch {
    return null
  }
}
