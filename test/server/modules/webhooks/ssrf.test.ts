// Webhook URLs against the outbound policy: refused when registered (every way of writing a
// forbidden address, names that resolve to one), allowed where the deployment says so, and judged
// again at every delivery, where a name that re-resolves (DNS rebinding) is caught at connect time.
import t, { type Test } from 'tap'
import { systemResolver, type Resolver } from '../../../../server/platform/outbound.js'
import { testApp, type Called, type Caller } from '../../../helpers/app.js'
import { operatorKey } from '../../../helpers/operator.js'
import { eventually, receiver, SECRET, verified, webhookApp, type Receiver } from './helpers.js'

const PUBLIC = '93.184.216.34'

/**
 * A resolver answering from a table that a test may change between calls (as a hostile DNS
 * server would); localhost goes to the system resolver, any other name does not exist.
 */
function dns(answers: Record<string, string[]>): Resolver & { answers: Record<string, string[]>; asked: string[] } {
  const asked: string[] = []
  const resolve = async (host: string) => {
    asked.push(host)
    if (host === 'localhost') return systemResolver(host)
    const list = answers[host]
    if (!list) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND', hostname: host })
    return list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))
  }
  return Object.assign(resolve, { answers, asked })
}

/** A tenant of an app that allows http and `networks`, its names answered from `answers`. */
async function httpTenant(t: Test, networks: string, answers: Record<string, string[]>) {
  const h = await testApp(
    t,
    { OUTBOUND_ALLOWED_NETWORKS: networks, WEBHOOK_ALLOW_HTTP: 'true' },
    { resolver: dns(answers) },
  )
  return h.tenant()
}

const register = (call: Caller, url: string) =>
  call('POST', '/api/v1/webhooks', { url, events: ['project.created'], secret: SECRET })

/** A 400 VALIDATION_ERROR on the url field whose message says why. */
function refusedUrl(t: Test, r: Called, why: RegExp, what: string) {
  t.equal(r.status, 400, `${what}: 400 (${JSON.stringify(r.body?.error)})`)
  t.equal(r.body?.error?.code, 'VALIDATION_ERROR', `${what}: VALIDATION_ERROR`)
  t.equal(r.body?.error?.details?.errors?.[0]?.field, 'url', `${what}: the url field is named`)
  t.match(r.body?.error?.message, why, `${what}: the message says why`)
  t.match(r.body?.error?.details?.errors?.[0]?.message, why, `${what}: the field's message says why`)
}

const NEVER = (cls: string) => new RegExp(`may not be called: ${cls} addresses are never reachable`)
const OUTSIDE = (cls: string) => new RegExp(`may not be called: ${cls} address outside OUTBOUND_ALLOWED_NETWORKS`)
const AIR_GAPPED = /may not be called: air-gapped: only addresses inside OUTBOUND_ALLOWED_NETWORKS are reachable/
const UNLISTED_NAME = /may not be called: air-gapped: only names under OUTBOUND_ALLOWED_DOMAINS are looked up/

