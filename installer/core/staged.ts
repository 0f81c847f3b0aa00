// An install's new configuration is staged: written whole under <outputDir>/.pending/, deployed
// from there, and moved over the files in use only once the deploy answers /readyz. Until then the
// files in use are those of the Atrium that runs, byte for byte: a deploy that fails (or an
// installer killed half-way) leaves them as they were, and the next run starts from them. The
// configure command and the interactive installer's "write, deploy later" write the files in use
// directly (nothing is deployed by them).
import { existsSync, readdirSync, renameSync, rmSync } from 'node:fs'
import { basename, join } from 'node:path'
import type { ConfigFiles } from './context.js'

export const stagingDir = (outputDir: string) => join(outputDir, '.pending')

/** The same files, staged. */
export function stagedFiles(files: ConfigFiles, outputDir: string): ConfigFiles {
  const at = (path: string) => join(stagingDir(outputDir), basename(path))
  return files.target === 'compose'
    ? { target: 'compose', env: at(files.env), answers: at(files.answers) }
    : { target: 'helm', values: at(files.values), secret: at(files.secret), answers: at(files.answers) }
}

/**
 * The staged files become the ones in use: each renamed over its namesake (whole: a rename never
 * leaves half a file), the answers last, so a run cut short between renames is replayed from the
 * answers that match what was deployed before.
 */
export function commitStaged(outputDir: string): string[] {
  const dir = stagingDir(outputDir)
  if (!existsSync(dir)) return []
  const names = readdirSync(dir).sort((a, b) => Number(a === 'answers.yaml') - Number(b === 'answers.yaml'))
  for (const name of names) renameSync(join(dir, name), join(outputDir, name))
  rmSync(dir, { recursive: true, force: true })
  return names
}

/** Forgets a staged configuration: its deploy failed, or a run left it behind. True when there was one. */
export function dropStaged(outputDir: string): boolean {
  const dir = stagingDir(outputDir)
  if (!existsSync(dir)) return false
  rmSync(dir, { recursive: true, force: true })
  return true
}
