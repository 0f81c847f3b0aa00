// What the installer writes is what the bundles take: the real Helm lints and renders the chart
// with the written values, and the real Compose validator accepts the written .env with the exact
// command line the installer runs. Then a whole install, with docker standing in as a script (no
// engine runs here) and a server answering /readyz, down to the first admin's credentials.
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { parse } from 'yaml'
import { parseAnswers } from '../../../installer/core/answers.js'
import { parseEnvFile } from '../../../installer/core/config-file.js'
import { composeArgs } from '../../../installer/core/compose-bundle.js'
import { configure } from '../../../installer/core/configure.js'
import { loadContext } from '../../../installer/core/context.js'
import { acceptUnmet, installer } from '../../helpers/installer.js'
import { tempDir } from '../../helpers/platform.js'
import { CHART, KUBE_VERSION, find, helmTemplate, needs, needsCompose, runTool } from '../../helpers/tools.js'

// Each test runs the CLI as its own process (tsx compiling it first): on a slow or busy machine
// the file took close to the suite's 180 s per file, and once past it.
t.setTimeout(600_000)

/** The answers' config lines of a site with its own PostgreSQL, Redis and S3. */
const OWN_SERVICES = [
  '  DATABASE_URL: postgres://atrium:pw@db.internal:5432/atrium',
  '  REDIS_URL: redis://:pw@redis.internal:6379',
  '  R2_ENDPOINT: https://s3.internal',
  '  R2_ACCESS_KEY_ID: atrium',
  '  R2_SECRET_ACCESS_KEY: s3-secret',
]

/**
 * The configuration for the answers, written as configure writes it but without the checks: what these tests look at
 * is the files (the external services they name are never reached; the checks are main-configure.test.ts's).
 */
function written(path: string, o: { airGapped?: boolean } = {}) {
  const r = configure(loadContext({ answersPath: path, airGapped: o.airGapped }), { dryRun: false })
  if (!r.written) throw new Error(`not written: ${r.plan.problems.join('; ')}`)
}

function answers(t: Test, lines: string[]) {
  const dir = tempDir(t)
  const path = join(dir, 'answers.yaml')
  writeFileSync(path, [`dataPath: ${dir}/data`, `outputDir: ${dir}/out`, ...lines].join('\n') + '\n')
  return { dir, path, out: join(dir, 'out') }
}

t.test(
  "compose with the bundled services: the written .env passes the real validator on the installer's own command line",
  { skip: needsCompose() },
  async (t) => {
    const a = answers(t, ['target: compose', 'config:', '  PUBLIC_URL: https://atrium.example.com'])
    const r = await installer(['configure', '--answers', a.path, '--yes', ...acceptUnmet, '--json'])
    t.equal(r.code, 0, r.stderr)
    t.match(JSON.parse(r.stdout).generated, [
      'ENCRYPTION_MASTER_KEY',
      'POSTGRES_PASSWORD',
      'REDIS_PASSWORD',
      'MINIO_ROOT_PASSWORD',
      'MINIO_ATRIUM_PASSWORD',
    ])
    const envPath = join(a.out, '.env')
    const env = parseEnvFile(readFileSync(envPath, 'utf8')).values
    t.equal(env.DATABASE_URL, `postgres://atrium:${env.POSTGRES_PASSWORD}@postgres:5432/atrium`)
    t.equal(env.REDIS_URL, `redis://:${env.REDIS_PASSWORD}@redis:6379`)
    t.match(env, {
      R2_ENDPOINT: 'http://minio:9000',
      R2_ACCESS_KEY_ID: 'atrium-server',
      R2_SECRET_ACCESS_KEY: env.MINIO_ATRIUM_PASSWORD,
      // The bundled MinIO speaks plain HTTP on its published port, whatever is in front of Atrium.
      R2_PUBLIC_ENDPOINT: 'http://atrium.example.com:9000',
      ATRIUM_DATA_PATH: `${a.dir}/data`,
      COMPOSE_PROFILES: 'postgres,redis,s3',
    })

    for (const mode of ['connected', 'air-gapped'] as const) {
      const args = composeArgs({ ...parseAnswers(readFileSync(a.path, 'utf8')).answers, mode }, envPath)
      const v = await runTool('docker', [...args, 'config', '--quiet'])
      t.equal(v.code, 0, `${mode}: ${v.stderr}`)
    }
  },
)

// Without the validator too: a re-run that regenerated the passwords would lock the bundled
// services out of their own data.
t.test('compose: a re-run generates nothing and keeps every password', async (t) => {
  const a = answers(t, ['target: compose', 'config:', '  PUBLIC_URL: https://atrium.example.com'])
  const r = await installer(['configure', '--answers', a.path, '--yes', ...acceptUnmet, '--json'])
  t.equal(r.code, 0, r.stderr)
  const envPath = join(a.out, '.env')
  const env = parseEnvFile(readFileSync(envPath, 'utf8')).values
  // The replay: the checks accepted before are recorded in the answers it wrote.
  const again = await installer(['configure', '--answers', join(a.out, 'answers.yaml'), '--yes', '--json'])
  t.equal(again.code, 0, again.stderr)
  t.same(JSON.parse(again.stdout).generated, [], 'a re-run generates nothing')
  t.same(parseEnvFile(readFileSync(envPath, 'utf8')).values, env, 'every password kept')
})

