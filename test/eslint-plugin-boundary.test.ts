// eslint.config.js's boundary for a module's plugin.ts: server/services.ts builds every service, so a plugin
// never imports another module's service to build one; it may name the service's type.
import { fileURLToPath } from 'node:url'
import { ESLint } from 'eslint'
import t from 'tap'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
const eslint = new ESLint({ cwd: ROOT })
const RULES = new Set(['no-restricted-imports', '@typescript-eslint/no-restricted-imports'])

/** The import-restriction messages ESLint gives `code` as if it were the file at `path`. */
async function refusals(path: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: `${ROOT}${path}` })
  return result!.messages.filter((m) => RULES.has(m.ruleId ?? '')).map((m) => m.message)
}

const BUILDS = /a plugin never builds another module's service \(server\/services\.ts builds them\)/

const refused: [string, string, RegExp][] = [
  ['server/modules/cli-auth/plugin.ts', "import { authService } from '../sign-in/service.js'", BUILDS],
  ['server/modules/chat/plugin.ts', "import { projectFilesService } from '../projects/files-service.js'", BUILDS],
  ['server/modules/cli-auth/plugin.ts', "import { authService } from '../../modules/sign-in/service.js'", BUILDS],
  // Refused once: the store's boundary and the service's do not both speak.
  ['server/modules/cli-auth/plugin.ts', "import { findUser } from '../users/store.js'", /never its store/],
]

for (const [path, code, message] of refused) {
  t.test(`${path}: ${code} is refused`, async (t) => {
    const got = await refusals(path, `${code}\nexport const used = [${code.match(/\{ (\w+)/)![1]}]\n`)
    t.equal(got.length, 1, got.join('; '))
    t.match(got[0], message)
  })
}

// [file, import, what it shows]: a plugin names another module's service type and uses its own module's service;
// the boundary is the plugin's alone.
const allowed: [string, string, string][] = [
  ['server/modules/cli-auth/plugin.ts', "import type { AuthService } from '../sign-in/service.js'", 'a type'],
  ['server/modules/cli-auth/plugin.ts', "import { type AuthService } from '../sign-in/service.js'", 'an inline type'],
  ['server/modules/cli-auth/plugin.ts', "import { cliAuthService } from './service.js'", "the module's own service"],
  ['server/modules/team/service.ts', "import { createTenant } from '../tenants/service.js'", 'a service uses another'],
  ['server/modules/team/routes.ts', "import { createTenant } from '../tenants/service.js'", 'routes use another'],
]

t.test('the allowed imports are not refused', async (t) => {
  for (const [path, code, what] of allowed) {
    t.same(await refusals(path, `${code}\nexport const used = [${code.match(/\{ (?:type )?(\w+)/)![1]}]\n`), [], what)
  }
})
