// The image recipe, checked statically (test/image.test.ts builds and runs it): pinned base, production
// dependencies only, non-root, read-only friendly, a health check, and nothing copied in that the
// server does not need. Then the build it copies is run as the image would run it.
import { existsSync, readdirSync, readFileSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import {
  CONTAINER_CLI,
  CONTAINER_ENTRYPOINT,
  CONTAINER_FIXED,
  NODE_ENVIRONMENT,
  NODE_FLAGS,
} from '../config/bundles.js'
import { buildServer } from '../server/build.js'
import { ROOT, finished } from './helpers/cli.js'
import { tempDir } from './helpers/platform.js'
import { spawn } from 'node:child_process'

const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
/** Instructions with continuation lines joined and comments dropped. */
const instructions = text
  .replace(/\\\n/g, ' ')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#'))
const args = Object.fromEntries(
  instructions
    .filter((i) => i.startsWith('ARG ') && i.includes('='))
    .map((i) => i.slice(4).split('=') as [string, string]),
)
const stages = instructions.reduce<string[][]>(
  (acc, i) => (i.startsWith('FROM ') ? [...acc, [i]] : (acc.at(-1)?.push(i), acc)),
  [],
)
const runtime = stages.at(-1)!
const copies = instructions.filter((i) => i.startsWith('COPY ') && !i.includes('--from='))

t.test('every base image is pinned to a release, never latest', async (t) => {
  // A stage built on an earlier one names no image of its own.
  const named = new Set(stages.map((s) => s[0]!.split(/\s+/)[3]).filter(Boolean))
  const froms = stages
    .map((s) => s[0]!.split(/\s+/)[1]!.replace(/\$\{(\w+)\}/g, (_, a: string) => args[a] ?? ''))
    .filter((f) => !named.has(f))
  t.ok(stages.length >= 2, 'multi-stage')
  for (const image of froms) t.match(image, /^[\w.-]+\/[\w./-]+:\d+\.\d+\.\d+[\w.-]*$/, `${image} has an exact version`)
  t.match(args.NODE_IMAGE, /node:(2[2-9]|[3-9]\d)\./, 'a current Node LTS')
})

t.test('the runtime stage installs production dependencies only and runs as a non-root user', async (t) => {
  // Our dependency fixes (patches/) are applied; the server is compiled, then the development dependencies go.
  const deps = instructions.find((i) => i.startsWith('RUN npm ci'))!
  t.match(deps, /npm ci .*&& npx --no-install patch-package --error-on-fail/)
  t.ok(
    instructions.some((i) => /^RUN npm run build\s+&& chmod -R a\+rX dist$/.test(i)),
    'built, readable by the non-root user whatever the modes of the context',
  )
  t.ok(
    instructions.some((i) => /^RUN npm prune --omit=dev\b/.test(i)),
    'the development dependencies pruned',
  )
  t.same(
    runtime.filter((i) => i.startsWith('COPY ')),
    ['COPY --from=prod-deps /app/node_modules ./node_modules', 'COPY --from=build /app/dist ./'],
    'the runtime holds the compiled server and the production dependencies, no TypeScript',
  )
  t.ok(instructions.includes('COPY patches ./patches'), 'the patches are in the build')
  t.notOk(
    instructions.some((i) => i.startsWith('ADD ')),
    'COPY only: ADD can fetch from the network',
  )
  const user = runtime.filter((i) => i.startsWith('USER ')).at(-1)
  t.match(user, /^USER 10001:10001$/, 'numeric, so Kubernetes runAsNonRoot can verify it')
  const lastRun = runtime.map((i, n) => (i.startsWith('RUN ') ? n : -1)).reduce((a, b) => Math.max(a, b))
  t.ok(runtime.indexOf(user!) > lastRun, 'nothing runs as root after USER')
})

t.test('read-only root filesystem friendly: data in a volume, settings fixed as the bundles fix them', async (t) => {
  t.ok(runtime.includes(`VOLUME ["${CONTAINER_FIXED.DATA_DIR}"]`))
  const env = runtime.find((i) => i.startsWith('ENV '))!
  for (const name of ['NODE_ENV', 'PORT', 'HOST', 'DATA_DIR'] as const) t.match(env, `${name}=${CONTAINER_FIXED[name]}`)
  t.ok(runtime.includes(`EXPOSE ${CONTAINER_FIXED.PORT}`))
})

t.test('a health check asks /readyz, and the entrypoint is the admin CLI in exec form', async (t) => {
  const health = runtime.find((i) => i.startsWith('HEALTHCHECK '))
  t.match(health, /CMD \["node", "-e", ".*\/readyz/)
  const entry = runtime.find((i) => i.startsWith('ENTRYPOINT '))!
  t.same(
    JSON.parse(entry.slice('ENTRYPOINT '.length)),
    CONTAINER_ENTRYPOINT,
    "the admin CLI the installer and the chart's notes run in the container, with the server's Node flags",
  )
  t.same(
    CONTAINER_ENTRYPOINT.filter((a) => !NODE_FLAGS.includes(a)),
    CONTAINER_CLI,
  )
  t.same(JSON.parse(runtime.find((i) => i.startsWith('CMD '))!.slice(4)), ['serve'])
})

t.test('npm start runs the compiled server with the Node flags and environment the image runs it with', async (t) => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }
  const env = Object.entries(NODE_ENVIRONMENT).map(([k, v]) => `${k}=${v}`)
  t.equal(pkg.scripts.start, [...env, 'node', ...NODE_FLAGS, 'dist/server/main.js'].join(' '))
  const image = runtime.find((i) => i.startsWith('ENV '))!
  for (const e of env) t.match(image, e, `the image sets ${e}`)
})

t.test(".dockerignore lets in exactly what is copied, and leaves the vendor's license tool out", async (t) => {
  const ignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
    .split('\n')
    .filter((l) => l && !l.startsWith('#'))
  t.equal(ignore[0], '*', 'everything is out unless let in')
  const allowed = ignore.filter((l) => l.startsWith('!')).map((l) => l.slice(1).replace(/\/$/, ''))
  const sources = copies.flatMap((c) => c.split(/\s+/).slice(1, -1)).filter((s) => !s.startsWith('--'))
  t.same([...new Set(sources)].sort(), allowed.sort())
  for (const s of sources) t.ok(existsSync(join(ROOT, s)), `${s} exists`)
  t.ok(ignore.includes('licenses/issue.ts'))
})

t.test('the build alone (what the image copies to /app) runs the admin CLI and migrates a database', async (t) => {
  const app = tempDir(t)
  await buildServer(app)
  const shipped = readdirSync(app, { recursive: true, encoding: 'utf8' })
  t.same(
    shipped.filter((f) => f.endsWith('.ts')),
    [],
    'JavaScript only',
  )
  t.notOk(shipped.includes('licenses/issue.js'), "the vendor's license tool stays out")
  t.ok(shipped.includes('server/platform/migrations/0001_foundation.sql'), 'files read beside the modules are there')
  symlinkSync(join(ROOT, 'node_modules'), join(app, 'node_modules'))
  const data = tempDir(t)
  const run = (args: string[]) =>
    finished(
      spawn(process.execPath, [join(app, 'server/cli.js'), ...args], {
        cwd: app,
        env: { PATH: process.env.PATH ?? '', DATA_DIR: data },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    )
  const help = await run(['help'])
  t.equal(help.code, 0, help.stderr)
  t.match(help.stdout, /wait-for-migrations/)
  t.match(
    help.stdout,
    `Usage: node ${join(app, 'server/cli.js')} <command>`,
    'the way to run it there, not an npm script the build does not have',
  )
  t.notOk(
    JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')).scripts,
    'no npm scripts that name sources or tools',
  )
  const migrated = await run(['migrate'])
  t.equal(migrated.code, 0, migrated.stderr)
  t.ok(JSON.parse(migrated.stdout).applied.length >= 1)
})
