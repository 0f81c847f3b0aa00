// backup: what it needs from the command line and the site, refused as bad input naming each. A
// backup taken and restored on real services is in restore.test.ts (the upgrade's backup).
import t from 'tap'
import { backupCommand } from '../../../installer/commands/backup.js'
import { BadInput } from '../../../installer/commands/command.js'
import { DEFAULT_ANSWERS } from '../../../installer/core/answers.js'
import { contextFor } from '../../../installer/core/context.js'
import { tempDir } from '../../helpers/platform.js'
import { passphraseFile, problemsOf } from '../fixtures.js'

t.test(
  'backup needs its archive and a passphrase of 12 characters or more, and a site with services: bad input naming each',
  async (t) => {
    const ctx = contextFor({ ...DEFAULT_ANSWERS, outputDir: tempDir(t) }, { env: {} })
    await t.rejects(
      backupCommand(ctx, {}),
      new BadInput([
        'backup needs --output FILE (the archive to write, e.g. atrium-backup.tar)',
        'backup needs --passphrase-file FILE (the passphrase that encrypts the configuration part, which holds ENCRYPTION_MASTER_KEY)',
      ]),
    )
    t.match(await problemsOf(backupCommand(ctx, { output: 'x.tar', passphraseFile: passphraseFile(t, 'short\n') })), [
      /shorter than 12 characters/,
    ])
    t.match(await problemsOf(backupCommand(ctx, { output: 'x.tar', passphraseFile: '/nonexistent/passphrase' })), [
      /cannot read the passphrase file \/nonexistent\/passphrase: ENOENT/,
    ])
    // A site with nothing configured has no services to back up.
    t.match(await problemsOf(backupCommand(ctx, { output: 'x.tar', passphraseFile: passphraseFile(t) })), [
      /DATABASE_URL is not configured/,
      /R2_ENDPOINT is not configured/,
    ])
  },
)
