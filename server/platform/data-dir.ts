// DATA_DIR holds the embedded database, the generated master key and local blobs: no other local
// user may read or change anything in it. Its folders are made 0700 and everything under them loses
// every group and other permission bit (files 0600), whether it was created by this version, by an
// older one, or by PGlite, whose initdb sets 0666 on its files explicitly (a umask cannot prevent
// that, and a umask is process-wide: it would change every file and socket the process creates).
import { chmodSync, lstatSync, mkdirSync, readdirSync, realpathSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
import type { Logger } from 'pino'

const GROUP_OTHER = 0o077
const octal = (mode: number) => (mode & 0o7777).toString(8).padStart(4, '0')

/**
 * `path` as a folder only its owner can use: created 0700, or tightened (and logged) when it exists
 * with group or other permissions. A folder this user does not own cannot be changed: that is
 * logged, and the caller carries on (a mounted volume's permissions are the operator's to set).
 */
export function privateDir(path: string, log?: Logger): string {
  const dir = resolve(path)
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const mode = statSync(dir).mode
  if (mode & GROUP_OTHER) {
    const next = mode & ~GROUP_OTHER
    try {
      chmodSync(dir, next & 0o7777)
      log?.warn(
        { path: dir, was: octal(mode), now: octal(next) },
        'data folder was open to other local users: made private',
      )
    } catch (err) {
      log?.error(
        { path: dir, mode: octal(mode), err },
        "data folder is open to other local users and could not be made private: restrict it to the server's user",
      )
    }
  }
  return dir
}

/**
 * Removes group and other permissions from `root` and everything under it. `root` may be reached
 * through a symbolic link (DATA_DIR often is); links under it are neither changed nor followed:
 * chmod would act on their target, which may lie outside.
 */
export function tightenTree(root: string, log?: Logger): void {
  let tightened = 0
  const failed: string[] = []
  const pending = [realpathSync(root)]
  for (let path = pending.pop(); path !== undefined; path = pending.pop()) {
    let st
    try {
      st = lstatSync(path)
    } catch {
      continue // removed meanwhile
    }
    if (st.isSymbolicLink()) continue
    if (st.mode & GROUP_OTHER) {
      try {
        chmodSync(path, st.mode & ~GROUP_OTHER & 0o7777)
        tightened++
      } catch {
        failed.push(path)
      }
    }
    if (!st.isDirectory()) continue
    try {
      for (const name of readdirSync(path)) pending.push(join(path, name))
    } catch {
      failed.push(path) // a folder this user cannot list
    }
  }
  if (tightened) log?.info({ path: root, tightened }, 'made files and folders private (no group or other permissions)')
  if (failed.length)
    log?.error(
      { path: root, failed: failed.slice(0, 10), count: failed.length },
      "could not make these private: restrict them to the server's user",
    )
}
