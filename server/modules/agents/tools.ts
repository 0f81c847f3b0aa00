// The tools an agent may call, by autonomy level: low none, medium reads (and web search where the
// deployment has it), high also writes and deletes. A run works on the project's files as they
// were when it started plus its own staged changes (the workspace); the changes become one project
// version when the run completes. A bad call (unknown tool, arguments that do not match, a path
// that escapes, a file too large) is answered to the model as an error result: the model can
// correct itself, and the run does not crash.
import type { Actor } from '../../domain/actor.js'
import { AppError } from '../../domain/errors.js'
import type { LlmTool } from '../../platform/llm.js'
import type { OutboundFetch } from '../../platform/outbound.js'
import type { FileChange, ProjectFilesService, StagedFile } from '../projects/files-service.js'
import { deploymentRefuses } from '../../domain/features.js'
import { sliceText, storableText } from '../../domain/text.js'
import type { AutonomyLevel } from './store.js'

export const TOOL_NAMES = ['list_files', 'read_file', 'write_file', 'delete_file', 'web_search'] as const
export type ToolName = (typeof TOOL_NAMES)[number]

/** What each level may use; an agent's `tools` is a subset (all of them when not given). */
export const LEVEL_TOOLS: Record<AutonomyLevel, readonly ToolName[]> = {
  low: [],
  medium: ['list_files', 'read_file', 'web_search'],
  high: ['list_files', 'read_file', 'write_file', 'delete_file', 'web_search'],
}

/** Tools that reach outside the deployment: off when AIR_GAPPED, and without a search endpoint. */
export const EXTERNAL_TOOLS: readonly ToolName[] = ['web_search']

/**
 * What one list_files answers at most (files, and characters of their paths): a model gains nothing from ten thousand
 * names, and a prefix narrows it.
 */
export const LIST_MAX_FILES = 1000
export const LIST_MAX_CHARS = 64 * 1024
/** Files one run may change (write or delete) before it completes. */
export const RUN_MAX_CHANGED_FILES = 1000
/** A file read is cut here: the model's context is the limit, not the file. */
export const READ_MAX_CHARS = 64 * 1024
/** What a step keeps of a tool's result in the run record (the model gets the whole result). */
export const RESULT_EXCERPT_CHARS = 2048
/** What the run's record, events and conversation keep of a tool call's arguments (the tool gets them whole). */
export const ARGUMENT_EXCERPT_CHARS = 2048
const SEARCH_RESULTS = 5
const SEARCH_TIMEOUT_MS = 15_000

const DEFINITIONS: Record<ToolName, LlmTool> = {
  list_files: {
    name: 'list_files',
    description: `List the project's files (path and size), optionally under a path prefix; at most ${LIST_MAX_FILES} files (truncated: true when there are more).`,
    parameters: {
      type: 'object',
      properties: { prefix: { type: 'string', maxLength: 1024 } },
      additionalProperties: false,
    },
  },
  read_file: {
    name: 'read_file',
    description: `Read a project file as UTF-8 text (the first ${READ_MAX_CHARS} characters).`,
    parameters: {
      type: 'object',
      properties: { path: { type: 'string', minLength: 1, maxLength: 1024 } },
      required: ['path'],
      additionalProperties: false,
    },
  },
  write_file: {
    name: 'write_file',
    description:
      'Create or replace a project file with the given UTF-8 text. Changes are saved as one project version when the run completes.',
    parameters: {
      type: 'object',
      properties: { path: { type: 'string', minLength: 1, maxLength: 1024 }, content: { type: 'string' } },
      required: ['path', 'content'],
      additionalProperties: false,
    },
  },
  delete_file: {
    name: 'delete_file',
    description: 'Delete a project file.',
    parameters: {
      type: 'object',
      properties: { path: { type: 'string', minLength: 1, maxLength: 1024 } },
      required: ['path'],
      additionalProperties: false,
    },
  },
  web_search: {
    name: 'web_search',
    description: 'Search the web; returns titles, addresses and snippets of the top results.',
    parameters: {
      type: 'object',
      properties: { query: { type: 'string', minLength: 1, maxLength: 500 } },
      required: ['query'],
      additionalProperties: false,
    },
  },
}

export interface ToolEnvironment {
  /** AIR_GAPPED: external tools are neither offered nor run. */
  airGapped: boolean
  /** WEB_SEARCH_URL, or '' when the deployment has no search. */
  webSearchUrl: string
  fetch: OutboundFetch
}

/**
 * Why a tool cannot be used on this deployment, or null when it can: the feature check's own answer
 * (domain/features.ts).
 */
export function toolUnavailable(
  name: ToolName,
  env: Pick<ToolEnvironment, 'airGapped' | 'webSearchUrl'>,
): { reason: string; setting: string } | null {
  if (!EXTERNAL_TOOLS.includes(name)) return null
  return deploymentRefuses(name as 'web_search', { airGapped: env.airGapped, webSearch: Boolean(env.webSearchUrl) })
}

