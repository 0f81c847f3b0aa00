// Object storage: any S3-compatible store through the minio client, or, with no R2_ENDPOINT, a
// folder under DATA_DIR whose download links the server signs and serves itself (/blobs/...).
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto'
import { createReadStream, createWriteStream } from 'node:fs'
import { mkdir, readdir, rename, rm, stat, writeFile } from 'node:fs/promises'
import http from 'node:http'
import https from 'node:https'
import { dirname, join, sep } from 'node:path'
import { PassThrough, Transform, type Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { Client } from 'minio'
import type { Logger } from 'pino'
import { privateDir } from './data-dir.js'
import { connect, isIP } from 'node:net'
import { connect as tlsConnect } from 'node:tls'
import { check, type CheckResult } from '../../common/checks.js'
import { putStream } from '../../common/s3-upload.js'
import { outboundAgent, refusalIn, type CompiledPolicy } from './outbound.js'

export interface LinkOptions {
  expiresSeconds: number
  filename: string
}

export interface StoredObject {
  key: string
  lastModified: Date
}

export interface Blobs {
  readonly kind: 's3' | 'local'
  /** Stores a buffer or a stream of unknown length; a failed stream leaves no object behind. */
  put(key: string, body: Buffer | Readable, contentType: string): Promise<void>
  get(key: string): Promise<Readable>
  /** Bytes `start` to `end` inclusive (a zip read from its central directory, entry by entry). */
  getRange(key: string, start: number, end: number): Promise<Readable>
  /** The object's size, or null when there is none. */
  size(key: string): Promise<number | null>
  remove(key: string): Promise<void>
  /** A link anyone holding it can download from until it expires. */
  presignGet(key: string, opts: LinkOptions): Promise<string>
  ping(): Promise<void>
  /** Every object whose key starts with `prefix`, a page at a time (the object collector's walk). */
  list(prefix: string): AsyncIterable<StoredObject>
}

export interface LocalBlobs extends Blobs {
  readonly kind: 'local'
  /** Checks a link this store signed; the file and its download name, or why not. */
  verifyLink(
    key: string,
    query: Record<string, string | undefined>,
  ): { path: string; filename: string } | { refused: 'expired' | 'signature' }
}

const KEY_RE = /^[A-Za-z0-9][A-Za-z0-9._\-/]{0,1000}$/

/**
 * A key this process refuses before any request is made: a fault of the caller here, never the
 * store's, so callers that map a store's failures (its error code, a connection refused) tell it
 * apart and do not report it as the store being unreachable.
 */
export class BlobKeyRefused extends Error {
  constructor(readonly key: string) {
    super(`invalid blob key: ${key}`)
    this.name = 'BlobKeyRefused'
  }
}

/**
 * What a store's failure was, in the store's terms: the outbound policy's refusal, the error code the
 * store or the connection gave (never its message: it may echo the request), or the S3 client's own
 * name for an answer it could not read. A fault of this process (a key refused before any request:
 * BlobKeyRefused) is not the store's and is never passed here.
 */
export function storeReason(err: unknown): string {
  if (refusalIn(err)) return 'OutboundRefused'
  const { code, name } = (err ?? {}) as { code?: unknown; name?: unknown }
  if (typeof code === 'string') return code
  return typeof name === 'string' && name !== 'Error' ? name : 'UnexpectedError'
}

function checkKey(key: string): string {
  if (!KEY_RE.test(key) || key.split('/').some((p) => p === '' || p === '.' || p === '..')) {
    throw new BlobKeyRefused(key)
  }
  return key
}

export interface S3Options {
  endpoint: string
  /**
   * Connections through this agent: a store a tenant named is reached only where the outbound
   * policy allows (an agent whose lookup judges each address). The platform's own store has none.
   */
  agent?: http.Agent
  /** Where users reach the store, when not at `endpoint` (links are signed for their host). */
  publicEndpoint?: string
  bucket: string
  accessKey: string
  secretKey: string
  region: string
  /**
   * STORAGE_TIMEOUT_SECONDS: a small call's whole time, and any transfer's longest silence (default
   * S3_CALL_TIMEOUT_MS).
   */
  timeoutMs?: number
}

// ---- every S3 exchange bounded: its bytes, its silence, its time -------------------------------------

/**
 * An answer the client reads whole (an error, a listing, a bucket's region) holds at most this
 * much: a store that answers with more is broken or hostile, and the call fails rather than the
 * server buffering it. Error documents are a few hundred bytes; a listing page of 1,000 keys of
 * 1,024 bytes each is under 2 MiB.
 */
export const S3_ERROR_MAX_BYTES = 64 * 1024
export const S3_ANSWER_MAX_BYTES = 8 * 1024 * 1024
/**
 * A connection with no byte either way for this long is given up (a store that accepts and never answers).
 * STORAGE_TIMEOUT_SECONDS sets both.
 */
export const S3_IDLE_TIMEOUT_MS = 30_000
/** A call whose answer is small (stat, delete, a listing page, the bucket's existence) has this long in all. */
export const S3_CALL_TIMEOUT_MS = 30_000

/** A store that did not answer in time: a dependency away (503), like a refused connection. */
export const storeTimeout = (what: string, ms: number) =>
  Object.assign(new Error(`the object store did not answer ${what} within ${ms} ms`), { code: 'ETIMEDOUT' })

/**
 * Rejects with code ETIMEDOUT when `work` takes longer than `ms`; a stream it brings too late is destroyed, not left
 * open.
 */
export function withDeadline<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  let late = false
  work.then(
    (v) => {
      if (late) (v as { destroy?: () => void } | null)?.destroy?.()
    },
    () => {},
  )
  return Promise.race([
    work,
    new Promise<never>(
      (_, reject) =>
        (timer = setTimeout(() => {
          late = true
          reject(storeTimeout(what, ms))
        }, ms)),
    ),
  ]).finally(() => clearTimeout(timer))
}

