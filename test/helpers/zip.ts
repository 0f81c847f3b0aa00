// Reads a zip archive whole (small archives in tests): entry name to text, or to bytes.
import zlib from 'node:zlib'
import yauzl from 'yauzl'

export async function unzip(buf: Buffer): Promise<Record<string, string>> {
  const raw = await unzipRaw(buf)
  return Object.fromEntries(Object.entries(raw).map(([name, bytes]) => [name, bytes.toString('utf8')]))
}

/** Entry name to its exact bytes. */
export function unzipRaw(buf: Buffer): Promise<Record<string, Buffer>> {
  return new Promise((resolve, reject) => {
    yauzl.fromBuffer(buf, { lazyEntries: true }, (err, zip) => {
      if (err) return reject(err)
      const out: Record<string, Buffer> = {}
      zip.on('entry', (entry: yauzl.Entry) => {
        zip.openReadStream(entry, (e, stream) => {
          if (e) return reject(e)
          const chunks: Buffer[] = []
          stream.on('data', (c: Buffer) => chunks.push(c))
          stream.on('end', () => {
            out[entry.fileName] = Buffer.concat(chunks)
            zip.readEntry()
          })
        })
      })
      zip.on('end', () => resolve(out))
      zip.readEntry()
    })
  })
}

export interface RawEntry {
  name: string
  data?: Buffer
  /** 0 stored (default), 8 deflated. */
  method?: 0 | 8
  /** Unix mode for the external attributes (0o120777 makes a symbolic link). */
  mode?: number
  /** A CRC-32 to write instead of the data's. */
  crc?: number
  /** Share the local header and data of an earlier entry (by index): overlapping entries. */
  sameDataAs?: number
}

/**
 * A zip written byte by byte, for archives no zip library would write: unsafe names, duplicate
 * names, wrong CRCs, symbolic links, entries that share their data. Names are UTF-8 (flag bit 11).
 */
export function rawZip(entries: RawEntry[]): Buffer {
  const locals: Buffer[] = []
  const central: Buffer[] = []
  const placed: { offset: number; crc: number; compressed: number; size: number; method: number }[] = []
  let offset = 0
  for (const e of entries) {
    const name = Buffer.from(e.name, 'utf8')
    let at: (typeof placed)[number]
    if (e.sameDataAs !== undefined) at = placed[e.sameDataAs]!
    else {
      const data = e.data ?? Buffer.alloc(0)
      const method = e.method ?? 0
      const body = method === 8 ? zlib.deflateRawSync(data) : data
      const crc = e.crc ?? zlib.crc32(data)
      const local = Buffer.alloc(30)
      local.writeUInt32LE(0x04034b50, 0)
      local.writeUInt16LE(20, 4)
      local.writeUInt16LE(0x0800, 6)
      local.writeUInt16LE(method, 8)
      local.writeUInt32LE(crc >>> 0, 14)
      local.writeUInt32LE(body.length, 18)
      local.writeUInt32LE(data.length, 22)
      local.writeUInt16LE(name.length, 26)
      at = { offset, crc, compressed: body.length, size: data.length, method }
      locals.push(local, name, body)
      offset += 30 + name.length + body.length
    }
    placed.push(at)
    const c = Buffer.alloc(46)
    c.writeUInt32LE(0x02014b50, 0)
    c.writeUInt16LE((3 << 8) | 20, 4) // made by Unix: the external attributes hold a mode
    c.writeUInt16LE(20, 6)
    c.writeUInt16LE(0x0800, 8)
    c.writeUInt16LE(at.method, 10)
    c.writeUInt32LE(at.crc >>> 0, 16)
    c.writeUInt32LE(at.compressed, 20)
    c.writeUInt32LE(at.size, 24)
    c.writeUInt16LE(name.length, 28)
    c.writeUInt32LE(((e.mode ?? 0o100644) << 16) >>> 0, 38)
    c.writeUInt32LE(at.offset, 42)
    central.push(c, name)
  }
  const dir = Buffer.concat(central)
  const tail: Buffer[] = []
  if (entries.length > 0xffff) {
    // More entries than the 16-bit count holds: a ZIP64 end record and its locator say how many.
    const z = Buffer.alloc(56)
    z.writeUInt32LE(0x06064b50, 0)
    z.writeBigUInt64LE(44n, 4)
    z.writeUInt16LE(45, 12)
    z.writeUInt16LE(45, 14)
    z.writeBigUInt64LE(BigInt(entries.length), 24)
    z.writeBigUInt64LE(BigInt(entries.length), 32)
    z.writeBigUInt64LE(BigInt(dir.length), 40)
    z.writeBigUInt64LE(BigInt(offset), 48)
    const locator = Buffer.alloc(20)
    locator.writeUInt32LE(0x07064b50, 0)
    locator.writeBigUInt64LE(BigInt(offset + dir.length), 8)
    locator.writeUInt32LE(1, 16)
    tail.push(z, locator)
  }
  const end = Buffer.alloc(22)
  end.writeUInt32LE(0x06054b50, 0)
  end.writeUInt16LE(Math.min(entries.length, 0xffff), 8)
  end.writeUInt16LE(Math.min(entries.length, 0xffff), 10)
  end.writeUInt32LE(dir.length, 12)
  end.writeUInt32LE(offset, 16)
  return Buffer.concat([...locals, dir, ...tail, end])
}

/** A zip of `entries` (an unzipRaw answer) with some replaced or added, stored as written byte by byte. */
export const rebuiltZip = (entries: Record<string, Buffer>, change: (entries: RawEntry[]) => RawEntry[]) =>
  rawZip(change(Object.entries(entries).map(([name, data]) => ({ name, data }))))

/** An archive's central directory: each entry's name, method and sizes (no data read). */
export function zipDirectory(
  buf: Buffer,
): Promise<{ name: string; method: number; compressed: number; size: number }[]> {
  return new Promise((resolve, reject) => {
    yauzl.fromBuffer(buf, { lazyEntries: true }, (err, zip) => {
      if (err) return reject(err)
      const out: { name: string; method: number; compressed: number; size: number }[] = []
      zip.on('entry', (e: yauzl.Entry) => {
        out.push({
          name: e.fileName,
          method: e.compressionMethod,
          compressed: e.compressedSize,
          size: e.uncompressedSize,
        })
        zip.readEntry()
      })
      zip.on('end', () => resolve(out))
      zip.readEntry()
    })
  })
}
