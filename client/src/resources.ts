// The resources of the API as methods: each one a typed call through openapi-fetch (paths, bodies
// and results come from the server's OpenAPI document), its envelope unwrapped, lists as async
// iterators over the cursor pages. Anything not here is reachable, typed, through `client.api`.
import { delay } from './delay.js'
import { AtriumError, type ErrorCode } from './errors.js'
import type { paths } from './openapi.js'
import { eventStream, type StreamEvent, type StreamOptions } from './sse.js'
import { dataOf, eachOf, envelopeOf, type Transport } from './transport.js'

type Op<P extends keyof paths, M extends keyof paths[P]> = NonNullable<paths[P][M]>
/** The JSON body of an operation. */
export type BodyOf<P extends keyof paths, M extends keyof paths[P]> =
  Op<P, M> extends { requestBody?: { content: { 'application/json': infer B } } } ? B : never
/** The query of an operation, all of it optional where the server has a default. */
export type QueryOf<P extends keyof paths, M extends keyof paths[P]> =
  Op<P, M> extends { parameters: { query?: infer Q } } ? Partial<NonNullable<Q>> : never
/** What an operation's success envelope carries in `data`. */
export type DataOf<P extends keyof paths, M extends keyof paths[P]> =
  Op<P, M> extends { responses: infer R }
    ? R extends { 200: { content: { 'application/json': { data: infer D } } } }
      ? D
      : R extends { 201: { content: { 'application/json': { data: infer D } } } }
        ? D
        : R extends { 202: { content: { 'application/json': { data: infer D } } } }
          ? D
          : never
    : never
type ListQuery<P extends keyof paths> = Omit<QueryOf<P, 'get' & keyof paths[P]>, 'cursor'>
/** The path parameters of an operation. */
type PathParamsOf<P extends keyof paths, M extends keyof paths[P]> =
  Op<P, M> extends { parameters: { path: infer A } } ? A : never
/** An operation of `P` by its HTTP method. */
type MethodOf<P extends keyof paths, M extends Method> = Lowercase<M> & keyof paths[P]
/** What a request gives besides its method and path: its path parameters, query and JSON body, where it has them. */
interface RequestOf<P extends keyof paths, M extends keyof paths[P]> {
  path?: PathParamsOf<P, M>
  query?: QueryOf<P, M>
  body?: BodyOf<P, M>
}
/** What a request resolves to: its envelope's `data`, or nothing known of a 204 No Content. */
type ResultOf<P extends keyof paths, M extends keyof paths[P]> =
  Op<P, M> extends { responses: { 204: unknown } } ? unknown : DataOf<P, M>
/** What one item of a cursor-paged list is. */
type ItemOf<P extends keyof paths> = DataOf<P, 'get' & keyof paths[P]> extends (infer I)[] ? I : never

export type Project = DataOf<'/api/v1/projects/{id}', 'get'>
export type Agent = DataOf<'/api/v1/agents/{id}', 'get'>
export type AgentRun = DataOf<'/api/v1/agents/{id}/runs/{run_id}', 'get'>
export type ChatSession = DataOf<'/api/v1/chat/sessions/{id}', 'get'>
export type ChatMessage = DataOf<'/api/v1/chat/sessions/{id}/messages', 'post'>['message']
export type ChatExport = DataOf<'/api/v1/chat/export', 'post'>
export type ExportJob = DataOf<'/api/v1/platform/tenants/{tenantId}/export/{exportId}', 'get'>
export type FeatureKey = NonNullable<
  paths['/api/v1/regions/features/{tenantId}/check/{featureKey}']['get']
>['parameters']['path']['featureKey']
export type RestoreJob = DataOf<'/api/v1/platform/tenants/{tenantId}/restore/{restoreId}', 'get'>

/** Path segments of a file's path, each encoded (slashes stay separators). */
const filePath = (path: string) => path.split('/').map(encodeURIComponent).join('/')

/**
 * The typed API as the helpers below call it, generic in the path: openapi-fetch cannot check a call whose path is a
 * type parameter, so the helpers' own signatures carry the types instead.
 */