type Transport = Pick<typeof http, 'request'>

/**
 * What the S3 client sends its requests through: Node's own http(s), with a timeout on silence,
 * and every answer the client reads whole cut off at its bound. An object's bytes (a GET of a key)
 * pass through as they come: their readers bound them by the size the record says they have.
 */
export function boundedTransport(
  secure: boolean,
  o: { idleMs?: number; errorMaxBytes?: number; answerMaxBytes?: number } = {},
): Transport {
  const base = secure ? https : http
  const idleMs = o.idleMs ?? S3_IDLE_TIMEOUT_MS
  return {
    request: ((options: http.RequestOptions, callback?: (res: http.IncomingMessage) => void) => {
      const req = base.request(options, (res) => {
        const status = res.statusCode ?? 0
        const query = new URLSearchParams(String(options.path ?? '').split('?')[1] ?? '')
        const objectRead =
          (options.method ?? 'GET') === 'GET' &&
          status >= 200 &&
          status < 300 &&
          [...query.keys()].every((k) => k === 'versionId')
        if (objectRead) watchSilence(req, res, idleMs)
        callback?.(
          objectRead
            ? res
            : capped(
                res,
                status >= 300 ? (o.errorMaxBytes ?? S3_ERROR_MAX_BYTES) : (o.answerMaxBytes ?? S3_ANSWER_MAX_BYTES),
              ),
        )
      })
      req.setTimeout(idleMs, () => req.destroy(storeTimeout('(no byte in either direction)', idleMs)))
      return req
    }) as Transport['request'],
  }
}

/**
 * An object's bytes are read as their reader takes them (a zip written to a slow store reads its
 * source no faster): a silent socket is then the reader's doing, not the store's. So the socket's
 * own timeout goes, and the connection is given up only when no byte came for `idleMs` while none
 * was waiting in the response's buffer for the reader.
 */
function watchSilence(req: http.ClientRequest, res: http.IncomingMessage, idleMs: number) {
  req.setTimeout(0)
  const socket = res.socket
  let seen = socket?.bytesRead ?? 0
  let quietSince = Date.now()
  const timer = setInterval(
    () => {
      if (res.complete || res.destroyed) return clearInterval(timer)
      const read = socket?.bytesRead ?? 0
      // Bytes waiting in the response's buffer: the reader has not taken them yet (paused, or slow).
      // An empty buffer and nothing coming is the store's silence, whatever the reader is doing.
      const readerBehind = res.readableLength > 0
      if (read !== seen || readerBehind) {
        seen = read
        quietSince = Date.now()
      } else if (Date.now() - quietSince > idleMs) {
        clearInterval(timer)
        // The response carries the reason to its reader; the connection goes with it.
        res.destroy(storeTimeout('(no byte of the object while it was waited for)', idleMs))
        req.destroy()
      }
    },
    Math.max(50, Math.min(1000, idleMs / 4)),
  )
  timer.unref()
  res.once('close', () => clearInterval(timer))
}

