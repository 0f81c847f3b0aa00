// The support bundle holds what support needs and no secret: not in the configuration, not in the
// check results, not in logs that printed a connection string.
import { chmodSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { COMPOSE_VARIABLES } from '../../../config/compose-variables.js'
import { settings, type Setting, type SettingName } from '../../../config/schema.js'
import { isSecret } from '../../../config/secrets.js'
import { DEFAULT_ANSWERS, TARGETS, type Answers } from '../../../installer/core/answers.js'
import type { CheckResult } from '../../../installer/core/checks/check.js'
import {
  logCommands,
  redactConfig,
  scrubber,
  STOPPED_LOG_BYTES,
  stoppedContainerLogs,
  writeSupportBundle,
} from '../../../installer/core/support-bundle.js'
import { run, type Runner } from '../../../installer/core/run.js'
import { docker, engine } from '../../helpers/engine.js'
import { suffix, tempDir } from '../../helpers/platform.js'
import { unzip } from '../../helpers/zip.js'

/** The container engine, for the test that runs containers (or why there is none). */
const withEngine = await engine()

const config = {
  PUBLIC_URL: 'https://atrium.example.com',
  DATABASE_URL: 'postgres://atrium:p%40ss-w0rd@db:5432/atrium',
  R2_SECRET_ACCESS_KEY: 'minio-secret-key-123',
  ENCRYPTION_MASTER_KEY: Buffer.alloc(32, 9).toString('base64'),
  LOG_LEVEL: 'info',
}
const secrets = ['p%40ss-w0rd', 'p@ss-w0rd', 'minio-secret-key-123', config.ENCRYPTION_MASTER_KEY]

t.test('the configuration keeps ordinary values and says only how long each secret is', async (t) => {
  t.same(redactConfig(config), {
    PUBLIC_URL: 'https://atrium.example.com',
    DATABASE_URL: `<redacted: ${config.DATABASE_URL.length} characters>`,
    R2_SECRET_ACCESS_KEY: '<redacted: 20 characters>',
    ENCRYPTION_MASTER_KEY: '<redacted: 44 characters>',
    LOG_LEVEL: 'info',
  })
})

t.test('secret values are removed from any text, URL passwords too, decoded or not', async (t) => {
  const text = `connecting to ${config.DATABASE_URL}\nauth with p@ss-w0rd and p%40ss-w0rd\nkey=minio-secret-key-123 level=info`
  const clean = scrubber(config)(text)
  for (const s of secrets) t.notOk(clean.includes(s), s)
  t.match(clean, /connecting to <redacted>\nauth with <redacted> and <redacted>\nkey=<redacted> level=info/)
})

t.test('a compose site gets a zip of versions, checks, redacted configuration and scrubbed logs', async (t) => {
  const dir = tempDir(t)
  // Docker stands in as a script on PATH that logs like a server that prints its settings.
  writeFileSync(
    join(dir, 'docker'),
    `#!/bin/sh\necho "server: DATABASE_URL=${config.DATABASE_URL} R2=${config.R2_SECRET_ACCESS_KEY}"\necho "args: $*" >&2\n`,
  )
  chmodSync(join(dir, 'docker'), 0o755)
  const runner: Runner = (file, args, opts) => run(file, args, { ...opts, env: { PATH: dir } })
  const answers: Answers = {
    ...DEFAULT_ANSWERS,
    site: 'blue',
    outputDir: dir,
    config: { PUBLIC_URL: config.PUBLIC_URL, R2_SECRET_ACCESS_KEY: config.R2_SECRET_ACCESS_KEY },
  }
  const checks = [
    {
      id: 'tools.docker',
      title: 'Docker Engine',
      status: 'pass' as const,
      found: '27.3.1',
      required: 'Docker Engine 24.0.0 or newer',
      fix: '',
    },
  ]
  const path = join(dir, 'bundle.zip')
  const r = await writeSupportBundle(path, {
    answers,
    config,
    checks,
    runner,
    envFile: join(dir, '.env'),
    now: new Date('2026-11-23T10:00:00Z'),
  })
  t.equal(statSync(path).mode & 0o777, 0o600)
  t.equal(r.size, statSync(path).size)
  const files = await unzip(readFileSync(path))
  t.same(Object.keys(files).sort(), [
    'answers.yaml',
    'checks.json',
    'config.redacted.json',
    'logs/compose-ps.txt',
    'logs/compose.txt',
    'logs/containers.txt',
    'versions.json',
  ])
  t.match(JSON.parse(files['versions.json']!), {
    atrium: /^\d+\.\d+\.\d+/,
    node: process.version,
    target: 'compose',
    site: 'blue',
    mode: 'connected',
    airGapped: false,
    tools: [{ id: 'tools.docker', found: '27.3.1' }],
    createdAt: '2026-11-23T10:00:00.000Z',
  })
  // The site's project and the files the installer deployed with: without them Compose finds no project.
  t.match(
    files['logs/compose.txt'],
    /\$ docker compose --project-name blue --env-file .*\.env -f \S+\/compose\/compose\.yaml logs --no-color --timestamps --tail 2000\n\(exit code 0\)\nserver: DATABASE_URL=<redacted> R2=<redacted>/,
  )
  t.match(
    files['logs/containers.txt'],
    /^\$ docker ps --all --no-trunc --filter label=com\.docker\.compose\.project=blue --format /,
    "every container of the installer's project, by its label",
  )
  t.equal(JSON.parse(files['config.redacted.json']!).PUBLIC_URL, 'https://atrium.example.com')
  const all = Object.values(files).join('\n')
  for (const s of secrets) t.notOk(all.includes(s), `no ${s.slice(0, 4)}… anywhere in the bundle`)
})

t.test(
  'a helm site collects pod descriptions, logs before a restart, events, the migration log, the release status and history; a missing tool is said, not fatal',
  async (t) => {
    const answers: Answers = { ...DEFAULT_ANSWERS, target: 'helm', namespace: 'ai', release: 'prod', config: {} }
    const cmds = logCommands(answers, '')
    t.same(
      cmds.map((c) => `${c.file} ${c.args.join(' ')}`),
      [
        'kubectl get pods,jobs,deployments,replicasets,services,ingresses,networkpolicies -n ai -l app.kubernetes.io/instance=prod -o wide',
        'kubectl describe pods -n ai -l app.kubernetes.io/instance=prod',
        'kubectl logs -n ai -l app.kubernetes.io/instance=prod --all-containers --prefix --timestamps --tail 2000 --ignore-errors',
        'kubectl logs -n ai -l app.kubernetes.io/instance=prod --previous --all-containers --prefix --timestamps --tail 2000 --ignore-errors',
        'kubectl logs -n ai -l app.kubernetes.io/instance=prod,app.kubernetes.io/component=migrate --all-containers --prefix --timestamps --tail 2000 --ignore-errors',
        'kubectl get events -n ai --sort-by=.lastTimestamp',
        'helm status prod -n ai',
        'helm history prod -n ai --max 20',
      ],
    )
    t.same(
      logCommands({ ...answers, target: 'compose', mode: 'air-gapped' }, '/etc/atrium/.env', {
        bundles: { compose: '/opt/atrium/compose' },
      })[0]!.args,
      [
        'compose',
        '--project-name',
        'atrium',
        '--env-file',
        '/etc/atrium/.env',
        '-f',
        '/opt/atrium/compose/compose.yaml',
        '-f',
        '/opt/atrium/compose/compose.airgap.yaml',
        'ps',
        '--all',
      ],
      'compose: the project and the files the installer deployed with',
    )
    const dir = tempDir(t)
    const runner: Runner = (file, args, opts) => run(file, args, { ...opts, env: { PATH: dir } })
    const path = join(dir, 'b.zip')
    await writeSupportBundle(path, { answers, config: {}, checks: [], runner, envFile: '' })
    const files = await unzip(readFileSync(path))
    t.match(files['logs/pods.txt'], /\(kubectl is not installed here\)/)
    t.match(files['logs/helm-status.txt'], /\(helm is not installed here\)/)
  },
)

// A password with what URLs, JSON and base64 each spell their own way, different for every secret.
const password = (what: string) => `${what}-P@ss/w:rd "q" \\ é+%`

/**
 * A value for a secret setting, and the secrets it holds: a URL setting gets the password inside
 * (percent-encoded, as a URL must carry it), OIDC_PROVIDERS a provider whose clientSecret it is.
 */
function plant(name: string): { value: string; secrets: string[] } {
  const pw = password(name)
  const s = Object.hasOwn(settings, name) ? (settings[name as SettingName] as Setting) : undefined
  if (s?.type === 'url') {
    const url = `${(s.protocols ?? ['https:'])[0]}//user-${name.toLowerCase()}:${encodeURIComponent(pw)}@${name.toLowerCase()}.internal:1234/atrium`
    return { value: url, secrets: [url, pw] }
  }
  if (s?.type === 'json') {
    const providers = JSON.stringify([
      { id: 'corp', name: 'Corp', issuer: 'https://id.example.com', clientId: 'atrium-app', clientSecret: pw },
    ])
    return { value: providers, secrets: [providers, pw] }
  }
  return { value: pw, secrets: [pw] }
}

/** Every character as JSON's \\uXXXX escape, with lower- or upper-case hex digits. */
const unicodeEscaped = (text: string, upper = false) =>
  [...text]
    .map((c) =>
      [...Array(c.length).keys()]
        .map((i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')[upper ? 'toUpperCase' : 'toLowerCase']()}`)
        .join(''),
    )
    .join('')
const base64url = (bytes: Buffer) => bytes.toString('base64url')

/** Each way a log, a JSON document or a Kubernetes Secret may print a value. */
function spellings(secret: string): Record<string, string> {
  const userinfo = new URL('x://host')
  userinfo.password = secret
  const percent = encodeURIComponent(secret)
  const bytes = Buffer.from(secret)
  return {
    raw: secret,
    percent,
    'percent, lower-case hex': percent.replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase()),
    'URL userinfo': userinfo.password,
    JSON: JSON.stringify(secret).slice(1, -1),
    'JSON, every character \\u-escaped': unicodeEscaped(secret),
    base64: bytes.toString('base64'),
    base64url: base64url(bytes),
    hex: bytes.toString('hex'),
    'upper-case hex': bytes.toString('hex').toUpperCase(),
  }
}

/**
 * Which spellings of a secret a text still holds any of, the base64 ones inside a longer value
 * too (the characters that hold only the secret's bits, at each of the three places it may start
 * in a 3-byte group), also when its lines are joined. `bytes` adds what a key stands for.
 */
function leftIn(text: string, secret: string, bytes: Buffer[] = []): string[] {
  const joined = text.replace(/[ \t]*(?:\r?\n|\\r?\\n)[ \t]*/g, '')
  const forms = Object.entries(spellings(secret))
  for (const [i, b] of [Buffer.from(secret), ...bytes].entries()) {
    forms.push([`hex ${i}`, b.toString('hex')], [`upper-case hex ${i}`, b.toString('hex').toUpperCase()])
    for (const shift of [0, 1, 2]) {
      const inside = Buffer.concat([Buffer.alloc(shift), b])
        .toString('base64')
        .slice(4, -4)
      forms.push(
        [`base64 ${i} after ${shift} bytes`, inside],
        [`base64url ${i} after ${shift} bytes`, inside.replace(/\+/g, '-').replace(/\//g, '_')],
      )
    }
  }
  return forms.filter(([, s]) => s.length >= 8 && (text.includes(s) || joined.includes(s))).map(([how]) => how)
}

t.test(
  'a value planted in every secret the installer writes appears nowhere in the bundle, in any spelling',
  async (t) => {
    // Every secret by the rule (a new secret setting is planted here without touching this test), a
    // line added to .env by hand, and credentials inside the URLs of settings that are not secret.
    const names = [...Object.keys(settings), ...Object.keys(COMPOSE_VARIABLES)].filter(isSecret)
    const config: Record<string, string> = {}
    const planted: Record<string, string> = {}
    for (const name of [...names, 'SMTP_PASSWORD']) {
      const p = plant(name)
      config[name] = p.value
      p.secrets.forEach((secret, i) => {
        planted[i ? `${name} (inside)` : name] = secret
      })
    }
    planted['LOG_SINK_URL password'] = password('sink')
    config.LOG_SINK_URL = `https://sink-user:${encodeURIComponent(planted['LOG_SINK_URL password'])}@logs.example.com/ingest`
    // Typed in by hand: a '%' that is no escape, and text that only looks like JSON.
    planted['BROKER_URL password'] = 'broker-%zz-planted'
    config.BROKER_URL = `amqp://queue:${planted['BROKER_URL password']}@broker.internal:5672`
    config.MOTD = '[maintenance] Saturday 10:00'
    planted['BACKUP_REMOTE token'] = 'ghp_plantedToken0123456789'
    config.BACKUP_REMOTE = `https://${planted['BACKUP_REMOTE token']}@git.example.com/ops/backups.git`
    config.PUBLIC_URL = 'https://atrium.example.com'
    t.ok(
      [
        'POSTGRES_PASSWORD',
        'REDIS_PASSWORD',
        'MINIO_ROOT_PASSWORD',
        'OIDC_PROVIDERS (inside)',
        'DATABASE_URL (inside)',
      ].every((n) => n in planted),
      "the bundle's passwords, a URL's and a clientSecret are among them",
    )

    // Programs print secrets every way: raw, percent-encoded, in a connection string, JSON-escaped.
    const printed = Object.values(planted)
      .flatMap((secret) => [
        ...Object.values(spellings(secret)).map((s) => `level=info value=${s}`),
        `connecting to redis://someone:${encodeURIComponent(secret)}@cache:6379/0`,
        JSON.stringify({ msg: 'settings', value: secret }),
      ])
      .join('\n')
    const runner: Runner = async (file, args) => ({
      command: [file, ...args].join(' '),
      exitCode: 1,
      stdout: printed,
      stderr: printed,
      notFound: false,
      timedOut: file === 'helm',
    })
    const checks: CheckResult[] = [
      {
        id: 'tools.docker',
        title: 'Docker Engine',
        status: 'pass',
        found: `27.3.1 (DOCKER_HOST=tcp://ops:${encodeURIComponent(planted.REDIS_PASSWORD!)}@docker:2376)`,
        required: '24.0.0',
        fix: '',
      },
      {
        id: 'postgres.version',
        title: 'PostgreSQL',
        status: 'fail',
        found: `no answer from ${config.DATABASE_URL}`,
        required: '15',
        fix: `check ${planted.POSTGRES_PASSWORD}`,
      },
    ]

    for (const target of TARGETS) {
      const dir = tempDir(t)
      // Secrets typed into the answers go out as references; one typed into the wrong field is text like any other.
      const answers: Answers = {
        ...DEFAULT_ANSWERS,
        target,
        outputDir: dir,
        tenantName: planted.MINIO_ROOT_PASSWORD!,
        config: { PUBLIC_URL: config.PUBLIC_URL, LICENSE_KEY: config.LICENSE_KEY! },
      }
      const path = join(dir, 'bundle.zip')
      await writeSupportBundle(path, { answers, config, checks, runner, envFile: join(dir, '.env') })
      const files = await unzip(readFileSync(path))
      t.ok(Object.keys(files).length >= 6, `${target}: every entry is there`)
      const leaks = Object.entries(files).flatMap(([entry, text]) =>
        Object.entries(planted).flatMap(([name, secret]) =>
          Object.entries(spellings(secret))
            .filter(([, s]) => text.includes(s))
            .map(([how]) => `${entry}: ${name} (${how})`),
        ),
      )
      t.same(leaks, [], `${target}: no planted secret anywhere`)
      const all = Object.values(files).join('\n')
      t.notMatch(all, /:\/\/(?!<redacted>@)[^\s/?#@]+@/, `${target}: no URL keeps its user or password`)
      t.match(
        all,
        /connecting to redis:\/\/<redacted>@cache:6379\/0/,
        `${target}: what is around a secret stays readable`,
      )
      t.equal(JSON.parse(files['config.redacted.json']!).PUBLIC_URL, config.PUBLIC_URL)
    }
  },
)

t.test(
  "config.redacted.json shows every ordinary value as written, and a published default does not blank out the product's name",
  async (t) => {
    const ordinary = Object.fromEntries(
      [...Object.keys(settings), ...Object.keys(COMPOSE_VARIABLES), 'LOG_FORMAT']
        .filter((n) => !isSecret(n))
        .map((n) => [n, `value of ${n}`]),
    )
    // Atrium's user of the bundled MinIO is `atrium-server`, secret by name (it is R2_ACCESS_KEY_ID) but published by
    // the bundle.
    const config = {
      ...ordinary,
      R2_ACCESS_KEY_ID: 'atrium-server',
      POSTGRES_PASSWORD: 'f'.repeat(48),
      SMTP_PASSWORD: 'hand-added',
    }
    t.same(redactConfig(config), {
      ...ordinary,
      R2_ACCESS_KEY_ID: '<redacted: 13 characters>',
      POSTGRES_PASSWORD: '<redacted: 48 characters>',
      SMTP_PASSWORD: '<redacted: 10 characters>',
    })
    t.equal(
      scrubber(config)('atrium-server-1  Up 3 minutes; bucket value of R2_BUCKET'),
      'atrium-server-1  Up 3 minutes; bucket value of R2_BUCKET',
    )
  },
)

// A site's secrets as the installer writes them: a hex password (openssl rand -hex 24) in a URL,
// the master key (base64 of 32 bytes), an access key and a typed-in password with characters
// every encoding spells its own way.
const POSTGRES_PASSWORD = '23cde294fb17a6da47ece451e6cac1a5f372e2db1256b04e'
const site = {
  PUBLIC_URL: 'https://atrium.example.com',
  POSTGRES_PASSWORD,
  DATABASE_URL: `postgres://atrium:${POSTGRES_PASSWORD}@postgres:5432/atrium`,
  ENCRYPTION_MASTER_KEY: 'wKViplCd92Wp+Z/xWDK+HvElUcixJKnmK9HbqT4/pnk=',
  R2_ACCESS_KEY_ID: 'atrium-server',
  R2_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
  SMTP_PASSWORD: 'Tr0ub4dor&3 "horse" é/ñ+% 🐎',
  LOG_LEVEL: 'info',
}
const masterKey = Buffer.from(site.ENCRYPTION_MASTER_KEY, 'base64')
const clean = scrubber(site)

t.test(
  'an HTTP Basic credential (base64 of user:password) loses its password, whatever the user, in base64 or base64url, padded or not',
  async (t) => {
    const basic = (user: string, password: string) => Buffer.from(`${user}:${password}`)
    const text = [
      `> GET /bucket HTTP/1.1\n> Authorization: Basic ${basic('atrium', POSTGRES_PASSWORD).toString('base64')}`,
      `proxy-authorization: basic ${base64url(basic('atrium-server', site.R2_SECRET_ACCESS_KEY))}`,
      `{"headers":{"authorization":"Basic ${basic('someone-else', site.SMTP_PASSWORD).toString('base64').replace(/=+$/, '')}"}}`,
      `relay: ${basic('mailer', site.SMTP_PASSWORD).toString('base64')}`,
    ].join('\n')
    const out = clean(text)
    for (const secret of [POSTGRES_PASSWORD, site.R2_SECRET_ACCESS_KEY, site.SMTP_PASSWORD])
      t.same(leftIn(out, secret), [], secret.slice(0, 4))
    t.match(out, /^> Authorization: Basic YXRyaXVtO\S*<redacted>/m, "the user's part stays readable")
    t.match(out, /^proxy-authorization: basic \S*<redacted>/m)
  },
)

t.test('a secret in hex, lower or upper case, is removed; a hex password in upper case too', async (t) => {
  const hex = (text: string) => Buffer.from(text).toString('hex')
  const text = [
    `smtp auth: ${hex(site.SMTP_PASSWORD).toUpperCase()}`,
    `s3 secret=${hex(site.R2_SECRET_ACCESS_KEY)}`,
    `PGPASSWORD=${POSTGRES_PASSWORD.toUpperCase()}`,
  ].join('\n')
  t.equal(clean(text), 'smtp auth: <redacted>\ns3 secret=<redacted>\nPGPASSWORD=<redacted>')
})

t.test(
  'a key is removed in any encoding of its bytes: the master key as hex, base64url or base64 without padding; a hex password as base64',
  async (t) => {
    const text = [
      `key (hex): ${masterKey.toString('hex')}`,
      `KEY=${masterKey.toString('hex').toUpperCase()}`,
      `key (base64url): ${base64url(masterKey)}`,
      `key (unpadded): ${site.ENCRYPTION_MASTER_KEY.replace(/=+$/, '')}.`,
      `pg: ${Buffer.from(POSTGRES_PASSWORD, 'hex').toString('base64')}`,
    ].join('\n')
    const out = clean(text)
    t.equal(
      out,
      'key (hex): <redacted>\nKEY=<redacted>\nkey (base64url): <redacted>\nkey (unpadded): <redacted>.\npg: <redacted>',
    )
    t.same(leftIn(out, site.ENCRYPTION_MASTER_KEY, [masterKey]), [])
    t.same(leftIn(out, POSTGRES_PASSWORD, [Buffer.from(POSTGRES_PASSWORD, 'hex')]), [])
  },
)

t.test(
  'a secret in JSON with \\u escapes is removed: every character escaped (either case of hex), or some, mixed with other escapes',
  async (t) => {
    const pw = site.SMTP_PASSWORD
    const text = [
      `{"msg":"smtp","password":"${unicodeEscaped(pw)}"}`,
      `{"msg":"smtp","password":"${unicodeEscaped(pw, true)}"}`,
      // Some characters as \u, some percent-encoded, the rest as JSON writes them.
      `{"msg":"s3","secret":"${unicodeEscaped(site.R2_SECRET_ACCESS_KEY.slice(0, 9))}${encodeURIComponent(site.R2_SECRET_ACCESS_KEY.slice(9, 20))}${site.R2_SECRET_ACCESS_KEY.slice(20)}"}`,
      `{"smtp":"${unicodeEscaped(pw.slice(0, 3))}${JSON.stringify(pw.slice(3)).slice(1, -1)}"}`,
    ].join('\n')
    t.equal(
      clean(text),
      '{"msg":"smtp","password":"<redacted>"}\n{"msg":"smtp","password":"<redacted>"}\n{"msg":"s3","secret":"<redacted>"}\n{"smtp":"<redacted>"}',
    )
  },
)

t.test(
  "a secret wrapped across lines is removed: base64 at 64 and 76 columns (PEM, MIME), a line break inside a value, a JSON string's \\n",
  async (t) => {
    // A configuration file in base64, as `kubectl get secret -o yaml | base64 -w 64` or MIME would show it.
    const file = Buffer.from(
      `DATABASE_URL=${site.DATABASE_URL}\nSMTP_PASSWORD=${site.SMTP_PASSWORD}\nENCRYPTION_MASTER_KEY=${site.ENCRYPTION_MASTER_KEY}\n`,
    ).toString('base64')
    const wrap = (text: string, width: number, eol: string) => text.match(new RegExp(`.{1,${width}}`, 'g'))!.join(eol)
    const pem = `-----BEGIN ATRIUM ENV-----\n${wrap(file, 64, '\n')}\n-----END ATRIUM ENV-----`
    const mime = `Content-Transfer-Encoding: base64\r\n\r\n${wrap(file, 76, '\r\n')}`
    const indented = `data:\n  env: |\n    ${wrap(file, 64, '\n    ')}`
    const logWrapped = `password check failed for ${site.R2_SECRET_ACCESS_KEY.slice(0, 17)}\n${site.R2_SECRET_ACCESS_KEY.slice(17)} (retrying)`
    const json = JSON.stringify({
      msg: `key ${site.ENCRYPTION_MASTER_KEY.slice(0, 20)}\n  ${site.ENCRYPTION_MASTER_KEY.slice(20)}`,
    })
    for (const [what, text] of Object.entries({ pem, mime, indented, logWrapped, json })) {
      const out = clean(text)
      for (const secret of [
        POSTGRES_PASSWORD,
        site.SMTP_PASSWORD,
        site.ENCRYPTION_MASTER_KEY,
        site.R2_SECRET_ACCESS_KEY,
      ])
        t.same(leftIn(out, secret), [], `${what}: ${secret.slice(0, 4)}`)
    }
    t.equal(clean(pem).split('\n')[0], '-----BEGIN ATRIUM ENV-----', 'the lines around stay')
    t.equal(clean(logWrapped), 'password check failed for <redacted> (retrying)')
  },
)

t.test(
  'ordinary text is left as it is: logs full of hex, base64, escapes and wrapped lines; a secret below the floor is not looked for',
  async (t) => {
    // A site whose Redis password is short (below the floor, it would match all over) and whose other secrets are as
    // usual.
    const scrub = scrubber({ ...site, REDIS_PASSWORD: 'abc', REDIS_URL: 'redis://:abc@redis:6379' })
    const text = [
      '2026-11-23T10:00:00.000Z atrium-server-1  | {"level":30,"time":1795428000000,"pid":1,"hostname":"3f1c9e2a7b44","reqId":"5b0e6c1e-8d4f-4c2a-9e57-1f3b2a6d9c01","msg":"request completed","responseTime":12.5}',
      '{"level":50,"msg":"upstream failed","err":{"type":"Error","message":"connect ECONNREFUSED 10.0.0.7:5432","stack":"Error: connect ECONNREFUSED\\n    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1611:16)"}}',
      'GET /api/v1/projects?cursor=eyJpZCI6IjAxSjhaN0tYUlE5In0&limit=50 200 "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36" abc-def abcdef',
      'etag: "W/\\"a1b2c3d4e5f60718\\"" x-request-id: 0f8fad5b-d9cb-469f-a165-70867728950e; sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
      'name=Zo\\u00eb%20M%C3%BCller title="Ops + Support - EMEA" path=/var/lib/atrium/data_dir/backups',
      '-----BEGIN CERTIFICATE-----',
      'MIIBszCCAVmgAwIBAgIUQ0Fnb4f0nVqU1lB2ZG9tYWluLmV4YW1wbGUwHhcNMjYx',
      'MTIzMTAwMDAwWhcNMjcxMTIzMTAwMDAwWjAXMRUwEwYDVQQDDAxleGFtcGxlLmNv',
      '-----END CERTIFICATE-----',
      'migrations: 0001_init 0002_users ... 0031_regions up to date; YWJj 616263 abc',
    ].join('\n')
    t.equal(scrub(text), text)
  },
)

t.test(
  "a compose project's stopped containers (an exited migrate, a one-off run) have their logs in the bundle, the newest, each bounded; running ones are listed",
  { skip: 'skip' in withEngine && withEngine.skip },
  async (t) => {
    const base = (withEngine as { base: string }).base
    // A project of the test's own: the installer's, atrium, may be a site on this engine.
    const project = `atrium-bundle-${suffix()}`
    const ids: string[] = []
    t.teardown(() => (ids.length ? docker(['rm', '--force', ...ids]) : undefined))
    const container = async (
      service: string,
      script: string,
      name = `${project}-${service}-1`,
      extra: string[] = [],
    ) => {
      const r = await docker([
        'run',
        '--detach',
        '--label',
        `com.docker.compose.project=${project}`,
        '--label',
        `com.docker.compose.service=${service}`,
        '--name',
        name,
        ...extra,
        base,
        'node',
        '-e',
        script,
      ])
      t.equal(r.code, 0, r.stderr)
      ids.push(r.stdout.trim())
      return r.stdout.trim()
    }
    const migrate = await container(
      'migrate',
      "console.log('applying 0017'); console.error('migration 0017 failed: relation \"tenants\" does not exist'); process.exit(1)",
    )
    const chatty = await container(
      'minio-init',
      "for (let i = 0; i < 2000; i++) console.log(String(i).padStart(1000, '.'))",
    )
    await container('server', 'setInterval(() => {}, 1000)')
    // `docker compose run`'s one-off container, which `docker compose logs` leaves out.
    const once = await container('server', "console.log('create-tenant done')", `${project}-server-run-1`, [
      '--label',
      'com.docker.compose.oneoff=True',
    ])
    for (const id of [migrate, chatty, once]) await docker(['wait', id])

    const entries = await stoppedContainerLogs(run, project)
    t.same(
      entries.map((e) => e.name).sort(),
      [
        'logs/containers.txt',
        `logs/stopped/${project}-migrate-1.txt`,
        `logs/stopped/${project}-minio-init-1.txt`,
        `logs/stopped/${project}-server-run-1.txt`,
      ],
      'the stopped ones have their logs; the running server is in compose logs',
    )
    const text = (name: string) => entries.find((e) => e.name === `logs/stopped/${project}-${name}-1.txt`)!.data
    t.match(entries[0]!.data, new RegExp(`${project}-server-1\trunning`), 'every container is listed, running too')
    t.match(
      text('migrate'),
      /^Exited \(1\) .*, created .*\n\$ docker logs --timestamps --tail 500 \w+\n\(exit code 0\)\n/,
    )
    t.match(
      text('migrate'),
      /Z applying 0017\n\S+Z migration 0017 failed: relation "tenants" does not exist/,
      'both streams, in time order',
    )
    t.match(text('server-run'), /Z create-tenant done\n/)
    const bounded = text('minio-init')
    t.ok(Buffer.byteLength(bounded) < STOPPED_LOG_BYTES + 500, `bounded: ${Buffer.byteLength(bounded)} bytes`)
    t.match(bounded, /\(\d+ earlier bytes left out\)\n/, 'says what it left out')
    t.match(bounded, /\.1999\n/, 'the newest lines are kept')
    t.notMatch(bounded, /\.1499\n/, 'at most the last 500 lines')
  },
)

t.test('the scrubber removes both passwords of a Sentinel URL, which WHATWG URL cannot read', async (t) => {
  const scrub = scrubber({ REDIS_URL: 'redis+sentinel://:data-pw@h1:26379,h2:26379/m?sentinelPassword=sentinel-pw' })
  const out = scrub('AUTH data-pw, then the Sentinels with sentinel-pw')
  t.notMatch(out, /data-pw|sentinel-pw/)
  t.match(out, /^AUTH .+, then the Sentinels with /)
})