t.test('compose with an external PostgreSQL keeps it and bundles only the rest', async (t) => {
  const a = answers(t, ['target: compose', 'config:', '  DATABASE_URL: postgres://atrium:pw@db.internal:5432/atrium'])
  written(a.path)
  const env = parseEnvFile(readFileSync(join(a.out, '.env'), 'utf8')).values
  t.equal(env.DATABASE_URL, 'postgres://atrium:pw@db.internal:5432/atrium')
  t.equal(env.R2_ENDPOINT, 'http://minio:9000')
  t.equal(env.COMPOSE_PROFILES, 'redis,s3', 'the bundled PostgreSQL does not start')
  t.notOk('POSTGRES_PASSWORD' in env, 'and has no password made for it')
  t.ok(env.REDIS_PASSWORD && env.MINIO_ROOT_PASSWORD && env.MINIO_ATRIUM_PASSWORD, 'the bundled ones do')
})

t.test(
  'compose with its own PostgreSQL, Redis and S3: no bundled password is made or listed, and the real validator accepts the .env',
  { skip: needsCompose() },
  async (t) => {
    const a = answers(t, ['target: compose', 'config:', ...OWN_SERVICES])
    // Written as configure writes it, without the checks: the services it names are never reached.
    const r = configure(loadContext({ answersPath: a.path }), { dryRun: false })
    t.ok(r.written, r.plan.problems.join('; '))
    t.same(r.plan.generated, ['ENCRYPTION_MASTER_KEY'], 'nothing of the bundled services to back up')
    const envPath = join(a.out, '.env')
    const env = parseEnvFile(readFileSync(envPath, 'utf8')).values
    for (const name of ['POSTGRES_PASSWORD', 'REDIS_PASSWORD', 'MINIO_ROOT_PASSWORD', 'MINIO_ATRIUM_PASSWORD'])
      t.notOk(name in env, `no ${name}`)
    t.equal(env.COMPOSE_PROFILES, '')
    const args = composeArgs(parseAnswers(readFileSync(a.path, 'utf8')).answers, envPath)
    const v = await runTool('docker', [...args, 'config', '--quiet'])
    t.equal(v.code, 0, v.stderr)
  },
)

t.test(
  'helm: the written values pass helm lint --strict and render with the Secret the installer applies',
  { skip: needs('helm') },
  async (t) => {
    const a = answers(t, [
      'target: helm',
      'namespace: ai',
      'release: prod',
      // Air-gapped, services named by host name are admitted by the networks given for them.
      'servicesCidrs: [10.40.0.0/16]',
      'config:',
      '  PUBLIC_URL: https://atrium.example.com',
      '  PORT: "9090"',
      '  LOG_LEVEL: debug',
      '  RATE_LIMIT_MAX: "500"',
      ...OWN_SERVICES,
    ])
    written(a.path, { airGapped: true })
    const values = join(a.out, 'values.yaml')
    const lint = await runTool('helm', ['lint', '--strict', CHART, '-f', values, '--kube-version', KUBE_VERSION])
    t.equal(lint.code, 0, lint.stdout + lint.stderr)
    const rendered = await helmTemplate(t, [parse(readFileSync(values, 'utf8'))])
    t.equal(rendered.code, 0, rendered.stderr)
    t.match(find(rendered.manifests, 'ConfigMap')!.data, {
      LOG_LEVEL: 'debug',
      RATE_LIMIT_MAX: '500',
      PUBLIC_URL: 'https://atrium.example.com',
      AIR_GAPPED: 'true',
      PORT: '8080',
    })
    t.notOk(find(rendered.manifests, 'Secret'), "the installer's Secret is used, not one of the chart's")
    t.match(find(rendered.manifests, 'NetworkPolicy')!.spec.egress, [
      {},
      {},
      { to: [{ ipBlock: { cidr: '10.40.0.0/16' } }], ports: [{ port: 443 }, { port: 5432 }, { port: 6379 }] },
    ])
    const secret = parse(readFileSync(join(a.out, 'secret.yaml'), 'utf8'))
    t.equal(
      find(rendered.manifests, 'Deployment')!.spec.template.spec.containers[0].envFrom[1].secretRef.name,
      secret.metadata.name,
    )
    t.match(secret.stringData, {
      DATABASE_URL: 'postgres://atrium:pw@db.internal:5432/atrium',
      R2_SECRET_ACCESS_KEY: 's3-secret',
    })
    const schema = JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8'))
    for (const key of Object.keys(secret.stringData))
      t.ok(key in schema.properties.secrets.properties, `${key} is a secret setting the chart knows`)
  },
)

