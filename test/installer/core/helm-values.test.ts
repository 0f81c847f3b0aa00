// The Helm site's configuration as the installer writes it: every secret setting in the Secret it applies
// (secret.yaml), none in values.yaml, and none in any object the chart renders from those values (Helm keeps the
// values in its release history; a Deployment's or Job's spec is read by whoever may list them).
import t from 'tap'
import { parse } from 'yaml'
import { renderHelmFiles } from '../../../installer/core/helm-values.js'
import { configSecrets, secretsIn } from '../../helpers/leaks.js'
import { helmTemplate, needs } from '../../helpers/tools.js'

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
