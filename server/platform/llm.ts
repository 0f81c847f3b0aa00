// The one adapter for model calls. The AI SDK's provider packages speak each provider's wire
// protocol (OpenAI chat completions, Azure OpenAI, Anthropic Messages, any OpenAI-compatible server
// such as vLLM or Ollama); this file chooses the provider, hands every provider the target's
// guarded fetch (so each connection is judged by the outbound policy: AIR_GAPPED,
// OUTBOUND_ALLOWED_NETWORKS), always streams, and turns every failure into one of the catalog's
// LLM_* codes. Tools are declared to the model only: the caller runs them and sends their results
// back in the next call.
//
// The models are called through the provider specification (LanguageModelV3.doStream), not the
// SDK's streamText: a call here is one request and its one stream, which is all streamText would
// do for us (we run no tools and no steps in it), and its layers of web streams cost some 2.5
// times the CPU per streamed piece (measured by bench/chat.ts: 6 ms p50 per delta with 20 chat
// streams through streamText, 2.3 ms through doStream). What it did besides is here: the retries
// (its policy: 2, from 2 s doubling, a provider's Retry-After within a minute heeded), checking a
// tool call's arguments, and logging the provider's warnings.
//
// Secrets: the API key goes only to the provider factory. Errors carry {provider, model,
// upstreamStatus}, never the provider's message (an "invalid key sk-...abcd" echoes part of it).
// A call's span (tracing on) carries the gen_ai.* attributes: provider, model, tokens, outcome;
// never the prompt, the answer, the key or the base URL.
import { performance } from 'node:perf_hooks'
import { Ajv, type ValidateFunction } from 'ajv'
import {
  APICallError,
  type LanguageModelV3,
  type LanguageModelV3CallOptions,
  type LanguageModelV3FunctionTool,
  type LanguageModelV3Prompt,
  type LanguageModelV3ToolCall,
} from '@ai-sdk/provider'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Logger } from 'pino'
import { Counter, Histogram, type Registry } from 'prom-client'
import type { Clock } from '../clock.js'
import { AppError, type ErrorCode } from '../domain/errors.js'
import { findUnstorableText, jsonTooDeep, MAX_JSON_DEPTH, storableJson, storableText } from '../domain/text.js'
import type { Db } from './db.js'
import { refusalIn, type OutboundFetch } from './outbound.js'
import { failSpan, type Tracing } from './tracing.js'

export const LLM_PROVIDERS = ['openai', 'azure-openai', 'anthropic', 'vllm', 'ollama', 'openai-compatible'] as const
export type LlmProvider = (typeof LLM_PROVIDERS)[number]

export interface LlmTarget {
  provider: LlmProvider
  baseUrl: string | null
  model: string | null
  apiKey: string | null
  temperature: number | null
  maxTokens: number | null
  fetch: OutboundFetch
}
export interface LlmToolCall {
  id: string
  name: string
  arguments: unknown
  /** set when the model's call did not parse or match the tool's schema: the reason, to hand back to the model */
  invalid?: string
}
export type LlmMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string; toolCalls?: LlmToolCall[] }
  | { role: 'tool'; toolCallId: string; toolName: string; content: string } // content: the tool's result as JSON text
