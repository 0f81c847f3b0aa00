// ESLint: the recommended JavaScript and typescript-eslint rules, Prettier owning the layout
// (eslint-config-prettier last), and the design's layering as import boundaries: installer/,
// config/ and licenses/ import nothing from server/ (shared code lives in common/); services, stores
// and server/domain/ import nothing from server/http/ or Fastify; http/ and platform/ import no
// module; a module uses another module's service, never its store. `npm run lint` runs this with
// --max-warnings=0, so every rule is an error or off.
import js from '@eslint/js'
import prettier from 'eslint-config-prettier/flat'
import { defineConfig, globalIgnores } from 'eslint/config'
import globals from 'globals'
import tseslint from 'typescript-eslint'

// Import boundaries. The core no-restricted-imports rule matches the import's text, so each regex
// below names the folder as a relative path that climbs out of the importing file's folder
// (`../../http/errors.js` from server/modules/<area>/). Flat config replaces a rule's options
// wholesale when two blocks match one file, so every file belongs to exactly one block below, and
// that block lists every boundary that applies to it.
/** An import that climbs out of the importing file's folder (`../`, as often as it takes) into one of `folders`. */
const climbingInto = (folders, message) => ({ regex: `^(\\.\\./)+(${folders.join('|')})/`, message })
const SERVER = climbingInto(
  ['server'],
  'installer, config and licenses import nothing from server/: move shared code to common/',
)
const COMMON_OUT = climbingInto(
  ['server', 'installer', 'config', 'licenses'],
  'common/ imports nothing from server/, installer/, config/ or licenses/: it is the code they share',
)
const HTTP_MESSAGE = 'services and stores import nothing from http/ or Fastify'
const NO_HTTP = [
  climbingInto(['http', 'server/http'], HTTP_MESSAGE),
  { regex: '^(fastify|@fastify/[^/]+)(/.*)?$', message: HTTP_MESSAGE },
]
// The client package is published on its own: it imports nothing of the repository around it, and
// its library (all but the CLI) nothing of Node's, so that it runs in browsers.
const CLIENT_OUT = climbingInto(
  ['server', 'installer', 'config', 'licenses', 'common'],
  'client/ is its own package: it imports nothing from the rest of the repository',
)
const CLIENT_NO_NODE = {
  regex: '^node:',
  message: 'the client library runs in browsers too: Node modules belong in client/src/cli/',
}
const MODULES = ['modules', 'server/modules']
const HTTP_NO_MODULES = climbingInto(MODULES, 'http does not import modules')
const PLATFORM_NO_MODULES = climbingInto(MODULES, 'platform imports no module')
// From server/modules/<area>/ (or deeper), a file of another module named `kind` (store.js, or a
// part's, such as files-store.js): ../<other>/store.js, or the long way round.
const otherModules = (kind, message) => ({
  regex: `^(\\.\\./[^./][^/]*/|(\\.\\./)+(server/)?modules/[^/]+/)([a-z0-9]+-)*${kind}(\\.[jt]s)?$`,
  message,
})
const OTHER_STORE = otherModules('store', "use the other module's service, never its store")
// A plugin is given its module's services built: server/services.ts, the composition root, builds
// every service, so a plugin that built another module's would hold a second one. Its type is
// what a plugin may name (typescript-eslint's rule: the core one cannot tell a type import).
const OTHER_SERVICE = {
  ...otherModules(
    'service',
    "a plugin never builds another module's service (server/services.ts builds them): import its type only",
  ),
  allowTypeImports: true,
}
// The files of a module that speak HTTP; everything else in a module is service, store or helper.
const MODULE_HTTP_FILES = [
  'server/modules/**/routes.ts',
  'server/modules/**/*-routes.ts',
  'server/modules/**/page.ts',
  'server/modules/**/plugin.ts',
  'server/modules/**/index.ts',
]

const boundaries = (name, files, patterns, ignores = []) => ({
  name: `atrium/layering/${name}`,
  files,
  ignores,
  rules: { 'no-restricted-imports': ['error', { patterns }] },
})

export default defineConfig([
  globalIgnores(['node_modules/', '**/dist/', 'coverage/', '.tap/', '.atrium/']),
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    name: 'atrium/node',
    languageOptions: { ecmaVersion: 2022, sourceType: 'module', globals: globals.node },
    // An eslint-disable comment that disables nothing is an error too (ESLint's default is a warning).
    linterOptions: { reportUnusedDisableDirectives: 'error' },
  },
  {
    // Page scripts served to the browser as classic scripts (the pages' CSP allows no inline script).
    name: 'atrium/browser-scripts',
    files: ['server/modules/*/*.js', 'server/http/*.js'],
    languageOptions: { sourceType: 'script', globals: globals.browser },
  },
  {
    name: 'atrium/rules',
    rules: {
      // The codebase's convention: `_` names what is deliberately unused (a callback's leading
      // parameters), and `const { dropped: _, ...rest } = row` leaves a field out of a copy.
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          ignoreRestSiblings: true,
        },
      ],
    },
  },
  boundaries('installer-config-licenses', ['installer/**', 'config/**', 'licenses/**'], [SERVER]),
  boundaries('common', ['common/**'], [COMMON_OUT]),
  boundaries('client-library', ['client/src/**'], [CLIENT_OUT, CLIENT_NO_NODE], ['client/src/cli/**']),
  boundaries('client-cli', ['client/src/cli/**'], [CLIENT_OUT]),
  boundaries('http', ['server/http/**'], [HTTP_NO_MODULES]),
  boundaries('platform', ['server/platform/**'], [PLATFORM_NO_MODULES]),
  boundaries('domain', ['server/domain/**'], NO_HTTP),
  boundaries('module-http', MODULE_HTTP_FILES, [OTHER_STORE]),
  {
    // Another rule than the blocks above, so it adds to module-http's boundaries instead of replacing them.
    name: 'atrium/layering/module-plugin',
    files: ['server/modules/**/plugin.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [OTHER_SERVICE] }] },
  },
  boundaries('module-core', ['server/modules/**'], [...NO_HTTP, OTHER_STORE], MODULE_HTTP_FILES),
  prettier,
])
