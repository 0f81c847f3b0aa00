// The configuration part of a site backup: every file the installer keeps in the site's output
// folder (compose .env, or helm values.yaml and secret.yaml; answers.yaml; state.json, the first
// tenant's record). A restore takes from it what the restored data cannot do without: the
// ENCRYPTION_MASTER_KEY every stored secret is encrypted under, and the first tenant's record.
import { existsSync, lstatSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse } from 'yaml'
import { parseEnvFile, writePrivateFile } from '../core/config-file.js'
import type { Resolved } from '../core/context.js'
import { stagingDir } from '../core/staged.js'

/** Files the installer writes for a site; only these are kept (never a backup lying in the folder, say). */
const KEPT = ['.env', 'values.yaml', 'secret.yaml', 'answers.yaml', 'state.json']

/**
 * The site's configuration files: those in use; for a name not in use yet, the one an install has
 * staged (core/staged.ts). The upgrade of an Atrium this installer never configured backs up the
 * configuration it is about to put in use, which holds the master key the running server was given.
 */
export function configurationFiles(outputDir: string): Record<string, string> {
  const files: Record<string, string> = {}
  for (const dir of [outputDir, stagingDir(outputDir)]) {
    if (!existsSync(dir)) continue
    for (const name of readdirSync(dir))
      if (KEPT.includes(name) && !(name in files) && lstatSync(join(dir, name)).isFile())
        files[name] = readFileSync(join(dir, name), 'utf8')
  }
  return files
}

/** The master key in backed-up configuration files, whichever target wrote them; '' when none. */
export function archivedMasterKey(files: Record<string, string>): string {
  if (files['.env']) return parseEnvFile(files['.env']).values.ENCRYPTION_MASTER_KEY ?? ''
  if (files['secret.yaml']) {
    const doc = parse(files['secret.yaml']) as { stringData?: Record<string, unknown> } | null
    return String(doc?.stringData?.ENCRYPTION_MASTER_KEY ?? '')
  }
  return ''
}

/** Why the site's answers forbid the backup's master key (they name another); null when they do not. */
export function masterKeyProblem(ctx: Resolved, archived: string): string | null {
  const given = ctx.values.ENCRYPTION_MASTER_KEY
  if (!archived) return 'the backup holds no ENCRYPTION_MASTER_KEY: its stored secrets could not be read'
  return given && given !== archived
    ? 'the answers set ENCRYPTION_MASTER_KEY to another key than the backup’s, under which its stored secrets cannot be read: remove it from the answers (the restore writes the backup’s key into the configuration)'
    : null
}

/** The first tenant's record, as the backup has it (the restored database's tenant). */
export function restoreState(ctx: Resolved, files: Record<string, string>): void {
  if (files['state.json'] && existsSync(ctx.answers.outputDir))
    writePrivateFile(join(ctx.answers.outputDir, 'state.json'), files['state.json'])
}
