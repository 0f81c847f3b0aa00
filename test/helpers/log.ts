// A logger whose lines a test reads back, parsed: what an operator would see in the log.
import pino from 'pino'

export interface LogLine {
  level: number
  msg: string
  [field: string]: unknown
}

export function captureLog() {
  const lines: LogLine[] = []
  const log = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s) as LogLine) })
  return {
    log,
    lines,
    at: (level: 'info' | 'warn' | 'error') => lines.filter((l) => l.level === pino.levels.values[level]),
  }
}
