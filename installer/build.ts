// The installer as one file that runs where there is Node.js and nothing else: no node_modules, no
// registry, no network (an air-gapped site). `buildInstaller(out)` writes
//   out/installer/cli.js     the installer and every dependency it uses (Ink, React, the service
//                            clients, the Kubernetes client), one ES module
//   out/licenses/keys.js     the vendor's public keys, a file of its own as in the server's build
//   out/compose/             the Compose bundle it deploys (the chart is packaged by the kit)
//   out/config/, package.json  the files its modules read beside them (the env template, the version)
//   out/atrium-installer     a shell script: node installer/cli.js "$@"; the commands the
//                            installer prints start with its absolute path (core/invocation.ts)
// The air-gap kit (installer/kit.ts) carries it.
import { chmodSync, cpSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Plugin } from 'esbuild'
import { bundle, ROOT, writePackageJson } from '../common/bundle.js'

export const INSTALLER_ENTRY = 'installer/cli.js'

/**
 * Ink loads React DevTools only when DEV=true, through a dynamic import of its devtools module,
 * which imports react-devtools-core (not a dependency of ours). Left as an import, not bundled, it
 * costs nothing unless asked for, and then Ink says what to install.
 */
const inkDevtoolsLeftOut: Plugin = {
  name: 'ink-devtools-left-out',
  setup(b) {
    b.onResolve({ filter: /^\.\/devtools\.js$/ }, (args) =>
      args.importer.includes('/node_modules/ink/') ? { path: args.path, external: true } : undefined,
    )
  },
}

/** Dependency files that name their own location, bundled all the same (common/bundle.ts refuses any other). */
const HARMLESS = {
  'node_modules/yoga-layout/dist/binaries/yoga-wasm-base64-esm.js':
    "Ink's layout engine: its WebAssembly is inlined as base64, so its script's location is never used",
  'node_modules/ioredis/built/utils/index.js':
    "reads its package.json for the client's version, and says error-fetching-version when it is not there",
  'node_modules/ioredis/built/Command.js': 'trims its own frames from error stacks by their folder',
}

/** Writes the installer's files into `out` (made if missing); returns how many modules went into the one file. */
export async function buildInstaller(out: string): Promise<{ modules: number; bytes: number }> {
  mkdirSync(out, { recursive: true })
  const metafile = await bundle({
    entries: ['installer/cli.ts'],
    own: ['licenses/keys.ts'],
    outdir: out,
    harmless: HARMLESS,
    // The installer then prints its commands as the kit's script (core/invocation.ts), not as npm's.
    esbuild: { plugins: [inkDevtoolsLeftOut], define: { ATRIUM_BUNDLED_INSTALLER: 'true' } },
  })
  cpSync(join(ROOT, 'compose'), join(out, 'compose'), { recursive: true })
  cpSync(join(ROOT, 'config/atrium.env.example'), join(out, 'config/atrium.env.example'))
  writePackageJson(out)
  const script = join(out, 'atrium-installer')
  writeFileSync(
    script,
    `#!/bin/sh\n# The Atrium installer (Node.js 20.19 or later; nothing else to install).\nexec node "$(dirname "$0")/${INSTALLER_ENTRY}" "$@"\n`,
  )
  chmodSync(script, 0o755)
  const entry = Object.entries(metafile.outputs).find(([f]) => f.endsWith(INSTALLER_ENTRY))!
  return { modules: Object.keys(metafile.inputs).length, bytes: entry[1].bytes }
}