t.test(
  'registration refuses metadata, link-local, loopback, private and unspecified addresses in every notation',
  async (t) => {
    const resolver = dns({})
    const h = await testApp(t, {}, { resolver })
    const a = await h.tenant()
    const cases: [string, RegExp, string][] = [
      ['https://169.254.169.254/', NEVER('metadata'), '169.254.169.254'],
      ['https://[::ffff:169.254.169.254]/', NEVER('metadata'), '::ffff:a9fe:a9fe'],
      ['https://[::ffff:a9fe:a9fe]/', NEVER('metadata'), '::ffff:a9fe:a9fe'],
      ['https://2852039166/', NEVER('metadata'), '169.254.169.254'],
      ['https://0xA9FEA9FE/', NEVER('metadata'), '169.254.169.254'],
      ['https://0251.0376.0251.0376/', NEVER('metadata'), '169.254.169.254'],
      ['https://[fd00:ec2::254]/', NEVER('metadata'), 'fd00:ec2::254'],
      ['https://169.254.10.1/', NEVER('link-local'), '169.254.10.1'],
      ['https://[fe80::1]/', NEVER('link-local'), 'fe80::1'],
      ['https://127.0.0.1/', OUTSIDE('loopback'), '127.0.0.1'],
      ['https://localhost/', OUTSIDE('loopback'), ''],
      ['https://[::1]/', OUTSIDE('loopback'), '::1'],
      ['https://10.0.0.5/', OUTSIDE('private'), '10.0.0.5'],
      ['https://192.168.1.1/', OUTSIDE('private'), '192.168.1.1'],
      ['https://0.0.0.0/', NEVER('unspecified'), '0.0.0.0'],
      ['https://[::]/', NEVER('unspecified'), '::'],
      ['https://224.0.0.1/', NEVER('multicast'), '224.0.0.1'],
      ['https://100.100.100.200/', NEVER('metadata'), '100.100.100.200'],
      ['https://100.64.0.1/', OUTSIDE('private'), '100.64.0.1'],
      ['https://203.0.113.10/', OUTSIDE('reserved'), '203.0.113.10'],
      ['https://[::ffff:127.0.0.1]/', OUTSIDE('loopback'), '::ffff:7f00:1'],
    ]
    for (const [url, why, address] of cases) {
      const r = await register(a.call, url)
      refusedUrl(t, r, why, url)
      t.equal(r.body?.error?.details?.reason, 'outbound_refused', `${url}: the reason is the outbound policy`)
      if (address) t.equal(r.body?.error?.details?.address, address, `${url}: judged as ${address}`)
    }
    t.same(resolver.asked, ['localhost'], 'IP literals, however written, are judged without asking DNS')
    t.same((await a.call('GET', '/api/v1/webhooks')).body.data, [], 'nothing was registered')
  },
)

t.test('metadata and link-local stay refused even when OUTBOUND_ALLOWED_NETWORKS covers them', async (t) => {
  for (const networks of ['0.0.0.0/0,::/0', '169.254.0.0/16,fe80::/10,fd00::/8']) {
    const a = await httpTenant(t, networks, { 'metadata.test': ['169.254.169.254'] })
    for (const url of [
      'https://169.254.169.254/',
      'http://169.254.169.254/latest/meta-data/',
      'https://2852039166/',
      'https://0xA9FEA9FE/',
      'https://[::ffff:a9fe:a9fe]/',
      'https://[fd00:ec2::254]/',
      'https://metadata.test/',
    ]) {
      refusedUrl(t, await register(a.call, url), NEVER('metadata'), `${url} with ${networks}`)
    }
    for (const url of ['https://169.254.10.1/', 'https://[fe80::1]/'])
      refusedUrl(t, await register(a.call, url), NEVER('link-local'), `${url} with ${networks}`)
    refusedUrl(t, await register(a.call, 'https://0.0.0.0/'), NEVER('unspecified'), `0.0.0.0 with ${networks}`)
  }
})

t.test('registration refuses http unless WEBHOOK_ALLOW_HTTP=true, and URLs with credentials', async (t) => {
  const resolver = dns({ 'public.test': [PUBLIC] })
  const strict = await (await testApp(t, {}, { resolver })).tenant()
  refusedUrl(
    t,
    await register(strict.call, 'http://public.test/hook'),
    /must be an https URL.*WEBHOOK_ALLOW_HTTP=true/,
    'http by default',
  )
  refusedUrl(
    t,
    await register(strict.call, 'https://user:pass@public.test/hook'),
    /must not contain credentials/,
    'user and password',
  )
  refusedUrl(
    t,
    await register(strict.call, 'https://token@public.test/hook'),
    /must not contain credentials/,
    'user only',
  )
  t.equal((await register(strict.call, 'https://public.test/hook')).status, 201, 'the same host over https is fine')

  const lax = await (await testApp(t, { WEBHOOK_ALLOW_HTTP: 'true' }, { resolver })).tenant()
  t.equal((await register(lax.call, 'http://public.test/hook')).status, 201, 'http once WEBHOOK_ALLOW_HTTP=true')
  refusedUrl(
    t,
    await register(lax.call, 'http://user:pass@public.test/hook'),
    /must not contain credentials/,
    'credentials over http',
  )
  refusedUrl(t, await register(lax.call, 'ftp://public.test/hook'), /must be an http or https URL/, 'ftp')
})

