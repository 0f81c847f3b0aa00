// The helm target's files: the values and the Secret, and, air-gapped, the egress the chart is to
// allow for the site's own services, derived from their addresses or given in the answers. Every
// secret setting is in the Secret the installer applies (secret.yaml), none in values.yaml, and
// none in any object the chart renders from those values (Helm keeps the values in its release
// history; a Deployment's or Job's spec is read by whoever may list them).
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { parse } from 'yaml'
import { DEFAULT_ANSWERS, type Answers } from '../../../installer/core/answers.js'
import {
  placeOf,
  readHelmFiles,
  renderHelmFiles,
  serviceAddresses,
  serviceEgress,
  servicesCidrsProblem,
} from '../../../installer/core/helm-values.js'
import { tempDir } from '../../helpers/platform.js'
import { configSecrets, secretsIn } from '../../helpers/leaks.js'
import { helmTemplate, needs } from '../../helpers/tools.js'

t.test('every service the settings name, with its port (the scheme default when none is written)', async (t) => {
  t.same(
    serviceAddresses({
      DATABASE_URL: 'postgresql://u:p@10.0.0.5/atrium',
      REDIS_URL: 'redis://[fd00::7]',
      R2_ENDPOINT: 'http://minio.storage.svc.cluster.local',
      REGION_STORES: JSON.stringify({
        'eu-west': {
          endpoint: 'https://s3.eu.corp.localhost:8443',
          bucket: 'b',
          accessKeyId: 'a',
          secretAccessKey: 's',
        },
      }),
    }),
    [
      { setting: 'DATABASE_URL', host: '10.0.0.5', port: 5432 },
      { setting: 'REDIS_URL', host: 'fd00::7', port: 6379 },
      { setting: 'R2_ENDPOINT', host: 'minio.storage.svc.cluster.local', port: 80 },
      { setting: 'REGION_STORES.eu-west', host: 's3.eu.corp.localhost', port: 8443 },
    ],
  )
  t.same(
    serviceAddresses({
      DATABASE_URL: 'postgres://u:p@localhost/atrium?host=10.0.0.6&port=6432',
      R2_ENDPOINT: 'https://s3',
    }),
    [
      { setting: 'DATABASE_URL', host: '10.0.0.6', port: 6432 },
      { setting: 'R2_ENDPOINT', host: 's3', port: 443 },
    ],
    "libpq's host and port parameters win",
  )
  t.same(
    serviceAddresses({
      DATABASE_URL: 'postgres://u:p@localhost/atrium?host=/var/run/postgresql',
      REDIS_URL: 'not a url',
    }),
    [],
    'a socket is no network; a setting that is no URL is left to the configuration check',
  )
})

t.test('an address is its own network, a cluster service name its namespace, any other name is outside', async (t) => {
  t.same(placeOf('10.1.2.3'), { cidr: '10.1.2.3/32' })
  t.same(placeOf('fd00::1'), { cidr: 'fd00::1/128' })
  t.same(placeOf('postgres'), { namespace: null }, 'no dot: a service of the release namespace')
  t.same(placeOf('postgres.databases.svc'), { namespace: 'databases' })
  t.same(placeOf('pg-0.postgres.databases.svc.cluster.local'), { namespace: 'databases' })
  t.equal(placeOf('db.corp.localhost'), 'outside')
  t.equal(placeOf('postgres.databases'), 'outside', 'NAME.NAMESPACE alone could be any domain')
  t.equal(placeOf('svc.corp.localhost'), 'outside')
})

