// esbuild as the server's build (server/build.ts) and the installer's (installer/build.ts) both use
// it: our TypeScript and the dependencies' JavaScript in ES modules for Node 20, with the fixes
// bundling needs. Our modules keep finding the files beside them (their import.meta.url is
// rewritten to where each would sit as a file of its own), chosen modules of ours stay files of
// their own (the vendor's public keys, which a site-specific build replaces), and a dependency
// that finds files by its own location fails the build unless it is left external.
import { build, type BuildOptions, type Plugin } from 'esbuild'
import { readFileSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

export const ROOT = fileURLToPath(new URL('../', import.meta.url))

/** True when a module's source finds files by its own location, which bundling would move. */
export const locatesOwnFiles = (source: string) =>
  /\b__dirname\b|\b__filename\b|\bimport\.meta\.(url|dirname|filename)\b/.test(source)

/**
 * Our modules' import.meta.url as if each were still its own file (where its assets are copied).
 * Every output file sits one folder below the output's root (dist/server/, <kit>/installer/), so
 * the path is relative to there.
 */
const ownModuleUrls: Plugin = {
  name: 'own-module-urls',
  setup(b) {
    b.onLoad({ filter: /\.tsx?$/ }, (args) => {
      const path = relative(ROOT, args.path)
      if (path.startsWith('node_modules')) return undefined
      const loader = path.endsWith('.tsx') ? 'tsx' : 'ts'
      const source = readFileSync(args.path, 'utf8')
      if (!source.includes('import.meta.url')) return { contents: source, loader }
      const url = `new URL(${JSON.stringify(`../${path.replace(/\.tsx?$/, '.js')}`)}, import.meta.url).href`
      return { contents: source.replaceAll('import.meta.url', url), loader }
    })
  },
}

/** Imports of `own` (our modules kept as files) left as imports of their built file, relative to the output folder. */
const ownFiles = (own: readonly string[]): Plugin => ({
  name: 'own-files',
  setup(b) {
    b.onResolve({ filter: /^\.\.?\// }, (args) => {
      if (args.kind === 'entry-point') return undefined
      const path = relative(ROOT, join(args.resolveDir, args.path)).replace(/\.js$/, '.ts')
      return own.includes(path) ? { path: `../${path.replace(/\.ts$/, '.js')}`, external: true } : undefined
    })
  },
})

export interface BundleOptions {
  /** Entry points, relative to the repository root; `own` files are built too. */
  entries: readonly string[]
  /** Our modules kept as files of their own beside the bundle. */
  own?: readonly string[]
  outdir: string
  /** Dependencies loaded from node_modules at run time. */
  external?: readonly string[]
  /** Bundled dependency files that find their own location but need nothing there, each with why. */
  harmless?: Readonly<Record<string, string>>
  /** What else esbuild is told (splitting, source maps, plugins). */
  esbuild?: Pick<
    BuildOptions,
    'splitting' | 'chunkNames' | 'sourcemap' | 'sourcesContent' | 'plugins' | 'entryNames' | 'define'
  >
}

/** Builds the bundle; returns esbuild's metafile. Refuses a bundled dependency that finds its own files. */
export async function bundle(o: BundleOptions) {
  const own = o.own ?? []
  const result = await build({
    entryPoints: [...o.entries, ...own].map((f) => join(ROOT, f)),
    outbase: ROOT,
    outdir: o.outdir,
    bundle: true,
    external: [...(o.external ?? [])],
    format: 'esm',
    platform: 'node',
    target: 'node20',
    // CommonJS dependencies call require(); in an ES module it has to be made.
    banner: {
      js: "import { createRequire as __atriumCreateRequire } from 'node:module'; const require = __atriumCreateRequire(import.meta.url);",
    },
    // Whitespace and syntax only: names stay, so stack traces and logs stay readable.
    minifyWhitespace: true,
    minifySyntax: true,
    metafile: true,
    logLevel: 'warning',
    ...o.esbuild,
    plugins: [...(o.esbuild?.plugins ?? []), ownFiles(own), ownModuleUrls],
  })
  // Looked up from node_modules/ on: where node_modules is a link (worktrees sharing one), esbuild names its target.
  const misplaced = Object.keys(result.metafile.inputs).filter(
    (f) =>
      f.includes('node_modules/') &&
      !o.harmless?.[f.slice(f.indexOf('node_modules/'))] &&
      locatesOwnFiles(readFileSync(join(ROOT, f), 'utf8')),
  )
  if (misplaced.length)
    throw new Error(
      `these bundled dependency files find files by their own location; leave their packages external:\n${misplaced.join('\n')}`,
    )
  return result.metafile
}

/**
 * A package.json of the output's own: the version is read from it, and it makes the output ES
 * modules. Only that: the root's scripts would name sources and tools that are not there.
 */
export function writePackageJson(out: string): void {
  const { name, version, license } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Record<
    string,
    string
  >
  writeFileSync(
    join(out, 'package.json'),
    `${JSON.stringify({ name, version, private: true, license, type: 'module' }, null, 2)}\n`,
  )
}
