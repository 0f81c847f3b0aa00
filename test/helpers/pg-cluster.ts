// A PostgreSQL cluster of a test's own, for what the shared test server cannot show: it trusts every
// loopback connection, so no pg_hba.conf refusal and no wrong password can be had from it. initdb
// and pg_ctl of this machine's PostgreSQL, on a free loopback port, with the pg_hba.conf the test
// gives; stopped and removed when the test ends.
import { execFileSync } from 'node:child_process'
import { chownSync, existsSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Test } from 'tap'
import { freePort, tempDir } from './platform.js'
import { runTool } from './tools.js'

/** initdb and pg_ctl: on PATH, else the newest of Debian's /usr/lib/postgresql/<major>/bin. */
function serverBin(): string | null {
  const onPath = (process.env.PATH ?? '').split(':').find((d) => d && existsSync(join(d, 'initdb')))
  if (onPath) return onPath
  const root = '/usr/lib/postgresql'
  const majors = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : []
  const found = majors.map((m) => join(root, m, 'bin')).find((d) => existsSync(join(d, 'initdb')))
  return found ?? null
}

/** PostgreSQL (and PgBouncer) refuse to run as root: as root, the cluster belongs to the postgres user. */
export function postgresOwner(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null
  try {
    const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim())
    return { uid: id('-u'), gid: id('-g') }
  } catch {
    return null
  }
}

/** tap's skip option: false when a cluster can be made here, else why not. */
export function clusterSkip(): false | string {
  if (!serverBin()) return "needs PostgreSQL's server programs (initdb, pg_ctl): apt-get install postgresql"
  if (process.getuid?.() === 0 && !postgresOwner())
    return 'runs as root, and there is no postgres user to own the cluster'
  return false
}

export interface Cluster {
  port: number
  /** psql as the cluster's superuser over its unix socket (trusted), e.g. to make roles and databases. */
  psql: (sql: string) => Promise<void>
}

/**
 * A running cluster on 127.0.0.1:<port>. `hba` are pg_hba.conf's lines for TCP connections; the
 * superuser `admin` is trusted on the cluster's unix socket alone.
 */
export async function pgCluster(t: Test, hba: string[]): Promise<Cluster> {
  const bin = serverBin()!
  const user = postgresOwner()
  const dir = tempDir(t, 'atrium-pg-')
  if (user) chownSync(dir, user.uid, user.gid)
  const data = join(dir, 'data')
  const as = (tool: string, args: string[]) =>
    user
      ? runTool('runuser', ['-u', 'postgres', '--', join(bin, tool), ...args], { cwd: dir })
      : runTool(join(bin, tool), args, { cwd: dir })
  const init = await as('initdb', ['-D', data, '-U', 'admin', '-A', 'trust', '--no-sync', '-E', 'UTF8'])
  if (init.code !== 0) throw new Error(`initdb failed: ${init.stderr}`)
  writeFileSync(join(data, 'pg_hba.conf'), ['local all all trust', ...hba].join('\n') + '\n')
  const port = await freePort()
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`
  const started = await as('pg_ctl', ['start', '-D', data, '-w', '-l', join(dir, 'log'), '-o', options])
  if (started.code !== 0) throw new Error(`pg_ctl start failed: ${started.stderr}${started.stdout}`)
  // Registered after tempDir's removal, so it runs before it (tap runs teardowns last in, first out).
  t.teardown(async () => {
    await as('pg_ctl', ['stop', '-D', data, '-m', 'immediate'])
  })
  return {
    port,
    psql: async (sql) => {
      const r = await runTool('psql', [
        '-h',
        dir,
        '-p',
        String(port),
        '-U',
        'admin',
        '-d',
        'postgres',
        '-v',
        'ON_ERROR_STOP=1',
        '-c',
        sql,
      ])
      if (r.code !== 0) throw new Error(`psql failed: ${r.stderr}`)
    },
  }
}
