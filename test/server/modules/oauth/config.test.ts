// OIDC_PROVIDERS: its format, its problems (never showing the secret), and the outbound policy it
// meets at start-up: air-gapped, only identity providers inside OUTBOUND_ALLOWED_NETWORKS.
import t from 'tap'
import { parseConfig } from '../../../../config/schema.js'
import { ConfigError, loadConfig } from '../../../../server/config.js'
import { assertProvidersAllowed } from '../../../../server/modules/oauth/providers.js'
import { compilePolicy } from '../../../../server/platform/outbound.js'
import { testApp } from '../../../helpers/app.js'
import { suffix } from '../../../helpers/platform.js'
import { createTenant } from '../../../../server/modules/tenants/service.js'
import { CLIENT_ID, CLIENT_SECRET, signInAtIdp, startIdp } from './idp.js'

const PUBLIC_URL = 'http://atrium.test'
const SECRET = 'hunter2-client-secret'
const entry = (extra: Record<string, unknown> = {}) => ({
  id: 'corp',
  name: 'Corp SSO',
  issuer: 'https://sso.example.com/realms/corp',
  clientId: 'atrium',
  clientSecret: SECRET,
  ...extra,
})

t.test('OIDC_PROVIDERS is a JSON array of providers, with defaults filled in', async (t) => {
  t.same(parseConfig({}).config.OIDC_PROVIDERS, [], 'none by default')
  const tenantId = '0190e2a4-7c1b-7cde-8f00-0123456789ab'
  const { config, problems } = parseConfig({
    OIDC_PROVIDERS: JSON.stringify([
      entry(),
      entry({
        id: 'lab',
        issuer: 'http://10.0.0.5:8080',
        allowHttp: true,
        tenantId,
        defaultRole: 'viewer',
        scopes: ' openid  email ',
        tokenAuthMethod: 'client_secret_post',
      }),
    ]),
  })
  t.same(problems, [])
  t.same(config.OIDC_PROVIDERS, [
    {
      id: 'corp',
      name: 'Corp SSO',
      issuer: 'https://sso.example.com/realms/corp',
      clientId: 'atrium',
      clientSecret: SECRET,
      scopes: 'openid email profile',
      tenantId: null,
      defaultRole: 'member',
      allowHttp: false,
      tokenAuthMethod: 'client_secret_basic',
    },
    {
      id: 'lab',
      name: 'Corp SSO',
      issuer: 'http://10.0.0.5:8080',
      clientId: 'atrium',
      clientSecret: SECRET,
      scopes: 'openid email',
      tenantId,
      defaultRole: 'viewer',
      allowHttp: true,
      tokenAuthMethod: 'client_secret_post',
    },
  ])
})

t.test('a wrong OIDC_PROVIDERS is one problem line naming every mistake, never the secret', async (t) => {
  const cases: [unknown, RegExp][] = [
    [`[{"id":"corp","clientSecret":"${SECRET}"`, /^OIDC_PROVIDERS is not valid JSON \(at position \d+\)$/],
    [{ providers: [] }, /must be a JSON array/],
    [[entry(), entry()], /provider 2 \("corp"\): id is used by an earlier provider/],
    [[entry({ id: 'Not A Slug' })], /provider 1: id must be a slug/],
    [[entry({ issuer: 'http://sso.example.com' })], /issuer must be an https:\/\/ URL \(set allowHttp: true/],
    [[entry({ issuer: 'https://sso.example.com/?x=1' })], /issuer must not have a query/],
    [[entry({ issuer: 'sso' })], /issuer must be a URL/],
    [[entry({ clientSecret: '' })], /clientSecret is required/],
    [[entry({ scopes: 'email profile' })], /scopes must be .* openid/],
    [[entry({ tenantId: 'acme' })], /tenantId must be a tenant id/],
    [
      [entry({ tenantId: '0190e2a4-7c1b-7cde-8f00-0123456789ab', defaultRole: 'owner' })],
      /defaultRole must be one of admin, member, viewer/,
    ],
    [[entry({ defaultRole: 'member' })], /defaultRole needs tenantId/],
    [[entry({ clientSceret: SECRET })], /unknown fields clientSceret/],
    [['corp'], /provider 1: must be an object/],
  ]
  for (const [value, expected] of cases) {
    const { problems } = parseConfig({ OIDC_PROVIDERS: typeof value === 'string' ? value : JSON.stringify(value) })
    t.equal(problems.length, 1, String(expected))
    t.match(problems[0], expected)
    t.notMatch(problems[0], /hunter2|\n/, 'no secret, one line')
  }
  const many = parseConfig({ OIDC_PROVIDERS: JSON.stringify([{ id: 'x', clientSecret: SECRET }]) }).problems
  t.same(many, ['OIDC_PROVIDERS: provider 1 ("x"): name is required; issuer must be a URL; clientId is required'])
  const two = parseConfig({
    OIDC_PROVIDERS: JSON.stringify([entry({ name: '' }), entry({ id: 'b', clientId: '' })]),
  }).problems
  t.same(two, ['OIDC_PROVIDERS: provider 1 ("corp"): name is required; provider 2 ("b"): clientId is required'])
  // The server's start-up path: every problem at once, exit 78 (server/config.ts).
  let thrown: unknown
  try {
    loadConfig({ OIDC_PROVIDERS: `[${SECRET}]` })
  } catch (err) {
    thrown = err
  }
  t.ok(thrown instanceof ConfigError)
  t.same((thrown as ConfigError).problems, ['OIDC_PROVIDERS is not valid JSON'])
})

t.test(
  'air-gapped: an identity provider outside OUTBOUND_ALLOWED_NETWORKS is refused at start-up and never contacted',
  async (t) => {
    const idp = await startIdp(t, [`${PUBLIC_URL}/oauth/corp/callback`])
    const settings = (issuer: string, networks: string) => ({
      PUBLIC_URL,
      AIR_GAPPED: 'true',
      OUTBOUND_ALLOWED_NETWORKS: networks,
      OUTBOUND_ALLOWED_DOMAINS: 'invalid,localhost',
      OIDC_PROVIDERS: JSON.stringify([
        entry({ issuer, allowHttp: true, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET }),
      ]),
    })
    await t.rejects(
      testApp(t, settings(idp.issuer, '10.0.0.0/8')),
      /OIDC_PROVIDERS: provider "corp" \(issuer host 127\.0\.0\.1\) is refused: air-gapped: only addresses inside OUTBOUND_ALLOWED_NETWORKS are reachable/,
    )
    await t.rejects(
      testApp(t, settings('https://93.184.216.34', '10.0.0.0/8')),
      /provider "corp" \(issuer host 93\.184\.216\.34\) is refused: air-gapped/,
      'a public address too',
    )
    await t.rejects(
      testApp(t, settings(`https://idp-${suffix()}.invalid`, '10.0.0.0/8')),
      /could not be resolved .* inside OUTBOUND_ALLOWED_NETWORKS/,
      'a name that does not resolve cannot be shown to be inside',
    )
    await t.rejects(
      testApp(t, settings('https://sso.example.com/realms/corp', '10.0.0.0/8')),
      /issuer host sso\.example\.com\) is refused: air-gapped: only names under OUTBOUND_ALLOWED_DOMAINS are looked up \(AIR_GAPPED=true: identity providers must be named under OUTBOUND_ALLOWED_DOMAINS/,
      'a name outside the listed domains',
    )
    await t.rejects(
      testApp(t, settings(idp.issuer.replace('127.0.0.1', 'localhost'), '10.0.0.0/8')),
      /issuer host localhost\) is refused/,
      'a name is judged by what it resolves to',
    )
    await t.rejects(
      testApp(t, settings('https://169.254.169.254', '169.254.0.0/16')),
      /metadata addresses are never reachable/,
      'listing it does not make a metadata address reachable',
    )
    t.equal(idp.requests(), 0, 'none of them was contacted')
  },
)

