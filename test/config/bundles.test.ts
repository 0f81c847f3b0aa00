// The bundles' settings come from the one schema: a setting added to config/schema.ts appears in
// the chart's values and schema, the Compose environment and the env templates, or this fails.
import { readFileSync } from 'node:fs'
import t from 'tap'
import { parse } from 'yaml'
import {
  CHART_FIXED,
  CONTAINER_FIXED,
  MONITORING,
  PATHS,
  bundleSettings,
  helmValue,
  renderAll,
  renderComposeImages,
  replaceBlock,
  staleFiles,
} from '../../config/bundles.js'
import { COMPOSE_VARIABLES } from '../../config/compose-variables.js'
import { IMAGES } from '../../config/images.js'
import { VERSION } from '../../common/version.js'
import { settings } from '../../config/schema.js'
import { isSecret } from '../../config/secrets.js'

t.test(
  'every generated file is current (run `npm run config:generate` after changing config/schema.ts or config/images.ts)',
  async (t) => {
    t.same(staleFiles(), [])
  },
)

t.test(
  "values.yaml and values.schema.json offer every setting but the container's and the chart's fixed ones, secrets apart",
  async (t) => {
    const values = parse(readFileSync(PATHS.values, 'utf8'))
    const schema = JSON.parse(readFileSync(PATHS.valuesSchema, 'utf8'))
    const names = (secret: boolean) =>
      bundleSettings(secret)
        .map(([n]) => n)
        .filter((n) => !(n in CHART_FIXED))
        .sort()
    t.same(Object.keys(values.env).sort(), names(false))
    t.same(Object.keys(values.secrets).sort(), names(true))
    t.same(Object.keys(schema.properties.env.properties).sort(), names(false))
    t.same(Object.keys(schema.properties.secrets.properties).sort(), names(true))
    t.equal(schema.properties.env.additionalProperties, false, 'a misspelt setting fails')
    for (const name of [...Object.keys(CONTAINER_FIXED), ...Object.keys(CHART_FIXED)])
      t.notOk(name in values.env, `${name} is the chart's`)
    t.equal(values.env.RATE_LIMIT_MAX, settings.RATE_LIMIT_MAX.default, "defaults are the schema's, typed")
    t.notMatch(JSON.stringify(schema), /"\$ref"\s*:\s*"http/, 'no remote $ref')
  },
)

t.test(
  "one rule says what is secret: the schema's flag, a bundle variable by the setting made from it, any other name by how it reads",
  async (t) => {
    for (const [name, s] of Object.entries(settings))
      t.equal(isSecret(name), s.secret, `${name} is as the schema marks it`)
    t.notOk(isSecret('ACCESS_TOKEN_TTL_SECONDS'), "a setting's flag wins over how its name reads")
    t.same(
      Object.keys(COMPOSE_VARIABLES).filter(isSecret).sort(),
      ['MINIO_ATRIUM_PASSWORD', 'MINIO_ROOT_PASSWORD', 'POSTGRES_PASSWORD', 'REDIS_PASSWORD'],
      "the bundle's credentials, as DATABASE_URL, REDIS_URL and the R2 keys are",
    )
    for (const name of [
      'SMTP_PASSWORD',
      'PGPASSWORD',
      'GITHUB_TOKEN',
      'AWS_SECRET_ACCESS_KEY',
      'GCP_CREDENTIALS',
      'DB_PASS',
      'SSH_KEY',
      'clientSecret',
      'apiKey',
    ])
      t.ok(isSecret(name), `${name} reads as a secret`)
    for (const name of ['KEYCLOAK_URL', 'BYPASS_CACHE', 'LOG_FORMAT', 'clientId', 'issuer'])
      t.notOk(isSecret(name), `${name} does not`)
    t.match(
      readFileSync(PATHS.composeEnv, 'utf8'),
      /REDIS_URL must use it \[secret\]\nREDIS_PASSWORD=\n/,
      '.env.example marks them',
    )
  },
)

t.test('the Compose environment passes every setting through and fixes the container ones', async (t) => {
  const compose = parse(readFileSync(PATHS.compose, 'utf8'))
  const env = compose['x-atrium-env']
  t.same(Object.keys(env).sort(), Object.keys(settings).sort())
  for (const [name, value] of Object.entries(CONTAINER_FIXED)) t.equal(env[name], value)
  t.equal(env.DATABASE_URL, '${DATABASE_URL:-}')
})

t.test('helm values are typed as the chart schema wants them', async (t) => {
  t.equal(helmValue(settings.RATE_LIMIT_MAX, '50'), 50)
  t.equal(helmValue(settings.AIR_GAPPED, 'TRUE'), true)
  t.equal(helmValue(settings.LOG_LEVEL, 'debug'), 'debug')
  t.equal(helmValue(settings.RATE_LIMIT_MAX, 'lots'), 'lots', 'left as it is, for the schema to refuse by name')
})

t.test('a file without the generated block is an error naming the file, not a silent rewrite', async (t) => {
  t.throws(() => replaceBlock('no markers here', 'x: 1', 'values.yaml'), /values.yaml has no generated block/)
  t.equal(renderAll().filter((f) => !f.path.startsWith(MONITORING.copy)).length, 6)
})

t.test(
  "compose.yaml's images are generated from config/images.ts: the server's default tag is this release's, every tag pinned there",
  async (t) => {
    const stale = [
      'services:',
      '  server:',
      '    image: ${ATRIUM_REGISTRY:-docker.io}/atrium/atrium-server:${ATRIUM_VERSION:-0.0.1}',
      '  postgres:',
      '    image: ${ATRIUM_REGISTRY:-docker.io}/library/postgres:16.0',
    ].join('\n')
    const postgres = IMAGES.find((i) => i.name === 'postgres')!
    t.equal(
      renderComposeImages(stale, 'compose.yaml'),
      [
        'services:',
        '  server:',
        `    image: \${ATRIUM_REGISTRY:-docker.io}/atrium/atrium-server:\${ATRIUM_VERSION:-${VERSION}}`,
        '  postgres:',
        `    image: \${ATRIUM_REGISTRY:-docker.io}/library/postgres:${postgres.tag}`,
      ].join('\n'),
    )
    const written = readFileSync(PATHS.compose, 'utf8')
    t.equal(written.match(/^\s*image: /gm)?.length, 6, 'every service of compose.yaml has its image line rewritten')
    t.match(written, `atrium/atrium-server:\${ATRIUM_VERSION:-${VERSION}}`, 'the one written is current')
    t.throws(
      () => renderComposeImages('    image: ${ATRIUM_REGISTRY:-docker.io}/library/nginx:1', 'compose.yaml'),
      /compose\.yaml: image: \$\{ATRIUM_REGISTRY:-docker\.io\}\/library\/nginx:1 is not an image of config\/images\.ts/,
    )
  },
)