/** The tools a run offers the model: the agent's, within its level, that this deployment has. */
export function offeredTools(
  level: AutonomyLevel,
  chosen: readonly string[],
  env: Pick<ToolEnvironment, 'airGapped' | 'webSearchUrl'>,
): LlmTool[] {
  return LEVEL_TOOLS[level].filter((n) => chosen.includes(n) && !toolUnavailable(n, env)).map((n) => DEFINITIONS[n])
}

/** A run's view of its project's files: the stored ones with its own staged changes over them. */
export class Workspace {
  readonly pending = new Map<string, FileChange>()
  /** Staged bytes no longer part of the run's changes, let go of once that is saved (releaseSuperseded). */
  private superseded: StagedFile[] = []
  constructor(
    readonly files: ProjectFilesService,
    readonly actor: Actor,
    readonly projectId: string,
    pending: readonly FileChange[] = [],
    /** How long what the run stages is kept for it (until it ends; a run that dies lets the collector have it then). */
    readonly holdMs?: number,
  ) {
    for (const c of pending) this.pending.set(c.path, c)
  }

  changes(): FileChange[] {
    return [...this.pending.values()]
  }

  /**
   * The files under `prefix`, in path order, up to LIST_MAX_FILES and LIST_MAX_CHARS of paths; `truncated` when there
   * are more.
   */
  async list(prefix = ''): Promise<{ files: { path: string; size: number }[]; truncated: boolean }> {
    const out = new Map<string, number>()
    let cursor: string | undefined
    let more = false
    // Read a page past what one answer holds, so that whether there is more is known.
    for (let pages = 0; pages * 200 <= LIST_MAX_FILES; pages++) {
      const p = await this.files.list(this.actor.tenantId, this.projectId, {
        limit: 200,
        prefix,
        ...(cursor ? { cursor } : {}),
      })
      for (const f of p.data) out.set(f.path, f.size)
      more = p.nextCursor !== null
      if (!p.nextCursor) break
      cursor = p.nextCursor
    }
    for (const c of this.pending.values()) {
      if (!c.path.startsWith(prefix)) continue
      if ('delete' in c) out.delete(c.path)
      else out.set(c.path, c.staged.size)
    }
    const sorted = [...out].sort(([a], [b]) => (a < b ? -1 : 1))
    const files: { path: string; size: number }[] = []
    let chars = 0
    for (const [path, size] of sorted) {
      chars += path.length + 24
      if (files.length >= LIST_MAX_FILES || chars > LIST_MAX_CHARS) break
      files.push({ path, size })
    }
    return { files, truncated: more || files.length < sorted.length }
  }

  async read(path: string): Promise<Buffer> {
    const normal = this.files.normalizePath(path)
    const c = this.pending.get(normal)
    if (c && 'delete' in c)
      throw new AppError('RESOURCE_NOT_FOUND', `file ${normal} does not exist`, { resource: 'file', id: normal })
    if (c) return this.files.readStaged(this.actor.tenantId, c.staged)
    return (await this.files.read(this.actor.tenantId, this.projectId, normal)).body
  }

  async write(path: string, content: string): Promise<StagedFile> {
    const normal = this.files.normalizePath(path)
    if (!this.pending.has(normal) && this.pending.size >= RUN_MAX_CHANGED_FILES) {
      throw new AppError('QUOTA_EXCEEDED', `a run may change at most ${RUN_MAX_CHANGED_FILES} files`, {
        limit: RUN_MAX_CHANGED_FILES,
      })
    }
    // The run's other changes count against the project's quota too, checked before the upload.
    const staged = await this.files.stage(
      this.actor,
      this.projectId,
      normal,
      Buffer.from(content, 'utf8'),
      'text/plain; charset=utf-8',
      {
        pending: this.changes(),
        holdMs: this.holdMs,
      },
    )
    const replaced = this.pending.get(normal)
    this.pending.set(staged.path, { path: staged.path, staged })
    // Written again in the same run: the earlier bytes are no longer part of its change.
    if (replaced && 'staged' in replaced) this.superseded.push(replaced.staged)
    return staged
  }

  /**
   * Lets go of the bytes the run staged and then wrote again or deleted, once the step that did so
   * is saved: until then a run resumed after a crash takes up its last saved changes, which name them.
   */
  async releaseSuperseded(): Promise<void> {
    const gone = this.superseded
    this.superseded = []
    await this.files.release(this.actor.tenantId, gone)
  }

  /** Lets go of everything staged: the run ends without its changes. */
  async discard(): Promise<void> {
    const gone = [...this.superseded, ...this.changes().flatMap((c) => ('staged' in c ? [c.staged] : []))]
    this.superseded = []
    await this.files.release(this.actor.tenantId, gone)
  }

  async remove(path: string): Promise<void> {
    const normal = this.files.normalizePath(path)
    const c = this.pending.get(normal)
    if (c && !('delete' in c)) {
      // Staged by this run: does it exist apart from the run? Then deleting it deletes the stored one too.
      const stored = await this.exists(normal)
      if (stored) this.pending.set(normal, { path: normal, delete: true })
      else this.pending.delete(normal)
      this.superseded.push(c.staged)
      return
    }
    if (!c && this.pending.size >= RUN_MAX_CHANGED_FILES)
      throw new AppError('QUOTA_EXCEEDED', `a run may change at most ${RUN_MAX_CHANGED_FILES} files`, {
        limit: RUN_MAX_CHANGED_FILES,
      })
    if (c || !(await this.exists(normal)))
      throw new AppError('RESOURCE_NOT_FOUND', `file ${normal} does not exist`, { resource: 'file', id: normal })
    this.pending.set(normal, { path: normal, delete: true })
  }

