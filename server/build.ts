// `npm run build`: the server (and the code it runs: common/, config/, licenses/) as JavaScript in
// dist/, the folders kept as they are so that files read beside a module (migrations, pages,
// license keys) are found where the module looks. Each file is transpiled on its own (esbuild, no
// bundling, no type check: `npm run typecheck` does that). Production runs this, not tsx: the
// server starts faster and idles some 75 MB smaller without a compiler and its caches in process.
import { build } from 'esbuild'
import { cpSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { isMain } from '../common/is-main.js'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
export const OUT = join(ROOT, 'dist')
const FOLDERS = ['common', 'config', 'licenses', 'server']
/** Not run by the server: the vendor's license-issuing tool stays out of what ships, and tests and this file are not code to run. */
const LEFT_OUT = (path: string) => path === 'licenses/issue.ts' || path === 'server/build.ts' || path.endsWith('.test.ts') || path.endsWith('.d.ts')

function files(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(ROOT, join(e.parentPath, e.name)))
}

export async function buildServer(out = OUT) {
  rmSync(out, { recursive: true, force: true })
  const all = FOLDERS.flatMap(files).filter((f) => !LEFT_OUT(f))
  const code = all.filter((f) => f.endsWith('.ts'))
  await build({
    entryPoints: code.map((f) => join(ROOT, f)),
    outbase: ROOT,
    outdir: out,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    // For stack traces that point at the TypeScript: NODE_OPTIONS=--enable-source-maps (off by
    // default: it costs some 10 MB at rest). The sources stay out.
    sourcemap: 'linked',
    sourcesContent: false,
    logLevel: 'warning',
  })
  const assets = all.filter((f) => !f.endsWith('.ts'))
  for (const f of assets) cpSync(join(ROOT, f), join(out, f))
  // A package.json of its own: the version is read from it, and it makes dist/ ES modules. Only
  // that: the root's scripts would name sources and tools that are not there.
  const { name, version, license } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Record<string, string>
  writeFileSync(join(out, 'package.json'), `${JSON.stringify({ name, version, private: true, license, type: 'module' }, null, 2)}\n`)
  return { modules: code.length, assets: assets.length + 1 }
}

if (isMain(import.meta.url)) {
  const started = performance.now()
  const { modules, assets } = await buildServer()
  console.log(`dist/: ${modules} modules, ${assets} other files, in ${Math.round(performance.now() - started)} ms`)
}
