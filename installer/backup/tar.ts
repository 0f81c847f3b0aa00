// The site backup is a POSIX tar file (pax where a name is long or not ASCII), so that an admin's own
// `tar` lists and extracts it. Both ends stream: an entry's bytes go from the source to the file (or
// from the file to the target) a chunk at a time, so memory stays bounded whatever the size. The
// writer and the reader each keep a SHA-256 of every archive byte, which is what the manifest's
// `archive.sha256` is checked against: one changed byte anywhere before the manifest is caught.
import { createHash, type Hash } from 'node:crypto'
import { createWriteStream, type WriteStream } from 'node:fs'
import { once } from 'node:events'

const BLOCK = 512
const ZEROS = Buffer.alloc(BLOCK * 2)
/** The largest size the ustar size field holds (11 octal digits); bigger sizes go in a pax record. */
const USTAR_MAX_SIZE = 0o77777777777

/** An archive that is not as written: truncated, a header whose checksum fails, a size that does not match. */
export class ArchiveError extends Error {
  override name = 'ArchiveError'
}

function header(name: string, size: number, type: '0' | 'x', mtime: number): Buffer {
  const h = Buffer.alloc(BLOCK)
  h.write(name, 0, 100, 'utf8')
  h.write('0000600\0', 100, 'ascii')
  h.write('0000000\0', 108, 'ascii')
  h.write('0000000\0', 116, 'ascii')
  h.write(`${Math.min(size, USTAR_MAX_SIZE).toString(8).padStart(11, '0')}\0`, 124, 'ascii')
  h.write(`${Math.floor(mtime).toString(8).padStart(11, '0')}\0`, 136, 'ascii')
  h.write('        ', 148, 'ascii')
  h.write(type, 156, 'ascii')
  h.write('ustar\u000000', 257, 'ascii')
  h.write(`${checksum(h).toString(8).padStart(6, '0')}\0 `, 148, 'ascii')
  return h
}

const checksum = (h: Buffer): number => {
  let sum = 0
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : h[i]!
  return sum
}

