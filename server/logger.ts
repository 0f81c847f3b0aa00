// pino, with credentials redacted wherever they could appear in a log line.
import pino, { type DestinationStream, type Logger } from 'pino'

export const REDACT_PATHS = ['req.headers.authorization', 'req.headers.cookie', 'req.headers["x-api-key"]', 'res.headers["set-cookie"]', '*.password', '*.secret', '*.apiKey', '*.token']

// Query parameters that are credentials (signed download links).
const SECRET_QUERY = /([?&](?:signature|token|code|state|codeVerifier)=)[^&]*/gi

export const redactUrl = (url: string) => url.replace(SECRET_QUERY, '$1[redacted]')

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      serializers: {
        req: (req: { method: string; url: string; ip?: string; id?: string }) => ({ method: req.method, url: redactUrl(req.url), ip: req.ip }),
        err: pino.stdSerializers.err,
      },
    },
    destination,
  )
}