/** The response as a stream that fails, and closes the connection, past `max` bytes. */
function capped(res: http.IncomingMessage, max: number): http.IncomingMessage {
  let size = 0
  const out = new PassThrough()
  res.on('data', (c: Buffer) => {
    size += c.length
    if (size <= max) return void (out.write(c) || res.pause())
    res.destroy()
    out.destroy(
      Object.assign(new Error(`the object store answered with more than ${max} bytes`), { code: 'ResponseTooLarge' }),
    )
  })
  out.on('drain', () => res.resume())
  res.on('end', () => out.end())
  res.on('error', (err) => out.destroy(err))
  // What the client reads of a response besides its body.
  return Object.assign(out, {
    statusCode: res.statusCode,
    statusMessage: res.statusMessage,
    headers: res.headers,
    rawHeaders: res.rawHeaders,
  }) as unknown as http.IncomingMessage
}

/**
 * A stream of an object's bytes that fails past `expected` bytes (or short of them, at its end):
 * what a record says an object holds is all that is read of it, whatever the store sends.
 */
export function exactly(stream: Readable, expected: number, key: string): Readable {
  let size = 0
  const out = new Transform({
    transform(chunk: Buffer, _enc, done) {
      size += chunk.length
      if (size > expected)
        return done(
          Object.assign(new Error(`object ${key} holds more than the ${expected} bytes its record says`), {
            code: 'ObjectSizeMismatch',
          }),
        )
      done(null, chunk)
    },
    flush(done) {
      done(
        size === expected
          ? null
          : Object.assign(new Error(`object ${key} holds ${size} bytes, not the ${expected} its record says`), {
              code: 'ObjectSizeMismatch',
            }),
      )
    },
  })
  stream.on('error', (err) => out.destroy(err))
  out.on('close', () => (stream as Readable & { destroy?: () => void }).destroy?.())
  return stream.pipe(out)
}

// The S3 client loads with the first S3 store: a server on local storage (the embedded default)
// does not carry it, some 40 MB and 0.4 s of start-up (docs/performance.md). Every way to an S3
// store is async and awaits it first.
let minio: typeof import('minio') | null = null
const loadMinio = async () => (minio ??= await import('minio'))

function s3Client(
  endpoint: string,
  o: Pick<S3Options, 'accessKey' | 'secretKey' | 'agent' | 'timeoutMs'> & { region?: string },
): Client {
  const url = new URL(endpoint)
  return new minio!.Client({
    endPoint: url.hostname,
    port: url.port ? Number(url.port) : undefined,
    useSSL: url.protocol === 'https:',
    accessKey: o.accessKey,
    secretKey: o.secretKey,
    // With the region known, presigning is pure computation: no request to the store.
    ...(o.region ? { region: o.region } : {}),
    transport: boundedTransport(url.protocol === 'https:', { idleMs: o.timeoutMs ?? S3_IDLE_TIMEOUT_MS }),
    ...(o.agent ? { transportAgent: o.agent } : {}),
    // A status the client would retry (5xx, 429) is the caller's to retry: the client's own retry
    // logs to the console and leaves the refused answer unread.
    retryOptions: { disableRetry: true },
  })
}

