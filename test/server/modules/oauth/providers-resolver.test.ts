// The identity providers are judged by the deployment's one compiled outbound policy: a resolver given to the
// services (as a test gives one) is what names resolve through at start-up and when a provider is contacted.
import t from 'tap'
import type { Resolver } from '../../../../server/platform/outbound.js'
import { testApp } from '../../../helpers/app.js'
import { CLIENT_ID, CLIENT_SECRET, startIdp } from './idp.js'

const PUBLIC_URL = 'http://atrium.test'
// A name no system resolver knows: only the services' resolver can give it an address.
const HOST = 'idp.atrium-test.invalid'

const resolving =
  (address: string): Resolver =>
  async (hostname) => {
    if (hostname !== HOST) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' })
    return [{ address, family: 4 }]
  }

const settings = (issuer: string, extra: Record<string, string> = {}) => ({
  PUBLIC_URL,
  OIDC_PROVIDERS: JSON.stringify([
    { id: 'corp', name: 'Corp SSO', issuer, allowHttp: true, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET },
  ]),
  ...extra,
})

const airGapped = { AIR_GAPPED: 'true', OUTBOUND_ALLOWED_NETWORKS: '127.0.0.0/8', OUTBOUND_ALLOWED_DOMAINS: HOST }

t.test(
  'air-gapped: a provider whose name the services resolver puts inside the networks starts and is discovered',
  async (t) => {
    const idp = await startIdp(t, [`${PUBLIC_URL}/oauth/corp/callback`], 0, HOST)
    const ta = await testApp(t, settings(idp.issuer, airGapped), { resolver: resolving('127.0.0.1') })
    const start = await ta.anonymous('GET', '/oauth/corp/start')
    t.equal(start.status, 200, JSON.stringify(start.body))
    t.ok(String(start.body.data.authorizationUrl).startsWith(`${idp.issuer}/`), 'the discovered authorization endpoint')
    t.ok(idp.requests() > 0, 'discovery reached the provider at the address the resolver gave')
  },
)

t.test(
  'air-gapped: a provider whose name the services resolver puts outside the networks stops the start',
  async (t) => {
    const idp = await startIdp(t, [`${PUBLIC_URL}/oauth/corp/callback`], 0, HOST)
    await t.rejects(
      testApp(t, settings(idp.issuer, airGapped), { resolver: resolving('10.9.9.9') }),
      /OIDC_PROVIDERS: provider "corp" \(issuer host idp\.atrium-test\.invalid\) is refused: air-gapped: only addresses inside OUTBOUND_ALLOWED_NETWORKS are reachable/,
    )
    t.equal(idp.requests(), 0, 'never contacted')
  },
)

t.test(
  'connected: a provider name the services resolver sends to a metadata address is refused when contacted',
  async (t) => {
    const idp = await startIdp(t, [`${PUBLIC_URL}/oauth/corp/callback`], 0, HOST)
    const ta = await testApp(t, settings(idp.issuer), { resolver: resolving('169.254.169.254') })
    const start = await ta.anonymous('GET', '/oauth/corp/start')
    t.equal(start.status, 503, JSON.stringify(start.body))
    t.equal(start.body.error.code, 'SERVICE_UNAVAILABLE')
    t.equal(start.body.error.details.reason, 'outbound_refused', 'the policy refused it, not a failed lookup')
    t.equal(idp.requests(), 0, 'never contacted')
  },
)
