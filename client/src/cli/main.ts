#!/usr/bin/env node
// `atrium`: the command-line client. See USAGE below and the package README.
import { createReadStream, createWriteStream, readFileSync, statSync } from 'node:fs'
import { stat } from 'node:fs/promises'
import { basename } from 'node:path'
import { createInterface } from 'node:readline/promises'
import { Readable, Writable } from 'node:stream'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { AtriumError, AtriumNetworkError, type AtriumClient } from '../index.js'
import { readStored, removeStored, writeStored, credentialsFile } from './credentials.js'
import { deviceLogin } from './device-login.js'
import { bytes, counted, progress } from './progress.js'
import { clientFor, NotSignedIn } from './session.js'
import { EXPIRY_BUFFER_MS } from '../tokens.js'

export const VERSION: string = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version

export const USAGE = `atrium ${VERSION}: the Atrium command-line client

Usage: atrium <command> [options]

Sign in
  login [--no-browser]                 device login: approve in the browser, compare the code
  login --api-key <key>                store an API key instead (or set ATRIUM_API_KEY)
  logout                               end the session and forget the stored credentials
  whoami                               the user, tenant and credential in use

Projects and files
  projects list | get <id> | delete <id>
  projects create --name <n> [--description <d>] [--language <l>]
  files list <project> | get <project> <path> [--output <file>] | put <project> <path> <file>
  files delete <project> <path>

Agents and chat
  agents list
  agents run <agent> --goal <text> [--project <id>]     starts a run and streams it to the end
  chat [--session <id>] [--message <text>]              interactive, or one message and its reply

Data
  export [--include projects,agents,...] [--format zip|json] [--output <file>]
                                       exports the tenant and downloads the archive
  restore <file> [--merge] [--validate]                 uploads a backup and waits for the restore
                                       (--merge adds to the data, --validate only checks)
  restore <project-backup.zip> [--project <id> | --as-new-project]
                                       a project backup: into that project, or a new one
                                       (default: the project it was made of)

Options on every command
  --url <address>      the Atrium server (or ATRIUM_URL; default: the one you logged in to)
  --api-key <key>      an API key (or ATRIUM_API_KEY)
  --json               print the result as JSON on stdout (errors too)
  -h, --help           this text

Exit codes
  0 done   1 the server refused (the error's code is printed)   2 bad usage
  3 not signed in, or the session is no longer valid: run \`atrium login\`
  4 the server could not be reached   5 the export, restore or run failed   130 interrupted
`

export class UsageError extends Error {}
class JobFailed extends Error {
  constructor(
    message: string,
    readonly result: unknown,
  ) {
    super(message)
  }
}

export interface Io {
  env: NodeJS.ProcessEnv
  stdout: NodeJS.WritableStream & { isTTY?: boolean }
  stderr: NodeJS.WriteStream
  stdin: NodeJS.ReadableStream & { isTTY?: boolean }
}

const OPTIONS = {
  url: { type: 'string' },
  'api-key': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  'no-browser': { type: 'boolean' },
  name: { type: 'string' },
  description: { type: 'string' },
  language: { type: 'string' },
  output: { type: 'string', short: 'o' },
  goal: { type: 'string' },
  project: { type: 'string' },
  session: { type: 'string' },
  message: { type: 'string', short: 'm' },
  include: { type: 'string' },
  format: { type: 'string' },
  merge: { type: 'boolean' },
  validate: { type: 'boolean' },
  'as-new-project': { type: 'boolean' },
} as const

type Flags = { [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K]['type'] extends 'string' ? string : boolean }

const collect = async <T>(it: AsyncIterable<T>): Promise<T[]> => {
  const out: T[] = []
  for await (const x of it) out.push(x)
  return out
}

