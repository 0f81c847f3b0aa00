// A real terminal for interactive programs: a detached tmux session of a given size, keys sent as
// a person types them, and the screen read back.
import { execFileSync, spawnSync } from 'node:child_process'
import type { Test } from 'tap'

export const hasTmux = spawnSync('tmux', ['-V']).status === 0

export interface Terminal {
  /** Types text literally, then presses Enter when asked. */
  type(text: string, enter?: boolean): void
  /** Presses named keys (Enter, Down, BSpace, C-c ...). */
  press(...keys: string[]): void
  /** Presses a key several times, a moment apart, as a person does (one burst reads as one input). */
  repeat(key: string, times: number): Promise<void>
  /** The visible screen. */
  screen(): string
  /** Waits until the screen matches, or fails with what it showed. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>
}

export function terminal(t: Test, command: string, opts: { cwd: string; width?: number; height?: number }): Terminal {
  const name = `atrium-test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
  const tmux = (...args: string[]) => execFileSync('tmux', args, { encoding: 'utf8' })
  // A person's terminal, not CI's: with CI set, Ink draws only the final frame.
  const shell = `env -u CI -u CONTINUOUS_INTEGRATION ${command}`
  tmux(
    'new-session',
    '-d',
    '-s',
    name,
    '-x',
    String(opts.width ?? 80),
    '-y',
    String(opts.height ?? 24),
    '-c',
    opts.cwd,
    shell,
  )
  // Keep the pane after the program exits, so its last screen can still be read.
  tmux('set-option', '-t', name, 'remain-on-exit', 'on')
  t.teardown(() => {
    spawnSync('tmux', ['kill-session', '-t', name])
  })
  const screen = () => tmux('capture-pane', '-p', '-t', name)
  return {
    type(text, enter = false) {
      tmux('send-keys', '-t', name, '-l', text)
      if (enter) tmux('send-keys', '-t', name, 'Enter')
    },
    press: (...keys) => {
      tmux('send-keys', '-t', name, ...keys)
    },
    async repeat(key, times) {
      for (let i = 0; i < times; i++) {
        tmux('send-keys', '-t', name, key)
        await new Promise((r) => setTimeout(r, 30))
      }
    },
    screen,
    async waitFor(pattern, timeoutMs = 30_000) {
      const until = Date.now() + timeoutMs
      for (;;) {
        const s = screen()
        if (pattern.test(s)) return s
        if (Date.now() > until) throw new Error(`the screen never showed ${pattern}; it showed:\n${s}`)
        await new Promise((r) => setTimeout(r, 100))
      }
    },
  }
}
