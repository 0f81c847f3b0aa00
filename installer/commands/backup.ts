// backup: one archive of the whole site: every database row, every object of its buckets, the
// configuration encrypted with the passphrase. Also what restore shares with it: the input both read.
import { VERSION } from '../../common/version.js'
import { backupSite } from '../backup/backup.js'
import type { BackupManifest } from '../backup/manifest.js'
import { siteServices, type SiteServices } from '../backup/site.js'
import { siteConfig, type Resolved } from '../core/context.js'
import { EXIT, type BackupReport, type BackupSummary } from '../core/report.js'
import { run } from '../core/run.js'
import { runningVersion } from '../deploy/install.js'
import { BadInput, passphraseOf, siteCommand, type FlagValues, type Hooks } from './command.js'
import type { Progress } from '../ui/output.js'
import { output, passphraseFile, site } from './flags.js'

const flags = { ...site, output, passphraseFile }

export type BackupOptions = FlagValues<typeof flags> & Hooks

/** What backup and restore need from the command line and the site, or bad input naming all that is missing. */
export function siteDataInput(
  ctx: Resolved,
  o: { output?: string; input?: string; passphraseFile?: string },
  command: 'backup' | 'restore',
): { services: SiteServices; passphrase: string; path: string } {
  const path = command === 'backup' ? o.output : o.input
  const problems = [
    !path &&
      (command === 'backup'
        ? 'backup needs --output FILE (the archive to write, e.g. atrium-backup.tar)'
        : 'restore needs --input FILE (the archive backup wrote)'),
    !o.passphraseFile &&
      `${command} needs --passphrase-file FILE (the passphrase that ${command === 'backup' ? 'encrypts' : 'encrypted'} the configuration part, which holds ENCRYPTION_MASTER_KEY)`,
  ].filter((p): p is string => Boolean(p))
  if (problems.length) throw new BadInput(problems)
  const passphrase = passphraseOf(o.passphraseFile!)
  const found = siteServices(ctx)
  if ('problems' in found) throw new BadInput(found.problems)
  return { services: found.services, passphrase, path: path! }
}

/** The manifest in the few numbers an admin checks. */
export const summaryOf = (m: BackupManifest): BackupSummary => ({
  atriumVersion: m.atriumVersion,
  schemaVersion: m.schemaVersion,
  createdAt: m.createdAt,
  tables: Object.keys(m.database.tables).length,
  rows: Object.values(m.database.tables).reduce((a, b) => a + b, 0),
  databaseBytes: m.database.bytes,
  objects: m.objects.count,
  objectBytes: m.objects.bytes,
})

/** One archive of the whole site: database, objects, configuration (encrypted). */
export async function backupCommand(
  ctx: Resolved,
  o: BackupOptions = {},
  progress: Progress = {},
): Promise<BackupReport> {
  const { services, passphrase, path } = siteDataInput(ctx, o, 'backup')
  const report: BackupReport = {
    command: 'backup',
    exitCode: EXIT.ok,
    path,
    bytes: 0,
    sha256: '',
    backup: null,
    error: null,
  }
  try {
    // The version the site runs is the one its data belongs to (a restore with that release's installer must accept
    // it).
    const version =
      (await runningVersion(ctx, siteConfig(ctx), o.runner ?? run)) ?? (ctx.existing?.ATRIUM_VERSION || VERSION)
    const r = await backupSite(ctx, services, { output: path, passphrase, version, say: progress.note })
    return { ...report, bytes: r.bytes, sha256: r.sha256, backup: summaryOf(r.manifest) }
  } catch (err) {
    return { ...report, exitCode: EXIT.error, error: `No backup was written: ${(err as Error).message}` }
  }
}

export const backup = siteCommand({
  name: 'backup',
  summary:
    'one archive of the whole site (--output FILE): every database row (pg_dump), every\nobject of its buckets, the configuration encrypted with --passphrase-file',
  flags,
  needs: { answers: 'the site to back up' },
  run: backupCommand,
})