export async function run(argv: string[], io: Io): Promise<number> {
  let parsed: { values: Flags; positionals: string[] }
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true }) as never
  } catch (err) {
    throw new UsageError((err as Error).message)
  }
  const { values: f, positionals } = parsed
  const [command, ...args] = positionals
  const say = (text: string) => io.stderr.write(text + '\n')
  /** The result: JSON with --json, else `human` (or the JSON, indented). */
  const print = (value: unknown, human?: string) =>
    io.stdout.write((f.json || human === undefined ? JSON.stringify(value, null, f.json ? 0 : 2) : human) + '\n')
  /** A whole list: JSON with --json, else a line an item (or `none` when it is empty). */
  const printList = async <T>(items: AsyncIterable<T>, line: (item: T) => string, none: string) => {
    const all = await collect(items)
    print(all, all.map(line).join('\n') || none)
  }
  const target = { url: f.url ?? io.env.ATRIUM_URL, apiKey: f['api-key'] ?? io.env.ATRIUM_API_KEY }
  const need = (n: number, what: string) => {
    if (args.length < n) throw new UsageError(`${command} ${args[0] ?? ''}: missing ${what}`.replace(/ +/g, ' '))
  }
  const client = async (): Promise<AtriumClient> => (await clientFor(target, io.env)).client
  if (f.help || command === undefined || command === 'help') {
    io.stdout.write(USAGE)
    return 0
  }
  /** The `list` subcommands that take no argument, by command. */
  const lists = new Map<string, (c: AtriumClient) => Promise<void>>([
    ['projects', (c) => printList(c.projects.list(), (p) => `${p.id}  ${p.name}`, '(no projects)')],
    ['agents', (c) => printList(c.agents.list(), (a) => `${a.id}  ${a.name}`, '(no agents)')],
  ])
  const list = args[0] === 'list' ? lists.get(command) : undefined
  if (list) {
    await list(await client())
    return 0
  }

  switch (command) {
    case 'login': {
      if (target.apiKey) {
        if (!target.url) throw new UsageError('login --api-key: pass --url or set ATRIUM_URL')
        const me = await (await clientFor(target, io.env)).client.me()
        writeStored({ url: target.url, kind: 'api-key', apiKey: target.apiKey }, io.env)
        print(
          { url: target.url, tenant: me.tenant, credential: me.credential },
          `Signed in to ${target.url} with an API key (tenant ${me.tenant?.name ?? '?'}).`,
        )
        return 0
      }
      const url = target.url ?? readStored(io.env)?.url
      if (!url) throw new UsageError('login: pass --url or set ATRIUM_URL')
      const issued = await deviceLogin({
        baseUrl: url,
        cliVersion: VERSION,
        openBrowser: !f['no-browser'] && !io.env.ATRIUM_NO_BROWSER,
        show: (s) =>
          say(
            `To sign in, open this address in a browser:\n\n  ${s.authUrl}\n\nand check that it shows the code\n\n  ${s.verificationCode}\n\nWaiting for the approval (until ${new Date(s.expiresAt).toLocaleTimeString()})...`,
          ),
      })
      writeStored(
        {
          url,
          kind: 'device',
          accessToken: issued.token,
          staleAt: Date.now() + issued.expiresIn * 1000 - EXPIRY_BUFFER_MS,
          refreshToken: issued.refreshToken,
          refreshExpiresAt: issued.refreshExpiresAt,
          user: issued.user,
          tenant: issued.tenant,
        },
        io.env,
      )
      print(
        { url, user: issued.user, tenant: issued.tenant },
        `Signed in to ${url} as ${issued.user.email} (tenant ${issued.tenant.name}). Credentials: ${credentialsFile(io.env)}`,
      )
      return 0
    }
    case 'logout': {
      const stored = readStored(io.env)
      if (stored?.kind === 'device') {
        // Ends the session on the server too; a session already over is no reason to keep the file.
        await (await clientFor({ url: stored.url, apiKey: undefined }, io.env)).client.logout().catch(() => {})
      }
      const had = removeStored(io.env)
      print({ loggedOut: had }, had ? 'Signed out.' : 'Not signed in.')
      return 0
    }
    case 'whoami': {
      const { client: c, url } = await clientFor(target, io.env)
      const me = await c.me()
      print(
        { url, ...me },
        [
          `${me.user ? `${me.user.name} <${me.user.email}> (${me.user.role})` : `API key ${me.credential.id}`}`,
          `tenant ${me.tenant?.name ?? '-'} (${me.tenant?.id ?? '-'}, plan ${me.tenant?.plan ?? '-'})`,
          `server ${url}`,
        ].join('\n'),
      )
      return 0
    }
    case 'projects': {
      const c = await client()
      const [sub, id] = args
      if (sub === 'get') {
        need(2, '<id>')
        print(await c.projects.get(id!))
      } else if (sub === 'create') {
        if (!f.name) throw new UsageError('projects create: --name is required')
        const p = await c.projects.create({
          name: f.name,
          ...(f.description ? { description: f.description } : {}),
          ...(f.language ? { language: f.language } : {}),
        } as never)
        print(p, `${p.id}  ${p.name}`)
      } else if (sub === 'delete') {
        need(2, '<id>')
        print(await c.projects.delete(id!), `Deleted ${id}.`)
      } else throw new UsageError(`projects: unknown subcommand ${sub ?? '(none)'}`)
      return 0
    }
    case 'files': {
      const c = await client()
      const [sub, project, path, file] = args
      need(2, '<project>')
      if (sub === 'list') {
        await printList(c.projects.files(project!), (x) => `${x.path}  ${bytes(x.size)}`, '(no files)')
      } else if (sub === 'get') {
        need(3, '<path>')
        const res = await c.projects.readFile(project!, path!)
        if (f.output) {
          const total = Number(res.headers.get('content-length')) || null
          await res
            .body!.pipeThrough(counted(progress(basename(path!), total)))
            .pipeTo(Writable.toWeb(createWriteStream(f.output)))
          print({ path, output: f.output, size: statSync(f.output).size }, `Saved ${path} to ${f.output}.`)
        } else if (f.json) print({ path, content: await res.text() })
        else io.stdout.write(Buffer.from(await res.arrayBuffer()))
      } else if (sub === 'put') {
        need(4, '<file>')
        const content = new Uint8Array(readFileSync(file!))
        const written = await c.projects.writeFile(project!, path!, content)
        print(written, `Wrote ${path} (${bytes(content.byteLength)}).`)
      } else if (sub === 'delete') {
        need(3, '<path>')
        print(await c.projects.deleteFile(project!, path!), `Deleted ${path}.`)
      } else throw new UsageError(`files: unknown subcommand ${sub ?? '(none)'}`)
      return 0
    }
    case 'agents': {
      const c = await client()
      const [sub, id] = args
      if (sub !== 'run') throw new UsageError(`agents: unknown subcommand ${sub ?? '(none)'}`)
      need(2, '<agent>')
      if (!f.goal) throw new UsageError('agents run: --goal is required')
      // wait: 0: the run's output is streamed as it comes rather than waited for whole.
      const started = await c.agents.execute(
        id!,
        { goal: f.goal, ...(f.project ? { projectId: f.project } : {}) } as never,
        { wait: 0 },
      )
      if (!f.json) say(`Run ${started.id} ${started.status}.`)
      const events = []
      for await (const e of c.agents.runEvents(id!, started.id)) {
        events.push(e)
        if (f.json) continue
        if (e.event === 'output.delta') io.stdout.write(String(e.data.delta))
        else if (e.event === 'tool.call') say(`\n[tool ${String(e.data.name)}]`)
        else if (e.event !== 'run.completed') say(`[${e.event}]`)
      }
      const run = await c.agents.run(id!, started.id)
      if (f.json) print({ run, events })
      else io.stdout.write('\n')
      if (run.status !== 'completed') throw new JobFailed(`run ${run.id} ${run.status}`, run)
      return 0
    }
    case 'chat': {
      const c = await client()
      const sessionId = f.session ?? (await c.chat.createSession({})).id
      const ask = async (content: string) => {
        const sent = await c.chat.send(sessionId, content)
        const it = c.chat.reply(sessionId, sent.replyId)
        let r = await it.next()
        while (!r.done) {
          if (!f.json) io.stdout.write(r.value)
          r = await it.next()
        }
        if (f.json) print({ sessionId, message: sent.message, reply: r.value })
        else io.stdout.write('\n')
      }
      if (f.message !== undefined) {
        await ask(f.message)
        return 0
      }
      if (!f.json && io.stdin.isTTY) say(`Chat session ${sessionId}. An empty line or Ctrl-D ends it.`)
      const rl = createInterface({
        input: io.stdin,
        output: io.stdin.isTTY ? (io.stderr as NodeJS.WritableStream) : undefined,
        terminal: Boolean(io.stdin.isTTY),
      })
      try {
        for (;;) {
          const line = await rl.question(io.stdin.isTTY ? '> ' : '').catch(() => null)
          if (line === null || line.trim() === '') break
          await ask(line)
        }
      } finally {
        rl.close()
      }
      return 0
    }
    case 'export': {
      const c = await client()
      const me = await c.me()
      if (!me.tenant) throw new UsageError('export: this credential belongs to no tenant')
      const include = (f.include ?? 'all').split(',').map((s) => s.trim()) as never
      const job = await c.data.export(me.tenant.id, {
        format: (f.format ?? 'zip') as never,
        include,
        destination: 'download',
      } as never)
      if (!f.json) say(`Export ${job.exportId} ${job.status}...`)
      const done = await c.data.waitForExport(me.tenant.id, job.exportId)
      if (done.status !== 'completed' || !done.downloadUrl)
        throw new JobFailed(`export ${done.exportId} ${done.status}`, done)
      const output = f.output ?? `atrium-export-${done.exportId}.${f.format ?? 'zip'}`
      const res = await fetch(done.downloadUrl)
      if (!res.ok || !res.body) throw new JobFailed(`download failed: HTTP ${res.status}`, done)
      await res.body
        .pipeThrough(counted(progress('Downloading', done.size ?? null)))
        .pipeTo(Writable.toWeb(createWriteStream(output)))
      print(
        { ...done, output },
        `Saved ${output} (${bytes((await stat(output)).size)}, sha256 ${done.checksum ?? '-'}).`,
      )
      return 0
    }
    case 'restore': {
      need(1, '<file>')
      const c = await client()
      const me = await c.me()
      if (!me.tenant) throw new UsageError('restore: this credential belongs to no tenant')
      const file = args[0]!
      const size = statSync(file).size
      const body = (Readable.toWeb(createReadStream(file)) as ReadableStream<Uint8Array>).pipeThrough(
        counted(progress('Uploading', size)),
      )
      const job = await c.data.restore(
        me.tenant.id,
        body,
        {
          merge: Boolean(f.merge),
          validate: Boolean(f.validate),
          ...(f.project ? { projectId: f.project } : {}),
          ...(f['as-new-project'] ? { asNewProject: true } : {}),
        },
        { filename: basename(file), size },
      )
      if (!f.json) say(`Restore ${job.restoreId} ${job.status}...`)
      const done = await c.data.waitForRestore(me.tenant.id, job.restoreId)
      print(done, `Restore ${done.restoreId} ${done.status}.`)
      if (done.status !== 'completed') throw new JobFailed(`restore ${done.restoreId} ${done.status}`, done)
      return 0
    }
    default:
      throw new UsageError(`unknown command: ${command}`)
  }
}

