// The flags more than one command reads, each declared once; a command lists the ones it reads.
import type { Flag } from './command.js'

const flag = <F extends Flag>(f: F): F => f

export const answers = flag({ type: 'string', value: 'FILE', help: 'the answers (YAML); see docs/installer.md' })
export const yes = flag({
  type: 'boolean',
  short: 'y',
  help: 'do not ask; required with --answers for configure and install',
})
export const target = flag({ type: 'string', value: 'compose|helm', help: 'overrides the answers file' })
export const airGapped = flag({ type: 'boolean', help: 'no outside network: features needing outside APIs are off' })
export const dryRun = flag({ type: 'boolean', help: 'show what would change; write nothing' })
export const json = flag({
  type: 'boolean',
  help: "one JSON object on stdout: the command's report (every command but the\ninteractive installer)",
})
export const strict = flag({ type: 'boolean', help: 'warnings count as failures (exit 4)' })
export const ignoreFailed = flag({
  type: 'boolean',
  name: 'ignore-failed-checks',
  help: 'configure even though checks failed (they are still shown and reported)',
})
export const output = flag({
  type: 'string',
  value: 'FILE|DIR',
  help: 'where support-bundle (default atrium-support-<time>.zip), backup or images save writes',
})
export const images = flag({
  type: 'string',
  value: 'DIR',
  help: "air-gapped: the air-gap kit's folder (install with compose loads it first)",
})
export const allowUnsigned = flag({
  type: 'boolean',
  help: "accept a kit without the vendor's signature (one saved with images save)",
})
export const allowSkip = flag({
  type: 'boolean',
  help: 'install (compose): let this upgrade skip a minor version (read the release notes)',
})
export const registry = flag({
  type: 'string',
  value: 'HOST',
  help: 'air-gapped helm: the private registry that holds the images',
})
export const passphraseFile = flag({
  type: 'string',
  value: 'FILE',
  help: "backup, restore, and install's upgrade backup: the passphrase (12+ characters)",
})
export const skipBackup = flag({ type: 'boolean', help: 'install: upgrade without taking a backup first' })

/** What every command that reads the answers reads with them. */
export const site = { answers, target, airGapped, json }