t.test('registration refuses a name that resolves to a forbidden address, or to nothing', async (t) => {
  const resolver = dns({
    'metadata.test': ['169.254.169.254'],
    'mapped.test': ['::ffff:169.254.169.254'],
    'intranet.test': ['10.1.2.3'],
    'mixed.test': [PUBLIC, '127.0.0.1'],
    'empty.test': [],
  })
  const h = await testApp(t, {}, { resolver })
  const a = await h.tenant()
  const metadata = await register(a.call, 'https://metadata.test/hook')
  refusedUrl(t, metadata, NEVER('metadata'), 'a name for the metadata address')
  t.equal(
    metadata.body.error.message,
    'url: metadata.test may not be called: metadata addresses are never reachable',
    'the message names the host and the kind of address, not the address it resolved to',
  )
  t.notOk(
    'address' in metadata.body.error.details,
    'a tenant cannot map internal names to addresses through the answer',
  )
  const mixed = await register(a.call, 'https://mixed.test/hook')
  refusedUrl(t, mixed, OUTSIDE('loopback'), 'one forbidden answer among public ones')
  t.notMatch(mixed.body.error.message, /127\.0\.0\.1/, 'without naming the forbidden answer')
  const names: [string, RegExp, string][] = [
    ['https://mapped.test/hook', NEVER('metadata'), 'a name for the IPv4-mapped metadata address'],
    ['https://intranet.test/hook', OUTSIDE('private'), 'a name for a private address'],
    ['https://empty.test/hook', /the name has no addresses/, 'a name with no addresses'],
    [
      'https://nowhere.test/hook',
      /nowhere\.test does not resolve to an address/,
      'a name that does not resolve (ENOTFOUND)',
    ],
  ]
  for (const [url, why, what] of names) refusedUrl(t, await register(a.call, url), why, what)

  // Changing the URL later is judged the same way, for a tenant's endpoint and a platform operator's.
  resolver.answers['public.test'] = [PUBLIC]
  const hook = await register(a.call, 'https://public.test/hook')
  t.equal(hook.status, 201, JSON.stringify(hook.body))
  refusedUrl(
    t,
    await a.call('PATCH', `/api/v1/webhooks/${hook.body.data.id}`, { url: 'https://0xA9FEA9FE/' }),
    NEVER('metadata'),
    'PATCH to the metadata address',
  )
  refusedUrl(
    t,
    await a.call('PATCH', `/api/v1/webhooks/${hook.body.data.id}`, { url: 'https://metadata.test/' }),
    NEVER('metadata'),
    'PATCH to a name for it',
  )
  t.equal(
    (await a.call('GET', `/api/v1/webhooks/${hook.body.data.id}`)).body.data.url,
    'https://public.test/hook',
    'the URL is unchanged',
  )

  const opCall = (await operatorKey(h)).call
  refusedUrl(
    t,
    await opCall('POST', '/api/v1/platform/webhooks', {
      url: 'https://[::ffff:169.254.169.254]/',
      events: ['tenant.created'],
      secret: SECRET,
    }),
    NEVER('metadata'),
    'a platform endpoint',
  )
})

t.test('loopback registers once OUTBOUND_ALLOWED_NETWORKS includes it (and http is allowed)', async (t) => {
  const a = await httpTenant(t, '127.0.0.0/8', { 'receiver.test': ['127.0.0.1'] })
  for (const url of [
    'http://127.0.0.1:8080/hook',
    'http://127.1.2.3/hook',
    'http://receiver.test:8080/hook',
    'https://receiver.test/hook',
  ]) {
    const r = await register(a.call, url)
    t.equal(r.status, 201, `${url}: ${JSON.stringify(r.body)}`)
    t.equal(r.body.data.url, url)
  }
  refusedUrl(t, await register(a.call, 'http://[::1]/hook'), OUTSIDE('loopback'), '::1 is not inside 127.0.0.0/8')
  refusedUrl(t, await register(a.call, 'http://10.0.0.5/hook'), OUTSIDE('private'), 'private stays refused')
  refusedUrl(t, await register(a.call, 'http://169.254.169.254/hook'), NEVER('metadata'), 'metadata stays refused')
})