export interface LlmTool {
  name: string
  description: string
  parameters: Record<string, unknown> /* JSON Schema of an object */
}
export interface LlmRequest {
  tenantId: string
  target: LlmTarget
  messages: LlmMessage[]
  tools?: LlmTool[]
  model?: string // overrides target.model
  temperature?: number
  maxTokens?: number
  signal?: AbortSignal
  timeoutMs?: number // per call, default 120 s
  onDelta?: (text: string) => void // each streamed text delta, in order
  /**
   * Characters of text and tool-call arguments an answer may hold (default LLM_MAX_OUTPUT_CHARS); beyond it the call
   * fails LLM_RESPONSE_TOO_LARGE.
   */
  maxOutputChars?: number
  /** Tool calls an answer may make; beyond it the call fails LLM_RESPONSE_TOO_LARGE with details.limit 'toolCalls'. */
  maxToolCalls?: number
}
export interface LlmResponse {
  text: string
  toolCalls: LlmToolCall[]
  finishReason: 'stop' | 'length' | 'tool-calls' | 'content-filter' | 'error' | 'other'
  usage: { inputTokens: number; outputTokens: number }
  provider: LlmProvider
  model: string
}
export interface Llm {
  complete(req: LlmRequest): Promise<LlmResponse>
  /**
   * Throws AppError LLM_NOT_CONFIGURED (details.missing: the fields to set, e.g. ['model','apiKey']) unless the target
   * can be called.
   */
  checkConfigured(target: LlmTarget, model?: string): void
}

const DEFAULT_TIMEOUT_MS = 120_000
/**
 * What one answer may hold, text and tool-call arguments together: more than any model writes in
 * one answer (their output limits are 4,000 to 128,000 tokens, some 4 characters each), so only a
 * broken or hostile provider reaches it. The answer is read as it streams and the call ends there.
 */
export const LLM_MAX_OUTPUT_CHARS = 1024 * 1024
const DEFAULT_BASE_URL: Partial<Record<LlmProvider, string>> = {
  openai: 'https://api.openai.com/v1',
  anthropic: 'https://api.anthropic.com/v1',
}
const NEEDS_BASE_URL: ReadonlySet<LlmProvider> = new Set(['azure-openai', 'vllm', 'ollama', 'openai-compatible'])
const NEEDS_KEY: ReadonlySet<LlmProvider> = new Set(['openai', 'azure-openai', 'anthropic'])

/** The fields a target lacks before it can be called (empty: it can). */
export function missingFields(target: LlmTarget, model?: string): string[] {
  const missing: string[] = []
  if (!(model ?? target.model)?.trim()) missing.push('model')
  if (NEEDS_BASE_URL.has(target.provider) && !target.baseUrl?.trim()) missing.push('baseUrl')
  if (NEEDS_KEY.has(target.provider) && !target.apiKey) missing.push('apiKey')
  return missing
}

/**
 * The provider's model. Its package loads with the first call to that provider: a replica that
 * never calls one does not carry it (together they are about 12 MB and a third of a second of
 * start-up, docs/performance.md).
 */
