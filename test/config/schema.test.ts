import t from 'tap'
import { isCidr, isDomain, parseConfig, settings } from '../../config/schema.js'

const KEY = Buffer.alloc(32, 7).toString('base64')

t.test('an empty environment gives the embedded defaults', async (t) => {
  const { config, problems } = parseConfig({})
  t.same(problems, [])
  t.match(config, {
    PORT: 8080,
    HOST: '0.0.0.0',
    DATA_DIR: './.atrium',
    DATABASE_URL: '',
    REDIS_URL: '',
    R2_ENDPOINT: '',
    RATE_LIMIT_MAX: 1000,
    RATE_LIMIT_WINDOW_SECONDS: 60,
    AIR_GAPPED: false,
    OUTBOUND_ALLOWED_NETWORKS: [],
    PUBLIC_URL: 'http://localhost:8080',
    MIGRATE_ON_START: true,
  })
})

t.test('values are parsed to their types', async (t) => {
  const { config, problems } = parseConfig({
    PORT: '9000',
    AIR_GAPPED: 'yes',
    RATE_LIMIT_MAX: '5',
    OUTBOUND_ALLOWED_NETWORKS: '10.0.0.0/8, fd00::/8',
    PUBLIC_URL: 'https://atrium.example.com/',
    DATABASE_URL: 'postgres://u:p@db:5432/atrium',
    ENCRYPTION_MASTER_KEY: KEY,
  })
  t.same(problems, [])
  t.equal(config.PORT, 9000)
  t.equal(config.AIR_GAPPED, true)
  t.same(config.OUTBOUND_ALLOWED_NETWORKS, ['10.0.0.0/8', 'fd00::/8'])
  t.equal(config.PUBLIC_URL, 'https://atrium.example.com', 'trailing slash dropped')
})

t.test('every problem is reported at once, one line each', async (t) => {
  const { problems } = parseConfig({
    PORT: 'eighty',
    AIR_GAPPED: 'maybe',
    LOG_LEVEL: 'loud',
    RATE_LIMIT_MAX: '0',
    DATABASE_URL: 'mysql://root:hunter2@db/x',
    ENCRYPTION_MASTER_KEY: 'c2hvcnQ=',
    OUTBOUND_ALLOWED_NETWORKS: '10.0.0.0/8,nonsense,10.0.0.1/33',
  })
  t.equal(problems.length, 7)
  t.ok(problems.every((p) => !p.includes('\n')))
  for (const start of [
    'PORT must be a whole number',
    'AIR_GAPPED must be true or false',
    'LOG_LEVEL must be one of',
    'RATE_LIMIT_MAX must be between 1 and',
    'DATABASE_URL must start with postgres://',
    'ENCRYPTION_MASTER_KEY must be 32 bytes',
  ]) {
    t.ok(
      problems.some((p) => p.startsWith(start)),
      start,
    )
  }
  t.match(problems.join('|'), /nonsense, 10\.0\.0\.1\/33/)
})

t.test('a secret value never appears in a problem', async (t) => {
  const { problems } = parseConfig({
    DATABASE_URL: 'mysql://root:hunter2@db/x',
    ENCRYPTION_MASTER_KEY: 'hunter2hunter2',
    REDIS_URL: 'not a url hunter2',
  })
  t.equal(problems.length, 3)
  t.notMatch(problems.join('\n'), /hunter2/)
})

t.test('a URL whose port is out of range says so, naming the port and never a secret around it', async (t) => {
  const { problems } = parseConfig({
    PUBLIC_URL: 'http://127.0.0.1:99999',
    DATABASE_URL: 'postgres://atrium:hunter2@db.internal:654321/atrium',
    REDIS_URL: 'redis://[::1]:70000',
  })
  t.same(problems, [
    'PUBLIC_URL has port 99999, out of range (1-65535)',
    'DATABASE_URL has port 654321, out of range (1-65535)',
    'REDIS_URL has port 70000, out of range (1-65535)',
  ])
  t.notMatch(problems.join('\n'), /hunter2/)
  t.match(parseConfig({ PUBLIC_URL: 'http://127.0.0.1:8x' }).problems, [
    'PUBLIC_URL must be a URL (got "http://127.0.0.1:8x")',
  ])
  t.same(parseConfig({ PUBLIC_URL: 'http://127.0.0.1:65535' }).problems, [], 'the last port is a port')
})

t.test('production refuses embedded defaults', async (t) => {
  const { problems } = parseConfig({ NODE_ENV: 'production' })
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'R2_ENDPOINT', 'ENCRYPTION_MASTER_KEY']) {
    t.ok(
      problems.some((p) => p.startsWith(`${name} is required when NODE_ENV=production`)),
      name,
    )
  }
  const ok = parseConfig({
    NODE_ENV: 'production',
    DATABASE_URL: 'postgres://db/atrium',
    REDIS_URL: 'redis://cache:6379',
    ENCRYPTION_MASTER_KEY: KEY,
    R2_ENDPOINT: 'https://s3.example.com',
    R2_ACCESS_KEY_ID: 'a',
    R2_SECRET_ACCESS_KEY: 'b',
  })
  t.same(ok.problems, [])
})