t.test(
  'a public host registers, except air-gapped, where only hosts inside OUTBOUND_ALLOWED_NETWORKS (named under OUTBOUND_ALLOWED_DOMAINS) do',
  async (t) => {
    const resolver = dns({
      'public.test': [PUBLIC],
      'public6.test': ['2606:2800:220:1::1'],
      'intranet.test': ['10.1.2.3'],
      'outside.intranet.test': [PUBLIC],
    })
    const open = await (await testApp(t, {}, { resolver })).tenant()
    t.equal((await register(open.call, 'https://public.test/hook')).status, 201, 'a public IPv4 host')
    t.equal((await register(open.call, 'https://public6.test/hook')).status, 201, 'a public IPv6 host')
    refusedUrl(
      t,
      await register(open.call, 'https://intranet.test/hook'),
      OUTSIDE('private'),
      'a private host, not listed',
    )

    const gapped = await (
      await testApp(
        t,
        { AIR_GAPPED: 'true', OUTBOUND_ALLOWED_NETWORKS: '10.0.0.0/8', OUTBOUND_ALLOWED_DOMAINS: 'intranet.test' },
        { resolver },
      )
    ).tenant()
    resolver.asked.length = 0
    const refused = await register(gapped.call, 'https://public.test/hook')
    refusedUrl(t, refused, UNLISTED_NAME, 'a name outside OUTBOUND_ALLOWED_DOMAINS, air-gapped')
    t.notOk('address' in refused.body.error.details)
    for (const [url, what] of [
      ['https://public6.test/hook', 'another, air-gapped'],
      ['https://evil-intranet.test/hook', 'a name that only ends like a listed domain'],
    ] as const)
      refusedUrl(t, await register(gapped.call, url), UNLISTED_NAME, what)
    t.same(resolver.asked, [], 'and none of them was looked up')
    const outside: [string, RegExp, string][] = [
      [
        'https://outside.intranet.test/hook',
        AIR_GAPPED,
        'a listed name whose address is outside the allowed networks, air-gapped',
      ],
      [`https://${PUBLIC}/hook`, AIR_GAPPED, 'a public literal, air-gapped'],
      ['https://192.168.1.1/hook', AIR_GAPPED, 'a private address outside the allowed networks, air-gapped'],
      ['https://169.254.169.254/', NEVER('metadata'), 'metadata, air-gapped'],
    ]
    for (const [url, why, what] of outside) refusedUrl(t, await register(gapped.call, url), why, what)
    for (const [url, what] of [
      ['https://intranet.test/hook', 'a host inside OUTBOUND_ALLOWED_NETWORKS, air-gapped'],
      ['https://10.9.8.7/hook', 'an address inside OUTBOUND_ALLOWED_NETWORKS, air-gapped'],
    ] as const)
      t.equal((await register(gapped.call, url)).status, 201, what)
  },
)

/** The endpoint's only delivery once it has given up, with its attempts. */
async function failedDelivery(call: Caller, webhookId: string) {
  return eventually(async () => {
    const r = await call('GET', `/api/v1/webhooks/${webhookId}/deliveries`)
    const d = r.body.data[0]
    return d?.status === 'failed' ? d : null
  }, 10_000)
}

// Two attempts: the first, and one retry 50 ms later; then the delivery has failed.
const worker = { pollMs: 50, schedule: [0.05], attemptTimeoutMs: 2000 }

interface Endpoint {
  id: string
  rx: Receiver
}

/**
 * The endpoint's only delivery failed with no answer: both attempts were made, each refused with `error`, and its
 * receiver got nothing. Returns the delivery.
 */
async function refusedAtDelivery(t: Test, call: Caller, endpoint: Endpoint, error: string, what: string) {
  const d = await failedDelivery(call, endpoint.id)
  t.equal(d.lastStatusCode, null, `${what}: no answer`)
  t.equal(
    d.attempts.length,
    2,
    `${what}: both attempts were made and refused (a delivery failed with none would say nothing)`,
  )
  for (const at of d.attempts) {
    t.equal(at.statusCode, null, `${what}: attempt ${at.attempt}: no answer`)
    t.equal(at.error, error, `${what}: attempt ${at.attempt}: the policy's refusal`)
  }
  t.equal(endpoint.rx.received.length, 0, `${what}: the receiver got nothing`)
  return d
}

/**
 * A tenant of an app that delivers (two attempts) under `env`, names answered from `answers`; `endpoint(name)`
 * registers an endpoint at that name on a real receiver.
 */
async function deliveringTenant(t: Test, env: Record<string, string>, answers: Record<string, string[]>) {
  const resolver = dns(answers)
  const h = await webhookApp(t, env, { resolver, webhookWorker: worker })
  const a = await h.tenant()
  const endpoint = async (name: string): Promise<Endpoint> => {
    const rx = await receiver(t)
    const hook = await register(a.call, `http://${name}:${rx.port}/hook`)
    t.equal(hook.status, 201, JSON.stringify(hook.body))
    return { rx, id: hook.body.data.id }
  }
  return { resolver, a, endpoint }
}