type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'
type UntypedApi = Record<
  Method,
  (
    path: string,
    init: { params: object; body?: unknown },
  ) => Promise<{ data?: unknown; error?: unknown; response: Response }>
>

abstract class Resource {
  constructor(protected readonly t: Transport) {}
  protected get api() {
    return this.t.api
  }
  private get untyped() {
    return this.t.api as unknown as UntypedApi
  }
  /** One request through the typed API: the `data` of its envelope, or the AtriumError of its error envelope. */
  protected call<P extends keyof paths, M extends Method>(
    method: M,
    path: P,
    o: RequestOf<P, MethodOf<P, M>> = {},
  ): Promise<ResultOf<P, MethodOf<P, M>>> {
    return dataOf(this.untyped[method](path, { params: { path: o.path, query: o.query }, body: o.body }))
  }
  /** Every item of the cursor-paged list at `path`, page after page as the caller iterates. */
  protected pages<P extends keyof paths>(
    path: P,
    query: ListQuery<P>,
    params: PathParamsOf<P, 'get' & keyof paths[P]> | Record<string, never> = {},
  ): AsyncGenerator<ItemOf<P>> {
    return eachOf(
      (cursor) =>
        envelopeOf(this.untyped.GET(path, { params: { path: params, query: { ...query, cursor } } })) as Promise<{
          data: ItemOf<P>[]
          meta: { nextCursor?: string | null }
        }>,
    )
  }
}

/** Where a collection is listed and added to (`P`), and where one of it is read and deleted (`P/{id}`). */
type CollectionPath = '/api/v1/projects' | '/api/v1/agents' | '/api/v1/webhooks'
type ItemPath<P extends CollectionPath> = `${P}/{id}` & keyof paths

/** A collection of the API: list, create, get and delete, the same for each of them. */
abstract class Collection<P extends CollectionPath> extends Resource {
  protected abstract readonly path: P
  list(query = {} as ListQuery<P>): AsyncGenerator<ItemOf<P>> {
    return this.pages(this.path, query)
  }
  create(body: BodyOf<P, 'post'>) {
    return this.call('POST', this.path, { body })
  }
  get(id: string) {
    return this.call('GET', this.item, { path: { id } as never })
  }
  delete(id: string) {
    return this.call('DELETE', this.item, { path: { id } as never })
  }
  /** `{ id }` is every item path's one parameter, which TypeScript cannot see through `P` (hence `never` above). */
  private get item() {
    return `${this.path}/{id}` as ItemPath<P>
  }
}

export class Projects extends Collection<'/api/v1/projects'> {
  protected readonly path = '/api/v1/projects'
  update(id: string, body: BodyOf<'/api/v1/projects/{id}', 'patch'>) {
    return this.call('PATCH', '/api/v1/projects/{id}', { path: { id }, body })
  }
  versions(projectId: string, query: ListQuery<'/api/v1/projects/{projectId}/versions'> = {}) {
    return this.pages('/api/v1/projects/{projectId}/versions', query, { projectId })
  }
  restoreVersion(projectId: string, versionId: string) {
    return this.call('POST', '/api/v1/projects/{projectId}/versions/{versionId}/restore', {
      path: { projectId, versionId },
    })
  }
  backup(projectId: string, body: BodyOf<'/api/v1/projects/{projectId}/backup', 'post'> = {}) {
    return this.call('POST', '/api/v1/projects/{projectId}/backup', { path: { projectId }, body })
  }
  /** The files of a project, in path order. */
  files(projectId: string, query: ListQuery<'/api/v1/projects/{projectId}/files'> = {}) {
    return this.pages('/api/v1/projects/{projectId}/files', query, { projectId })
  }
  /** A file's bytes as a Response (read it with .text(), .arrayBuffer() or .body). */
  readFile(projectId: string, path: string) {
    return this.t.request('GET', `/api/v1/projects/${encodeURIComponent(projectId)}/files/${filePath(path)}`)
  }
  /** Writes a file (created or replaced); `ifMatch` makes it conditional on the current etag. */
  async writeFile(
    projectId: string,
    path: string,
    content: string | Uint8Array | Blob,
    o: { contentType?: string; ifMatch?: string } = {},
  ) {
    const headers: Record<string, string> = {
      'content-type':
        o.contentType ?? (typeof content === 'string' ? 'text/plain; charset=utf-8' : 'application/octet-stream'),
    }
    if (o.ifMatch) headers['if-match'] = o.ifMatch
    const res = await this.t.request(
      'PUT',
      `/api/v1/projects/${encodeURIComponent(projectId)}/files/${filePath(path)}`,
      { body: content as BodyInit, headers },
    )
    return ((await res.json()) as { data: DataOf<'/api/v1/projects/{projectId}/files/{*}', 'put'> }).data
  }
  async deleteFile(projectId: string, path: string, o: { ifMatch?: string } = {}): Promise<void> {
    await this.t.request('DELETE', `/api/v1/projects/${encodeURIComponent(projectId)}/files/${filePath(path)}`, {
      headers: o.ifMatch ? { 'if-match': o.ifMatch } : {},
    })
  }
}