t.test(
  'air-gapped: an identity provider named under OUTBOUND_ALLOWED_DOMAINS that resolves inside OUTBOUND_ALLOWED_NETWORKS signs people in',
  async (t) => {
    const idp = await startIdp(t, [`${PUBLIC_URL}/oauth/corp/callback`], 0, 'localhost')
    const ta = await testApp(t, {
      PUBLIC_URL,
      AIR_GAPPED: 'true',
      OUTBOUND_ALLOWED_NETWORKS: '127.0.0.0/8,::1/128',
      OUTBOUND_ALLOWED_DOMAINS: 'localhost',
      OIDC_PROVIDERS: JSON.stringify([
        entry({ issuer: idp.issuer, allowHttp: true, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET }),
      ]),
    })
    const email = `air-${suffix()}@example.com`
    const tenant = await createTenant(ta.platform, { name: 'Air', email })
    idp.accounts.set('air', { email, email_verified: true })
    const start = await ta.anonymous('GET', '/oauth/corp/start')
    t.equal(start.status, 200, JSON.stringify(start.body))
    const callback = await signInAtIdp(start.body.data.authorizationUrl, 'air', `${PUBLIC_URL}/oauth/corp/callback`)
    const cookie = /atrium_oauth=[A-Za-z0-9]+/.exec(String(start.headers['set-cookie']))![0]
    const r = await ta.anonymous(
      'POST',
      '/oauth/corp/authorize',
      { callbackUrl: callback.search },
      { cookie, origin: PUBLIC_URL },
    )
    t.equal(r.status, 200, JSON.stringify(r.body))
    t.equal(r.body.data.tenant.id, tenant.tenantId)
  },
)

t.test('in connected mode an issuer given as a forbidden address is refused at start-up', async (t) => {
  const policy = compilePolicy({ allowedCidrs: [], airGapped: false })
  const p = (issuer: string) =>
    parseConfig({ OIDC_PROVIDERS: JSON.stringify([entry({ issuer, allowHttp: true })]) }).config.OIDC_PROVIDERS
  await t.rejects(
    assertProvidersAllowed(p('http://169.254.169.254'), policy),
    /provider "corp" \(issuer host 169\.254\.169\.254\) is refused: metadata addresses are never reachable/,
  )
  await t.rejects(
    assertProvidersAllowed(p('http://[::ffff:a9fe:a9fe]'), policy),
    /metadata addresses are never reachable/,
  )
  await t.rejects(
    assertProvidersAllowed(p('http://127.0.0.1:8080'), policy),
    /loopback address outside OUTBOUND_ALLOWED_NETWORKS/,
  )
  await t.resolves(
    assertProvidersAllowed(
      p('http://127.0.0.1:8080'),
      compilePolicy({ allowedCidrs: ['127.0.0.0/8'], airGapped: false }),
    ),
  )
  let asked = 0
  await t.resolves(
    assertProvidersAllowed(
      p('https://sso.example.com'),
      compilePolicy({ allowedCidrs: [], airGapped: false }, async () => {
        asked++
        return []
      }),
    ),
  )
  t.equal(asked, 0, 'names are judged when connecting, not at start-up (a DNS hiccup must not stop the server)')
})
