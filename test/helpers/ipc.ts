// A script in a process of its own (under tsx) that the test drives over IPC: it answers messages,
// and `next` waits for the first one that matches (one that came earlier is not lost). Killed
// (SIGKILL) when the test ends, unless it has exited.
import { fork, type ChildProcess } from 'node:child_process'
import type { Test } from 'tap'

export type IpcChild<M> = ChildProcess & { next: (pred: (m: M) => unknown) => Promise<M> }

export function ipcChild<M>(t: Test, script: string, env: Record<string, string | undefined>): IpcChild<M> {
  const child = fork(script, [], { execArgv: ['--import', 'tsx'], env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const messages: M[] = []
  const waiting: { pred: (m: M) => unknown; resolve: (m: M) => void }[] = []
  child.on('message', (message) => {
    const m = message as M
    const w = waiting.findIndex((x) => x.pred(m))
    if (w >= 0) waiting.splice(w, 1)[0]!.resolve(m)
    else messages.push(m)
  })
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  return Object.assign(child, {
    next: (pred: (m: M) => unknown): Promise<M> => {
      const i = messages.findIndex(pred)
      if (i >= 0) return Promise.resolve(messages.splice(i, 1)[0]!)
      return new Promise<M>((resolve) => waiting.push({ pred, resolve }))
    },
  })
}
