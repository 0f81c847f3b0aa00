// The first tenant's arguments as the real admin CLI reads them.
import t from 'tap'
import { DEFAULT_ANSWERS } from '../../../installer/core/answers.js'
import { createTenantArgs, parseCreated, passwordInput } from '../../../installer/core/first-admin.js'
import { admin } from '../../helpers/cli.js'
import { testEnv } from '../../helpers/platform.js'

t.test('a generated password or a name that starts with "-" is taken as the value it is, not as a flag', async (t) => {
  const env = await testEnv(t)
  // base64url passwords start with "-" once in 64: every such install failed at its first tenant.
  const answers = { ...DEFAULT_ANSWERS, tenantName: '-Dash Corp', adminEmail: 'admin@example.com' }
  const password = `-${'a'.repeat(23)}`
  const r = await admin(createTenantArgs(answers), env, passwordInput(password))
  t.equal(r.code, 0, r.stderr)
  t.match(parseCreated(r.stdout, answers, password), { email: 'admin@example.com', password })
})

t.test(
  'the password is never an argument: it is the one line create-tenant reads from its standard input',
  async (t) => {
    const answers = { ...DEFAULT_ANSWERS, tenantName: 'Corp', adminEmail: 'admin@example.com' }
    const args = createTenantArgs(answers)
    t.ok(args.includes('--password-stdin'))
    t.notOk(
      args.some((a) => a.startsWith('--password=')),
      'no --password=VALUE',
    )
    t.equal(passwordInput('p4ss-word_x'), 'p4ss-word_x\n')
  },
)