async function languageModel(target: LlmTarget, model: string): Promise<LanguageModelV3> {
  const baseURL = (target.baseUrl?.trim() || DEFAULT_BASE_URL[target.provider] || '').replace(/\/+$/, '')
  const apiKey = target.apiKey ?? undefined
  // Every provider gets the guarded fetch: no connection of a model call bypasses the outbound policy.
  // A refusal is rethrown bare: as fetch's own TypeError the SDK would retry it, and waiting cannot
  // change the policy's answer.
  const fetch = ((input: string | URL, init?: RequestInit) =>
    target.fetch(input, init as never).catch((err: unknown) => {
      throw refusalIn(err) ?? err
    })) as typeof globalThis.fetch
  switch (target.provider) {
    case 'openai':
      // Chat completions rather than the Responses API: what OpenAI-compatible servers also speak.
      return (await import('@ai-sdk/openai')).createOpenAI({ baseURL, apiKey, fetch }).chat(model)
    case 'azure-openai':
      return (await import('@ai-sdk/azure')).createAzure({ baseURL, apiKey, fetch }).chat(model)
    case 'anthropic':
      return (await import('@ai-sdk/anthropic')).createAnthropic({ baseURL, apiKey, fetch })(model)
    case 'vllm':
    case 'ollama':
    case 'openai-compatible':
      // includeUsage: streamed answers report their tokens only when asked to.
      return (await import('@ai-sdk/openai-compatible'))
        .createOpenAICompatible({ name: target.provider, baseURL, apiKey, fetch, includeUsage: true })
        .chatModel(model)
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

/** Our messages in the specification's prompt shape, which every provider package reads. */
function toPrompt(messages: LlmMessage[]): LanguageModelV3Prompt {
  return messages.map((m): LanguageModelV3Prompt[number] => {
    switch (m.role) {
      case 'system':
        return { role: 'system', content: m.content }
      case 'user':
        return { role: 'user', content: [{ type: 'text', text: m.content }] }
      case 'assistant':
        return {
          role: 'assistant',
          content: [
            ...(m.content || !m.toolCalls?.length ? [{ type: 'text' as const, text: m.content }] : []),
            // Arguments that were not a JSON object (a call marked invalid) go back as {}: providers take objects only
            // (Anthropic refuses the call otherwise).
            ...(m.toolCalls ?? []).map((c) => ({
              type: 'tool-call' as const,
              toolCallId: c.id,
              toolName: c.name,
              input: isObject(c.arguments) ? c.arguments : {},
            })),
          ],
        }
      case 'tool': {
        let value: unknown
        try {
          value = JSON.parse(m.content)
        } catch {
          value = m.content // not JSON after all: handed over as text
        }
        const output =
          typeof value === 'string'
            ? { type: 'text' as const, value }
            : { type: 'json' as const, value: value as never }
        return {
          role: 'tool',
          content: [{ type: 'tool-result', toolCallId: m.toolCallId, toolName: m.toolName, output }],
        }
      }
    }
  })
}

// A tool call's arguments are checked here against the tool's JSON Schema; ones that do not
// parse or match come back as `invalid`, with the reason, for the model to correct.
const ajv = new Ajv({ allErrors: true, strict: false })
const validators = new WeakMap<object, ValidateFunction>()
function validatorOf(t: LlmTool): ValidateFunction {
  let v = validators.get(t.parameters)
  if (!v) {
    try {
      v = ajv.compile(t.parameters)
    } catch (err) {
      throw new TypeError(`tool ${t.name}: parameters is not a usable JSON Schema (${errorText(err)})`)
    }
    validators.set(t.parameters, v)
  }
  return v
}

/**
 * The tools as the model is told of them; their validators compiled first (a schema that does not compile is the
 * caller's mistake, thrown as it is).
 */
function toolDefinitions(tools: LlmTool[]): LanguageModelV3FunctionTool[] {
  for (const t of tools) validatorOf(t)
  return tools.map((t) => ({ type: 'function', name: t.name, description: t.description, inputSchema: t.parameters }))
}

/**
 * A tool call as the model made it (its arguments JSON text), parsed and checked. What is kept of
 * it can always be stored: text the database refuses (NUL, an unpaired surrogate) is replaced, and
 * the call is marked invalid so that the model is told.
 */
function toolCall(part: LanguageModelV3ToolCall, tools: LlmTool[] | undefined): LlmToolCall {
  const call: LlmToolCall = {
    id: storableText(part.toolCallId),
    name: storableText(part.toolName),
    arguments: storableText(part.input),
  }
  if (jsonTooDeep(part.input)) {
    call.invalid = `the arguments nest arrays and objects more than ${MAX_JSON_DEPTH} levels deep`
    return call
  }
  try {
    call.arguments = part.input.trim() === '' ? {} : JSON.parse(part.input)
  } catch (err) {
    call.invalid = `the arguments are not valid JSON (${errorText(err)})`
    return call
  }
  const unstorable = findUnstorableText(call.arguments, 'arguments')
  if (unstorable) {
    call.arguments = storableJson(call.arguments)
    call.invalid = storableText(`${unstorable.field} ${unstorable.message}`)
    return call
  }
  const t = tools?.find((x) => x.name === part.toolName)
  if (!t)
    call.invalid = `there is no tool named ${part.toolName}; the tools are: ${(tools ?? []).map((x) => x.name).join(', ') || 'none'}`
  else {
    const check = validatorOf(t)
    if (!check(call.arguments)) call.invalid = ajv.errorsText(check.errors, { dataVar: 'arguments' }).slice(0, 2000)
  }
  return call
}

/**
 * The SDK's retry policy: a provider error it marks retryable (408, 409, 429, 5xx, no connection), after a Retry-After
 * within a minute or 2 s doubling.
 */
const FIRST_RETRY_MS = 2000
function retryDelayMs(err: APICallError, attempt: number): number {
  const backoff = FIRST_RETRY_MS * 2 ** attempt
  const h = err.responseHeaders ?? {}
  let ms = h['retry-after-ms'] ? parseFloat(h['retry-after-ms']) : NaN
  if (Number.isNaN(ms) && h['retry-after']) {
    const seconds = parseFloat(h['retry-after'])
    ms = Number.isNaN(seconds) ? Date.parse(h['retry-after']) - Date.now() : seconds * 1000
  }
  return !Number.isNaN(ms) && ms >= 0 && (ms < 60_000 || ms < backoff) ? ms : backoff
}

/**
 * Streamed text made storable piece by piece: a NUL or an unpaired surrogate becomes U+FFFD, and a
 * high surrogate that ends a delta waits for the next one (the pair may arrive split). Called with
 * '' at the end, it flushes what waits.
 */
function storableDeltas(): (delta: string) => string {
  let held = ''
  return (delta) => {
    let s = held + delta
    held = ''
    const last = s.charCodeAt(s.length - 1)
    if (delta && last >= 0xd800 && last <= 0xdbff) {
      held = s.slice(-1)
      s = s.slice(0, -1)
    }
    return storableText(s)
  }
}

/** Why the call timed out: set as the abort reason of our own timer, told apart from the caller's. */
class CallTimeout extends Error {}

const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e))

