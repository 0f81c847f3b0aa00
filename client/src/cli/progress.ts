// A progress bar for long transfers, drawn on stderr when it is a terminal (and only then: piped
// output and --json stay clean), redrawn at most every 100 ms.
export interface Progress {
  add(bytes: number): void
  done(): void
}

const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
export function bytes(n: number): string {
  let i = 0
  for (; n >= 1024 && i < units.length - 1; i++) n /= 1024
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`
}

export function progress(label: string, total: number | null, out: NodeJS.WriteStream = process.stderr): Progress {
  let seen = 0
  let drawn = 0
  const draw = (final = false) => {
    if (!out.isTTY) return
    const now = Date.now()
    if (!final && now - drawn < 100) return
    drawn = now
    const width = 30
    const bar = total ? '#'.repeat(Math.min(width, Math.round((seen / total) * width))).padEnd(width, '.') : ''
    const pct = total ? ` ${Math.min(100, Math.floor((seen / total) * 100))}%` : ''
    out.write(`\r${label} ${bar ? `[${bar}]` : ''}${pct} ${bytes(seen)}${total ? ` of ${bytes(total)}` : ''}\x1b[K`)
  }
  return {
    add(n) {
      seen += n
      draw()
    },
    done() {
      draw(true)
      if (out.isTTY) out.write('\n')
    },
  }
}

/** A stream that counts what passes through it. */
export function counted(p: Progress): TransformStream<Uint8Array, Uint8Array> {
  return new TransformStream({
    transform(chunk, controller) {
      p.add(chunk.byteLength)
      controller.enqueue(chunk)
    },
    flush: () => p.done(),
  })
}
