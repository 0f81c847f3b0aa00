import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { DEFAULT_ANSWERS } from '../../../installer/core/answers.js'
import { contextFor, type Resolved } from '../../../installer/core/context.js'
import { libpqEnv, siteServices } from '../../../installer/backup/site.js'
import { renderHelmFiles } from '../../../installer/core/helm-values.js'
import { tempDir } from '../../helpers/platform.js'

/** The services of a site, which must have them. */
function servicesOf(ctx: Resolved) {
  const found = siteServices(ctx)
  if (!('services' in found)) throw new Error(found.problems.join())
  return found.services
}

/** The services of a Compose site whose .env is as the installer writes it, one setting a line. */
function composeServices(t: Parameters<typeof tempDir>[0], env: string[]) {
  const dir = tempDir(t)
  mkdirSync(join(dir, 'out'))
  writeFileSync(join(dir, 'out', '.env'), [...env, ''].join('\n'))
  return servicesOf(
    contextFor(
      { ...DEFAULT_ANSWERS, dataPath: join(dir, 'data'), outputDir: join(dir, 'out'), config: {} },
      { env: {} },
    ),
  )
}

t.test(
  "a Compose site's bundled PostgreSQL is dumped inside its container (no password passed) and its MinIO reached at the published port",
  async (t) => {
    const services = composeServices(t, [
      'DATABASE_URL=postgres://atrium:pw@postgres:5432/atrium',
      'R2_ENDPOINT=http://minio:9000',
      'R2_BUCKET=atrium',
      'R2_ACCESS_KEY_ID=atrium-server',
      'R2_SECRET_ACCESS_KEY=s3cret',
      'COMPOSE_PROFILES=postgres,redis,s3',
      'ATRIUM_BIND_ADDRESS=10.0.0.5',
      'ATRIUM_S3_PORT=9100',
    ])
    const dump = services.database.command('pg_dump', ['--format=custom'])
    t.equal(dump.file, 'docker')
    t.match(
      dump.args.join(' '),
      /^compose --project-name atrium --env-file .*\/out\/\.env -f .*compose\.yaml exec -T postgres pg_dump --username atrium --dbname atrium --format=custom$/,
    )
    t.same(dump.env, {})
    t.notOk(dump.args.join(' ').includes('pw'), 'the password is not an argument')
    t.match(services.stores, [
      { name: 'default', endpoint: 'http://10.0.0.5:9100', bucket: 'atrium', accessKey: 'atrium-server' },
    ])
  },
)

t.test(
  'a site with its own services is reached at their addresses, with the password in libpq’s environment only; every region store is a store',
  async (t) => {
    const services = composeServices(t, [
      'DATABASE_URL=postgres://app%40corp:p%2Fw@db.internal:6432/atrium?sslmode=verify-full',
      'R2_ENDPOINT=https://s3.internal',
      'R2_BUCKET=main',
      'R2_ACCESS_KEY_ID=k',
      'R2_SECRET_ACCESS_KEY=s',
      `REGION_STORES=${JSON.stringify({ 'eu-west': { endpoint: 'https://eu.s3.internal', bucket: 'eu', accessKeyId: 'ek', secretAccessKey: 'es' } })}`,
      'COMPOSE_PROFILES=redis',
    ])
    const restore = services.database.command('pg_restore', ['--single-transaction'])
    t.same(restore, {
      file: 'pg_restore',
      args: ['--dbname', 'atrium', '--single-transaction'],
      env: {
        PGHOST: 'db.internal',
        PGPORT: '6432',
        PGUSER: 'app@corp',
        PGDATABASE: 'atrium',
        PGPASSWORD: 'p/w',
        PGSSLMODE: 'verify-full',
      },
    })
    t.same(
      services.stores.map((s) => [s.name, s.endpoint, s.bucket]),
      [
        ['default', 'https://s3.internal', 'main'],
        ['eu-west', 'https://eu.s3.internal', 'eu'],
      ],
    )
    t.same(libpqEnv('postgres://u@[::1]/d'), { PGHOST: '::1', PGPORT: '5432', PGUSER: 'u', PGDATABASE: 'd' })
  },
)

t.test(
  'a Helm site with its own services is reached as the preflight reaches them: the values and Secret the installer wrote',
  async (t) => {
    const dir = tempDir(t)
    const answers = {
      ...DEFAULT_ANSWERS,
      target: 'helm' as const,
      dataPath: join(dir, 'data'),
      outputDir: join(dir, 'out'),
      config: {},
    }
    mkdirSync(answers.outputDir)
    const files = renderHelmFiles(
      {
        DATABASE_URL: 'postgres://atrium:pw@pg.db.svc:5432/atrium',
        R2_ENDPOINT: 'https://s3.example.net',
        R2_BUCKET: 'site',
        R2_ACCESS_KEY_ID: 'k',
        R2_SECRET_ACCESS_KEY: 's',
      },
      answers,
    )
    writeFileSync(join(answers.outputDir, 'values.yaml'), files.values)
    writeFileSync(join(answers.outputDir, 'secret.yaml'), files.secret)
    const services = servicesOf(contextFor(answers, { env: {} }))
    t.match(services.database.command('pg_dump', []), {
      file: 'pg_dump',
      env: { PGHOST: 'pg.db.svc', PGPASSWORD: 'pw' },
    })
    t.match(services.stores, [{ name: 'default', endpoint: 'https://s3.example.net', bucket: 'site' }])
  },
)