/** The provider's error code or type, read from its JSON error body (never shown to anyone). */
function upstreamCode(e: APICallError): string {
  const body = (e.data ?? safeJson(e.responseBody)) as
    { error?: { code?: unknown; type?: unknown; message?: unknown } } | undefined
  const err = body?.error
  return [
    err?.code,
    err?.type,
    typeof err?.message === 'string' && /prompt is too long|context length|maximum context/i.test(err.message)
      ? 'context_length_exceeded'
      : '',
  ]
    .filter((x) => typeof x === 'string' && x)
    .join(' ')
}
function safeJson(text: string | undefined): unknown {
  try {
    return text ? JSON.parse(text) : undefined
  } catch {
    return undefined
  }
}

const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'ECONNABORTED',
  'UND_ERR_SOCKET',
])
function connectionCode(err: unknown): string | null {
  for (let e = err, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code
    if (typeof code === 'string' && (CONNECTION_CODES.has(code) || code === 'ETIMEDOUT')) return code
  }
  return null
}

/** An SDK or connection failure as the catalog's LLM_* error. */
function classify(e: unknown, ctx: { provider: LlmProvider; model: string }, retriedOut: boolean): AppError {
  const refusal = refusalIn(e)
  if (refusal) {
    const remedy = refusal.remedy ? `to allow it, change ${refusal.remedy}` : 'no setting allows it'
    return new AppError(
      'LLM_OUTBOUND_REFUSED',
      `The outbound policy refused the connection to the model provider (${refusal.reason}); ${remedy}`,
      {
        ...ctx,
        reason: refusal.reason,
      },
    )
  }
  if (APICallError.isInstance(e) && e.statusCode !== undefined) {
    const status = e.statusCode
    const details = { ...ctx, upstreamStatus: status }
    const code = upstreamCode(e)
    let appCode: ErrorCode = 'LLM_PROVIDER_ERROR'
    if (/context_length_exceeded/.test(code)) appCode = 'LLM_CONTEXT_TOO_LONG'
    else if (status === 401 || status === 403) appCode = 'LLM_KEY_REJECTED'
    else if (status === 404 || /model_not_found/.test(code)) appCode = 'LLM_MODEL_NOT_FOUND'
    else if (status === 429) {
      const retryAfter = Math.ceil(Number(e.responseHeaders?.['retry-after']))
      const seconds = Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : null
      return new AppError(
        'LLM_RATE_LIMITED',
        `The model provider is rate limiting this deployment${retriedOut ? ' (after retries)' : ''}`,
        { ...details, retryAfterSeconds: seconds },
        seconds === null ? {} : { 'Retry-After': String(seconds) },
      )
    }
    return new AppError(appCode, undefined, details)
  }
  const conn = connectionCode(e)
  if (conn === 'ETIMEDOUT') return new AppError('LLM_TIMEOUT', undefined, ctx)
  if (conn)
    return new AppError('LLM_UNREACHABLE', `The model provider could not be reached (${conn})`, {
      ...ctx,
      reason: conn,
    })
  return new AppError('LLM_PROVIDER_ERROR', undefined, ctx)
}