  private async exists(path: string): Promise<boolean> {
    try {
      // The file's record, not its bytes.
      await this.files.stat(this.actor.tenantId, this.projectId, path)
      return true
    } catch (err) {
      if (err instanceof AppError && err.code === 'RESOURCE_NOT_FOUND') return false
      throw err
    }
  }
}

export type ToolResult = { ok: true; value: unknown } | { ok: false; error: { code: string; message: string } }

const refused = (code: string, message: string): ToolResult => ({ ok: false, error: { code, message } })

/**
 * Runs one tool call. Errors the model can act on come back as results; a fault of ours (database
 * or store down) is thrown, so the run's job retries the step.
 */
export async function runTool(
  call: { name: string; arguments: unknown; invalid?: string },
  o: { allowed: readonly LlmTool[]; workspace: Workspace; env: ToolEnvironment; signal?: AbortSignal },
): Promise<ToolResult> {
  if (!o.allowed.some((t) => t.name === call.name)) {
    const known = (TOOL_NAMES as readonly string[]).includes(call.name)
    const unavailable = known ? toolUnavailable(call.name as ToolName, o.env) : null
    return refused(
      unavailable ? 'FEATURE_DISABLED' : 'VALIDATION_ERROR',
      unavailable
        ? `${call.name} is turned off on this deployment (${unavailable.setting})`
        : `no tool named ${call.name} is available to this run`,
    )
  }
  // The LLM layer checked the arguments against the tool's schema (platform/llm.ts): `invalid` says why not.
  if (call.invalid) return refused('VALIDATION_ERROR', `the arguments do not fit the tool: ${call.invalid}`)
  const name = call.name as ToolName
  const args = call.arguments as Record<string, string>
  try {
    switch (name) {
      case 'list_files': {
        const { files, truncated } = await o.workspace.list(args.prefix ?? '')
        return {
          ok: true,
          value: {
            files,
            ...(truncated
              ? { truncated, hint: `only the first ${files.length} files are listed: give a prefix to list fewer` }
              : {}),
          },
        }
      }
      case 'read_file': {
        // A file's bytes as text the conversation can be stored with (a NUL in a binary file would not be).
        const text = storableText((await o.workspace.read(args.path!)).toString('utf8'))
        return {
          ok: true,
          value: { path: args.path, content: sliceText(text, READ_MAX_CHARS), truncated: text.length > READ_MAX_CHARS },
        }
      }
      case 'write_file': {
        const staged = await o.workspace.write(args.path!, args.content!)
        return { ok: true, value: { path: staged.path, size: staged.size, sha256: staged.sha256 } }
      }
      case 'delete_file':
        await o.workspace.remove(args.path!)
        return { ok: true, value: { path: o.workspace.files.normalizePath(args.path!), deleted: true } }
      case 'web_search':
        return { ok: true, value: await webSearch(args.query!, o.env, o.signal) }
    }
  } catch (err) {
    // Rules the model broke (a path that escapes, a file too large, one that is not there) are its to fix.
    if (err instanceof AppError && err.status < 500 && err.code !== 'RATE_LIMIT_EXCEEDED')
      return refused(err.code, err.message)
    throw err
  }
}

/** A SearXNG-style JSON search through the outbound guard. */
async function webSearch(
  query: string,
  env: ToolEnvironment,
  signal?: AbortSignal,
): Promise<{ results: { title: string; url: string; snippet: string }[] }> {
  const url = new URL(env.webSearchUrl)
  url.searchParams.set('q', query)
  url.searchParams.set('format', 'json')
  let res: Response
  try {
    res = await env.fetch(url, {
      headers: { accept: 'application/json' },
      signal: signal
        ? AbortSignal.any([signal, AbortSignal.timeout(SEARCH_TIMEOUT_MS)])
        : AbortSignal.timeout(SEARCH_TIMEOUT_MS),
    })
  } catch (err) {
    if (signal?.aborted) throw err
    throw new AppError('FEATURE_DISABLED', 'web search is not reachable just now', { reason: 'search_unreachable' })
  }
  if (!res.ok) throw new AppError('FEATURE_DISABLED', `web search answered ${res.status}`, { reason: 'search_failed' })
  const body = (await res.json().catch(() => ({}))) as {
    results?: { title?: unknown; url?: unknown; content?: unknown }[]
  }
  const results = (Array.isArray(body.results) ? body.results : []).slice(0, SEARCH_RESULTS).map((r) => ({
    title: storableText(sliceText(String(r.title ?? ''), 300)),
    url: storableText(sliceText(String(r.url ?? ''), 2000)),
    snippet: storableText(sliceText(String(r.content ?? ''), 1000)),
  }))
  return { results }
}
