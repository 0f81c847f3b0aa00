// The site backup on the real PostgreSQL and MinIO: a site with several tenants, projects with
// versions and backups, webhooks with encrypted secrets and files, backed up, restored into an
// empty database and bucket, compared table by table and object by object, then served again.
import { execFileSync, spawnSync } from 'node:child_process'
import { join } from 'node:path'
import t from 'tap'
import { SCHEMA_VERSION } from '../../../common/version.js'
import { writeBackup } from '../../../installer/backup/backup.js'
import { restoreBackup } from '../../../installer/backup/restore.js'
import { caller } from '../../helpers/app.js'
import { freshBucket, freshDatabase, s3Client, services, tempDir } from '../../helpers/platform.js'
import { directSite, snapshot } from '../../helpers/site-data.js'
import { receiver, SECRET, verified, webhookApp } from '../../server/modules/webhooks/helpers.js'

const PASSPHRASE = 'correct horse battery staple'

t.test(
  'a site restored from its backup into an empty database and bucket has every row and object, and its stored webhook secret still signs',
  {
    skip:
      !(services.databaseUrl && services.s3Endpoint) &&
      'needs TEST_DATABASE_URL and TEST_S3_ENDPOINT (a real PostgreSQL and S3)',
  },
  async (t) => {
    const site = await webhookApp(t)
    const { DATABASE_URL: databaseUrl, R2_BUCKET: bucket, ENCRYPTION_MASTER_KEY: masterKey } = site.platform.config
    const tenants = [await site.tenant(), await site.tenant(), await site.tenant('pro')]
    for (const [i, tenant] of tenants.entries()) {
      const project = await tenant.call('POST', '/api/v1/projects', { name: `Project ${i}`, description: 'backed up' })
      t.equal(project.status, 201)
      const id = project.body.data.id
      for (const draft of ['first draft\n', 'second draft, ünïcödé\n']) {
        const put = await tenant.call('PUT', `/api/v1/projects/${id}/files/docs/readme.md`, draft, {
          'content-type': 'text/markdown',
        })
        t.ok(put.status < 300, `file written (${put.status})`)
      }
      await tenant.call('PUT', `/api/v1/projects/${id}/files/data/blob.bin`, Buffer.from([0, 1, 2, 255]), {
        'content-type': 'application/octet-stream',
      })
      t.equal((await tenant.call('PATCH', `/api/v1/projects/${id}`, { description: 'changed once' })).status, 200)
      const versions = await tenant.call('GET', `/api/v1/projects/${id}/versions`)
      t.ok(versions.body.data.length >= 1, 'the project has versions')
      const backup = await tenant.call('POST', `/api/v1/projects/${id}/backup`, {})
      t.equal(backup.status, 201, JSON.stringify(backup.body))
    }
    const rx = await receiver(t)
    const hook = await tenants[0]!.call('POST', '/api/v1/webhooks', {
      url: rx.url,
      events: ['project.created'],
      secret: SECRET,
    })
    t.equal(hook.status, 201)

    const before = await snapshot(databaseUrl, bucket)
    t.ok(Object.keys(before.objects).length >= 3, 'the project backups are objects in the bucket')
    t.ok(before.tables.webhooks?.rows, 'a webhook endpoint is stored')

    const dir = tempDir(t)
    const path = join(dir, 'site.tar')
    const made = await writeBackup(directSite(databaseUrl, bucket), {
      output: path,
      passphrase: PASSPHRASE,
      configuration: { '.env': `ENCRYPTION_MASTER_KEY=${masterKey}\n` },
      target: 'compose',
    })
    t.equal(made.manifest.objects.count, Object.keys(before.objects).length)
    t.same(
      made.manifest.database.tables,
      Object.fromEntries(Object.entries(before.tables).map(([n, v]) => [n, v.rows])),
    )
    t.equal(made.manifest.schemaVersion, SCHEMA_VERSION, 'the schema this release brings')
    // The admin's own tools read it: tar lists every part, and the dump is pg_restore's.
    const tar = spawnSync('tar', ['-tf', path], { encoding: 'utf8' })
    t.equal(tar.stderr, '', 'GNU tar reads it without a warning')
    const listed = tar.stdout.trim().split('\n')
    t.same([listed[0], ...listed.slice(-3)], ['configuration.enc', 'database.dump', 'objects.jsonl', 'manifest.json'])
    t.equal(listed.filter((n) => n.startsWith('objects/default/')).length, made.manifest.objects.count)
    t.notMatch(
      execFileSync('tar', ['-xOf', path, 'configuration.enc']).toString('latin1'),
      masterKey,
      'the configuration is encrypted',
    )

    // An empty site: a new database and bucket, as after the disk died.
    const newDatabase = await freshDatabase(t)
    const newBucket = await freshBucket(t)
    const restored = await restoreBackup(directSite(newDatabase, newBucket), path, { passphrase: PASSPHRASE })
    t.same(
      restored.configuration,
      { '.env': `ENCRYPTION_MASTER_KEY=${masterKey}\n` },
      'the configuration comes back, master key and all',
    )
    t.same(
      await snapshot(newDatabase, newBucket),
      before,
      'every table (row count and checksum) and every object (SHA-256) is as it was',
    )
    const zip = Object.keys(before.objects).find((k) => k.endsWith('.zip'))!
    const s3 = s3Client()
    t.equal(
      (await s3.statObject(newBucket, zip)).metaData['content-type'],
      (await s3.statObject(bucket, zip)).metaData['content-type'],
      'an object keeps its content type',
    )

    // The server starts on the restored site with the backed-up master key, and the tenant's API
    // key and stored webhook secret still work: the delivery verifies with the secret given at creation.
    const again = await webhookApp(t, {
      DATABASE_URL: newDatabase,
      R2_ENDPOINT: services.s3Endpoint,
      R2_BUCKET: newBucket,
      R2_ACCESS_KEY_ID: services.s3AccessKey,
      R2_SECRET_ACCESS_KEY: services.s3SecretKey,
      ENCRYPTION_MASTER_KEY: masterKey,
    })
    const call = caller(again.app, tenants[0]!.apiKey)
    const listedProjects = await call('GET', '/api/v1/projects')
    t.equal(listedProjects.status, 200)
    t.equal(listedProjects.body.data.length, 1)
    const created = await call('POST', '/api/v1/projects', { name: 'After the restore' })
    t.equal(created.status, 201)
    const [delivery] = await rx.waitFor(1)
    t.equal(verified(SECRET, delivery!).type, 'project.created')
    const file = await call('GET', `/api/v1/projects/${listedProjects.body.data[0].id}/files/data/blob.bin`)
    t.same([...file.raw], [0, 1, 2, 255], 'a stored file reads back')
  },
)