/** One pax record: "<length> <key>=<value>\n", where the length counts itself. */
export function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`
  const bytes = Buffer.byteLength(body)
  // The smallest n with n = bytes + digits(n): 98 bytes make 101, not 100 (which has 3 digits).
  let n = bytes + 1
  while (n !== bytes + String(n).length) n++
  return `${n}${body}`
}

/**
 * An entry's attributes (an object's content type) are extended attributes in the form GNU tar and
 * bsdtar know (SCHILY.xattr.*): they list and extract the archive without a warning, and
 * `tar --xattrs -x` even sets them (user.mime_type is where desktops look for a file's type).
 */
const ATTRIBUTE = 'SCHILY.xattr.'

const padding = (size: number) => (BLOCK - (size % BLOCK)) % BLOCK
const plainName = (name: string) => /^[\x20-\x7e]{1,100}$/.test(name)

export interface Written {
  bytes: number
  sha256: string
}

/** Writes a tar file entry by entry; nothing is kept in memory but the chunk in hand. */
export class TarWriter {
  private readonly out: WriteStream
  private readonly hash: Hash = createHash('sha256')
  private readonly opened: Promise<unknown>
  bytes = 0

  /** A new file, never one that exists (`wx`), readable by its owner only: it may hold the site's data. */
  constructor(path: string) {
    this.out = createWriteStream(path, { flags: 'wx', mode: 0o600, highWaterMark: 1 << 20 })
    this.opened = once(this.out, 'open')
    this.opened.catch(() => {}) // awaited before the first write, which reports it
    // Kept, and thrown by the next write: never an unhandled 'error' event (a write after destroy, say).
    this.out.on('error', (err) => (this.failed ??= err))
  }

  private failed: Error | null = null

  private async write(buf: Buffer): Promise<void> {
    if (this.failed) throw this.failed
    this.hash.update(buf)
    this.bytes += buf.length
    if (!this.out.write(buf)) await once(this.out, 'drain')
  }

  /** The SHA-256 of every byte written so far (the manifest records it, then is written after it). */
  digest(): string {
    return this.hash.copy().digest('hex')
  }

  /**
   * One file entry of exactly `size` bytes from `source`; a source that gives more or fewer is an error (it changed
   * while read).
   */
  async entry(
    name: string,
    size: number,
    source: AsyncIterable<Buffer> | Buffer,
    o: { attributes?: Record<string, string>; mtime?: number } = {},
  ): Promise<Written> {
    await this.opened
    const mtime = o.mtime ?? Date.now() / 1000
    const pax = [
      plainName(name) ? '' : paxRecord('path', name),
      size > USTAR_MAX_SIZE ? paxRecord('size', String(size)) : '',
      ...Object.entries(o.attributes ?? {}).map(([k, v]) => paxRecord(`${ATTRIBUTE}${k}`, v)),
    ].join('')
    if (pax) {
      const data = Buffer.from(pax, 'utf8')
      await this.write(header('PaxHeader', data.length, 'x', mtime))
      await this.write(data)
      await this.write(Buffer.alloc(padding(data.length)))
    }
    await this.write(header(plainName(name) ? name : name.replace(/[^\x20-\x7e]/g, '_').slice(-100), size, '0', mtime))
    const hash = createHash('sha256')
    let seen = 0
    for await (const chunk of Buffer.isBuffer(source) ? [source] : source) {
      seen += chunk.length
      if (seen > size) throw new ArchiveError(`${name} grew while it was read (more than ${size} bytes)`)
      hash.update(chunk)
      await this.write(chunk)
    }
    if (seen !== size) throw new ArchiveError(`${name} gave ${seen} bytes where ${size} were listed`)
    await this.write(Buffer.alloc(padding(size)))
    return { bytes: size, sha256: hash.digest('hex') }
  }

  /** The end-of-archive blocks, then the file closed (and flushed). */
  async finish(): Promise<void> {
    await this.opened
    await this.write(ZEROS)
    this.out.end()
    await once(this.out, 'finish')
    await once(this.out, 'close')
  }

  /** Closes the file after a failure (the caller removes it). */
  destroy(): void {
    this.out.destroy()
  }
}

/** Pulls exact byte counts out of a stream of chunks, hashing each byte as it is consumed. */
class ByteReader {
  private buf: Buffer = Buffer.alloc(0)
  private readonly it: AsyncIterator<Buffer>
  readonly hash: Hash = createHash('sha256')
  offset = 0

  constructor(source: AsyncIterable<Buffer>) {
    this.it = source[Symbol.asyncIterator]()
  }

  private async more(): Promise<boolean> {
    const r = await this.it.next()
    if (r.done) return false
    this.buf = this.buf.length ? Buffer.concat([this.buf, r.value]) : r.value
    return true
  }

  /** Exactly n bytes, or null at a clean end (no byte left); a partial read is a truncated archive. */
  async take(n: number): Promise<Buffer | null> {
    while (this.buf.length < n) if (!(await this.more())) break
    if (this.buf.length === 0) return null
    if (this.buf.length < n)
      throw new ArchiveError(
        `the archive ends in the middle (at byte ${this.offset + this.buf.length}): it is truncated`,
      )
    const out = this.buf.subarray(0, n)
    this.buf = this.buf.subarray(n)
    this.consumed(out)
    return out
  }

  /** The next chunk of at most n bytes. */
  async chunk(n: number): Promise<Buffer> {
    if (!this.buf.length && !(await this.more()))
      throw new ArchiveError(`the archive ends in the middle (at byte ${this.offset}): it is truncated`)
    const out = this.buf.subarray(0, Math.min(n, this.buf.length))
    this.buf = this.buf.subarray(out.length)
    this.consumed(out)
    return out
  }

  async close(): Promise<void> {
    await this.it.return?.()
  }

  private consumed(b: Buffer) {
    this.hash.update(b)
    this.offset += b.length
  }
}

export interface TarEntry {
  name: string
  size: number
  /** The SHA-256 of every archive byte before this entry's first header (a manifest's `archive.sha256`). */
  archiveBefore: string
  /** The entry's extended attributes (SCHILY.xattr.*), without the prefix. */
  attributes: Record<string, string>
  /** The entry's bytes; what is not read is skipped when the next entry is asked for. */
  body: AsyncIterable<Buffer>
}

function parseSize(field: Buffer): number {
  // GNU base-256 (a high bit set) for sizes past the octal field; written by other tools only.
  if (field[0]! & 0x80) return field.subarray(1).reduce((n, b) => n * 256 + b, field[0]! & 0x7f)
  const text = field.toString('ascii').replace(/\0.*$/s, '').trim()
  if (!/^[0-7]*$/.test(text)) throw new ArchiveError(`a header's size field is not a number (${JSON.stringify(text)})`)
  return text ? parseInt(text, 8) : 0
}

