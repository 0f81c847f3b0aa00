// Where a secret would show to others while something runs: the command line of every process on this machine (what
// `ps -ef` lists, a container's processes included: they are the host's too), sampled every 100 ms, and the
// container engine's event stream (`docker events`). Then each secret is looked for in all of it, in any spelling
// the support bundle's redaction knows (as is, percent-encoded, base64, hex...).
import { spawn } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { redactor } from '../../common/redact.js'
import { secretValues } from '../../installer/core/support-bundle.js'

/** Every distinct command line seen while watching, and how many times /proc was read. */
export interface ProcessWatch {
  stop(): { samples: number; commandLines: string[] }
}

/** Reads every /proc/<pid>/cmdline now and every `intervalMs` until stopped. */
export function watchCommandLines(intervalMs = 100): ProcessWatch {
  const seen = new Set<string>()
  let samples = 0
  const sample = () => {
    samples++
    for (const pid of readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue
      try {
        const line = readFileSync(`/proc/${pid}/cmdline`).toString('utf8').replaceAll('\0', ' ').trim()
        if (line) seen.add(line)
      } catch {
        // gone between the listing and the read
      }
    }
  }
  sample()
  // Unref'd: a watch left running must not keep the test's process alive once its tests are done.
  const timer = setInterval(sample, intervalMs).unref()
  return {
    stop() {
      clearInterval(timer)
      sample()
      return { samples, commandLines: [...seen] }
    },
  }
}

export interface EventWatch {
  /** Stops the stream and gives every event it printed, one JSON line each. */
  stop(): Promise<string[]>
}

/** `docker events --format '{{json .}}'` from now until stopped; resolves once the stream is open. */
export async function watchDockerEvents(): Promise<EventWatch> {
  const since = Math.floor(Date.now() / 1000) - 1
  const child = spawn('docker', ['events', '--format', '{{json .}}', '--since', String(since)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s))
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()))
  // The stream is open once the process runs; --since covers the moment before.
  await new Promise<void>((resolve, reject) => {
    child.on('spawn', resolve)
    child.on('error', reject)
  })
  return {
    async stop() {
      // Events already sent are read before the stream is closed.
      await new Promise((r) => setTimeout(r, 1000))
      child.kill('SIGTERM')
      await closed
      return out.split('\n').filter(Boolean)
    },
  }
}

/** The names of the secrets that appear in `texts`, in any spelling the redaction knows. */
export function secretsIn(texts: readonly string[], secrets: Readonly<Record<string, string>>): string[] {
  const all = texts.join('\n')
  // One pass over the text for all of them (it may be megabytes: every command line of the machine); only when it
  // finds something is each secret looked for on its own, to name it.
  const values = Object.values(secrets).filter(Boolean)
  if (redactor(values, '\u0000')(all) === all) return []
  return Object.entries(secrets)
    .filter(([, value]) => value && redactor([value], '\u0000')(all) !== all)
    .map(([name]) => name)
}

/** Each secret value a configuration holds (the support bundle's rule), named for where it was found. */
export function configSecrets(values: Readonly<Record<string, string>>): Record<string, string> {
  const named: Record<string, string> = {}
  for (const [name, value] of Object.entries(values))
    secretValues({ [name]: value }).forEach((v, i) => (named[i ? `${name} (${i + 1})` : name] = v))
  return named
}
