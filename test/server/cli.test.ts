import t from 'tap'
import { admin } from '../helpers/cli.js'
import { testEnv } from '../helpers/platform.js'

const env = await testEnv(t)

t.test('create-tenant prints exactly one JSON line with the tenant, owner and key', async (t) => {
  const r = await admin(['create-tenant', '--name', 'CLI Co', '--plan', 'pro', '--email', `cli-${Date.now()}@example.com`, '--password', 'twelve chars!'], env)
  t.equal(r.code, 0, r.stderr)
  const lines = r.stdout.trim().split('\n')
  t.equal(lines.length, 1)
  const out = JSON.parse(lines[0]!)
  t.same(Object.keys(out).sort(), ['apiKey', 'tenantId', 'userId'])
  t.match(out.apiKey, /^svc_ci_[A-Za-z0-9]{32}$/)

  const key = await admin(['create-key', '--tenant', out.tenantId, '--type', 'sdk', '--permissions', 'projects:read', '--name', 'reader', '--expires-in-days', '30'], env)
  t.equal(key.code, 0, key.stderr)
  t.match(JSON.parse(key.stdout), { id: String, apiKey: /^svc_sdk_/, type: 'sdk', permissions: ['projects:read'] })

  const op = await admin(['create-key', '--type', 'admin'], env)
  t.equal(op.code, 0, op.stderr)
  t.match(JSON.parse(op.stdout), { apiKey: /^svc_admin_/, type: 'admin', permissions: ['*'] })
})

t.test('bad usage exits 2 with a reason and prints nothing on stdout', async (t) => {
  const cases = [
    [['create-tenant']],
    [['create-tenant', '--name', 'X', '--plan', 'platinum']],
    [['create-tenant', '--name', 'X', '--bogus', 'y']],
    [['create-tenant', '--name', 'X', '--password', 'short']],
    [['create-key', '--type', 'sdk']],
    [['create-key', '--tenant', '01900000-0000-7000-8000-000000000000']],
    [['create-key', '--tenant', 'x', '--type', 'root']],
    [['create-key', '--type', 'admin', '--expires-in-days', 'soon']],
    [['frobnicate']],
  ] as const
  for (const [args] of cases) {
    const r = await admin([...args], env)
    t.equal(r.code, 2, args.join(' '))
    t.equal(r.stdout, '', `${args.join(' ')}: stdout stays clean`)
    t.match(r.stderr, /^error: /, args.join(' '))
  }
})

t.test('help lists the commands', async (t) => {
  const r = await admin(['help'], env)
  t.equal(r.code, 0)
  t.match(r.stdout, /create-tenant --name N/)
})

t.test('a configuration problem exits 78 with one line per problem and no stack trace', async (t) => {
  const r = await admin(['migrate'], { ...env, PORT: 'eighty', DATABASE_URL: 'mysql://x' })
  t.equal(r.code, 78)
  const lines = r.stderr.trim().split('\n')
  t.equal(lines.length, 2)
  t.ok(lines.every((l) => l.startsWith('config error: ')))
  t.notMatch(r.stderr, /\n\s+at /)
})