export type RunEvent = StreamEvent<{ runId: string; [k: string]: unknown }>
const RUN_ENDS = new Set(['run.completed', 'run.failed', 'run.cancelled'])

export class Agents extends Collection<'/api/v1/agents'> {
  protected readonly path = '/api/v1/agents'
  update(id: string, body: BodyOf<'/api/v1/agents/{id}', 'patch'>) {
    return this.call('PATCH', '/api/v1/agents/{id}', { path: { id }, body })
  }
  /**
   * Runs the agent: the server waits up to `wait` seconds (0 to 60; its default, 30, when not given) for the run
   * to end. The record then has its status: completed with its output, failed with its error, or cancelled (the
   * server answered 200); queued or running when the wait ran out first (202): follow it with runEvents() or
   * run(). `wait: 0` starts it and answers at once.
   */
  execute(id: string, body: BodyOf<'/api/v1/agents/{id}/execute', 'post'>, o: { wait?: number } = {}) {
    return this.call('POST', '/api/v1/agents/{id}/execute', {
      path: { id },
      body,
      ...(o.wait === undefined ? {} : { query: { wait: o.wait } }),
    })
  }
  runs(id: string, query: ListQuery<'/api/v1/agents/{id}/runs'> = {}) {
    return this.pages('/api/v1/agents/{id}/runs', query, { id })
  }
  run(id: string, runId: string) {
    return this.call('GET', '/api/v1/agents/{id}/runs/{run_id}', { path: { id, run_id: runId } })
  }
  cancel(id: string, runId: string) {
    return this.call('POST', '/api/v1/agents/{id}/runs/{run_id}/cancel', { path: { id, run_id: runId } })
  }
  /** The run's events from the first (or after `lastEventId`) until it completes, fails or is cancelled. */
  runEvents(id: string, runId: string, o: StreamOptions = {}): AsyncGenerator<RunEvent> {
    const path = `/api/v1/agents/${encodeURIComponent(id)}/runs/${encodeURIComponent(runId)}/stream`
    return eventStream(
      (last, signal) => this.t.request('GET', path, { headers: streamHeaders(last), signal }),
      (e) => RUN_ENDS.has(e.event),
      o,
    )
  }
}

const streamHeaders = (lastEventId: string | undefined): Record<string, string> => ({
  accept: 'text/event-stream',
  ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
})

export type ChatEvent =
  | StreamEvent<{ messageId: string; delta: string }>
  | StreamEvent<{ message: ChatMessage }>
  | StreamEvent<{ messageId: string; code: string; message: string }>

