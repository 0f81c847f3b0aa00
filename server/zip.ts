// Builds a zip archive in memory (backups and exports of metadata are small) with yazl.
import { ZipFile } from 'yazl'

export interface ZipEntry { name: string; data: string | Buffer }

export function buildZip(entries: ZipEntry[], mtime = new Date()): Promise<Buffer> {
  const zip = new ZipFile()
  for (const e of entries) zip.addBuffer(Buffer.isBuffer(e.data) ? e.data : Buffer.from(e.data, 'utf8'), e.name, { mtime })
  zip.end()
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    zip.outputStream.on('data', (c: Buffer) => chunks.push(c))
    zip.outputStream.on('error', reject)
    zip.outputStream.on('end', () => resolve(Buffer.concat(chunks)))
  })
}

export const json = (value: unknown) => JSON.stringify(value, null, 2) + '\n'