t.test('install: deploys, waits for /readyz, creates the first tenant once and shows its admin', async (t) => {
  const server = createServer((req, res) => res.writeHead(req.url === '/readyz' ? 200 : 404).end('{}'))
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise<void>((r) => server.close(() => r())))
  const port = (server.address() as AddressInfo).port
  const a = answers(t, [
    'target: compose',
    'tenantName: Example Corp',
    'adminEmail: admin@example.com',
    'config:',
    `  PORT: "${port}"`,
  ])
  const bin = tempDir(t)
  writeFileSync(
    join(bin, 'docker'),
    [
      '#!/bin/sh',
      `echo "docker $*" >> "${bin}/calls.log"`,
      'case "$*" in',
      '  *"volume inspect"*) exit 1;;',
      `  *create-tenant*) head -n 1 > "${bin}/stdin.log"; echo '{"tenantId":"0191b7e6-0000-7000-8000-000000000001","userId":"0191b7e6-0000-7000-8000-000000000002","apiKey":"svc_ci_test"}';;`,
      'esac',
    ].join('\n'),
  )
  chmodSync(join(bin, 'docker'), 0o755)
  const env = { PATH: `${bin}:${process.env.PATH}` }
  const r = await installer(['install', '--answers', a.path, '--yes', ...acceptUnmet], env)
  t.equal(r.code, 0, r.stderr)
  t.match(r.stdout, /Atrium is ready at http:\/\/localhost:\d+|Atrium is ready at http:\/\/127\.0\.0\.1:\d+/)
  t.match(r.stdout, /sign in {3}admin@example\.com\n {2}password {2}\S{24}\n {2}API key {3}svc_ci_test/)
  const password = /password {2}(\S{24})/.exec(r.stdout)![1]!
  const calls = readFileSync(join(bin, 'calls.log'), 'utf8')
  t.equal(readFileSync(join(bin, 'stdin.log'), 'utf8'), `${password}\n`, 'the password went on its standard input')
  t.notOk(calls.includes(password), 'and on no command line')
  t.match(
    calls,
    /docker volume create --driver local --opt type=none --opt o=bind --opt device=.*\/data\/postgres atrium-postgres/,
  )
  t.match(
    calls,
    /exec -T server node \/app\/server\/cli\.js create-tenant --name=Example Corp --plan=enterprise --email=admin@example\.com --password-stdin\n/,
  )
  t.ok(existsSync(join(a.dir, 'data', 'postgres')), 'the volume folders exist before the volumes are made')
  const state = JSON.parse(readFileSync(join(a.out, 'state.json'), 'utf8'))
  t.same(
    state,
    {
      firstAdmin: {
        tenantId: '0191b7e6-0000-7000-8000-000000000001',
        userId: '0191b7e6-0000-7000-8000-000000000002',
        email: 'admin@example.com',
      },
    },
    'ids only: no password or key kept',
  )

  // The upgrade replays the answers written, with the checks accepted the first time.
  const again = await installer(['install', '--answers', join(a.out, 'answers.yaml'), '--yes'], env)
  t.equal(again.code, 0, again.stderr)
  t.match(
    again.stdout,
    /The first tenant exists already \(0191b7e6-0000-7000-8000-000000000001, admin admin@example\.com\)/,
  )
  t.equal(
    readFileSync(join(bin, 'calls.log'), 'utf8').match(/create-tenant/g)?.length,
    1,
    'a re-run (an upgrade) makes no second tenant',
  )
})

t.test("install stops with the failing command's output, and a failed first tenant is not recorded", async (t) => {
  const server = createServer((req, res) => res.writeHead(200).end('{}'))
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise<void>((r) => server.close(() => r())))
  const port = (server.address() as AddressInfo).port
  const fakeDocker = (t: Test, behaviour: string) => {
    const bin = tempDir(t)
    writeFileSync(join(bin, 'docker'), `#!/bin/sh\ncase "$*" in\n${behaviour}\nesac\nexit 0\n`)
    chmodSync(join(bin, 'docker'), 0o755)
    return { PATH: `${bin}:${process.env.PATH}` }
  }
  const a = answers(t, ['target: compose', 'adminEmail: admin@example.com', 'config:', `  PORT: "${port}"`])
  const up = await installer(
    ['install', '--answers', a.path, '--yes', ...acceptUnmet],
    fakeDocker(t, '  *" up "*) echo "Error response from daemon: pull access denied" >&2; exit 18;;'),
  )
  t.equal(up.code, 1)
  t.match(up.stderr, /Deploy failed at: docker compose .* up --detach --wait/)
  t.match(up.stderr, /pull access denied/)
  const tenant = await installer(
    ['install', '--answers', a.path, '--yes', ...acceptUnmet, '--json'],
    fakeDocker(t, '  *create-tenant*) echo "error: the license allows 1 tenant" >&2; exit 1;;'),
  )
  t.equal(tenant.code, 1)
  const out = JSON.parse(tenant.stdout) // one object: the configuration and the deploy together
  t.match(out, {
    command: 'install',
    exitCode: 1,
    written: true,
    deployed: true,
    ready: true,
    stage: 'tenant',
    firstAdmin: null,
    error: /creating the first tenant failed:\nerror: the license allows 1 tenant/,
  })
  t.notOk(existsSync(join(a.out, 'state.json')), 'nothing recorded: the next run tries again')
})
