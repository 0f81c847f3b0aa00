// Hostile and broken archives: each is refused with its own code before anything of it is written;
// the tenant's records and stored objects are as they were, and the upload is gone.
import t from 'tap'
import { testApp } from '../../../helpers/app.js'
import { goneFrom, portability, projectWithFiles, storedKeys, tenantState } from '../../../helpers/portability.js'
import { rawZip, rebuiltZip, unzipRaw, type RawEntry } from '../../../helpers/zip.js'
import { MAX_JSON_DEPTH, MAX_RATIO, PAGE_BYTES } from '../../../../server/modules/exports/limits.js'

const h = await testApp(t, {}, { jobs: { pollMs: 50 } })
const p = portability(h)

// A real archive to break: a tenant with a project and three files.
const source = await h.tenant('enterprise')
const FILES = { 'a.txt': 'alpha alpha alpha\n', 'b.txt': 'bravo bravo bravo\n', 'c.txt': 'charlie charlie charlie\n' }
const project = await projectWithFiles(source.call, 'Source', FILES)
const good = (await p.exported(source.call, source.tenantId, { include: ['projects'] })).archive!
const goodEntries = await unzipRaw(good)

// The tenant restored into already holds data of its own, which must stay as it is.
const target = await h.tenant('enterprise')
await projectWithFiles(target.call, 'Mine', { 'keep.txt': 'keep me' })

const state = () => tenantState(h, target.tenantId)

/** The good archive's entries with some replaced or added (stored, as written byte by byte). */
const rebuilt = (change: (entries: RawEntry[]) => RawEntry[]) => rebuiltZip(goodEntries, change)

/** The good archive with one byte of a stored file's content changed (its CRC no longer matches). */
function flipped(content: string): Buffer {
  const copy = Buffer.from(good)
  const at = copy.indexOf(Buffer.from(content))
  if (at < 0) throw new Error('content not found in the archive (was it deflated?)')
  copy[at] = copy[at]! ^ 0x20
  return copy
}

/** An archive of `count` chat message pages numbered from `first`, each holding `data` (stored, or deflated: 8). */
const messagePages = (count: number, first: number, data: Buffer, method: 0 | 8 = 0) =>
  rawZip(
    Array.from({ length: count }, (_, i) => ({
      name: `chat/messages/${String(first + i).padStart(5, '0')}.json`,
      data,
      method,
    })),
  )

interface Case {
  name: string
  archive: () => Buffer
  code: string
  details?: Record<string, unknown>
}

/** An archive whose one entry is named `path`, which `rule` refuses. */
const unsafePath = (name: string, path: string, rule: string): Case => ({
  name,
  archive: () => rawZip([{ name: path, data: Buffer.from('x') }]),
  code: 'ARCHIVE_UNSAFE_PATH',
  details: { rule },
})

