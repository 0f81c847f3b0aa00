// The flags more than one command reads, each declared once; a command lists the ones it reads.
import type { Flag } from './command.js'

const flag = <F extends Flag>(f: F): F => f
/** A flag that takes a value, which the usage shows as `value` (FILE, DIR, HOST). */
export const stringFlag = (value: string, help: string) => flag({ type: 'string', value, help })
/** A flag that takes a value and may be given again, once per value. */
export const listFlag = (value: string, help: string) => flag({ type: 'list', value, help })
/** A flag that is given or not. */
export const booleanFlag = (help: string) => flag({ type: 'boolean', help })

export const answers = stringFlag('FILE', 'the answers (YAML); see docs/installer.md')
export const yes = flag({
  type: 'boolean',
  short: 'y',
  help: 'do not ask; required with --answers for configure and install',
})
export const target = stringFlag('compose|helm', 'overrides the answers file')
export const airGapped = booleanFlag('no outside network: features needing outside APIs are off')
export const dryRun = booleanFlag('show what would change; write nothing')
export const json = booleanFlag(
  "one JSON object on stdout: the command's report (every command but the\ninteractive installer)",
)
export const strict = booleanFlag('warnings count as failures (exit 4)')
export const acceptCheck = listFlag(
  'ID',
  "carry on although this check failed (repeatable; recorded in answers.yaml with\nwho and when, and applied again on replay); the site's own services'\nconnectivity and credential checks cannot be accepted",
)
export const output = stringFlag(
  'FILE|DIR',
  'where support-bundle (default atrium-support-<time>.zip), backup or images save writes',
)
export const images = stringFlag('DIR', "air-gapped: the air-gap kit's folder (install with compose loads it first)")
export const allowUnsigned = booleanFlag("accept a kit without the vendor's signature (one saved with images save)")
export const allowSkip = booleanFlag(
  'install (compose): let this upgrade skip a minor version (read the release notes)',
)
export const registry = stringFlag('HOST', 'air-gapped helm: the private registry that holds the images')
export const passphraseFile = stringFlag(
  'FILE',
  "backup, restore, and install's upgrade backup: the passphrase (12+ characters)",
)
export const skipBackup = booleanFlag('install: upgrade without taking a backup first')

/** What every command that reads the answers reads with them. */
export const site = { answers, target, airGapped, json }
