// The package as a user gets it: `npm pack` lists only the built library, the CLI, the README and
// package.json; the tarball installs into an empty folder; the one-file example and the installed
// `atrium` binary run against a real server.
import { execFile } from 'node:child_process'
import { copyFileSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { testApp } from '../helpers/app.js'
import { ROOT } from '../helpers/cli.js'
import { freePort, tempDir } from '../helpers/platform.js'

const run = promisify(execFile)
const CLIENT = join(ROOT, 'client')
const npm = (args: string[], cwd: string) =>
  run('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd,
    maxBuffer: 16 << 20,
    env: { ...process.env, npm_config_update_notifier: 'false' },
  })

t.test('the package packs what it should, installs from its tarball, and its example and binary run', async (t) => {
  const packed = JSON.parse((await npm(['pack', '--dry-run', '--json'], CLIENT)).stdout)[0] as {
    files: { path: string }[]
    name: string
  }
  const files = packed.files.map((f) => f.path).sort()
  t.equal(packed.name, '@atrium/client')
  t.same(
    files.filter((f) => !/^dist\/(cli\/)?[a-z-]+\.(js|d\.ts)$/.test(f)),
    ['README.md', 'package.json'],
    'besides dist/ only README.md and package.json',
  )
  for (const f of ['dist/index.js', 'dist/index.d.ts', 'dist/cli/main.js', 'dist/openapi.d.ts'])
    t.ok(files.includes(f), f)
  t.notOk(
    files.some((f) => /\.map$|\.ts$(?<!\.d\.ts)|scripts\/|examples\//.test(f)),
    'no sources, maps, scripts or examples',
  )

  // The library (all but the CLI) runs in browsers: nothing of Node's in what it ships.
  for (const f of readdirSync(join(CLIENT, 'dist')).filter((f) => f.endsWith('.js'))) {
    t.notMatch(
      readFileSync(join(CLIENT, 'dist', f), 'utf8'),
      /from ['"]node:|require\(|\bprocess\.|\bBuffer\b/,
      `dist/${f} uses only what browsers have`,
    )
  }

  const out = tempDir(t, 'atrium-pack-')
  // Built once, by the dry run's prepack.
  const tarball = JSON.parse(
    (await npm(['pack', '--json', '--ignore-scripts', '--pack-destination', out], CLIENT)).stdout,
  )[0].filename as string
  const app = tempDir(t, 'atrium-app-')
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'an-application', private: true, type: 'module' }))
  // Its one dependency comes from npm's cache (npm ci has just put it there) or the registry.
  await npm(['install', '--prefer-offline', join(out, tarball)], app)
  copyFileSync(join(CLIENT, 'examples', 'quickstart.mjs'), join(app, 'quickstart.mjs'))

  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const h = await testApp(t, { PUBLIC_URL: base })
  await h.app.listen({ host: '127.0.0.1', port })
  const tn = await h.tenant('pro')
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    ATRIUM_URL: base,
    ATRIUM_API_KEY: tn.apiKey,
    ATRIUM_CONFIG_DIR: tempDir(t, 'atrium-cfg-'),
  }

  const example = await run(process.execPath, ['quickstart.mjs'], { cwd: app, env })
  t.match(JSON.parse(example.stdout), { projects: ['Quick start'], files: ['README.md'] })

  const listed = await run(join(app, 'node_modules', '.bin', 'atrium'), ['projects', 'list', '--json'], {
    cwd: app,
    env,
  })
  t.same(
    JSON.parse(listed.stdout).map((p: { name: string }) => p.name),
    ['Quick start'],
    'the installed binary sees the project the example made',
  )
  const version = await run(join(app, 'node_modules', '.bin', 'atrium'), ['--help'], { cwd: app, env })
  t.match(version.stdout, /^atrium 0\.1\.0: the Atrium command-line client/)
})