const cases: Case[] = [
  unsafePath('zip slip (../)', '../../../../tmp/atrium-evil', "'..' segment"),
  {
    name: 'zip slip inside a project path',
    archive: () =>
      rebuilt((e) => [...e, { name: `projects/${project.id}/files/../../../escape.txt`, data: Buffer.from('x') }]),
    code: 'ARCHIVE_UNSAFE_PATH',
  },
  unsafePath('absolute path', '/etc/cron.d/atrium', 'absolute path'),
  unsafePath('drive letter', 'C:/Windows/evil.dll', 'drive letter'),
  unsafePath('backslash', 'projects\\..\\evil', 'backslash'),
  {
    name: 'symbolic link',
    archive: () =>
      rebuilt((e) => [
        ...e.filter((x) => x.name !== 'tenant.json'),
        { name: 'tenant.json', data: Buffer.from('/etc/passwd'), mode: 0o120777 },
      ]),
    code: 'ARCHIVE_SYMLINK',
  },
  {
    name: '10,000:1 ratio bomb (ten entries sharing 10 MiB of deflated zeros)',
    archive: () =>
      rawZip(
        Array.from({ length: 10 }, (_, i) =>
          i === 0
            ? { name: 'chat/messages/00001.json', data: Buffer.alloc(10 * 1024 * 1024), method: 8 }
            : { name: `chat/messages/0000${i + 1}.json`, sameDataAs: 0 },
        ),
      ),
    code: 'ARCHIVE_COMPRESSION_RATIO',
  },
  {
    name: 'one deflated entry expanding beyond the ratio and its allowance',
    archive: () =>
      rebuilt((e) => [
        ...e,
        {
          name: 'chat/messages/00001.json',
          data: Buffer.concat([Buffer.from('['), Buffer.alloc(10 * 1024 * 1024, 0x20), Buffer.from(']')]),
          method: 8,
        },
      ]),
    code: 'ARCHIVE_COMPRESSION_RATIO',
    details: { entry: 'chat/messages/00001.json', limit: MAX_RATIO },
  },
  {
    name: 'entries each within the allowance, the archive as a whole far beyond the ratio',
    archive: () =>
      messagePages(20, 1, Buffer.concat([Buffer.from('['), Buffer.alloc(PAGE_BYTES - 2, 0x20), Buffer.from(']')]), 8),
    code: 'ARCHIVE_COMPRESSION_RATIO',
  },
  {
    name: 'JSON nested deeper than a restore reads',
    archive: () =>
      rebuilt((e) =>
        e.map((x) =>
          x.name === 'projects/index.json'
            ? { ...x, data: Buffer.from('['.repeat(MAX_JSON_DEPTH + 1) + ']'.repeat(MAX_JSON_DEPTH + 1)) }
            : x,
        ),
      ),
    code: 'ARCHIVE_INVALID_DATA',
    details: { entry: 'projects/index.json', limit: MAX_JSON_DEPTH },
  },
  {
    name: '100,000 entries',
    archive: () => messagePages(100_000, 0, Buffer.from('[]')),
    code: 'ARCHIVE_TOO_MANY_ENTRIES',
    details: { entries: 100_000, limit: 50_000 },
  },
  {
    name: 'duplicate names',
    archive: () => rebuilt((e) => [...e, { name: 'metadata.json', data: goodEntries['metadata.json']! }]),
    code: 'ARCHIVE_DUPLICATE_ENTRY',
    details: { entry: 'metadata.json' },
  },
  {
    name: 'truncated archive',
    archive: () => good.subarray(0, Math.floor(good.length * 0.6)),
    code: 'ARCHIVE_CORRUPT',
  },
  { name: 'not a zip at all', archive: () => Buffer.from('{"this": "is json"}'), code: 'ARCHIVE_CORRUPT' },
  {
    name: 'wrong CRC in a file’s bytes (found while copying: what was copied before it goes)',
    archive: () => flipped(FILES['c.txt']),
    code: 'ARCHIVE_CORRUPT',
    details: { rule: 'crc' },
  },
  {
    name: 'wrong CRC in a record entry',
    archive: () => rebuilt((e) => e.map((x) => (x.name === 'projects/index.json' ? { ...x, crc: 12345 } : x))),
    code: 'ARCHIVE_CORRUPT',
    details: { rule: 'crc', entry: 'projects/index.json' },
  },
  {
    name: 'newer format version',
    archive: () =>
      rebuilt((e) =>
        e.map((x) =>
          x.name === 'metadata.json'
            ? { ...x, data: Buffer.from(JSON.stringify({ ...JSON.parse(x.data!.toString()), formatVersion: 2 })) }
            : x,
        ),
      ),
    code: 'ARCHIVE_VERSION_UNSUPPORTED',
    details: { formatVersion: 2, supported: 1 },
  },
  {
    name: 'no metadata (not a tenant export)',
    archive: () => rebuilt((e) => e.filter((x) => x.name !== 'metadata.json')),
    code: 'ARCHIVE_VERSION_UNSUPPORTED',
  },
  {
    name: 'an entry of no known kind',
    archive: () => rebuilt((e) => [...e, { name: 'install.sh', data: Buffer.from('#!/bin/sh\n') }]),
    code: 'ARCHIVE_UNKNOWN_ENTRY',
    details: { entry: 'install.sh' },
  },
  {
    name: 'a record with a field the format does not have',
    archive: () =>
      rebuilt((e) =>
        e.map((x) =>
          x.name === 'projects/index.json'
            ? {
                ...x,
                data: Buffer.from(
                  JSON.stringify(
                    JSON.parse(x.data!.toString()).map((r: object) => ({ ...r, tenant_id: target.tenantId })),
                  ),
                ),
              }
            : x,
        ),
      ),
    code: 'ARCHIVE_INVALID_DATA',
    details: { field: 'tenant_id' },
  },
  {
    name: 'a file its manifest does not name',
    archive: () => rebuilt((e) => [...e, { name: `projects/${project.id}/files/extra.txt`, data: Buffer.from('x') }]),
    code: 'ARCHIVE_INVALID_DATA',
  },
]

const before = await state()
for (const c of cases) {
  t.test(`${c.name}: ${c.code}, nothing written`, async (t) => {
    const done = await p.restored(target.call, target.apiKey, target.tenantId, c.archive(), { merge: false })
    t.equal(done.status, 'failed')
    t.equal(done.error?.code, c.code, done.error?.message)
    if (c.details) t.match(done.error.details, c.details)
    t.same(await state(), before, 'the records and objects are as they were')
    t.same(await goneFrom(h, `tenants/${target.tenantId}/restores/`), [], 'and the upload is gone')
  })
}

t.test('an upload over RESTORE_MAX_UPLOAD_BYTES is 413 and leaves nothing behind', async (t) => {
  const small = await testApp(t, { RESTORE_MAX_UPLOAD_BYTES: String(1024 * 1024) })
  const tn = await small.tenant('enterprise')
  const r = await portability(small).upload(tn.apiKey, tn.tenantId, Buffer.alloc(2 * 1024 * 1024, 7))
  t.equal(r.status, 413)
  t.equal(r.body.error.code, 'PAYLOAD_TOO_LARGE')
  t.match(r.body.error.details, { limit: 1024 * 1024 })
  t.same((await tn.call('GET', `/api/v1/platform/tenants/${tn.tenantId}/restore`)).body.data, [])
  t.same(await storedKeys(small, `tenants/${tn.tenantId}/`), [])
})

t.test('the good archive itself restores (the cases above broke only what they name)', async (t) => {
  const done = await p.restored(target.call, target.apiKey, target.tenantId, good, { merge: true })
  t.equal(done.status, 'completed', JSON.stringify(done.error))
  t.match(done.report.counts.projects, { restored: 1 })
})