export class Chat extends Resource {
  sessions(query: ListQuery<'/api/v1/chat/sessions'> = {}) {
    return this.pages('/api/v1/chat/sessions', query)
  }
  createSession(body: BodyOf<'/api/v1/chat/sessions', 'post'> = {}) {
    return this.call('POST', '/api/v1/chat/sessions', { body })
  }
  getSession(id: string) {
    return this.call('GET', '/api/v1/chat/sessions/{id}', { path: { id } })
  }
  deleteSession(id: string) {
    return this.call('DELETE', '/api/v1/chat/sessions/{id}', { path: { id } })
  }
  messages(id: string, query: ListQuery<'/api/v1/chat/sessions/{id}/messages'> = {}) {
    return this.pages('/api/v1/chat/sessions/{id}/messages', query, { id })
  }
  /**
   * Sends a message (201): the saved message and the id of the reply being generated. `projectId` binds a session
   * that has none to that project (a session bound to another refuses it).
   */
  send(id: string, content: string, o: { projectId?: string } = {}) {
    return this.call('POST', '/api/v1/chat/sessions/{id}/messages', {
      path: { id },
      body: { content, ...(o.projectId ? { projectId: o.projectId } : {}) },
    })
  }
  /**
   * The session's stream: every event of every reply, from `lastEventId` on, reconnecting with
   * Last-Event-ID after a drop. It stays open until the signal stops it (or `until` says so).
   */
  stream(id: string, o: StreamOptions & { until?: (e: ChatEvent) => boolean } = {}): AsyncGenerator<ChatEvent> {
    const path = `/api/v1/chat/sessions/${encodeURIComponent(id)}/stream`
    return eventStream(
      (last, signal) => this.t.request('GET', path, { headers: streamHeaders(last), signal }),
      o.until ?? (() => false),
      o,
    ) as AsyncGenerator<ChatEvent>
  }
  /** One reply's text as it arrives; ends with the saved reply, or throws its error. */
  async *reply(id: string, replyId: string, o: StreamOptions = {}): AsyncGenerator<string, ChatMessage> {
    const mine = (e: ChatEvent) =>
      ('messageId' in e.data && e.data.messageId === replyId) ||
      ('message' in e.data && typeof e.data.message === 'object' && e.data.message.id === replyId)
    for await (const e of this.stream(id, { ...o, until: (e) => mine(e) && e.event !== 'message.delta' })) {
      if (!mine(e)) continue
      if (e.event === 'message.delta') yield (e.data as { delta: string }).delta
      else if (e.event === 'message.completed') return (e.data as { message: ChatMessage }).message
      else if (e.event === 'error') {
        const d = e.data as { code: ErrorCode; message: string }
        throw new AtriumError(d.code, d.message, 502, { messageId: replyId })
      }
    }
    throw new Error(`the stream ended before reply ${replyId} did`)
  }
  /**
   * The tenant's chat history for a range of days (YYYY-MM-DD), as one JSON document: the `data` of the answer's
   * envelope. An answer cut short by a fault on the server does not parse, and is thrown.
   */
  async export(body: BodyOf<'/api/v1/chat/export', 'post'>): Promise<ChatExport> {
    const res = await this.t.request('POST', '/api/v1/chat/export', {
      body: JSON.stringify(body),
      headers: { 'content-type': 'application/json' },
    })
    return ((await res.json()) as { data: ChatExport }).data
  }
}

export class Tenant extends Resource {
  get() {
    return this.call('GET', '/api/v1/tenant')
  }
  usage() {
    return this.call('GET', '/api/v1/tenant/usage')
  }
  llmSettings() {
    return this.call('GET', '/api/v1/tenant/settings/llm')
  }
  updateLlmSettings(body: BodyOf<'/api/v1/tenant/settings/llm', 'patch'>) {
    return this.call('PATCH', '/api/v1/tenant/settings/llm', { body })
  }
}

export class Team extends Resource {
  members(query: ListQuery<'/api/v1/tenant/team/members'> = {}) {
    return this.pages('/api/v1/tenant/team/members', query)
  }
  invite(body: BodyOf<'/api/v1/tenant/team/members', 'post'>) {
    return this.call('POST', '/api/v1/tenant/team/members', { body })
  }
  update(userId: string, body: BodyOf<'/api/v1/tenant/team/members/{userId}', 'patch'>) {
    return this.call('PATCH', '/api/v1/tenant/team/members/{userId}', { path: { userId }, body })
  }
  remove(userId: string) {
    return this.call('DELETE', '/api/v1/tenant/team/members/{userId}', { path: { userId } })
  }
}

