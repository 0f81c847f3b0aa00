// Object storage: any S3-compatible store through the minio client, or, with no R2_ENDPOINT, a
// folder under DATA_DIR whose download links the server signs and serves itself (/blobs/...).
import { createHmac, timingSafeEqual } from 'node:crypto'
import { createReadStream, createWriteStream } from 'node:fs'
import { mkdir, rename, rm, stat, writeFile } from 'node:fs/promises'
import { dirname, join, sep } from 'node:path'
import type { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { Client } from 'minio'
import type { Logger } from 'pino'
import { privateDir } from './data-dir.js'

export interface LinkOptions {
  expiresSeconds: number
  filename: string
}

export interface Blobs {
  readonly kind: 's3' | 'local'
  /** Stores a buffer or a stream of unknown length; a failed stream leaves no object behind. */
  put(key: string, body: Buffer | Readable, contentType: string): Promise<void>
  get(key: string): Promise<Readable>
  remove(key: string): Promise<void>
  /** A link anyone holding it can download from until it expires. */
  presignGet(key: string, opts: LinkOptions): Promise<string>
  ping(): Promise<void>
}

export interface LocalBlobs extends Blobs {
  readonly kind: 'local'
  /** Checks a link this store signed; the file and its download name, or why not. */
  verifyLink(key: string, query: Record<string, string | undefined>): { path: string; filename: string } | { refused: 'expired' | 'signature' }
}

const KEY_RE = /^[A-Za-z0-9][A-Za-z0-9._\-/]{0,1000}$/

function checkKey(key: string): string {
  if (!KEY_RE.test(key) || key.split('/').some((p) => p === '' || p === '.' || p === '..')) {
    throw new Error(`invalid blob key: ${key}`)
  }
  return key
}

export interface S3Options {
  endpoint: string
  /** Where users reach the store, when not at `endpoint` (links are signed for their host). */
  publicEndpoint?: string
  bucket: string
  accessKey: string
  secretKey: string
  region: string
}

function s3Client(endpoint: string, o: S3Options): Client {
  const url = new URL(endpoint)
  return new Client({
    endPoint: url.hostname,
    port: url.port ? Number(url.port) : undefined,
    useSSL: url.protocol === 'https:',
    accessKey: o.accessKey,
    secretKey: o.secretKey,
    // With the region known, presigning is pure computation: no request to the store.
    region: o.region,
  })
}

export async function openS3Blobs(o: S3Options): Promise<Blobs> {
  const client = s3Client(o.endpoint, o)
  const signer = o.publicEndpoint ? s3Client(o.publicEndpoint, o) : client
  const blobs: Blobs = {
    kind: 's3',
    async put(key, body, contentType) {
      // a stream of unknown length goes up in parts; a failed upload never completes the object
      await client.putObject(o.bucket, checkKey(key), body, Buffer.isBuffer(body) ? body.length : undefined, { 'Content-Type': contentType })
    },
    get: (key) => client.getObject(o.bucket, checkKey(key)),
    remove: (key) => client.removeObject(o.bucket, checkKey(key)),
    presignGet: (key, opts) =>
      signer.presignedGetObject(o.bucket, checkKey(key), opts.expiresSeconds, {
        'response-content-disposition': contentDisposition(opts.filename),
      }),
    async ping() {
      if (!(await client.bucketExists(o.bucket))) throw new Error(`bucket ${o.bucket} does not exist`)
    },
  }
  if (!(await client.bucketExists(o.bucket).catch(() => true))) {
    await client.makeBucket(o.bucket, o.region).catch((err: { code?: string }) => {
      // another replica made it at the same moment
      if (err.code !== 'BucketAlreadyOwnedByYou' && err.code !== 'BucketAlreadyExists') throw err
    })
  }
  return blobs
}

export function openLocalBlobs(o: { dir: string; publicUrl: string; signingKey: Buffer; log?: Logger }): LocalBlobs {
  // Private like the rest of DATA_DIR; what put() creates inside is 0700 and 0600 as well.
  const root = privateDir(o.dir, o.log)
  const pathOf = (key: string) => {
    const p = join(root, ...checkKey(key).split('/'))
    if (!p.startsWith(root + sep)) throw new Error(`invalid blob key: ${key}`)
    return p
  }
  // HMAC-SHA256 of the key, expiry and download name, as unpadded base64url (43 characters).
  const sign = (key: string, expires: string, filename: string) => createHmac('sha256', o.signingKey).update(`${key}\n${expires}\n${filename}`).digest('base64url')

  return {
    kind: 'local',
    async put(key, body) {
      const p = pathOf(key)
      await mkdir(dirname(p), { recursive: true, mode: 0o700 })
      // write then rename: a reader never sees half a file
      const tmp = `${p}.${process.pid}.${Date.now()}.part`
      try {
        if (Buffer.isBuffer(body)) await writeFile(tmp, body, { mode: 0o600 })
        else await pipeline(body, createWriteStream(tmp, { mode: 0o600 }))
        await rename(tmp, p)
      } catch (err) {
        await rm(tmp, { force: true })
        throw err
      }
    },
    async get(key) {
      const p = pathOf(key)
      await stat(p)
      return createReadStream(p)
    },
    remove: (key) => rm(pathOf(key), { force: true }),
    async presignGet(key, opts) {
      checkKey(key)
      const expires = String(Math.floor(Date.now() / 1000) + opts.expiresSeconds)
      const q = new URLSearchParams({ expires, filename: opts.filename, signature: sign(key, expires, opts.filename) })
      return `${o.publicUrl}/blobs/${key.split('/').map(encodeURIComponent).join('/')}?${q}`
    },
    async ping() {
      await mkdir(root, { recursive: true, mode: 0o700 })
    },
    verifyLink(key, query) {
      const { expires = '', filename = '', signature = '' } = query
      // Compared as text, in constant time: decoding would be lenient (it skips characters outside
      // the alphabet, accepts '=' padding, '+' and '/', and ignores the last character's spare
      // bits), so altered spellings of the same bytes would pass. Only the exact text we issued does.
      const given = Buffer.from(signature, 'utf8')
      const want = Buffer.from(sign(key, expires, filename), 'utf8')
      if (given.length !== want.length || !timingSafeEqual(given, want)) return { refused: 'signature' }
      if (!/^\d+$/.test(expires) || Number(expires) * 1000 < Date.now()) return { refused: 'expired' }
      return { path: pathOf(key), filename }
    },
  }
}

export function contentDisposition(filename: string): string {
  const ascii = filename.replace(/[^A-Za-z0-9._-]/g, '_')
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`
}