/** A store's client, without looking at the bucket (openS3Blobs makes it when missing). */
export function s3Blobs(o: S3Options): Blobs {
  const client = s3Client(o.endpoint, o)
  const signer = o.publicEndpoint ? s3Client(o.publicEndpoint, o) : client
  const small = <T>(work: Promise<T>, what: string) => withDeadline(work, o.timeoutMs ?? S3_CALL_TIMEOUT_MS, what)
  return {
    kind: 's3',
    async put(key, body, contentType) {
      if (Buffer.isBuffer(body))
        await client.putObject(o.bucket, checkKey(key), body, body.length, { 'Content-Type': contentType })
      else await putStream(client, o.bucket, checkKey(key), body, contentType)
    },
    // Until the bytes begin: then the connection's silence is what is bounded (a large object takes its time).
    get: (key) => small(client.getObject(o.bucket, checkKey(key)), `GET ${key}`),
    getRange: (key, start, end) =>
      small(client.getPartialObject(o.bucket, checkKey(key), start, end - start + 1), `GET ${key}`),
    async size(key) {
      try {
        return (await small(client.statObject(o.bucket, checkKey(key)), `HEAD ${key}`)).size
      } catch (err) {
        if ((err as { code?: string }).code === 'NotFound' || (err as { code?: string }).code === 'NoSuchKey')
          return null
        throw err
      }
    },
    remove: (key) => small(client.removeObject(o.bucket, checkKey(key)), `DELETE ${key}`),
    presignGet: (key, opts) =>
      signer.presignedGetObject(o.bucket, checkKey(key), opts.expiresSeconds, {
        'response-content-disposition': contentDisposition(opts.filename),
      }),
    async ping() {
      if (!(await small(client.bucketExists(o.bucket), 'HEAD bucket')))
        throw new Error(`bucket ${o.bucket} does not exist`)
    },
    async *list(prefix) {
      for await (const item of client.listObjectsV2(o.bucket, prefix, true) as AsyncIterable<{
        name?: string
        lastModified?: Date
      }>) {
        if (item.name !== undefined) yield { key: item.name, lastModified: item.lastModified ?? new Date(0) }
      }
    },
  }
}

/**
 * A bucket someone other than the operator named (a tenant's export destination): reached only
 * where the outbound policy allows, and never created. OutboundRefused when the policy refuses
 * its host.
 */
export async function guardedS3Blobs(
  policy: CompiledPolicy,
  o: Omit<S3Options, 'agent' | 'publicEndpoint'>,
): Promise<Blobs & { close(): void }> {
  await loadMinio()
  const agent = await outboundAgent(policy, new URL(o.endpoint))
  return { ...s3Blobs({ ...o, agent }), close: () => agent.destroy() }
}

/**
 * A bucket of one of the site's own stores (the address the operator configured) opened with keys
 * someone else gave (a tenant's export into the site's store): reached as the platform reaches its
 * own store, and never created.
 */
export async function siteS3Blobs(o: Omit<S3Options, 'agent' | 'publicEndpoint'>): Promise<Blobs & { close(): void }> {
  await loadMinio()
  return { ...s3Blobs(o), close: () => {} }
}

