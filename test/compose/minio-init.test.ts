// The Compose bundle's bucket job (minio-init in compose/compose.yaml), run as Compose would run
// it, with the real mc against the test's MinIO: it makes the bucket and Atrium's own user, which
// can do what the server does with its bucket and nothing else; run again, it changes nothing. The
// secret keys reach mc on its standard input: no command line on the machine holds them.
import { randomBytes } from 'node:crypto'
import { chmodSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import t from 'tap'
import { parse } from 'yaml'
import { MINIO_ATRIUM_USER } from '../../config/compose-variables.js'
import { openS3Blobs } from '../../server/platform/blobs.js'
import { ROOT } from '../helpers/cli.js'
import { secretsIn, watchCommandLines } from '../helpers/leaks.js'
import { freshBucket, s3Client, services, tempDir } from '../helpers/platform.js'
import { findTool, needs, runTool } from '../helpers/tools.js'

const skip = (!services.s3Endpoint && 'needs TEST_S3_ENDPOINT (a real MinIO)') || needs('mc')

/** The job's script as the container's shell receives it: Compose turns $$ into $. */
function minioInitScript(): string {
  const doc = parse(readFileSync(join(ROOT, 'compose/compose.yaml'), 'utf8'))
  const [shell, flags, script] = doc.services['minio-init'].entrypoint as string[]
  if (shell !== 'sh' || flags !== '-ec') throw new Error(`unexpected entrypoint ${shell} ${flags}`)
  return script!.replaceAll('$$', '$')
}

t.test(
  "minio-init makes the bucket and Atrium's user, allowed that bucket alone, with neither key on a command line; a second run changes nothing",
  { skip },
  async (t) => {
    const bucket = await freshBucket(t)
    const password = randomBytes(24).toString('hex')
    // mc as the job runs it, each of its command lines kept (one may last less than the watch's 100 ms).
    const bin = tempDir(t)
    const calls = join(bin, 'calls.log')
    writeFileSync(join(bin, 'mc'), `#!/bin/sh\nprintf 'mc %s\\n' "$*" >> '${calls}'\nexec '${findTool('mc')}' "$@"\n`)
    chmodSync(join(bin, 'mc'), 0o755)
    const env = {
      PATH: `${bin}:${process.env.PATH}`,
      MC_CONFIG_DIR: tempDir(t, 'atrium-mc-'),
      MINIO_URL: services.s3Endpoint,
      MINIO_ROOT_USER: services.s3AccessKey,
      MINIO_ROOT_PASSWORD: services.s3SecretKey,
      MINIO_ATRIUM_PASSWORD: password,
      R2_BUCKET: bucket,
    }
    // mc reads an alias from MC_HOST_<alias> too: the teardown needs no config folder.
    const admin = new URL(services.s3Endpoint)
    admin.username = services.s3AccessKey
    admin.password = services.s3SecretKey
    t.teardown(() =>
      runTool('mc', ['admin', 'user', 'remove', 'local', MINIO_ATRIUM_USER], {
        env: { ...env, MC_HOST_local: admin.toString().replace(/\/$/, '') },
      }),
    )
    const watch = watchCommandLines(100)
    for (const run of ['first', 'second']) {
      const r = await runTool('sh', ['-ec', minioInitScript()], { env })
      t.equal(r.code, 0, `${run} run: ${r.stdout}${r.stderr}`)
      t.match(r.stdout, new RegExp(`bucket ${bucket} and user atrium-server ready`))
    }
    const { commandLines } = watch.stop()
    const mc = readFileSync(calls, 'utf8').trim().split('\n')
    t.ok(mc.includes('mc admin user add local atrium-server'), 'the job ran mc with the user, the key on its stdin')
    t.same(
      secretsIn([...commandLines, ...mc], {
        MINIO_ROOT_PASSWORD: services.s3SecretKey,
        MINIO_ATRIUM_PASSWORD: password,
      }),
      [],
      'no command line held a secret key',
    )

    // What the server does with its store, as the server does it.
    const blobs = await openS3Blobs({
      endpoint: services.s3Endpoint,
      bucket,
      accessKey: MINIO_ATRIUM_USER,
      secretKey: password,
      region: 'us-east-1',
    })
    await blobs.ping()
    await blobs.put('t/small.txt', Buffer.from('hello'), 'text/plain')
    t.equal(await blobs.size('t/small.txt'), 5)
    const big = randomBytes(12 * 1024 * 1024) // a stream of unknown length: a multipart upload
    await blobs.put('t/big.bin', Readable.from([big.subarray(0, 6e6), big.subarray(6e6)]), 'application/octet-stream')
    t.equal(await blobs.size('t/big.bin'), big.length)
    const link = await blobs.presignGet('t/small.txt', { expiresSeconds: 60, filename: 'small.txt' })
    t.equal(await (await fetch(link)).text(), 'hello', 'a download link works')
    await blobs.remove('t/small.txt')
    await blobs.remove('t/big.bin')
    t.equal(await blobs.size('t/small.txt'), null)

    // Nothing beyond its bucket.
    const own = s3Client(services.s3Endpoint, MINIO_ATRIUM_USER, password)
    await t.rejects(
      own.makeBucket(`atrium-other-${randomBytes(4).toString('hex')}`),
      { code: 'AccessDenied' },
      'it cannot make buckets',
    )
    const other = await freshBucket(t)
    await s3Client().makeBucket(other)
    await t.rejects(
      own.putObject(other, 'x', Buffer.from('x')),
      { code: 'AccessDenied' },
      'nor write in another bucket',
    )
    t.same(
      (await own.listBuckets()).map((b) => b.name),
      [bucket],
      'nor see the other buckets',
    )
    await t.rejects(
      s3Client(services.s3Endpoint, MINIO_ATRIUM_USER, 'wrong-password').bucketExists(bucket),
      'and only with its own password',
    )
  },
)