t.test(
  'the egress: addresses as /32 with their ports, other namespaces by name, the admin networks with the ports of the services named by host',
  async (t) => {
    const values = {
      DATABASE_URL: 'postgres://u:p@10.0.0.5:5433/atrium',
      REDIS_URL: 'redis://cache.corp.localhost',
      R2_ENDPOINT: 'http://minio.storage.svc:9000',
      REGION_STORES: JSON.stringify({
        'eu-west': { endpoint: 'http://10.0.0.5:9000', bucket: 'b', accessKeyId: 'a', secretAccessKey: 's' },
        'us-west': { endpoint: 'http://minio.atrium.svc:9000', bucket: 'b', accessKeyId: 'a', secretAccessKey: 's' },
      }),
    }
    const egress = serviceEgress(values, { namespace: 'atrium', servicesCidrs: ['10.30.0.0/16'] })
    t.same(egress.servicesCidrs, [
      { cidr: '10.0.0.5/32', ports: [5433, 9000] },
      { cidr: '10.30.0.0/16', ports: [6379] },
    ])
    t.same(egress.clusterNamespaces, ['storage'], "the release's own namespace is always allowed")
    t.same(egress.byName, [{ setting: 'REDIS_URL', host: 'cache.corp.localhost', port: 6379 }])
    t.same(
      serviceEgress(
        { DATABASE_URL: 'postgres://u:p@10.0.0.5/a' },
        { namespace: 'atrium', servicesCidrs: ['10.9.0.0/16'] },
      ).servicesCidrs,
      [
        { cidr: '10.0.0.5/32', ports: [5432] },
        { cidr: '10.9.0.0/16', ports: [5432] },
      ],
      'no service by name: the admin networks get the ports of every service',
    )
  },
)

// Host names under .localhost: outside the cluster as far as the rules go, and loopback if anything ever looked them up.
const byName = {
  DATABASE_URL: 'postgres://atrium:s3cret-pw@db.corp.localhost/atrium',
  REDIS_URL: 'rediss://:redis-pw@cache.corp.localhost:6380',
  R2_ENDPOINT: 'https://10.20.0.9:9000',
  AIR_GAPPED: 'true',
}

const site = (o: Partial<Answers> = {}): Answers => ({
  ...DEFAULT_ANSWERS,
  target: 'helm',
  mode: 'air-gapped',
  ...o,
})

t.test(
  'air-gapped helm: a service named by host name without servicesCidrs is refused, naming the answer, the hosts and the fixes, never a password',
  async (t) => {
    const problem = servicesCidrsProblem(site(), byName)!
    t.match(
      problem,
      /^servicesCidrs: DATABASE_URL \(db\.corp\.localhost\), REDIS_URL \(cache\.corp\.localhost\) are named by host name/,
    )
    t.match(
      problem,
      /add servicesCidrs to the answers, the networks they are on \(e\.g\. servicesCidrs: \[10\.20\.0\.0\/16\]\)/,
    )
    t.match(problem, /or name them by IP address or as cluster services \(NAME\.NAMESPACE\.svc\)/)
    t.notMatch(problem, /s3cret-pw|redis-pw/)
    t.equal(servicesCidrsProblem(site({ servicesCidrs: ['10.10.0.0/24'] }), byName), null, 'given: fine')
    t.equal(servicesCidrsProblem(site({ mode: 'connected' }), byName), null, 'connected: egress is open')
    t.equal(servicesCidrsProblem(site({ target: 'compose' }), byName), null, 'compose: no NetworkPolicy')
    const inCluster = {
      DATABASE_URL: 'postgres://u:p@postgres/atrium',
      REDIS_URL: 'redis://redis.cache.svc.cluster.local',
      R2_ENDPOINT: 'http://10.20.0.9:9000',
    }
    t.equal(servicesCidrsProblem(site(), inCluster), null, 'cluster services and addresses need no answer')
  },
)

t.test('the values of an air-gapped site carry its egress; a connected site leaves egress to the chart', async (t) => {
  const files = renderHelmFiles(
    { ...byName, R2_ENDPOINT: 'http://minio.storage.svc:9000', PUBLIC_URL: 'https://atrium.localhost' },
    { release: 'atrium', namespace: 'atrium', servicesCidrs: ['10.10.0.0/24'] },
  )
  const values = parse(files.values)
  t.same(values.networkPolicy, {
    servicesCidrs: [{ cidr: '10.10.0.0/24', ports: [5432, 6380] }],
    clusterNamespaces: ['storage'],
  })
  t.equal(values.airGapped, true)
  t.notMatch(files.values, /s3cret-pw|redis-pw/, 'the values hold no secret')
  const connected = parse(
    renderHelmFiles({ ...byName, AIR_GAPPED: 'false' }, { release: 'atrium', namespace: 'atrium' }).values,
  )
  t.notOk('networkPolicy' in connected)
  const dir = tempDir(t)
  writeFileSync(join(dir, 'values.yaml'), files.values)
  writeFileSync(join(dir, 'secret.yaml'), files.secret)
  t.match(
    readHelmFiles(join(dir, 'values.yaml'), join(dir, 'secret.yaml')),
    { AIR_GAPPED: 'true', DATABASE_URL: byName.DATABASE_URL, PUBLIC_URL: 'https://atrium.localhost' },
    'read back as settings; the egress is the answers’ to give again',
  )
})

