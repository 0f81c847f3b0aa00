import { execFileSync } from 'node:child_process'
import { createReadStream, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createHash } from 'node:crypto'
import t from 'tap'
import { ArchiveError, TarWriter, paxRecord, readTar } from '../../../installer/backup/tar.js'
import { tempDir } from '../../helpers/platform.js'

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')

async function* chunks(b: Buffer, size: number) {
  for (let i = 0; i < b.length; i += size) yield b.subarray(i, i + size)
}

async function entries(path: string) {
  const out: { name: string; size: number; data: Buffer; attributes: Record<string, string>; archiveBefore: string }[] =
    []
  for await (const e of readTar(createReadStream(path, { highWaterMark: 1000 }))) {
    const parts: Buffer[] = []
    for await (const c of e.body) parts.push(c)
    out.push({
      name: e.name,
      size: e.size,
      data: Buffer.concat(parts),
      attributes: e.attributes,
      archiveBefore: e.archiveBefore,
    })
  }
  return out
}

t.test(
  'what the writer writes, GNU tar and the reader read back byte for byte: long and non-ASCII names, empty and odd sizes, attributes',
  async (t) => {
    const dir = tempDir(t)
    const path = join(dir, 'a.tar')
    const long = `objects/default/tenants/${'x'.repeat(180)}/backup.zip`
    const files: [string, Buffer][] = [
      ['plain.txt', Buffer.from('hello\n')],
      [long, Buffer.alloc(70_001, 7)],
      ['objects/default/ünïcödé name with spaces.md', Buffer.from('ü')],
      ['empty', Buffer.alloc(0)],
      ['exactly-a-block', Buffer.alloc(512, 1)],
    ]
    const w = new TarWriter(path)
    const written = []
    for (const [name, data] of files)
      written.push(
        await w.entry(name, data.length, chunks(data, 4096), {
          attributes: name === 'plain.txt' ? { 'user.mime_type': 'text/plain; charset=utf-8' } : {},
        }),
      )
    const beforeEnd = w.digest()
    await w.finish()
    t.same(
      written.map((x) => x.sha256),
      files.map(([, d]) => sha(d)),
    )
    const read = await entries(path)
    t.same(
      read.map((e) => [e.name, sha(e.data)]),
      files.map(([n, d]) => [n, sha(d)]),
    )
    t.same(read[0]!.attributes, { 'user.mime_type': 'text/plain; charset=utf-8' })
    t.equal(read[0]!.archiveBefore, createHash('sha256').digest('hex'), 'nothing comes before the first entry')
    t.not(beforeEnd, w.digest(), 'the digest covers the end blocks once they are written')
    t.equal(w.digest(), sha(readFileSync(path)), "the writer's digest is the file's SHA-256")
    // GNU tar lists the same names (pax path records) and extracts the same bytes.
    t.same(
      execFileSync('tar', ['-tf', path], { encoding: 'utf8' }).trim().split('\n'),
      files.map(([n]) => n),
    )
    t.equal(sha(execFileSync('tar', ['-xOf', path, long])), sha(files[1]![1]))
  },
)

t.test(
  'a source that gives fewer or more bytes than listed (an object changed while copied) is an error',
  async (t) => {
    const dir = tempDir(t)
    const w = new TarWriter(join(dir, 'short.tar'))
    await t.rejects(w.entry('a', 10, Buffer.alloc(9)), ArchiveError)
    w.destroy()
    const w2 = new TarWriter(join(dir, 'long.tar'))
    await t.rejects(w2.entry('a', 10, Buffer.alloc(11)), ArchiveError)
    w2.destroy()
  },
)

t.test('a truncated archive and a damaged header are errors, never a short read taken as the end', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, 'a.tar')
  const w = new TarWriter(path)
  await w.entry('one', 3000, Buffer.alloc(3000, 1))
  await w.entry('two', 10, Buffer.alloc(10, 2))
  await w.finish()
  const whole = readFileSync(path)
  for (const cut of [100, 2000, 4096, whole.length - 1024]) {
    writeFileSync(join(dir, 'cut.tar'), whole.subarray(0, cut))
    await t.rejects(entries(join(dir, 'cut.tar')), ArchiveError, `cut at ${cut}`)
  }
  const damaged = Buffer.from(whole)
  damaged[3584 + 10]! ^= 1 // the second entry's header
  writeFileSync(join(dir, 'bad.tar'), damaged)
  await t.rejects(entries(join(dir, 'bad.tar')), /damaged/)
})

t.test('an existing file is never overwritten', async (t) => {
  const dir = tempDir(t)
  const path = join(dir, 'kept.tar')
  writeFileSync(path, 'precious')
  const w = new TarWriter(path)
  await t.rejects(w.entry('a', 1, Buffer.from('x')), { code: 'EEXIST' })
  t.equal(readFileSync(path, 'utf8'), 'precious')
})

t.test(
  'a pax record states its own length exactly, across the lengths where the count gains a digit (98, 99, 998, 999 bytes)',
  async (t) => {
    for (let n = 1; n < 1100; n++) {
      const record = paxRecord('SCHILY.xattr.user.mime_type', 'x'.repeat(n))
      const stated = Number(record.slice(0, record.indexOf(' ')))
      if (stated !== Buffer.byteLength(record))
        t.fail(`value of ${n} bytes: stated ${stated}, is ${Buffer.byteLength(record)}`)
    }
    // The content types of Office templates make records of 98 and 99 bytes; they read back, and GNU tar reads them.
    const dir = tempDir(t)
    const path = join(dir, 'a.tar')
    const w = new TarWriter(path)
    const types = [
      'application/vnd.openxmlformats-officedocument.spreadsheetml.template',
      'application/vnd.openxmlformats-officedocument.presentationml.template',
    ]
    for (const [i, type] of types.entries())
      await w.entry(`f${i}`, 1, Buffer.from('x'), { attributes: { 'user.mime_type': type } })
    await w.finish()
    t.same(
      (await entries(path)).map((e) => e.attributes['user.mime_type']),
      types,
    )
    t.same(execFileSync('tar', ['-tf', path], { encoding: 'utf8' }).trim().split('\n'), ['f0', 'f1'])
  },
)