export function createLlm(deps: {
  db: Db
  log: Logger
  registry?: Registry
  now?: Clock
  retry?: { maxRetries?: number }
  /** METRICS_TENANT_LABEL: tokens also counted per tenant. */
  tenantLabel?: boolean
  /** Each call under a request's or job's span is a span of its own; none when off. */
  tracing?: Tracing
}): Llm {
  const { db, log } = deps
  const now = deps.now ?? Date.now
  const maxRetries = deps.retry?.maxRetries ?? 2
  // No tenant label on any of these: one series per tenant would grow without bound (GET
  // /tenant/usage answers per tenant from the database).
  const registers = deps.registry ? [deps.registry] : []
  const requests = new Counter({
    name: 'atrium_llm_requests_total',
    help: 'Model calls by provider and outcome (ok, aborted, or the error code)',
    labelNames: ['provider', 'outcome'] as const,
    registers,
  })
  const tokens = new Counter({
    name: 'atrium_llm_tokens_total',
    help: 'Tokens used by model calls',
    labelNames: ['provider', 'model', 'kind'] as const,
    registers,
  })
  // Only when the operator asks (a site with a handful of tenants): one series per tenant.
  const tenantTokens = deps.tenantLabel
    ? new Counter({
        name: 'atrium_llm_tenant_tokens_total',
        help: 'Tokens used by model calls, by tenant (METRICS_TENANT_LABEL)',
        labelNames: ['tenant', 'provider', 'kind'] as const,
        registers,
      })
    : null
  const duration = new Histogram({
    name: 'atrium_llm_request_duration_seconds',
    help: 'Time of model calls, first byte sent to last byte received',
    labelNames: ['provider'] as const,
    buckets: [0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320],
    registers,
  })

  function checkConfigured(target: LlmTarget, model?: string): void {
    const missing = missingFields(target, model)
    if (missing.length)
      throw new AppError('LLM_NOT_CONFIGURED', `The tenant's LLM settings are incomplete: set ${missing.join(', ')}`, {
        provider: target.provider,
        missing,
      })
  }

  async function record(
    tenantId: string,
    provider: LlmProvider,
    model: string,
    input: number,
    output: number,
  ): Promise<void> {
    const day = new Date(now()).toISOString().slice(0, 10) // UTC
    await db.tenant(tenantId, async (sql) => {
      await sql`
        insert into llm_usage (tenant_id, day, provider, model, requests, input_tokens, output_tokens)
        values (${tenantId}, ${day}, ${provider}, ${model}, 1, ${input}, ${output})
        on conflict (tenant_id, day, provider, model) do update set
          requests = llm_usage.requests + 1,
          input_tokens = llm_usage.input_tokens + excluded.input_tokens,
          output_tokens = llm_usage.output_tokens + excluded.output_tokens`
    })
  }

  async function complete(req: LlmRequest): Promise<LlmResponse> {
    const { target } = req
    checkConfigured(target, req.model)
    // Before the timer, the listener and the span: a schema that does not compile throws with nothing to undo.
    const tools = req.tools?.length ? toolDefinitions(req.tools) : undefined
    const provider = target.provider
    const model = (req.model ?? target.model)!.trim()
    const ctx = { provider, model }
    const started = performance.now()
    const temperature = req.temperature ?? target.temperature ?? undefined
    const maxOutputTokens = req.maxTokens ?? target.maxTokens ?? undefined

    // One signal for the SDK: the caller's abort or our timer, whichever comes first.
    const controller = new AbortController()
    const timeoutMs = req.timeoutMs ?? DEFAULT_TIMEOUT_MS
    const timer = setTimeout(
      () => controller.abort(new CallTimeout(`no complete answer within ${timeoutMs} ms`)),
      timeoutMs,
    )
    const onAbort = () => controller.abort(req.signal!.reason)
    if (req.signal?.aborted) onAbort()
    else req.signal?.addEventListener('abort', onAbort, { once: true })

    const span =
      deps.tracing?.child(`chat ${model}`, {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': provider,
        'gen_ai.system': provider, // the older name of gen_ai.provider.name, which many backends still read
        'gen_ai.request.model': model,
        ...(maxOutputTokens === undefined ? {} : { 'gen_ai.request.max_tokens': maxOutputTokens }),
        ...(temperature === undefined ? {} : { 'gen_ai.request.temperature': temperature }),
      }) ?? null

    /** Each call is counted once, whichever way it ends. */
    let counted = false
    const finish = (outcome: string) => {
      counted = true
      requests.inc({ provider, outcome })
      duration.observe({ provider }, (performance.now() - started) / 1000)
      if (span) {
        span.setAttribute('atrium.llm.outcome', outcome)
        // The caller's own abort (a cancelled run, a client gone) is not the model's failure.
        if (outcome !== 'ok' && outcome !== 'aborted') failSpan(span, outcome)
        span.end()
      }
    }
    /** Set once the retries are used up on a retryable error: its message says so. */
    let retriedOut = false
    const failed = (err: unknown): never => {
      if (controller.signal.aborted) {
        const reason: unknown = controller.signal.reason
        if (!(reason instanceof CallTimeout)) {
          finish('aborted')
          throw reason // the caller's own reason, as fetch does
        }
        err = new AppError('LLM_TIMEOUT', `The model provider did not answer within ${timeoutMs} ms`, ctx)
      }
      const appErr = err instanceof AppError ? err : classify(err, ctx, retriedOut)
      finish(appErr.code)
      // The class and code of what failed, never its message: a provider's message can echo the key.
      log.warn(
        {
          provider,
          model,
          tenantId: req.tenantId,
          code: appErr.code,
          upstreamStatus: appErr.details.upstreamStatus,
          errorName: (err as Error)?.name,
        },
        'model call failed',
      )
      throw appErr
    }

    const options: LanguageModelV3CallOptions = {
      prompt: toPrompt(req.messages),
      ...(tools ? { tools, toolChoice: { type: 'auto' as const } } : {}),
      ...(temperature === undefined ? {} : { temperature }),
      ...(maxOutputTokens === undefined ? {} : { maxOutputTokens }),
      abortSignal: controller.signal,
    }
    /** The request, retried as the policy says while it fails before its stream begins. */
    const open = async () => {
      const languageModelCall = await languageModel(target, model)
      for (let attempt = 0; ; attempt++) {
        try {
          return await languageModelCall.doStream(options)
        } catch (err) {
          if (!APICallError.isInstance(err) || !err.isRetryable || controller.signal.aborted) throw err
          if (attempt >= maxRetries) {
            retriedOut = maxRetries > 0
            throw err
          }
          await sleep(retryDelayMs(err, attempt), undefined, { signal: controller.signal })
        }
      }
    }
    const maxOutputChars = req.maxOutputChars ?? LLM_MAX_OUTPUT_CHARS
    /** Characters of the answer so far (text, and tool-call arguments as they stream or arrive whole). */
    let outputChars = 0
    const tooLarge = (limit: 'outputChars' | 'toolCalls', max: number) =>
      new AppError(
        'LLM_RESPONSE_TOO_LARGE',
        limit === 'toolCalls'
          ? `The model asked for more than ${max} tool calls in one answer`
          : `The model's answer is longer than ${max} characters`,
        {
          ...ctx,
          limit,
          max,
        },
      )
    const spend = (chars: number) => {
      outputChars += chars
      // Thrown inside the loop: leaving it cancels the stream, which closes the connection.
      if (outputChars > maxOutputChars) failed(tooLarge('outputChars', maxOutputChars))
    }
    const storable = storableDeltas()
    try {
      const { stream } = await open()
      let text = ''
      const toolCalls: LlmToolCall[] = []
      /** Calls begun, and those whose arguments were counted as they streamed, by id. */
      const started = new Set<string>()
      const streamed = new Set<string>()
      let finishReason: LlmResponse['finishReason'] = 'other'
      let usage = { inputTokens: 0, outputTokens: 0 }
      for await (const part of stream) {
        switch (part.type) {
          case 'text-delta': {
            // Providers open with an empty one (OpenAI's role chunk): not a delta to anyone.
            if (!part.delta) break
            spend(part.delta.length)
            const delta = storable(part.delta)
            if (!delta) break
            text += delta
            req.onDelta?.(delta)
            break
          }
          // Providers announce each call as it begins (the SDK hands over whole calls only at the
          // end of the answer): counted there, so that a flood of calls is stopped as it streams.
          case 'tool-input-start':
            started.add(part.id)
            if (req.maxToolCalls !== undefined && started.size > req.maxToolCalls)
              failed(tooLarge('toolCalls', req.maxToolCalls))
            break
          case 'tool-input-delta':
            streamed.add(part.id)
            spend(part.delta.length)
            break
          case 'tool-call':
            if (req.maxToolCalls !== undefined && toolCalls.length >= req.maxToolCalls)
              failed(tooLarge('toolCalls', req.maxToolCalls))
            if (!streamed.has(part.toolCallId)) spend(part.input.length)
            toolCalls.push(toolCall(part, req.tools))
            break
          case 'finish':
            finishReason = part.finishReason.unified
            usage = { inputTokens: part.usage.inputTokens.total ?? 0, outputTokens: part.usage.outputTokens.total ?? 0 }
            span?.setAttributes({
              'gen_ai.usage.input_tokens': usage.inputTokens,
              'gen_ai.usage.output_tokens': usage.outputTokens,
              'gen_ai.response.finish_reasons': [finishReason],
            })
            break
          case 'stream-start':
            // What the model ignored of the call (a setting it does not support): for the log, not the user.
            if (part.warnings.length) log.debug({ provider, model, warnings: part.warnings }, 'model call warnings')
            break
          case 'error':
            failed(part.error)
            break
        }
      }
      if (controller.signal.aborted) failed(controller.signal.reason)
      // A high surrogate held back at the very end stands alone: replaced, and sent like any delta.
      const tail = storable('')
      if (tail) {
        text += tail
        req.onDelta?.(tail)
      }
      finish('ok')
      tokens.inc({ provider, model, kind: 'input' }, usage.inputTokens)
      tokens.inc({ provider, model, kind: 'output' }, usage.outputTokens)
      tenantTokens?.inc({ tenant: req.tenantId, provider, kind: 'input' }, usage.inputTokens)
      tenantTokens?.inc({ tenant: req.tenantId, provider, kind: 'output' }, usage.outputTokens)
      await record(req.tenantId, provider, model, usage.inputTokens, usage.outputTokens)
      return { text, toolCalls, finishReason, usage, provider, model }
    } catch (err) {
      // Thrown by `failed` (counted already), or the request itself failed: an abort before the stream is counted as
      // one too.
      if (err instanceof AppError || counted) throw err
      return failed(err)
    } finally {
      clearTimeout(timer)
      req.signal?.removeEventListener('abort', onAbort)
    }
  }

  return { complete, checkConfigured }
}
