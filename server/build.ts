// `npm run build`: the server as JavaScript in dist/, bundled. The two entry points (the server,
// server/main.ts, and the admin CLI, server/cli.ts) each become one ES module holding our code and
// most of the dependencies' (esbuild; no type check: `npm run typecheck` does that), with the
// modules loaded on first use (AI SDK providers, the S3 client) split into chunks beside them.
// Loading one file instead of some 570 (resolving, reading and linking each) is a third of the
// start-up (docs/performance.md). Files read beside a module (migrations, pages, the version's
// package.json) are copied to where the module's source sits, and each of our modules' own
// import.meta.url is rewritten to point there. Production runs this, not tsx: without a
// compiler and its caches in process it idles some 75 MB smaller.
import { build, type Plugin } from 'esbuild'
import { cpSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { isMain } from '../common/is-main.js'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
export const OUT = join(ROOT, 'dist')
const FOLDERS = ['common', 'config', 'licenses', 'server']
const ENTRIES = ['server/main.ts', 'server/cli.ts']
/**
 * Our modules kept as files of their own beside the bundle, imported at run time: the vendor's
 * public license keys (licenses/keys.ts), the one file a site-specific or test image replaces to
 * trust other keys (test/helpers/engine.ts trustingImage).
 */
const OWN_FILES = ['licenses/keys.ts']
/** Not run by the server: the vendor's license-issuing tool stays out of what ships, and tests and this file are not code to run. */
const LEFT_OUT = (path: string) => path === 'licenses/issue.ts' || path === 'server/build.ts' || path.endsWith('.test.ts') || path.endsWith('.d.ts')

/**
 * Dependencies loaded from node_modules at run time rather than bundled, because they find files
 * beside their own modules (__dirname, import.meta.url): pino's and thread-stream's worker files,
 * @fastify/swagger's package.json and swagger-ui's static files, ioredis's package.json and its
 * error stacks, PGlite's WebAssembly. Bundled, those would be looked for in dist/server/.
 * `locatesOwnFiles` makes the build fail on any other dependency that does this.
 */
export const EXTERNAL = ['pino', 'thread-stream', '@fastify/swagger', '@fastify/swagger-ui', 'ioredis', '@electric-sql/pglite', '@electric-sql/pglite-socket']

/** True when a module's source finds files by its own location, which bundling would move. */
export const locatesOwnFiles = (source: string) => /\b__dirname\b|\b__filename\b|\bimport\.meta\.(url|dirname|filename)\b/.test(source)

function files(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(ROOT, join(e.parentPath, e.name)))
}

/**
 * Our modules' import.meta.url as if each were still its own file in dist/ (where its assets are
 * copied). Every output file sits in dist/server/, so the path is relative to there.
 */
const ownModuleUrls: Plugin = {
  name: 'own-module-urls',
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, (args) => {
      const path = relative(ROOT, args.path)
      if (path.startsWith('node_modules')) return undefined
      const source = readFileSync(args.path, 'utf8')
      if (!source.includes('import.meta.url')) return { contents: source, loader: 'ts' }
      const url = `new URL(${JSON.stringify(`../${path.replace(/\.ts$/, '.js')}`)}, import.meta.url).href`
      return { contents: source.replaceAll('import.meta.url', url), loader: 'ts' }
    })
  },
}

/** `external`: for tests of the check on dependencies that find their own files. */
/** Imports of OWN_FILES left as imports of their built file, relative to dist/server/ where every output sits. */
const ownFiles: Plugin = {
  name: 'own-files',
  setup(b) {
    b.onResolve({ filter: /^\.\.?\// }, (args) => {
      if (args.kind === 'entry-point') return undefined
      const path = relative(ROOT, join(args.resolveDir, args.path)).replace(/\.js$/, '.ts')
      return OWN_FILES.includes(path) ? { path: `../${path.replace(/\.ts$/, '.js')}`, external: true } : undefined
    })
  },
}

export async function buildServer(out = OUT, { external = EXTERNAL }: { external?: readonly string[] } = {}) {
  rmSync(out, { recursive: true, force: true })
  const all = FOLDERS.flatMap(files).filter((f) => !LEFT_OUT(f))
  const result = await build({
    entryPoints: [...ENTRIES, ...OWN_FILES].map((f) => join(ROOT, f)),
    outbase: ROOT,
    outdir: out,
    bundle: true,
    splitting: true,
    chunkNames: 'server/[name]-[hash]',
    external: [...external],
    format: 'esm',
    platform: 'node',
    target: 'node20',
    // CommonJS dependencies call require(); in an ES module it has to be made.
    banner: { js: "import { createRequire as __atriumCreateRequire } from 'node:module'; const require = __atriumCreateRequire(import.meta.url);" },
    // Whitespace and syntax only: names stay, so stack traces and logs stay readable.
    minifyWhitespace: true,
    minifySyntax: true,
    // For stack traces that point at the TypeScript: NODE_OPTIONS=--enable-source-maps (off by
    // default: it costs some 10 MB at rest). The sources stay out.
    sourcemap: 'linked',
    sourcesContent: false,
    metafile: true,
    plugins: [ownFiles, ownModuleUrls],
    logLevel: 'warning',
  })
  const misplaced = Object.keys(result.metafile.inputs).filter((f) => f.includes('node_modules/') && locatesOwnFiles(readFileSync(join(ROOT, f), 'utf8')))
  if (misplaced.length) throw new Error(`these bundled dependency files find files by their own location; add their packages to EXTERNAL in server/build.ts:\n${misplaced.join('\n')}`)
  const assets = all.filter((f) => !f.endsWith('.ts'))
  for (const f of assets) cpSync(join(ROOT, f), join(out, f))
  // A package.json of its own: the version is read from it, and it makes dist/ ES modules. Only
  // that: the root's scripts would name sources and tools that are not there.
  const { name, version, license } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Record<string, string>
  writeFileSync(join(out, 'package.json'), `${JSON.stringify({ name, version, private: true, license, type: 'module' }, null, 2)}\n`)
  const outputs = Object.keys(result.metafile.outputs).filter((f) => f.endsWith('.js'))
  return { inputs: Object.keys(result.metafile.inputs).length, outputs: outputs.length, assets: assets.length + 1 }
}

if (isMain(import.meta.url)) {
  const started = performance.now()
  const { inputs, outputs, assets } = await buildServer()
  console.log(`dist/: ${inputs} modules in ${outputs} files, ${assets} other files, in ${Math.round(performance.now() - started)} ms`)
}
