// Streaming zip archives (yazl) with their size and SHA-256 measured on the way out, so an archive
// of any size goes to storage without being held in memory.
import { createHash } from 'node:crypto'
import { Readable, Transform } from 'node:stream'
import { ZipFile } from 'yazl'

export interface ZipEntry {
  name: string
  data: string | Buffer | Readable
  /** Deflated unless false (stored as it is). */
  compress?: boolean
}

export interface MeasuredZip {
  /** The archive's bytes; read it once. */
  stream: Readable
  /** Resolves once the stream has been read to its end. */
  measured: Promise<{ size: number; sha256: string }>
  /** Abandons the archive: every entry stream is destroyed, which ends a database cursor feeding one. */
  destroy(): void
}

/** A pass-through that measures what passes: `measured` resolves with the size and SHA-256 once it has ended. */
export function meterStream(): { stream: Transform; measured: Promise<{ size: number; sha256: string }> } {
  const hash = createHash('sha256')
  let size = 0
  const stream = new Transform({
    transform(chunk: Buffer, _enc, done) {
      hash.update(chunk)
      size += chunk.length
      done(null, chunk)
    },
  })
  const measured = new Promise<{ size: number; sha256: string }>((resolve, reject) => {
    stream.once('end', () => resolve({ size, sha256: hash.digest('hex') }))
    stream.once('error', reject)
  })
  measured.catch(() => {}) // the reader of the stream sees the same error
  return { stream, measured }
}

export function zipStream(entries: ZipEntry[], mtime = new Date()): MeasuredZip {
  const { stream: meter, measured } = meterStream()
  const zip = new ZipFile()
  for (const e of entries) {
    if (e.data instanceof Readable) {
      zip.addReadStream(e.data, e.name, { mtime, compress: e.compress ?? true })
      e.data.once('error', (err) => meter.destroy(err)) // an entry's own stream failing fails the archive
    } else {
      zip.addBuffer(Buffer.isBuffer(e.data) ? e.data : Buffer.from(e.data, 'utf8'), e.name, {
        mtime,
        compress: e.compress ?? true,
      })
    }
  }
  zip.end()
  zip.outputStream.once('error', (err) => meter.destroy(err))
  zip.outputStream.pipe(meter)
  const destroy = () => {
    for (const e of entries) if (e.data instanceof Readable) e.data.destroy()
    meter.destroy()
  }
  return { stream: meter, measured, destroy }
}

export const json = (value: unknown) => JSON.stringify(value, null, 2) + '\n'

/** A JSON array written item by item from batches (a database cursor), never whole in memory. */
export function jsonArrayStream<T>(batches: AsyncIterable<readonly T[]>): Readable {
  return Readable.from(
    (async function* () {
      let first = true
      yield '['
      for await (const batch of batches) {
        for (const item of batch) {
          yield (first ? '\n  ' : ',\n  ') + JSON.stringify(item)
          first = false
        }
      }
      yield first ? ']\n' : '\n]\n'
    })(),
  )
}
