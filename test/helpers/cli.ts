// Runs the admin CLI or the server as a separate process, as an operator would.
import { spawn, type ChildProcess } from 'node:child_process'
import { request } from 'node:http'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { Test } from 'tap'

export const ROOT = fileURLToPath(new URL('../../', import.meta.url))

export interface Ran {
  code: number | null
  stdout: string
  stderr: string
}

/** tsx's loader by its path, so that a script also runs from a working directory outside the repository. */
const TSX = pathToFileURL(join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href

export function spawnScript(
  script: string,
  args: string[],
  env: Record<string, string>,
  o: { cwd?: string; input?: string | Buffer } = {},
): ChildProcess {
  const child = spawn(process.execPath, ['--import', TSX, join(ROOT, script), ...args], {
    cwd: o.cwd ?? ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: [o.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  })
  // A reader that stops early (a bound passed) must not turn into an unhandled EPIPE here.
  child.stdin?.on('error', () => {})
  child.stdin?.end(o.input)
  return child
}

export function finished(child: ChildProcess): Promise<Ran> {
  let stdout = ''
  let stderr = ''
  child.stdout?.on('data', (c: Buffer) => (stdout += c.toString()))
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()))
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })))
}

/** The admin CLI; `input` is its standard input (a password for --password-stdin), else it has none. */
export const admin = (args: string[], env: Record<string, string>, input?: string | Buffer) =>
  finished(spawnScript('server/cli.ts', args, env, { input }))

/** Starts `server/main.ts` (from source, under tsx) and waits for it to listen. */
export const startServer = (env: Record<string, string>) => listening(spawnScript('server/main.ts', [], env))

/** A server process started by the caller, once it listens. */
async function listening(
  child: ChildProcess,
): Promise<{ child: ChildProcess; done: Promise<Ran>; port: number; base: string }> {
  const done = finished(child)
  let stderr = ''
  const port = await new Promise<number>((resolve, reject) => {
    child.stderr!.on('data', (c: Buffer) => {
      stderr += c.toString()
      const m = /Atrium is listening on http:\/\/[^:]+:(\d+)/.exec(stderr)
      if (m) resolve(Number(m[1]))
    })
    child.on('exit', () => reject(new Error(`server exited before listening:\n${stderr}`)))
  })
  return { child, done, port, base: `http://127.0.0.1:${port}` }
}

export interface ServerProcess {
  child: ChildProcess
  /** Resolves when the process has exited, with everything it wrote. */
  done: Promise<Ran>
  port: number
  base: string
  /** An API call with the tenant's key; the body parsed. */
  call(apiKey: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON from the API
}

/** Starts `server/main.ts` on `env`, waits for it to listen, and kills it (SIGKILL) when the test ends. */
export const serverProcess = (t: Test, env: Record<string, string>): Promise<ServerProcess> =>
  serverProcessOf(t, spawnScript('server/main.ts', [], env))

/** serverProcess for a server the caller spawned (another script: the one trusting a test's license key). */
export async function serverProcessOf(t: Test, spawned: ChildProcess): Promise<ServerProcess> {
  const { child, done, port, base } = await listening(spawned)
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await done
  })
  return {
    child,
    done,
    port,
    base,
    async call(apiKey, method, path, body) {
      const r = await fetch(`${base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${apiKey}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
      const text = await r.text()
      return { status: r.status, body: text ? JSON.parse(text) : null }
    },
  }
}

/** A tenant made by the admin CLI (`create-tenant`), as an operator makes one. */
export async function adminTenant(
  t: Test,
  env: Record<string, string>,
  name: string,
  plan?: string,
): Promise<{ tenantId: string; apiKey: string }> {
  const created = await admin(['create-tenant', '--name', name, ...(plan ? ['--plan', plan] : [])], env)
  t.equal(created.code, 0, created.stderr)
  return JSON.parse(created.stdout)
}

/**
 * A POST sent half: in flight (its body incomplete) until `finish()` sends the rest, for what a
 * server does with a request it is in the middle of (a shutdown). `connected` resolves once its
 * connection is open; `response` with the answer and its Connection header.
 */
export function halfSentPost(url: string, headers: Record<string, string>, body: string) {
  let finish = () => {}
  let onConnect = () => {}
  const connected = new Promise<void>((resolve) => (onConnect = resolve))
  const response = new Promise<{ status: number; text: string; connection: string | undefined }>((resolve, reject) => {
    const req = request(
      url,
      { method: 'POST', headers: { ...headers, 'content-length': Buffer.byteLength(body) } },
      (res) => {
        let text = ''
        res.on('data', (c: Buffer) => (text += c.toString()))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, connection: res.headers.connection }))
      },
    )
    req.on('error', reject)
    req.on('socket', (socket) => socket.on('connect', onConnect))
    const half = Math.floor(body.length / 2)
    req.write(body.slice(0, half))
    finish = () => req.end(body.slice(half))
  })
  return { connected, response, finish: () => finish() }
}

/**
 * `atrium login --url <base> --no-browser` (the client package's CLI) with `env`: resolves once it
 * shows the approval address and the code to compare, with `done` for its end.
 */
export async function cliDeviceLogin(
  base: string,
  env: Record<string, string>,
): Promise<{ child: ChildProcess; done: Promise<Ran>; authUrl: string; code: string }> {
  const child = spawnScript('client/src/cli/main.ts', ['login', '--url', base, '--no-browser'], env)
  const done = finished(child)
  let shown = ''
  const started = await new Promise<{ authUrl: string; code: string }>((resolve, reject) => {
    child.stderr!.on('data', (c: Buffer) => {
      shown += c.toString()
      const url = /^\s+(http\S+\/cli\/auth\/approve\?\S+)$/m.exec(shown)
      const code = /^\s+([A-Z]{4}-[A-Z]{4})$/m.exec(shown)
      if (url && code) resolve({ authUrl: url[1]!, code: code[1]! })
    })
    child.on('exit', () => reject(new Error(`the CLI exited before showing the login:\n${shown}`)))
  })
  return { child, done, ...started }
}
