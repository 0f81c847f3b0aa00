// The bundled build (what `npm start` and the image run): it serves the API as the sources do, on
// the test's services when configured (the S3 client then comes from its own chunk), and the build
// refuses to bundle a dependency that finds files by its own location.
import { spawn } from 'node:child_process'
import { readdirSync, readFileSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { NODE_ENVIRONMENT, NODE_FLAGS } from '../../config/bundles.js'
import { TRUSTED_KEYS } from '../../licenses/keys.js'
import { buildServer, EXTERNAL, locatesOwnFiles } from '../../server/build.js'
import { finished, ROOT } from '../helpers/cli.js'
import { tempDir, testEnv } from '../helpers/platform.js'

t.setTimeout(300_000)

t.test('a module that finds files by its own location is recognised, other code is not', async (t) => {
  t.ok(locatesOwnFiles("const worker = join(__dirname, 'worker.js')"))
  t.ok(locatesOwnFiles('readFileSync(__filename)'))
  t.ok(locatesOwnFiles("new URL('./pglite.wasm', import.meta.url)"))
  t.ok(locatesOwnFiles('const here = import.meta.dirname'))
  t.notOk(locatesOwnFiles('const my__dirname = 1; export const url = meta.url'))
})

t.test('the build refuses to bundle such a dependency, naming its files', async (t) => {
  const out = tempDir(t)
  await t.rejects(
    buildServer(out, { external: EXTERNAL.filter((p) => p !== 'ioredis') }),
    /leave their packages external[\s\S]*node_modules\/ioredis\//,
  )
})

t.test('the bundled server serves the API, its pages and its document; the bundled CLI makes a tenant', async (t) => {
  const dist = tempDir(t)
  const built = await buildServer(dist)
  t.ok(built.inputs > 500, `${built.inputs} modules bundled`)
  const files = readdirSync(join(dist, 'server')).filter((f) => f.endsWith('.js'))
  t.ok(files.includes('main.js') && files.includes('cli.js'))
  t.ok(
    files.some((f) => f.startsWith('minio-')),
    'the S3 client is a chunk of its own, loaded on first use',
  )
  // The trusted license keys stay a file of their own, which an image layer may replace.
  const shipped = TRUSTED_KEYS[0]!.publicKeyJwk.x
  t.match(readFileSync(join(dist, 'licenses/keys.js'), 'utf8'), shipped)
  t.notOk(
    files.some((f) => readFileSync(join(dist, 'server', f), 'utf8').includes(shipped)),
    'no bundle holds a copy of the keys',
  )
  symlinkSync(join(ROOT, 'node_modules'), join(dist, 'node_modules'))

  const env: Record<string, string> = { ...(await testEnv(t)), ...NODE_ENVIRONMENT, PATH: process.env.PATH ?? '' }
  const node = (script: string, args: string[] = []) =>
    spawn(process.execPath, [...NODE_FLAGS, join(dist, 'server', script), ...args], {
      cwd: dist,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
  const created = await finished(node('cli.js', ['create-tenant', '--name', 'Bundled']))
  t.equal(created.code, 0, created.stderr)
  const { apiKey } = JSON.parse(created.stdout) as { apiKey: string }

  const server = node('main.js')
  const done = finished(server)
  t.teardown(async () => {
    server.kill('SIGKILL')
    await done
  })
  let stderr = ''
  const base = await new Promise<string>((resolve, reject) => {
    server.stderr!.on('data', (c: Buffer) => {
      stderr += c.toString()
      const m = /Atrium is listening on (http:\/\/[\d.]+:\d+)/.exec(stderr)
      if (m) resolve(m[1]!)
    })
    server.on('exit', () => reject(new Error(`the bundled server exited:\n${stderr}`)))
  })

  const ready = (await (await fetch(`${base}/readyz`)).json()) as {
    data: { status: string; checks: { blobs: { mode: string } } }
  }
  t.equal(ready.data.status, 'ready')
  t.equal(
    ready.data.checks.blobs.mode,
    env.R2_ENDPOINT ? 's3' : 'local',
    'the store configured, S3 through the chunk loaded on first use',
  )

  const css = await fetch(`${base}/pages/atrium.css`)
  t.equal(css.status, 200, 'an asset read beside its module')
  t.match(await css.text(), /\S/)
  const doc = (await (await fetch(`${base}/docs/json`)).json()) as { paths: Record<string, unknown> }
  t.ok(Object.keys(doc.paths).length > 50, 'the OpenAPI document')
  const ui = await fetch(`${base}/docs/`)
  t.equal(ui.status, 200, "swagger-ui's static files, from its package")

  const auth = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }
  const posted = await fetch(`${base}/api/v1/projects`, {
    method: 'POST',
    headers: auth,
    body: JSON.stringify({ name: 'From the bundle' }),
  })
  t.equal(posted.status, 201)
  const { data } = (await posted.json()) as { data: { id: string } }
  const got = await fetch(`${base}/api/v1/projects/${data.id}`, { headers: auth })
  t.equal(got.status, 200)
  t.match(await got.json(), { data: { id: data.id, name: 'From the bundle' } })
  const bad = await fetch(`${base}/api/v1/projects`, {
    method: 'POST',
    headers: auth,
    body: JSON.stringify({ name: 7 }),
  })
  t.equal(bad.status, 400)
  t.match(await bad.json(), { error: { code: 'VALIDATION_ERROR' } })
})
