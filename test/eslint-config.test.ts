// The import rules of eslint.config.js, each shown refusing the import it is about (and letting
// the allowed one through), so that a change to the config cannot quietly drop a layer's rule.
import { fileURLToPath } from 'node:url'
import { ESLint } from 'eslint'
import t from 'tap'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
const eslint = new ESLint({ cwd: ROOT })

/** The no-restricted-imports messages ESLint gives `code` as if it were the file at `path`. */
async function refusals(path: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: `${ROOT}${path}` })
  return result!.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message)
}

const cases: [string, string, RegExp][] = [
  [
    'installer/core/x.ts',
    "import { VERSION } from '../../server/version.js'",
    /installer, config and licenses import nothing from server\//,
  ],
  [
    'config/x.ts',
    "import { db } from '../server/platform/db.js'",
    /installer, config and licenses import nothing from server\//,
  ],
  [
    'licenses/x.ts',
    "import { PLANS } from '../server/domain/plans.js'",
    /installer, config and licenses import nothing from server\//,
  ],
  [
    'server/modules/projects/service.ts',
    "import type { FastifyRequest } from 'fastify'",
    /services and stores import nothing from http\/ or Fastify/,
  ],
  [
    'server/modules/projects/store.ts',
    "import { ok } from '../../http/envelope.js'",
    /services and stores import nothing from http\/ or Fastify/,
  ],
  [
    'server/domain/x.ts',
    "import { actorOf } from '../http/actor.js'",
    /services and stores import nothing from http\/ or Fastify/,
  ],
  [
    'server/http/x.ts',
    "import { projectsService } from '../modules/projects/service.js'",
    /http does not import modules/,
  ],
  ['server/platform/x.ts', "import { audit } from '../modules/audit/service.js'", /platform imports no module/],
  ['server/modules/team/service.ts', "import { listMembers } from '../users/store.js'", /never its store/],
]

for (const [path, code, message] of cases) {
  t.test(`${path}: ${code} is refused`, async (t) => {
    const got = await refusals(path, `${code}\nexport const used = [${code.match(/\{ (?:type )?(\w+)/)![1]}]\n`)
    t.equal(got.length, 1, got.join('; '))
    t.match(got[0], message)
  })
}

t.test('the allowed ways through are not refused', async (t) => {
  t.same(
    await refusals(
      'installer/core/x.ts',
      "import { VERSION } from '../../common/version.js'\nexport const v = VERSION\n",
    ),
    [],
  )
  t.same(
    await refusals(
      'server/modules/projects/routes.ts',
      "import { ok } from '../../http/envelope.js'\nexport const o = ok\n",
    ),
    [],
  )
  t.same(
    await refusals(
      'server/modules/team/service.ts',
      "import { listMembers } from '../users/service.js'\nexport const l = listMembers\n",
    ),
    [],
  )
  t.same(
    await refusals(
      'server/modules/projects/service.ts',
      "import { notFound } from '../../domain/errors.js'\nexport const n = notFound\n",
    ),
    [],
  )
})
