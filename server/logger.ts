// pino, with credentials redacted wherever they could appear in a log line.
import pino, { type DestinationStream, type Logger } from 'pino'

export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'res.headers["set-cookie"]',
  '*.password',
  '*.secret',
  '*.apiKey',
  '*.token',
]

// Query parameters that are credentials (signed download links).
const SECRET_QUERY = /([?&](?:signature|token|code|state|codeVerifier)=)[^&]*/gi

export const redactUrl = (url: string) => url.replace(SECRET_QUERY, '$1[redacted]')

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      serializers: {
        req: (req: { method: string; url: string; ip?: string; id?: string }) => ({
          method: req.method,
          url: redactUrl(req.url),
          ip: req.ip,
        }),
        err: pino.stdSerializers.err,
      },
    },
    destination,
  )
}

/**
 * Fastify's logger for a request, made only when the request logs at a level that is enabled. Fastify makes a pino
 * child (its bindings serialized, redaction applied) for every request, whether or not it ever logs: about a tenth of a
 * simple read's CPU when the level is above info (docs/performance.md). The child is the same pino child, made on first
 * use.
 */
class LazyRequestLogger {
  made: Logger | null = null
  readonly threshold: number
  constructor(
    private readonly parent: Logger,
    private bindings: pino.Bindings,
    private readonly opts: pino.ChildLoggerOptions,
  ) {
    this.threshold = parent.levels.values[opts.level ?? parent.level] ?? 0
  }
  real(): Logger {
    return (this.made ??= this.parent.child(this.bindings, this.opts))
  }
  /** Bindings learnt after the request began (its trace id), as pino's setBindings: the child is still made on first use. */
  setBindings(bindings: pino.Bindings): void {
    if (this.made) this.made.setBindings(bindings)
    else this.bindings = { ...this.bindings, ...bindings }
  }
  get level(): string {
    return this.made?.level ?? this.opts.level ?? this.parent.level
  }
  set level(level: string) {
    this.real().level = level
  }
  isLevelEnabled(level: string): boolean {
    return (this.parent.levels.values[level] ?? 0) >= this.threshold
  }
  silent() {}
  child(bindings: pino.Bindings, opts?: pino.ChildLoggerOptions): Logger {
    return this.real().child(bindings, opts)
  }
}
// One method per level (pino's values: fatal 60 ... trace 10), a no-op below the threshold.
for (const [level, value] of Object.entries({ fatal: 60, error: 50, warn: 40, info: 30, debug: 20, trace: 10 }) as [
  pino.Level,
  number,
][]) {
  Object.defineProperty(LazyRequestLogger.prototype, level, {
    value(this: LazyRequestLogger, ...args: unknown[]) {
      if (value >= this.threshold) (this.real()[level] as (...a: unknown[]) => void)(...args)
    },
  })
}

export const lazyRequestLogger = (parent: Logger, bindings: pino.Bindings, opts: pino.ChildLoggerOptions): Logger =>
  new LazyRequestLogger(parent, bindings, opts) as unknown as Logger
