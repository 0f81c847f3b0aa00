// How this installer is started, so that every command it prints (the replay, the answers file's
// header, the summary's hints) is one that works where it is read: from the air-gap kit, the kit's
// own `atrium-installer` (a site may have no npm); from a source checkout, npm's script in that
// checkout. Both by absolute path, so the command works from any working directory, and with every
// word quoted for a POSIX shell.
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

/** Defined (true) by installer/build.ts in the one-file installer the kit carries; undefined when run from source. */
declare const ATRIUM_BUNDLED_INSTALLER: boolean | undefined

export const BUNDLED = typeof ATRIUM_BUNDLED_INSTALLER !== 'undefined' && ATRIUM_BUNDLED_INSTALLER

/** In the kit this module sits in <kit>/installer/cli.js, beside the script that starts it (installer/build.ts). */
const KIT_SCRIPT = fileURLToPath(new URL('../../atrium-installer', import.meta.url))
/** The checkout's root, where package.json names the `installer` script. */
const CHECKOUT = fileURLToPath(new URL('../..', import.meta.url)).replace(/\/+$/, '')

/** The words that start this installer: the kit's script, or npm's script in this checkout. */
export const installerPrefix = (bundled = BUNDLED): string[] =>
  bundled ? [KIT_SCRIPT] : ['npm', '--prefix', CHECKOUT, 'run', '--silent', 'installer', '--']

/**
 * A word as a POSIX shell reads it back: left as it is when it holds nothing the shell would act
 * on, single-quoted otherwise. A word like `<file>` is a placeholder and stays as it is.
 */
export function shellWord(word: string): string {
  if (/^<[^<>]+>$/.test(word) || /^[\w@%+=:,./-]+$/.test(word)) return word
  return `'${word.replace(/'/g, `'\\''`)}'`
}

/**
 * The command that runs this installer with `args`: the one way every printed command is made.
 * `release`: another release's installer (a rollback runs the one of the release it goes back to),
 * which this one cannot know the path of, so it is named as a placeholder.
 */
export function installerCommand(args: readonly string[], o: { bundled?: boolean; release?: string } = {}): string {
  const prefix = o.release ? [`<the ${o.release} installer>`] : installerPrefix(o.bundled)
  return [...prefix, ...args].map(shellWord).join(' ')
}

/** The command that configures or installs the site again from its answers file, by its absolute path. */
export const answersCommand = (command: 'configure' | 'install', answersPath: string): string =>
  installerCommand([command, '--answers', resolve(answersPath), '--yes'])