/** A site with every kind of secret setting, each a value found nowhere else. */
const SITE = {
  PUBLIC_URL: 'https://atrium.corp.example',
  LOG_LEVEL: 'info',
  DATABASE_URL: 'postgres://atrium:db-Pw-7d1e0c9a44@db.corp.example:5432/atrium?sslmode=require',
  REDIS_URL: 'rediss://:redis-Pw-0b5f3e2c81@redis.corp.example:6380',
  R2_ENDPOINT: 'https://s3.corp.example',
  R2_BUCKET: 'atrium',
  R2_ACCESS_KEY_ID: 'AKIA7Q2EXAMPLEKEY',
  R2_SECRET_ACCESS_KEY: 's3-Secret-5e8a1f6b2d4c9e07',
  ENCRYPTION_MASTER_KEY: Buffer.alloc(32, 7).toString('base64'),
  LICENSE_KEY: 'eyJhbGciOiJFZERTQSJ9.eyJjdXN0b21lciI6IkNvcnAifQ.c2lnbmF0dXJlLW9mLXRoZS1saWNlbnNl',
  REGION_STORES: JSON.stringify({
    'eu-west': {
      endpoint: 'https://s3.eu.corp.example',
      bucket: 'atrium-eu',
      accessKeyId: 'AKIAEUEXAMPLE',
      secretAccessKey: 'eu-Secret-93c1d7a2f0b6',
    },
  }),
  OIDC_PROVIDERS: JSON.stringify([
    { id: 'corp', issuer: 'https://sso.corp.example', clientId: 'atrium', clientSecret: 'oidc-Secret-4b7e2a9c1f' },
  ]),
}

t.test(
  "the installer's Helm values and every object the chart renders from them hold no secret: only its Secret does",
  { skip: needs('helm') },
  async (t) => {
    const files = renderHelmFiles(SITE, { release: 'atrium', namespace: 'atrium' })
    const secrets = configSecrets(SITE)
    // Each setting's value, and the passwords and keys inside the URLs and JSON ones, each on its own.
    t.ok(Object.keys(secrets).length >= 10, `looked for ${Object.keys(secrets).join(', ')}`)
    t.same(
      secretsIn([files.secret], secrets).sort(),
      Object.keys(secrets).sort(),
      'the Secret the installer applies holds every one',
    )
    t.same(secretsIn([files.values], secrets), [], 'values.yaml (kept in the release history) holds none')
    // As the installer deploys it: its values, and a private registry with the image pinned.
    const r = await helmTemplate(
      t,
      [{ secrets: {} }, parse(files.values)],
      ['--set', 'global.imageRegistry=registry.corp.example:5000', '--set', `image.digest=sha256:${'a'.repeat(64)}`],
    )
    t.equal(r.code, 0, r.stderr)
    const kinds = r.manifests.map((m) => m.kind)
    t.ok(kinds.includes('Deployment') && kinds.includes('Job'), kinds.join(', '))
    t.notOk(kinds.includes('Secret'), "the chart renders no Secret of its own: it reads the installer's")
    for (const m of r.manifests)
      t.same(secretsIn([JSON.stringify(m)], secrets), [], `${m.kind} ${m.metadata.name} holds no secret`)
    const deployment = r.manifests.find((m) => m.kind === 'Deployment')!
    t.match(
      deployment.spec.template.spec.containers[0].envFrom,
      [{ configMapRef: Object }, { secretRef: { name: parse(files.secret).metadata.name } }],
      'the server reads the secrets from that Secret',
    )
  },
)
