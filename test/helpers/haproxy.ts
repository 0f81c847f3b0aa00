// HAProxy (Debian's) on loopback in front of Atrium's replicas, as docs/operations.md describes the
// topology: round robin, each replica health-checked on /readyz every 500 ms (three failures in a
// row take it out, one success puts it back), and a request whose connection a replica refused
// (stopping, or not started yet) tried again on another. For the replicas test and the replicas benchmark.
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { accepting } from './listen.js'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export interface Haproxy {
  port: number
  child: ChildProcess
  stop(): Promise<void>
}

/**
 * The configuration for `backends` (loopback ports), listening on `port`; `httpCheck`: the path
 * that must answer 200 (null: a TCP connect is the check, for a baseline server without /readyz).
 */
export function haproxyConfig(port: number, backends: number[], httpCheck: string | null = '/readyz'): string {
  return [
    'global',
    '  maxconn 4096',
    'defaults',
    '  mode http',
    '  timeout connect 2s',
    '  timeout client 60s',
    '  timeout server 60s',
    // A replica busy at full load (or starved by a neighbour starting) answers its health check
    // late, not never: only three checks in a row unanswered for 5 s each take it out. A stopping
    // replica need not be seen quickly: the connections it refuses are tried again on another.
    '  timeout check 5s',
    // A connection refused (a replica stopping or starting) is tried again, on another replica.
    '  retries 3',
    '  option redispatch 1',
    '  retry-on conn-failure empty-response',
    'frontend atrium',
    `  bind 127.0.0.1:${port}`,
    '  default_backend replicas',
    'backend replicas',
    '  balance roundrobin',
    ...(httpCheck ? [`  option httpchk GET ${httpCheck}`, '  http-check expect status 200'] : []),
    '  default-server inter 500 fall 3 rise 1',
    ...backends.map((p, i) => `  server replica${i + 1} 127.0.0.1:${p} check`),
    '',
  ].join('\n')
}

export async function startHaproxy(port: number, backends: number[], httpCheck?: string | null): Promise<Haproxy> {
  const dir = mkdtempSync(join(tmpdir(), 'atrium-haproxy-'))
  const cfg = join(dir, 'haproxy.cfg')
  writeFileSync(cfg, haproxyConfig(port, backends, httpCheck))
  // -db: in the foreground, logging to stderr.
  const child = spawn('haproxy', ['-db', '-f', cfg], { stdio: ['ignore', 'ignore', 'pipe'] })
  let err = ''
  child.stderr!.on('data', (c: Buffer) => (err = (err + c.toString()).slice(-4000)))
  await accepting(child, port, 'haproxy').catch((e: Error) => {
    child.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
    throw new Error(`${e.message}: ${err}`)
  })
  return {
    port,
    child,
    stop: async () => {
      if (child.exitCode === null) {
        child.kill('SIGTERM')
        await new Promise((r) => child.once('exit', r))
      }
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
