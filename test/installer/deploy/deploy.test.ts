// The deploy commands for each target, run in order through the command runner. Docker, kubectl
// and helm stand in as scripts on PATH that record how they were called (no container engine or
// cluster can run here); the commands themselves are the real ones.
import { chmodSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import t from 'tap'
import { DEFAULT_ANSWERS, type Answers } from '../../../installer/core/answers.js'
import { configFiles } from '../../../installer/core/context.js'
import {
  adminCommand,
  bundleMissing,
  chartFullname,
  deploy,
  deployCommands,
  waitReady,
} from '../../../installer/deploy/deploy.js'
import { run, type Runner } from '../../../installer/core/run.js'
import { siteVolumes } from '../../../installer/core/site.js'
import { tempDir } from '../../helpers/platform.js'

const bundles = { compose: '/pkg/compose', chart: '/pkg/charts/atrium' }
const line = (c: { file: string; args: string[] }) => `${c.file} ${c.args.join(' ')}`

t.test(
  'compose: validate, make the external volumes under the data path, run the migrations beside the running server, then up and wait; air-gapped loads the images and never pulls',
  async (t) => {
    const a: Answers = { ...DEFAULT_ANSWERS, outputDir: '/srv/atrium', dataPath: '/data/atrium', config: {} }
    const compose = 'docker compose --project-name atrium --env-file /srv/atrium/.env -f /pkg/compose/compose.yaml'
    t.same(deployCommands(a, configFiles(a), { bundles }).map(line), [
      `${compose} config --quiet`,
      ...siteVolumes(a).flatMap(({ name, folder }) => [
        `docker volume inspect ${name}`,
        `docker volume create --driver local --opt type=none --opt o=bind --opt device=/data/atrium/${folder} ${name}`,
      ]),
      `${compose} run --rm -T migrate`,
      `${compose} up --detach --wait --wait-timeout 600 --remove-orphans`,
    ])
    // A named site: its project and volumes carry its name, so it shares the engine with others.
    const blue: Answers = { ...a, site: 'blue', outputDir: '/srv/blue', dataPath: '/data/blue' }
    t.same(
      deployCommands(blue, configFiles(blue), { bundles })
        .map(line)
        .filter((c) => c.includes('blue')),
      [
        'docker compose --project-name blue --env-file /srv/blue/.env -f /pkg/compose/compose.yaml config --quiet',
        ...['postgres', 'redis', 'minio', 'data'].flatMap((folder) => [
          `docker volume inspect blue-${folder}`,
          `docker volume create --driver local --opt type=none --opt o=bind --opt device=/data/blue/${folder} blue-${folder}`,
        ]),
        'docker compose --project-name blue --env-file /srv/blue/.env -f /pkg/compose/compose.yaml run --rm -T migrate',
        'docker compose --project-name blue --env-file /srv/blue/.env -f /pkg/compose/compose.yaml up --detach --wait --wait-timeout 600 --remove-orphans',
      ],
    )
    const gapped = { ...a, mode: 'air-gapped' as const }
    const cmds = deployCommands(gapped, configFiles(gapped), { bundles, kit: '/media/atrium-images.tar' }).map(line)
    t.equal(cmds[0], 'docker load --input /media/atrium-images.tar')
    t.match(cmds.at(-2), /compose\.airgap\.yaml run --rm -T --pull never migrate$/, 'the migrations never pull either')
    t.match(
      cmds.at(-1),
      /-f \/pkg\/compose\/compose\.yaml -f \/pkg\/compose\/compose\.airgap\.yaml up --detach --wait .* --pull never$/,
    )
  },
)

t.test("the admin CLI runs inside the server: compose exec, or kubectl exec into the chart's Deployment", async (t) => {
  const a: Answers = { ...DEFAULT_ANSWERS, outputDir: '/srv/atrium', config: {} }
  t.equal(
    line(adminCommand(a, configFiles(a), ['create-tenant', '--name', 'X'], { bundles })),
    'docker compose --project-name atrium --env-file /srv/atrium/.env -f /pkg/compose/compose.yaml exec -T server node /app/server/cli.js create-tenant --name X',
  )
  const h: Answers = { ...a, target: 'helm', namespace: 'ai', release: 'prod' }
  t.equal(
    line(adminCommand(h, configFiles(h), ['migrate'])),
    'kubectl --namespace ai exec deploy/prod-atrium -c server -- node /app/server/cli.js migrate',
  )
  // A secret goes on standard input: kubectl passes it on only with -i; compose exec does unless told not to (-i=false).
  const fed = adminCommand(h, configFiles(h), ['create-tenant', '--password-stdin'], {}, 'pw-line\n')
  t.equal(
    line(fed),
    'kubectl --namespace ai exec -i deploy/prod-atrium -c server -- node /app/server/cli.js create-tenant --password-stdin',
  )
  t.equal(fed.input, 'pw-line\n')
  t.equal(adminCommand(a, configFiles(a), ['create-tenant'], { bundles }, 'pw-line\n').input, 'pw-line\n')
  t.equal(chartFullname('atrium'), 'atrium', 'a release named for the chart is not repeated, as in the chart')
  t.equal(chartFullname('my-atrium-prod'), 'my-atrium-prod')
})

t.test('helm: namespace, Secret, then upgrade --install --wait --atomic (the same command upgrades)', async (t) => {
  const a: Answers = {
    ...DEFAULT_ANSWERS,
    target: 'helm',
    outputDir: '/srv/atrium',
    namespace: 'ai',
    release: 'prod',
    config: {},
  }
  t.same(deployCommands(a, configFiles(a), { bundles, registry: 'registry.internal:5000' }).map(line), [
    'kubectl get namespace ai',
    'kubectl create namespace ai',
    'kubectl apply --namespace ai -f /srv/atrium/secret.yaml',
    'helm upgrade --install prod /pkg/charts/atrium --namespace ai -f /srv/atrium/values.yaml --set global.imageRegistry=registry.internal:5000 --wait --atomic --timeout 15m',
  ])
  // The registry the answers name (the interactive installer asks an air-gapped helm site); the flag wins.
  const asked: Answers = { ...a, mode: 'air-gapped', registry: 'registry.corp.example/atrium' }
  t.match(
    line(deployCommands(asked, configFiles(asked), { bundles }).at(-1)!),
    / --set global\.imageRegistry=registry\.corp\.example\/atrium /,
  )
  t.match(
    line(deployCommands(asked, configFiles(asked), { bundles, registry: 'other:5000' }).at(-1)!),
    / --set global\.imageRegistry=other:5000 /,
  )
})

/** Tools on PATH that append their arguments to calls.log and exit as told by environment files. */
function tools(t: Parameters<typeof tempDir>[0], behaviour: Record<string, string>) {
  const dir = tempDir(t)
  for (const name of ['docker', 'kubectl', 'helm']) {
    writeFileSync(
      join(dir, name),
      `#!/bin/sh\necho "${name} $*" >> "${dir}/calls.log"\n${behaviour[name] ?? 'exit 0'}\n`,
    )
    chmodSync(join(dir, name), 0o755)
  }
  const runner: Runner = (file, args, opts) => run(file, args, { ...opts, env: { PATH: dir } })
  const calls = () => readFileSync(join(dir, 'calls.log'), 'utf8').trim().split('\n')
  return { runner, calls }
}

t.test('an existing namespace is not created again; progress is reported for every step', async (t) => {
  const a: Answers = { ...DEFAULT_ANSWERS, target: 'helm', namespace: 'ai', release: 'prod', config: {} }
  const { runner, calls } = tools(t, {})
  const seen: string[] = []
  const r = await deploy(deployCommands(a, configFiles(a), { bundles }), runner, (s) =>
    seen.push(`${s.skipped ? 'skip' : s.result ? `done ${s.result.exitCode}` : 'start'}: ${s.command.title}`),
  )
  t.ok(r.ok)
  t.same(
    calls().map((c) => c.split(' ').slice(0, 2).join(' ')),
    ['kubectl get', 'kubectl apply', 'helm upgrade'],
  )
  t.match(seen, [
    'start: Look for the namespace ai',
    'done 0: Look for the namespace ai',
    'skip: Create the namespace ai',
    'start: Apply the Secret',
    'done 0: Apply the Secret',
    /start: Install or upgrade/,
    /done 0: Install or upgrade/,
  ])
})

t.test('a missing namespace is created; the first failing command stops the deploy', async (t) => {
  const a: Answers = { ...DEFAULT_ANSWERS, target: 'helm', namespace: 'ai', release: 'prod', config: {} }
  const { runner, calls } = tools(t, {
    kubectl: 'case "$1" in get) echo "namespaces \\"ai\\" not found" >&2; exit 1;; esac; exit 0',
    helm: 'echo "Error: UPGRADE FAILED: context deadline exceeded" >&2; exit 1',
  })
  const r = await deploy(deployCommands(a, configFiles(a), { bundles }), runner)
  t.notOk(r.ok)
  t.same(
    calls().map((c) => c.split(' ').slice(0, 2).join(' ')),
    ['kubectl get', 'kubectl create', 'kubectl apply', 'helm upgrade'],
  )
  t.match(r.steps.at(-1)!.result, { exitCode: 1, stderr: /UPGRADE FAILED/ })
  const compose = tools(t, {
    docker: 'case "$*" in *config*) echo "services.server.image must be a string" >&2; exit 15;; esac',
  })
  const c = await deploy(deployCommands(DEFAULT_ANSWERS, configFiles(DEFAULT_ANSWERS), { bundles }), compose.runner)
  t.notOk(c.ok)
  t.equal(compose.calls().length, 1, 'nothing runs after a failed validation')
})

t.test('readiness is polled until /readyz answers 200, or the time runs out with the last answer', async (t) => {
  let calls = 0
  const server = createServer((req, res) => {
    calls++
    res.writeHead(req.url === '/readyz' && calls >= 3 ? 200 : 503).end()
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  t.same(await waitReady(url, { intervalMs: 20, timeoutMs: 5000 }), { ready: true, last: 'HTTP 200' })
  t.equal(calls, 3)
  await new Promise((r) => server.close(r)) // nothing listens there any more
  t.same(await waitReady(url, { intervalMs: 20, timeoutMs: 100 }), { ready: false, last: 'ECONNREFUSED' })
})

t.test('a package without the bundle says where it looked', async (t) => {
  t.equal(bundleMissing(DEFAULT_ANSWERS, { bundles }), '/pkg/compose/compose.yaml')
  t.equal(bundleMissing({ ...DEFAULT_ANSWERS, target: 'helm' }, { bundles }), '/pkg/charts/atrium/Chart.yaml')
})

t.test('the volume commands follow the folders the configuration uses', async (t) => {
  const a: Answers = { ...DEFAULT_ANSWERS, outputDir: '/srv/atrium', dataPath: '/data/atrium', config: {} }
  const volumes = (folders?: string[]) =>
    deployCommands(a, configFiles(a), { bundles, folders })
      .map(line)
      .filter((c) => c.startsWith('docker volume inspect'))
  t.same(volumes(['data']), ['docker volume inspect atrium-data'], 'its own PostgreSQL, Redis and S3: data alone')
  t.same(volumes(['data', 'postgres']), ['docker volume inspect atrium-postgres', 'docker volume inspect atrium-data'])
  t.equal(volumes().length, 4, 'not known yet (a dry run): every one')
})
