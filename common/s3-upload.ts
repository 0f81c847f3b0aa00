// A stream of unknown length uploaded into an S3 object in bounded memory: the server's blob store
// (server/platform/blobs.ts) and the installer's site restore (installer/backup/restore.ts) use it.
import type { Readable } from 'node:stream'
import type { Client } from 'minio'

/**
 * Bytes of each part of a streamed upload: S3's smallest part is 5 MiB (the last excepted); 10,000 parts make 80 GiB.
 */
export const PART_BYTES = 8 * 1024 * 1024

/**
 * A stream of unknown length into an object, in parts of PART_BYTES with one part uploading while
 * the next fills. Two part buffers, filled in turn and reused (not a new one per part: large
 * buffers freed faster than the collector returns them would grow the process by far more), so
 * memory stays at two parts however large the object. (The client's own putObject sizes parts for
 * the largest possible object, about 500 MiB each, held in memory, and never settles when the
 * stream fails.) A stream that ends within one part is one PUT. When the stream or a part fails,
 * the multipart upload is aborted: no object, no parts left behind.
 */
// Part buffers outlive their upload, up to SPARE_PARTS of them: uploads one after another (a
// restore's files) reuse them rather than leave the collector 8 MiB to return per object.
const SPARE_PARTS = 4
const spareParts: Buffer[] = []

export async function putStream(
  client: Client,
  bucket: string,
  key: string,
  body: Readable | AsyncIterable<Buffer>,
  contentType: string,
): Promise<void> {
  const headers = { 'Content-Type': contentType }
  const buffers: Buffer[] = []
  let current = 0
  let filled = 0
  let uploadId: string | null = null
  const parts: { part: number; etag: string }[] = []
  let inFlight: Promise<void> | null = null
  // allocUnsafe: a part's memory is touched (and counted) only as far as it is filled.
  const buffer = () => (buffers[current] ??= spareParts.pop() ?? Buffer.allocUnsafe(PART_BYTES))
  const send = async (payload: Buffer) => {
    uploadId ??= await client.initiateNewMultipartUpload(bucket, key, headers)
    const part = parts.length + 1
    parts.push({ part, etag: '' })
    const r = await client.uploadPart(
      {
        bucketName: bucket,
        objectName: key,
        uploadID: uploadId,
        partNumber: part,
        headers: { 'Content-Length': payload.length },
      },
      payload,
    )
    parts[part - 1]!.etag = r.etag
  }
  try {
    for await (const chunk of body) {
      let c = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string)
      while (c.length) {
        const n = c.copy(buffer(), filled)
        filled += n
        c = c.subarray(n)
        if (filled === PART_BYTES) {
          await inFlight // the other buffer is free again once its part is up
          inFlight = send(buffers[current]!)
          inFlight.catch(() => {}) // awaited before the next part, and at the end
          current = 1 - current
          filled = 0
        }
      }
    }
    await inFlight
    if (uploadId === null) {
      const payload = filled ? buffer().subarray(0, filled) : Buffer.alloc(0)
      await client.putObject(bucket, key, payload, payload.length, headers)
      return
    }
    if (filled) await send(buffer().subarray(0, filled))
    await client.completeMultipartUpload(bucket, key, uploadId, parts)
  } catch (err) {
    await inFlight?.catch(() => {})
    if (uploadId !== null) await client.abortMultipartUpload(bucket, key, uploadId).catch(() => {})
    throw err
  } finally {
    // Nothing reads them any more: every part has been sent, or the upload was abandoned.
    for (const b of buffers) if (b && spareParts.length < SPARE_PARTS) spareParts.push(b)
  }
}