export async function openS3Blobs(o: S3Options): Promise<Blobs> {
  await loadMinio()
  const client = s3Client(o.endpoint, o)
  const blobs = s3Blobs(o)
  const small = <T>(work: Promise<T>, what: string) => withDeadline(work, o.timeoutMs ?? S3_CALL_TIMEOUT_MS, what)
  if (!(await small(client.bucketExists(o.bucket), 'HEAD bucket').catch(() => true))) {
    await small(client.makeBucket(o.bucket, o.region), 'PUT bucket').catch((err: { code?: string }) => {
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
    if (!p.startsWith(root + sep)) throw new BlobKeyRefused(key)
    return p
  }
  // HMAC-SHA256 of the key, expiry and download name, as unpadded base64url (43 characters).
  const sign = (key: string, expires: string, filename: string) =>
    createHmac('sha256', o.signingKey).update(`${key}\n${expires}\n${filename}`).digest('base64url')

  return {
    kind: 'local',
    async put(key, body) {
      const p = pathOf(key)
      await mkdir(dirname(p), { recursive: true, mode: 0o700 })
      // write then rename: a reader never sees half a file
      const tmp = `${p}.${randomUUID()}.part` // unique: two writes of one key at once (the same bytes uploaded twice) never share it
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
    async getRange(key, start, end) {
      const p = pathOf(key)
      await stat(p)
      return createReadStream(p, { start, end })
    },
    async size(key) {
      try {
        return (await stat(pathOf(key))).size
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
        throw err
      }
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
    async *list(prefix) {
      // The folder that holds the prefix, walked; a put's temporary file (.part) is not an object.
      const base = prefix.includes('/') ? prefix.slice(0, prefix.lastIndexOf('/')) : ''
      const dir = base ? pathOf(base) : root
      let names: string[]
      try {
        names = await readdir(dir, { recursive: true })
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return
        throw err
      }
      for (const name of names.sort()) {
        const key = (base ? `${base}/${name}` : name).split(sep).join('/')
        if (!key.startsWith(prefix) || key.endsWith('.part')) continue
        const st = await stat(join(dir, name)).catch(() => null)
        if (st?.isFile()) yield { key, lastModified: st.mtime }
      }
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

// ---- checking a store someone else runs (a tenant's own: BYOS) ------------------------------------

export interface StoreTarget {
  endpoint: string
  bucket: string
  region: string
  accessKey: string
  secretKey: string
}

/**
 * A store's endpoint is an origin: http:// or https:// with no path, query or credentials (the
 * installer's checks and export destinations hold it to the same form).
 */
export const isStoreOrigin = (url: URL): boolean =>
  (url.protocol === 'http:' || url.protocol === 'https:') &&
  !url.username &&
  !url.password &&
  (url.pathname === '/' || url.pathname === '') &&
  !url.search

const CHECK_TIMEOUT_MS = 10_000

/** Rejects with code ETIMEDOUT when `work` takes longer than the checks allow. */
const timed = <T>(work: Promise<T>): Promise<T> => withDeadline(work, CHECK_TIMEOUT_MS, 'the check')

const codeOf = (err: unknown) => {
  const e = err as { code?: unknown; message?: unknown }
  return typeof e?.code === 'string' ? e.code : err instanceof Error ? err.message : String(err)
}

/**
 * A store's checks, in order, each reported as an installer check (id, status, found, fix), through
 * the outbound policy: the endpoint, the policy, the connection, TLS, the credentials, the bucket,
 * writing, reading back and deleting a probe object, and the bucket's region. The list stops at the
 * first failure (what comes after it was not reached). Nothing is left in the store.
 */
export async function checkStore(policy: CompiledPolicy, t: StoreTarget): Promise<CheckResult[]> {
  const out: CheckResult[] = []
  const ok = (r: CheckResult) => (out.push(r), r.status !== 'fail')
  let url: URL
  try {
    url = new URL(t.endpoint)
    if (!isStoreOrigin(url)) throw new Error('shape')
  } catch {
    ok(
      check(
        'endpoint',
        'Endpoint',
        'fail',
        t.endpoint,
        'an http:// or https:// URL with no path, query or credentials',
        'Give the store as https://host[:port]',
      ),
    )
    return out
  }
  ok(check('endpoint', 'Endpoint', 'pass', url.origin, 'an http:// or https:// URL'))
  let addresses: string[]
  try {
    addresses = await policy.resolveAllowed(url.hostname)
  } catch (err) {
    const refused = refusalIn(err)
    ok(
      check(
        'outbound',
        'Allowed by the outbound policy',
        'fail',
        refused ? `refused: ${refused.reason}` : `does not resolve (${codeOf(err)})`,
        'an address the server may connect to',
        refused?.remedy
          ? `Ask the operator to allow it (${refused.remedy})`
          : refused
            ? 'Use a store on an address the server may reach'
            : 'Check the host name',
      ),
    )
    return out
  }
  ok(
    check(
      'outbound',
      'Allowed by the outbound policy',
      'pass',
      addresses.join(', '),
      'an address the server may connect to',
    ),
  )
  const port = Number(url.port) || (url.protocol === 'https:' ? 443 : 80)
  const host = url.hostname.replace(/^\[|\]$/g, '')
  try {
    await timed(
      new Promise<void>((resolve, reject) => {
        const s = connect({ host: addresses[0]!, port }, () => (s.destroy(), resolve()))
        s.once('error', reject)
      }),
    )
  } catch (err) {
    ok(
      check(
        'reachable',
        'Endpoint reachable',
        'fail',
        `${host}:${port}: ${codeOf(err)}`,
        'a TCP connection',
        'Check the address and port, and that the store runs',
      ),
    )
    return out
  }
  ok(check('reachable', 'Endpoint reachable', 'pass', `${host}:${port}`, 'a TCP connection'))
  if (url.protocol === 'https:') {
    try {
      await timed(
        new Promise<void>((resolve, reject) => {
          const s = tlsConnect(
            { host: addresses[0]!, port, servername: isIP(host) ? undefined : host, rejectUnauthorized: true },
            () => (s.destroy(), resolve()),
          )
          s.once('error', reject)
        }),
      )
      ok(
        check(
          'tls',
          'TLS certificate valid',
          'pass',
          'the certificate is valid for the host',
          'a certificate the server trusts',
        ),
      )
    } catch (err) {
      ok(
        check(
          'tls',
          'TLS certificate valid',
          'fail',
          codeOf(err),
          'a certificate the server trusts',
          'Renew the certificate, or give the server its CA (NODE_EXTRA_CA_CERTS)',
        ),
      )
      return out
    }
  } else {
    ok(
      check('tls', 'TLS certificate valid', 'warn', 'http:// (no TLS)', 'https://', {
        warn: 'Use https:// so that keys and data are not sent in the clear',
      }),
    )
  }
  const agent = await outboundAgent(policy, url)
  await loadMinio()
  const client = (region?: string) =>
    s3Client(url.origin, { accessKey: t.accessKey, secretKey: t.secretKey, agent, region })
  const c = client(t.region)
  const probe = `.atrium-storage-check-${Date.now()}-${Math.random().toString(36).slice(2)}`
  const body = Buffer.from(`Atrium checks that it may use this store (${probe}); the object is deleted at once.\n`)
  try {
    let exists: boolean
    try {
      exists = await timed(c.bucketExists(t.bucket))
    } catch (err) {
      ok(
        check(
          'credentials',
          'Credentials accepted',
          'fail',
          codeOf(err),
          'the access key and secret accepted',
          'Check the access key and the secret key, and that they may use the bucket',
        ),
      )
      return out
    }
    ok(check('credentials', 'Credentials accepted', 'pass', 'accepted', 'the access key and secret accepted'))
    if (
      !ok(
        check(
          'bucket',
          'Bucket exists',
          exists ? 'pass' : 'fail',
          exists ? t.bucket : `${t.bucket}: NoSuchBucket`,
          'an existing bucket',
          'Create the bucket, or give its exact name',
        ),
      )
    )
      return out
    const step = async (id: string, title: string, work: () => Promise<string>, fix: string) => {
      try {
        return ok(check(id, title, 'pass', await timed(work()), title.toLowerCase()))
      } catch (err) {
        return ok(check(id, title, 'fail', codeOf(err), title.toLowerCase(), fix))
      }
    }
    if (
      !(await step(
        'write',
        'Write an object',
        async () => (await c.putObject(t.bucket, probe, body, body.length), `${probe} written`),
        'Allow s3:PutObject to these keys',
      ))
    )
      return out
    const readBack = async () => {
      // Read as far as the probe goes: a store that sends more is wrong, and is not read to its end.
      const chunks: Buffer[] = []
      for await (const chunk of exactly(await c.getObject(t.bucket, probe), body.length, probe))
        chunks.push(chunk as Buffer)
      if (!Buffer.concat(chunks).equals(body))
        throw Object.assign(new Error('read back other bytes'), { code: 'Mismatch' })
      return 'the same bytes read back'
    }
    if (!(await step('read', 'Read it back', readBack, 'Allow s3:GetObject to these keys'))) return out
    if (
      !(await step(
        'delete',
        'Delete it',
        async () => (await c.removeObject(t.bucket, probe), 'deleted'),
        'Allow s3:DeleteObject to these keys',
      ))
    )
      return out
    try {
      const actual = await timed(client().getBucketRegionAsync(t.bucket))
      ok(
        check(
          'region',
          'Region matches',
          !t.region || actual === t.region ? 'pass' : 'fail',
          actual || '(none)',
          t.region || 'any',
          `Give the bucket's region: ${actual}`,
        ),
      )
    } catch (err) {
      ok(
        check('region', 'Region matches', 'warn', `not reported (${codeOf(err)})`, t.region || 'any', {
          warn: 'The store does not say its region; make sure it is the one given',
        }),
      )
    }
    return out
  } finally {
    await c.removeObject(t.bucket, probe).catch(() => {}) // whatever happened, no probe stays
    agent.destroy()
  }
}
