// A real OpenTelemetry Collector for the tracing tests: our build of its OTLP receiver and file
// exporter (.ci/otelcol; .ci/run builds it as atrium-otelcol where `go install` puts its tools).
// Each call starts one on a free loopback port, writing what it receives to a file of its own as
// OTLP JSON (one export a line), which spans() reads back flattened. Stopped and removed at the
// test's end.
import { spawn } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { connect, type AddressInfo } from 'node:net'
import { join } from 'node:path'
import type { Test } from 'tap'
import type { AppOptions } from '../../server/app.js'
import { createLogger } from '../../server/logger.js'
import { openPlatform } from '../../server/platform/index.js'
import { appOn, type TestApp } from './app.js'
import { configFrom, freePort, tempDir, testEnv } from './platform.js'
import { findTool, needs } from './tools.js'

/** tap's skip option for the tracing tests: false where the collector is built (always in CI). */
export const needsCollector = needs('atrium-otelcol')

/** A span as the collector received it; attributes by key, with their OTLP JSON values made plain. */
export interface ReceivedSpan {
  traceId: string
  spanId: string
  parentSpanId: string
  name: string
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number
  /** When it began, in nanoseconds since the epoch (OTLP JSON writes the 64-bit number as a string). */
  startTimeUnixNano: string
  attributes: Record<string, unknown>
  /** 2: error. */
  status: { code?: number; message?: string }
  links: { traceId: string; spanId: string }[]
  /** The attributes of the resource that sent it (service.name...). */
  resource: Record<string, unknown>
}

export interface Collector {
  /** What TRACING_OTLP_ENDPOINT is set to. */
  endpoint: string
  /** Every export's raw text so far: for a test that no secret was sent in any form. */
  raw(): string
  spans(): ReceivedSpan[]
  /** The spans once `ready` holds for them (the exporter sends every second, the collector writes every 100 ms). */
  until(ready: (spans: ReceivedSpan[]) => boolean, ms?: number): Promise<ReceivedSpan[]>
}

type AnyValue = {
  stringValue?: string
  intValue?: string | number
  doubleValue?: number
  boolValue?: boolean
  arrayValue?: { values?: AnyValue[] }
}
const plain = (v: AnyValue): unknown =>
  v.stringValue ??
  (v.intValue !== undefined ? Number(v.intValue) : undefined) ??
  v.doubleValue ??
  v.boolValue ??
  (v.arrayValue ? (v.arrayValue.values ?? []).map(plain) : undefined)
const attributes = (list: { key: string; value: AnyValue }[] = []) =>
  Object.fromEntries(list.map((a) => [a.key, plain(a.value)]))

interface ExportLine {
  resourceSpans?: {
    resource?: { attributes?: { key: string; value: AnyValue }[] }
    scopeSpans?: {
      spans?: (Omit<ReceivedSpan, 'attributes' | 'resource' | 'links'> & {
        attributes?: { key: string; value: AnyValue }[]
        links?: { traceId: string; spanId: string }[]
      })[]
    }[]
  }[]
}

export async function otelCollector(t: Test): Promise<Collector> {
  const binary = findTool('atrium-otelcol')
  if (!binary) throw new Error('atrium-otelcol is not built: .ci/run builds it (.ci/otelcol)')
  const dir = tempDir(t, 'atrium-otelcol-')
  const port = await freePort()
  const out = join(dir, 'spans.jsonl')
  const config = join(dir, 'config.yaml')
  // No metrics of its own (they would listen on a fixed port); its log at warn, on our stderr.
  writeFileSync(
    config,
    `receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${port}
exporters:
  file:
    path: ${out}
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
`,
  )
  const child = spawn(binary, ['--config', config], { stdio: ['ignore', 'ignore', 'pipe'] })
  let log = ''
  child.stderr.on('data', (c: Buffer) => (log = (log + c.toString()).slice(-4000)))
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  t.teardown(async () => {
    child.kill('SIGTERM')
    await exited
  })
  for (let i = 0; ; i++) {
    const up = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1', () => (s.destroy(), resolve(true)))
      s.on('error', () => resolve(false))
    })
    if (up) break
    if (i > 200 || child.exitCode !== null) throw new Error(`the collector did not start:\n${log}`)
    await new Promise((r) => setTimeout(r, 50))
  }

  const raw = () => (existsSync(out) ? readFileSync(out, 'utf8') : '')
  const spans = () =>
    raw()
      .split('\n')
      .filter(Boolean)
      .flatMap((line) =>
        ((JSON.parse(line) as ExportLine).resourceSpans ?? []).flatMap((rs) =>
          (rs.scopeSpans ?? []).flatMap((ss) =>
            (ss.spans ?? []).map((s): ReceivedSpan => ({
              ...s,
              parentSpanId: s.parentSpanId ?? '',
              status: s.status ?? {},
              attributes: attributes(s.attributes),
              links: (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
              resource: attributes(rs.resource?.attributes),
            })),
          ),
        ),
      )
  return {
    endpoint: `http://127.0.0.1:${port}`,
    raw,
    spans,
    async until(ready, ms = 20_000) {
      const end = Date.now() + ms
      for (;;) {
        const got = spans()
        if (ready(got)) return got
        if (Date.now() > end) throw new Error(`the collector did not receive the spans expected; it has ${got.length}`)
        await new Promise((r) => setTimeout(r, 100))
      }
    },
  }
}

/** A log line the server wrote, parsed. */
export type LogLine = Record<string, unknown> & { msg: string }

/**
 * An app on a test platform whose log (info and up, the server's own logger) is read back, listening
 * on loopback (requests over a real socket, as a body arrives in production).
 */
export async function loggedApp(
  t: Test,
  overrides: Record<string, string>,
  opts: AppOptions = {},
): Promise<TestApp & { lines: LogLine[]; base: string }> {
  const lines: LogLine[] = []
  const config = configFrom(await testEnv(t, overrides))
  const platform = await openPlatform(
    config,
    createLogger('info', { write: (s: string) => void lines.push(JSON.parse(s) as LogLine) }),
  )
  t.teardown(() => platform.close())
  const h = await appOn(t, platform, opts)
  await h.app.listen({ port: 0, host: '127.0.0.1' })
  return { ...h, lines, base: `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}` }
}