/** run() with the exit codes of USAGE; an error is printed (as JSON on stdout with --json). */
export async function main(argv: string[], io: Io): Promise<number> {
  const json = argv.includes('--json')
  const fail = (code: number, error: Record<string, unknown>, text: string) => {
    if (json) io.stdout.write(JSON.stringify({ error }) + '\n')
    io.stderr.write(`atrium: ${text}\n`)
    return code
  }
  try {
    return await run(argv, io)
  } catch (err) {
    if (err instanceof UsageError) return fail(2, { code: 'USAGE', message: err.message }, `${err.message}\n\n${USAGE}`)
    if (err instanceof NotSignedIn) return fail(3, { code: 'NOT_SIGNED_IN', message: err.message }, err.message)
    if (err instanceof AtriumError) {
      const error = { code: err.code, message: err.message, details: err.details, requestId: err.requestId }
      if (err.status === 401) return fail(3, error, `${err.message} (UNAUTHORIZED): run \`atrium login\``)
      return fail(1, error, `${err.message} (${err.code}${err.requestId ? `, request ${err.requestId}` : ''})`)
    }
    if (err instanceof AtriumNetworkError) return fail(4, { code: 'NETWORK_ERROR', message: err.message }, err.message)
    if (err instanceof JobFailed) {
      if (json) io.stdout.write(JSON.stringify(err.result) + '\n')
      io.stderr.write(`atrium: ${err.message}\n`)
      return 5
    }
    return fail(1, { code: 'CLIENT_ERROR', message: (err as Error).message }, (err as Error).message)
  }
}

// Run as the bin (the symlink npm makes resolves to this file).
const entry = process.argv[1]
if (entry && import.meta.url === pathToFileURL((await import('node:fs')).realpathSync(entry)).href) {
  process.once('SIGINT', () => process.exit(130))
  process.exitCode = await main(process.argv.slice(2), {
    env: process.env,
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
  })
}