export class ApiKeys extends Resource {
  list(query: ListQuery<'/api/v1/api-keys'> = {}) {
    return this.pages('/api/v1/api-keys', query)
  }
  /** The new key's secret is in the answer once. */
  create(body: BodyOf<'/api/v1/api-keys', 'post'>) {
    return this.call('POST', '/api/v1/api-keys', { body })
  }
  revoke(id: string) {
    return this.call('DELETE', '/api/v1/api-keys/{id}', { path: { id } })
  }
}

export class Webhooks extends Collection<'/api/v1/webhooks'> {
  protected readonly path = '/api/v1/webhooks'
  deliveries(id: string, query: ListQuery<'/api/v1/webhooks/{id}/deliveries'> = {}) {
    return this.pages('/api/v1/webhooks/{id}/deliveries', query, { id })
  }
}

export class Regions extends Resource {
  async list() {
    return this.call('GET', '/api/v1/regions')
  }
  preferences(tenantId: string) {
    return this.call('GET', '/api/v1/regions/preferences/{tenantId}', { path: { tenantId } })
  }
  updatePreferences(tenantId: string, body: BodyOf<'/api/v1/regions/preferences/{tenantId}', 'patch'>) {
    return this.call('PATCH', '/api/v1/regions/preferences/{tenantId}', { path: { tenantId }, body })
  }
  storage(tenantId: string) {
    return this.call('GET', '/api/v1/regions/storage/{tenantId}', { path: { tenantId } })
  }
  updateStorage(tenantId: string, body: BodyOf<'/api/v1/regions/storage/{tenantId}', 'put'>) {
    return this.call('PUT', '/api/v1/regions/storage/{tenantId}', { path: { tenantId }, body })
  }
  validateStorage(tenantId: string, body: BodyOf<'/api/v1/regions/storage/{tenantId}/validate', 'post'>) {
    return this.call('POST', '/api/v1/regions/storage/{tenantId}/validate', { path: { tenantId }, body })
  }
  feature(tenantId: string, featureKey: FeatureKey) {
    return this.call('GET', '/api/v1/regions/features/{tenantId}/check/{featureKey}', {
      path: { tenantId, featureKey },
    })
  }
  routingInfo() {
    return this.call('GET', '/api/v1/routing-info')
  }
}

/** What a restore reads: bytes in memory, a Blob (a browser's File), or a stream (Node: Readable.toWeb). */
export type UploadSource = Uint8Array | Blob | ReadableStream<Uint8Array>

