// Reads a zip archive whole (small archives in tests): entry name to text, or to bytes.
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