function parsePax(data: Buffer): Record<string, string> {
  const out: Record<string, string> = {}
  let at = 0
  while (at < data.length) {
    const space = data.indexOf(0x20, at)
    const len = Number(data.subarray(at, space).toString('ascii'))
    if (space < 0 || !Number.isInteger(len) || len <= 0 || at + len > data.length)
      throw new ArchiveError('a pax header is damaged')
    const record = data.subarray(space + 1, at + len - 1).toString('utf8')
    const eq = record.indexOf('=')
    out[record.slice(0, eq)] = record.slice(eq + 1)
    at += len
  }
  return out
}

/** The entries of a tar stream, in order. Each header's checksum is checked; an archive cut short is an error. */
export async function* readTar(source: AsyncIterable<Buffer>): AsyncGenerator<TarEntry> {
  const r = new ByteReader(source)
  try {
    yield* entriesOf(r)
  } finally {
    // A reader that stops early (a refusal, a failed upload) closes the file.
    await r.close()
  }
}

async function* entriesOf(r: ByteReader): AsyncGenerator<TarEntry> {
  let pax: Record<string, string> = {}
  let before = ''
  for (;;) {
    if (!Object.keys(pax).length) before = r.hash.copy().digest('hex')
    const at = r.offset
    const h = await r.take(BLOCK)
    if (!h) throw new ArchiveError('the archive ends without its end blocks: it is truncated')
    if (h.every((b) => b === 0)) return
    const stored = parseInt(h.subarray(148, 156).toString('ascii').replace(/\0.*$/s, '').trim(), 8)
    if (stored !== checksum(h))
      throw new ArchiveError(`the header at byte ${at} is damaged (its checksum does not match)`)
    const type = String.fromCharCode(h[156]!)
    const prefix = h.subarray(345, 500).toString('utf8').replace(/\0.*$/s, '')
    const short = h.subarray(0, 100).toString('utf8').replace(/\0.*$/s, '')
    let size = parseSize(h.subarray(124, 136))
    if (type === 'x') {
      const data = await r.take(size + padding(size))
      if (!data) throw new ArchiveError('the archive ends in a pax header: it is truncated')
      pax = { ...pax, ...parsePax(data.subarray(0, size)) }
      continue
    }
    if (pax.size !== undefined) size = Number(pax.size)
    const name = pax.path ?? (prefix ? `${prefix}/${short}` : short)
    const attributes = Object.fromEntries(
      Object.entries(pax).flatMap(([k, v]) => (k.startsWith(ATTRIBUTE) ? [[k.slice(ATTRIBUTE.length), v]] : [])),
    )
    pax = {}
    let left = size
    const body: AsyncIterable<Buffer> = {
      async *[Symbol.asyncIterator]() {
        while (left > 0) {
          const c = await r.chunk(left)
          left -= c.length
          yield c
        }
      },
    }
    yield { name, size, archiveBefore: before, attributes, body }
    while (left > 0) left -= (await r.chunk(left)).length
    const pad = padding(size)
    if (pad && !(await r.take(pad)))
      throw new ArchiveError('the archive ends in the middle of an entry: it is truncated')
  }
}
