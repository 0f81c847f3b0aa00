// `npm run build`: the server as JavaScript in dist/, bundled. The two entry points (the server,
// server/main.ts, and the admin CLI, server/cli.ts) each become one ES module holding our code and
// most of the dependencies' (esbuild; no type check: `npm run typecheck` does that), with the
// modules loaded on first use (AI SDK providers, the S3 client) split into chunks beside them.
// Loading one file instead of some 570 (resolving, reading and linking each) is a third of the
// start-up (docs/performance.md). Files read beside a module (migrations, pages, the version's
// package.json) are copied to where the module's source sits, and each of our modules' own
// import.meta.url is rewritten to point there. Production runs this, not tsx: without a
// compiler and its caches in process it idles some 75 MB smaller.
import { cpSync, readdirSync, rmSync } from 'node:fs'
import { join, relative } from 'node:path'
import { bundle, ROOT, writePackageJson } from '../common/bundle.js'
import { isMain } from '../common/is-main.js'

export { locatesOwnFiles } from '../common/bundle.js'
export const OUT = join(ROOT, 'dist')
const FOLDERS = ['common', 'config', 'licenses', 'server']
const ENTRIES = ['server/main.ts', 'server/cli.ts']
/**
 * Our modules kept as files of their own beside the bundle, imported at run time: the vendor's
 * public license keys (licenses/keys.ts), the one file a site-specific or test image replaces to
 * trust other keys (test/helpers/engine.ts trustingImage).
 */
const OWN_FILES = ['licenses/keys.ts']
/**
 * Not run by the server: the vendor's tools, the installer's build and this file stay out of what ships, and tests are
 * not code to run.
 */
const LEFT_OUT = (path: string) =>
  ['licenses/issue.ts', 'server/build.ts', 'common/bundle.ts'].includes(path) ||
  path.endsWith('.test.ts') ||
  path.endsWith('.d.ts')

/**
 * Dependencies loaded from node_modules at run time rather than bundled, because they find files
 * beside their own modules (__dirname, import.meta.url): pino's and thread-stream's worker files,
 * @fastify/swagger's package.json and swagger-ui's static files, ioredis's package.json and its
 * error stacks, PGlite's WebAssembly. Bundled, those would be looked for in dist/server/.
 * The build fails on any other dependency that does this (common/bundle.ts).
 */
export const EXTERNAL = [
  'pino',
  'thread-stream',
  '@fastify/swagger',
  '@fastify/swagger-ui',
  'ioredis',
  '@electric-sql/pglite',
  '@electric-sql/pglite-socket',
]

function files(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(ROOT, join(e.parentPath, e.name)))
}

export async function buildServer(out = OUT, { external = EXTERNAL }: { external?: readonly string[] } = {}) {
  rmSync(out, { recursive: true, force: true })
  const all = FOLDERS.flatMap(files).filter((f) => !LEFT_OUT(f))
  const metafile = await bundle({
    entries: ENTRIES,
    own: OWN_FILES,
    outdir: out,
    external,
    // For stack traces that point at the TypeScript: NODE_OPTIONS=--enable-source-maps (off by
    // default: it costs some 10 MB at rest). The sources stay out.
    esbuild: { splitting: true, chunkNames: 'server/[name]-[hash]', sourcemap: 'linked', sourcesContent: false },
  })
  const assets = all.filter((f) => !f.endsWith('.ts'))
  for (const f of assets) cpSync(join(ROOT, f), join(out, f))
  writePackageJson(out)
  const outputs = Object.keys(metafile.outputs).filter((f) => f.endsWith('.js'))
  return { inputs: Object.keys(metafile.inputs).length, outputs: outputs.length, assets: assets.length + 1 }
}

if (isMain(import.meta.url)) {
  const started = performance.now()
  const { inputs, outputs, assets } = await buildServer()
  console.log(
    `dist/: ${inputs} modules in ${outputs} files, ${assets} other files, in ${Math.round(performance.now() - started)} ms`,
  )
}