t.test('an object store needs its credentials', async (t) => {
  t.match(parseConfig({ R2_ENDPOINT: 'http://minio:9000' }).problems, [
    /R2_ACCESS_KEY_ID and R2_SECRET_ACCESS_KEY are required/,
  ])
})

t.test('tracing: off by default; a bad endpoint or ratio is refused, saying what is wanted', async (t) => {
  const defaults = parseConfig({})
  t.same(defaults.problems, [])
  t.match(defaults.config, { TRACING_OTLP_ENDPOINT: '', TRACING_SAMPLE_RATIO: 1, TRACING_SERVICE_NAME: 'atrium' })
  const on = parseConfig({ TRACING_OTLP_ENDPOINT: 'http://otel-collector:4318/', TRACING_SAMPLE_RATIO: '0.25' })
  t.same(on.problems, [])
  t.match(on.config, { TRACING_OTLP_ENDPOINT: 'http://otel-collector:4318', TRACING_SAMPLE_RATIO: 0.25 })
  t.equal(parseConfig({ TRACING_SAMPLE_RATIO: '0' }).config.TRACING_SAMPLE_RATIO, 0)
  t.equal(parseConfig({ TRACING_SAMPLE_RATIO: '.5' }).config.TRACING_SAMPLE_RATIO, 0.5)
  const cases: [Record<string, string>, string][] = [
    [
      { TRACING_OTLP_ENDPOINT: 'otel-collector:4318' },
      'TRACING_OTLP_ENDPOINT must start with http:// or https:// (got "otel-collector:4318")',
    ],
    [
      { TRACING_OTLP_ENDPOINT: 'grpc://otel:4317' },
      'TRACING_OTLP_ENDPOINT must start with http:// or https:// (got "grpc://otel:4317")',
    ],
    [{ TRACING_OTLP_ENDPOINT: 'http://otel:99999' }, 'TRACING_OTLP_ENDPOINT has port 99999, out of range (1-65535)'],
    [{ TRACING_OTLP_ENDPOINT: 'collector' }, 'TRACING_OTLP_ENDPOINT must be a URL (got "collector")'],
    [
      { TRACING_OTLP_ENDPOINT: 'https://otel:hunter2@collector:4318' },
      'TRACING_OTLP_ENDPOINT must not carry a user or password: it is not a secret setting; protect the collector on the site network instead',
    ],
    [{ TRACING_SAMPLE_RATIO: '1.5' }, 'TRACING_SAMPLE_RATIO must be between 0 and 1 (got "1.5")'],
    [{ TRACING_SAMPLE_RATIO: '-0.1' }, 'TRACING_SAMPLE_RATIO must be a decimal number such as 0.25 (got "-0.1")'],
    [{ TRACING_SAMPLE_RATIO: '10%' }, 'TRACING_SAMPLE_RATIO must be a decimal number such as 0.25 (got "10%")'],
    [{ TRACING_SAMPLE_RATIO: '1e-1' }, 'TRACING_SAMPLE_RATIO must be a decimal number such as 0.25 (got "1e-1")'],
  ]
  for (const [env, problem] of cases) t.same(parseConfig(env).problems, [problem], JSON.stringify(env))
})

t.test('CIDR syntax', async (t) => {
  for (const good of ['10.0.0.0/8', '192.168.1.0/24', '0.0.0.0/0', '::1/128', 'fd00::/8']) t.ok(isCidr(good), good)
  for (const bad of ['10.0.0.0', '10.0.0.0/33', 'fd00::/129', 'host/8', '10.0.0.0/8/1', '10.0.0.0/-1'])
    t.notOk(isCidr(bad), bad)
})

t.test('DNS domains: lowercase, without the dots around them, each once; anything else is named', async (t) => {
  const ok = parseConfig({ OUTBOUND_ALLOWED_DOMAINS: 'Corp.Example., .svc.cluster.local, corp.example,_srv.internal' })
  t.same(ok.problems, [])
  t.same(ok.config.OUTBOUND_ALLOWED_DOMAINS, ['corp.example', 'svc.cluster.local', '_srv.internal'])
  t.same(parseConfig({}).config.OUTBOUND_ALLOWED_DOMAINS, [], 'none by default')
  t.match(parseConfig({ OUTBOUND_ALLOWED_DOMAINS: 'corp.example,https://llm.corp.example,*.corp.example' }).problems, [
    /^OUTBOUND_ALLOWED_DOMAINS has entries that are not DNS domains: https:\/\/llm\.corp\.example, \*\.corp\.example \(write e\.g\. corp\.example,svc\.cluster\.local\)$/,
  ])
  for (const bad of ['-corp.example', 'corp..example', 'a'.repeat(64) + '.example', 'corp example', '10.0.0.0/8'])
    t.notOk(isDomain(bad), bad)
  for (const good of ['localhost', 'corp.example', 'a-b.c1.example', 'svc.cluster.local']) t.ok(isDomain(good), good)
})

t.test('every setting documents itself', async (t) => {
  for (const [name, s] of Object.entries(settings)) {
    t.ok(s.description.length > 10, `${name} has a description`)
    t.type(s.secret, 'boolean', `${name} says whether it is secret`)
  }
})
