// Traces with OpenTelemetry, off unless TRACING_OTLP_ENDPOINT names a collector inside the site.
// Off, nothing of the SDK starts: `tracing.enabled` is false, the tracer is the API's no-op one,
// and the adapters (db.ts, cache.ts, jobs.ts, llm.ts, http/tracing.ts) do not wrap anything.
//
// On: spans go in batches (BatchSpanProcessor) to the collector's /v1/traces as OTLP protobuf,
// through the outbound policy (an agent whose lookup judges every address, as for any other
// connection the server opens to an address it was given). Sampling is ParentBased: a request
// that arrives with a W3C traceparent follows its sampled flag; a new trace is kept at
// TRACING_SAMPLE_RATIO by its trace id, and a job's trace is kept when the request it links to was.
//
// Spans never carry secrets: no statement values (postgres.js keeps them apart from the text), no
// Redis arguments, no prompt or reply text, no keys or URLs with credentials, no error messages
// (a database's message can quote values): an error is its code.
import { hostname } from 'node:os'
import {
  context,
  defaultTextMapGetter,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type Tracer,
} from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { ExportResultCode, W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { resourceFromAttributes } from '@opentelemetry/resources'
import {
  BatchSpanProcessor,
  ParentBasedSampler,
  SamplingDecision,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type ReadableSpan,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace'
import { ATTR_ERROR_TYPE, ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions'
import type { Logger } from 'pino'
import { VERSION } from '../../common/version.js'
import { outboundAgent, refusalIn, type CompiledPolicy } from './outbound.js'

export interface TracingSettings {
  TRACING_OTLP_ENDPOINT: string
  TRACING_SAMPLE_RATIO: number
  TRACING_SERVICE_NAME: string
}

export interface Tracing {
  /** false: no SDK runs and nothing is wrapped. */
  readonly enabled: boolean
  readonly tracer: Tracer
  /** The context a request continues: its caller's trace when it sent a W3C traceparent. */
  extract(headers: Record<string, string | string[] | undefined>): Context
  /**
   * A client span (a query, a command, a model call) under the active span, or null when none is
   * recording: work outside a request or job (pool upkeep, polls) starts no trace of its own.
   */
  child(name: string, attributes: Attributes): Span | null
  /** Sends what is buffered and stops. */
  close(): Promise<void>
}

const propagator = new W3CTraceContextPropagator()

const off: Tracing = {
  enabled: false,
  tracer: trace.getTracer('atrium'), // the API's no-op tracer: no provider is registered globally
  extract: () => ROOT_CONTEXT,
  child: () => null,
  close: async () => {},
}

/** A span recorded under the active context, or null (no-op) when nothing records there. */
const recording = () => {
  const span = trace.getSpan(context.active())
  return span?.isRecording() ? span : null
}

/** The W3C traceparent of the active span when it is sampled (what a job keeps of the request that queued it). */
export function activeTraceparent(): string | null {
  const sc = recording()?.spanContext()
  return sc && sc.traceFlags & TraceFlags.SAMPLED ? `00-${sc.traceId}-${sc.spanId}-01` : null
}

/** A link to the span a stored traceparent names; none when there is none or it does not parse. */
export function linkTo(traceparent: string | null | undefined): Link[] {
  if (!traceparent) return []
  const sc = trace.getSpanContext(propagator.extract(ROOT_CONTEXT, { traceparent }, defaultTextMapGetter))
  return sc ? [{ context: sc }] : []
}

/**
 * `fn` run outside any trace, wherever it is called from: work a request sets going that outlives
 * its answer (a stream's polls) must not add spans to the request's trace for as long as it runs.
 */
export const detached = <A extends unknown[], R>(fn: (...args: A) => R): ((...args: A) => R) =>
  context.bind(ROOT_CONTEXT, fn)

/** Marks a span failed with its code alone (never a message: a database's or provider's can quote values). */
export function failSpan(span: Span, code: string): void {
  span.setAttribute(ATTR_ERROR_TYPE, code)
  span.setStatus({ code: SpanStatusCode.ERROR })
}

/** The code an error carries (a SQLSTATE, ECONNREFUSED, an AppError's), else its class name. */
export function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code
  if (typeof code === 'string' && code) return code
  // A Redis reply error's first word is Redis's code (ERR, NOSCRIPT, WRONGTYPE); the rest can quote a key.
  if (err instanceof Error && err.name === 'ReplyError') return /^[A-Z]+/.exec(err.message)?.[0] ?? err.name
  return err instanceof Error ? err.name : 'Error'
}

/**
 * A new trace is kept at the ratio; a trace with a link to a sampled span (a job queued by a kept
 * request) is kept too, so that a request's jobs are there at any ratio.
 */
function linkedOrRatio(ratio: number): Sampler {
  const byRatio = new TraceIdRatioBasedSampler(ratio)
  return {
    shouldSample: (ctx, traceId, name, kind, attributes, links) =>
      links.some((l) => l.context.traceFlags & TraceFlags.SAMPLED)
        ? { decision: SamplingDecision.RECORD_AND_SAMPLED }
        : byRatio.shouldSample(ctx, traceId),
    toString: () => `LinkedOrRatio{${ratio}}`,
  }
}

/** The exporter, saying once when exports start failing (the collector away, the policy refusing it) and once when they work again. */
function reporting(exporter: SpanExporter, log: Logger): SpanExporter {
  let failing = false
  return {
    export(spans: ReadableSpan[], done: (r: ExportResult) => void) {
      exporter.export(spans, (r) => {
        if (r.code !== ExportResultCode.SUCCESS && !failing) {
          failing = true
          const refused = refusalIn(r.error)
          log.warn(
            { err: refused ? refused.message : r.error?.message, spans: spans.length },
            'traces could not be sent to TRACING_OTLP_ENDPOINT; spans are dropped until it answers',
          )
        } else if (r.code === ExportResultCode.SUCCESS && failing) {
          failing = false
          log.info('traces are sent to TRACING_OTLP_ENDPOINT again')
        }
        done(r)
      })
    },
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
  }
}

let contextManager: AsyncLocalStorageContextManager | null = null
const CLOSE_WAIT_MS = 5000

/**
 * Starts the SDK when TRACING_OTLP_ENDPOINT is set. The endpoint is judged by the outbound policy
 * first: one it refuses (a name outside OUTBOUND_ALLOWED_DOMAINS when air-gapped, an address
 * outside OUTBOUND_ALLOWED_NETWORKS) stops the start with the reason; a name that does not resolve
 * yet does not (the collector may start after the server), and each connection is judged again.
 */
export async function openTracing(
  settings: TracingSettings,
  o: { policy: CompiledPolicy; log: Logger },
): Promise<Tracing> {
  if (!settings.TRACING_OTLP_ENDPOINT) return off
  const endpoint = new URL(settings.TRACING_OTLP_ENDPOINT)
  try {
    await o.policy.resolveAllowed(endpoint.hostname)
  } catch (err) {
    const refused = refusalIn(err)
    if (refused)
      throw new Error(
        `TRACING_OTLP_ENDPOINT ${endpoint.host} may not be called: ${refused.reason}${refused.remedy ? ` (to allow it, change ${refused.remedy})` : ''}`,
      )
    o.log.warn({ err: (err as Error).message, host: endpoint.hostname }, 'TRACING_OTLP_ENDPOINT does not resolve yet')
  }
  // As OTEL_EXPORTER_OTLP_ENDPOINT is read: the signal's path is added to the base URL.
  const url = `${endpoint.href.replace(/\/+$/, '')}/v1/traces`
  const exporter = new OTLPTraceExporter({
    url,
    // Every connection the exporter opens goes where the policy allows, judged at connect time.
    httpAgentOptions: () => outboundAgent(o.policy, endpoint),
    timeoutMillis: 10_000,
  })
  const provider = new TracerProvider({
    resource: resourceFromAttributes({
      [ATTR_SERVICE_NAME]: settings.TRACING_SERVICE_NAME || 'atrium',
      [ATTR_SERVICE_VERSION]: VERSION,
      'service.instance.id': `${hostname()}:${process.pid}`,
    }),
    sampler: new ParentBasedSampler({ root: linkedOrRatio(settings.TRACING_SAMPLE_RATIO) }),
    spanProcessors: [
      // Bounded: a collector that is away costs dropped spans, never memory.
      new BatchSpanProcessor({
        exporter: reporting(exporter, o.log),
        maxQueueSize: 4096,
        maxExportBatchSize: 512,
        scheduledDelayMillis: 1000,
        exportTimeoutMillis: 10_000,
      }),
    ],
  })
  // One context manager for the process: the active span follows async work (AsyncLocalStorage).
  if (!contextManager) {
    contextManager = new AsyncLocalStorageContextManager().enable()
    if (!context.setGlobalContextManager(contextManager)) contextManager.disable()
  }
  const tracer = provider.getTracer('atrium', VERSION)
  let closed: Promise<void> | null = null
  return {
    enabled: true,
    tracer,
    extract: (headers) => propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter),
    child: (name, attributes) => (recording() ? tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }) : null),
    // Sends what is queued (shutdown flushes first), waiting for a collector that is away no longer
    // than CLOSE_WAIT_MS: the rest of the shutdown budget is the requests' and the jobs'.
    close: () =>
      (closed ??= Promise.race([
        provider.shutdown().catch(() => {}), // a failed export is said by the exporter
        new Promise<void>((resolve) => setTimeout(resolve, CLOSE_WAIT_MS).unref()),
      ])),
  }
}