t.test(
  'DNS rebinding: a name that resolves to loopback after registration is refused at delivery, and nothing is sent',
  async (t) => {
    const { resolver, a, endpoint } = await deliveringTenant(
      t,
      { OUTBOUND_ALLOWED_NETWORKS: '' },
      { 'rebind.test': [PUBLIC], 'mapped.test': [PUBLIC] },
    )
    const hook = await endpoint('rebind.test')
    const mapped = await endpoint('mapped.test')
    t.same(resolver.asked, ['rebind.test', 'mapped.test'], 'judged when registered, by their public address')

    // The attacker's DNS now points at this host, once plainly and once in the IPv4-mapped form.
    resolver.answers['rebind.test'] = ['127.0.0.1']
    resolver.answers['mapped.test'] = ['::ffff:127.0.0.1']
    t.equal((await a.call('POST', '/api/v1/projects', { name: 'Rebound' })).status, 201)
    const d = await refusedAtDelivery(
      t,
      a.call,
      hook,
      'refused by the outbound policy: loopback address outside OUTBOUND_ALLOWED_NETWORKS (rebind.test)',
      'rebound to loopback',
    )
    t.equal(d.eventType, 'project.created')
    t.equal(d.attemptCount, 2)
    for (const at of d.attempts) t.equal(at.responseExcerpt, '', `attempt ${at.attempt}: nothing was read`)
    t.match(
      d.attempts.map((x: { outcome: string }) => x.outcome),
      ['retrying', 'failed'],
    )
    t.match(d.lastError, /^refused by the outbound policy/)
    t.ok(resolver.asked.filter((x) => x === 'rebind.test').length >= 3, 'every attempt asked DNS again')

    await refusedAtDelivery(
      t,
      a.call,
      mapped,
      'refused by the outbound policy: loopback address outside OUTBOUND_ALLOWED_NETWORKS (mapped.test)',
      'the IPv4-mapped answer is judged as its IPv4 address',
    )
  },
)

t.test(
  'DNS rebinding to the metadata address is refused at delivery, whatever OUTBOUND_ALLOWED_NETWORKS says',
  async (t) => {
    const { resolver, a, endpoint } = await deliveringTenant(
      t,
      { OUTBOUND_ALLOWED_NETWORKS: '0.0.0.0/0' },
      { 'rebind.test': ['127.0.0.1'] },
    )
    const hook = await endpoint('rebind.test')
    resolver.answers['rebind.test'] = ['169.254.169.254']
    t.equal((await a.call('POST', '/api/v1/projects', { name: 'Metadata' })).status, 201)
    await refusedAtDelivery(
      t,
      a.call,
      hook,
      'refused by the outbound policy: metadata addresses are never reachable (rebind.test)',
      'rebound to the metadata address',
    )
  },
)

t.test(
  'air-gapped: deliveries reach hosts inside OUTBOUND_ALLOWED_NETWORKS; a host that moved outside them is a recorded failure',
  async (t) => {
    const { resolver, a, endpoint } = await deliveringTenant(
      t,
      {
        AIR_GAPPED: 'true',
        OUTBOUND_ALLOWED_NETWORKS: '127.0.0.0/8',
        OUTBOUND_ALLOWED_DOMAINS: 'inside.test,moved.test',
      },
      { 'inside.test': ['127.0.0.1'], 'moved.test': ['127.0.0.1'] },
    )
    const inside = (await endpoint('inside.test')).rx
    const moved = await endpoint('moved.test')

    resolver.answers['moved.test'] = [PUBLIC] // public, so allowed anywhere but here
    t.equal((await a.call('POST', '/api/v1/projects', { name: 'Gapped' })).status, 201)
    const [got] = await inside.waitFor(1, 10_000)
    t.equal(verified(SECRET, got!).type, 'project.created', 'the host inside the allowed networks got the event')
    await refusedAtDelivery(
      t,
      a.call,
      moved,
      'refused by the outbound policy: air-gapped: only addresses inside OUTBOUND_ALLOWED_NETWORKS are reachable (moved.test)',
      'moved outside the allowed networks',
    )
    t.equal(inside.received.length, 1)
  },
)