export class Portability extends Resource {
  /** Starts an export of the tenant's data (pending); follow it with exportJob() or waitForExport(). */
  export(tenantId: string, body: BodyOf<'/api/v1/platform/tenants/{tenantId}/export', 'post'>) {
    return this.call('POST', '/api/v1/platform/tenants/{tenantId}/export', { path: { tenantId }, body })
  }
  exportJob(tenantId: string, exportId: string) {
    return this.call('GET', '/api/v1/platform/tenants/{tenantId}/export/{exportId}', { path: { tenantId, exportId } })
  }
  /** Polls an export until it is completed or failed. */
  waitForExport(tenantId: string, exportId: string, o: PollOptions = {}): Promise<ExportJob> {
    return poll(
      () => this.exportJob(tenantId, exportId),
      (job) => job.status === 'completed' || job.status === 'failed',
      o,
    )
  }
  schedule(tenantId: string, body: BodyOf<'/api/v1/platform/tenants/{tenantId}/export/schedule', 'post'>) {
    return this.call('POST', '/api/v1/platform/tenants/{tenantId}/export/schedule', { path: { tenantId }, body })
  }
  schedules(tenantId: string) {
    return this.call('GET', '/api/v1/platform/tenants/{tenantId}/export/schedule', { path: { tenantId } })
  }
  deleteSchedule(tenantId: string, scheduleId: string) {
    return this.call('DELETE', '/api/v1/platform/tenants/{tenantId}/export/schedule/{scheduleId}', {
      path: { tenantId, scheduleId },
    })
  }
  /**
   * Uploads a backup to restore (multipart: the `options` part, then the `file` part): a tenant
   * export or a project backup. merge: add to the data rather than replace it; validate: only check
   * the archive and report; for a project backup, projectId: the tenant's project it goes into, or
   * asNewProject: a new project (by default, the project it was made of). A stream is sent as it is
   * read, never held whole in memory; such a request is not retried after a 429.
   */
  async restore(
    tenantId: string,
    file: UploadSource,
    options: { merge?: boolean; validate?: boolean; projectId?: string; asNewProject?: boolean } = {},
    o: { filename?: string; size?: number } = {},
  ): Promise<RestoreJob> {
    const boundary = `atrium-${Math.random().toString(16).slice(2)}${Date.now().toString(16)}`
    const enc = new TextEncoder()
    const head = enc.encode(
      `--${boundary}\r\nContent-Disposition: form-data; name="options"\r\n\r\n${JSON.stringify({
        merge: options.merge ?? false,
        validate: options.validate ?? false,
        ...(options.projectId ? { projectId: options.projectId } : {}),
        ...(options.asNewProject ? { asNewProject: true } : {}),
      })}\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${(o.filename ?? 'backup.zip').replace(/["\r\n]/g, '_')}"\r\nContent-Type: application/zip\r\n\r\n`,
    )
    const tail = enc.encode(`\r\n--${boundary}--\r\n`)
    const streamed = file instanceof ReadableStream
    const body: BodyInit = streamed ? concatStreams(head, file, tail) : new Blob([head, file as BlobPart, tail])
    const res = await this.t.request('POST', `/api/v1/platform/tenants/${encodeURIComponent(tenantId)}/restore`, {
      body,
      headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
      retry: !streamed,
    })
    return ((await res.json()) as { data: RestoreJob }).data
  }
  restoreJob(tenantId: string, restoreId: string) {
    return this.call('GET', '/api/v1/platform/tenants/{tenantId}/restore/{restoreId}', {
      path: { tenantId, restoreId },
    })
  }
  /** Polls a restore until it is completed or failed. */
  waitForRestore(tenantId: string, restoreId: string, o: PollOptions = {}): Promise<RestoreJob> {
    return poll(
      () => this.restoreJob(tenantId, restoreId),
      (job) => job.status !== 'processing',
      o,
    )
  }
  /** All personal data the service holds on the caller (GDPR article 15). */
  async gdprExport(): Promise<unknown> {
    const res = await this.t.request('POST', '/api/v1/gdpr/export', {
      body: JSON.stringify({ format: 'json' }),
      headers: { 'content-type': 'application/json' },
    })
    return res.json()
  }
}

export interface PollOptions {
  /** Between two looks (default 1 s). */
  intervalMs?: number
  /** Stops waiting: the promise rejects with the signal's reason. */
  signal?: AbortSignal
}

/** `look` again and again, `intervalMs` apart, until `over` says the job is over. */
async function poll<J>(look: () => Promise<J>, over: (job: J) => boolean, o: PollOptions): Promise<J> {
  for (;;) {
    const job = await look()
    if (over(job)) return job
    await delay(o.intervalMs ?? 1000, o.signal)
  }
}

function concatStreams(
  head: Uint8Array,
  body: ReadableStream<Uint8Array>,
  tail: Uint8Array,
): ReadableStream<Uint8Array> {
  const reader = body.getReader()
  let stage = 0
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (stage === 0) {
        stage = 1
        return controller.enqueue(head)
      }
      if (stage === 1) {
        const { done, value } = await reader.read()
        if (!done) return controller.enqueue(value)
        stage = 2
        controller.enqueue(tail)
        return controller.close()
      }
    },
    cancel: (reason) => reader.cancel(reason),
  })
}
