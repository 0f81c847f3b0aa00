// PgBouncer (Debian's) of a test's own in front of the test PostgreSQL, on a free loopback port,
// in the pool mode the test asks for; stopped when the test ends. PgBouncer refuses to run as
// root: as root it runs as the postgres user, its files that user's.
import { spawn } from 'node:child_process'
import { chownSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Test } from 'tap'
import { freePort, services, tempDir } from './platform.js'
import { accepting } from './listen.js'
import { findTool } from './tools.js'
import { postgresOwner } from './pg-cluster.js'

export const pgbouncerSkip = (): false | string =>
  !findTool('pgbouncer')
    ? 'needs pgbouncer (apt-get install pgbouncer)'
    : !services.databaseUrl
      ? 'needs TEST_DATABASE_URL: PgBouncer stands in front of a real PostgreSQL'
      : false

/** DATABASE_URL through a PgBouncer in `poolMode`, with `extra` lines for pgbouncer.ini. */
export async function pgbouncer(
  t: Test,
  poolMode: 'session' | 'transaction' | 'statement',
  extra: string[] = [],
): Promise<string> {
  const target = new URL(services.databaseUrl)
  const dir = tempDir(t, 'atrium-pgbouncer-')
  const port = await freePort()
  const ini = join(dir, 'pgbouncer.ini')
  writeFileSync(
    ini,
    [
      '[databases]',
      // Every database name to the same server, as the test user (auth_type any: no password file).
      `* = host=${target.hostname} port=${target.port || 5432} user=${decodeURIComponent(target.username) || 'postgres'}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = any',
      `pool_mode = ${poolMode}`,
      'max_client_conn = 500',
      'default_pool_size = 40',
      `logfile = ${join(dir, 'pgbouncer.log')}`,
      ...extra,
      '',
    ].join('\n'),
  )
  const owner = postgresOwner()
  if (owner) {
    chownSync(dir, owner.uid, owner.gid)
    chownSync(ini, owner.uid, owner.gid)
  }
  // Its own process as that user (not under runuser, whose death would leave it running).
  const child = spawn('pgbouncer', [ini], { stdio: 'ignore', ...(owner ?? {}) })
  t.teardown(() => void (child.exitCode === null && child.kill('SIGKILL')))
  await accepting(child, port, 'pgbouncer')
  const via = new URL(services.databaseUrl)
  via.hostname = '127.0.0.1'
  via.port = String(port)
  return via.toString()
}
