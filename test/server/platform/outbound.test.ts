import http from 'node:http'
import { gzipSync } from 'node:zlib'
import t, { type Test } from 'tap'
import {
  checkHost,
  classify,
  compilePolicy,
  decideOutbound,
  isAllowedOutbound,
  outboundFetch,
  OutboundRefused,
  parseCidrs,
  parseIp,
  refusalIn,
  type Resolver,
} from '../../../server/platform/outbound.js'
import { listenLoopback } from '../../helpers/listen.js'
import { givesEach } from '../../helpers/cases.js'

const open = { airGapped: false }
const airGapped = { airGapped: true }

t.test('addresses are classified in every form a resolver or URL parser accepts', async (t) => {
  const cases: Record<string, string[]> = {
    metadata: [
      '169.254.169.254',
      '2852039166',
      '0xA9FEA9FE',
      '0xa9fea9fe',
      '0251.0376.0251.0376',
      '0xA9.0xFE.0xA9.0xFE',
      '169.254.43518',
      '169.254.169.254.',
      'fd00:ec2::254',
      '[fd00:ec2::254]',
      '::ffff:169.254.169.254',
      '::ffff:a9fe:a9fe',
      '[::ffff:a9fe:a9fe]',
      '0:0:0:0:0:ffff:a9fe:a9fe',
      '::ffff:0:a9fe:a9fe',
      '::169.254.169.254',
      '64:ff9b::a9fe:a9fe',
      '64:ff9b::169.254.169.254',
      '2002:a9fe:a9fe::1',
      '100.100.100.200',
      '192.0.0.192',
    ],
    'link-local': ['169.254.0.1', '169.254.170.2', 'fe80::1', 'fe80::1%eth0', '::ffff:169.254.1.1'],
    unspecified: ['0.0.0.0', '0', '::', '0.0.0.1', '::ffff:0.0.0.0'],
    multicast: ['224.0.0.1', '255.255.255.255', 'ff02::1'],
    loopback: [
      '127.0.0.1',
      '127.1',
      '2130706433',
      '0x7f000001',
      '017700000001',
      '127.255.255.254',
      '::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '64:ff9b::7f00:1',
    ],
    private: [
      '10.0.0.1',
      '10.255.255.255',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.1.1',
      '100.64.0.1',
      'fc00::1',
      'fd12:3456::1',
      '::ffff:10.1.2.3',
      '2002:0a00:0001::1',
      'fec0::1',
    ],
    reserved: ['192.0.2.1', '198.51.100.7', '203.0.113.9', '198.18.0.1', '240.0.0.1', '2001:db8::1', '2001::1'],
    public: [
      '8.8.8.8',
      '1.1.1.1',
      '172.32.0.1',
      '93.184.216.34',
      '2606:4700:4700::1111',
      '::ffff:8.8.8.8',
      '64:ff9b::808:808',
    ],
  }
  givesEach(t, classify, Object.entries(cases), (a, expected) => `${a} is ${expected}`)
  givesEach(
    t,
    classify,
    [[null, ['example.com', 'localhost', 'metadata.google.internal', '1.2.3.4.5', '::g', '']]],
    (notIp) => `${notIp || '(empty)'} is a name`,
  )
  t.equal(parseIp('0xA9FEA9FE')!.toString(), '169.254.169.254')
})

t.test('metadata and link-local are never reachable, whatever the configuration', async (t) => {
  const everything = ['0.0.0.0/0', '::/0', '169.254.0.0/16', 'fe80::/10', 'fd00::/8']
  const never = [
    '169.254.169.254',
    '2852039166',
    '0xA9FEA9FE',
    '::ffff:169.254.169.254',
    'fd00:ec2::254',
    '169.254.1.1',
    'fe80::1',
    '0.0.0.0',
    '::',
    '224.0.0.1',
  ]
  givesEach(
    t,
    (a) => isAllowedOutbound(a, everything, open),
    [[false, never]],
    (a) => `${a} refused even inside the allowed networks`,
  )
  givesEach(
    t,
    (a) => isAllowedOutbound(a, everything, airGapped),
    [[false, never]],
    (a) => `${a} refused air-gapped too`,
  )
  t.match(decideOutbound('169.254.169.254', [], open), { allowed: false, class: 'metadata', reason: /never reachable/ })
})

t.test('loopback and private addresses are reachable only inside OUTBOUND_ALLOWED_NETWORKS', async (t) => {
  givesEach(
    t,
    (a) => isAllowedOutbound(a, [], open),
    [
      [
        false,
        ['127.0.0.1', '::1', '10.1.2.3', '192.168.0.10', 'fd00::5', '::ffff:10.1.2.3', '100.64.1.1', '192.0.2.1'],
      ],
    ],
    (a) => `${a} refused by default`,
  )
  const cidrs = ['10.0.0.0/8', '127.0.0.1/32', 'fd00::/8']
  t.ok(isAllowedOutbound('10.1.2.3', cidrs, open))
  t.ok(isAllowedOutbound('::ffff:10.1.2.3', cidrs, open), 'an IPv4-mapped address counts as its IPv4 address')
  t.ok(isAllowedOutbound('127.0.0.1', cidrs, open))
  t.notOk(isAllowedOutbound('127.0.0.2', cidrs, open), 'just outside the /32')
  t.ok(isAllowedOutbound('fd00::5', cidrs, open))
  t.notOk(isAllowedOutbound('192.168.0.10', cidrs, open))
  t.notOk(isAllowedOutbound('::1', cidrs, open), '::1 is not in an IPv4 network')
  t.match(decideOutbound('192.168.0.10', cidrs, open), {
    allowed: false,
    class: 'private',
    reason: 'private address outside OUTBOUND_ALLOWED_NETWORKS',
  })
})

t.test('public addresses are reachable, except air-gapped where only the allowed networks are', async (t) => {
  t.ok(isAllowedOutbound('8.8.8.8', [], open))
  t.ok(isAllowedOutbound('2606:4700:4700::1111', [], open))
  t.notOk(isAllowedOutbound('8.8.8.8', [], airGapped))
  t.notOk(isAllowedOutbound('8.8.8.8', ['10.0.0.0/8'], airGapped))
  t.ok(isAllowedOutbound('8.8.8.8', ['8.8.8.0/24'], airGapped))
  t.ok(isAllowedOutbound('10.9.9.9', ['10.0.0.0/8'], airGapped))
  t.match(decideOutbound('8.8.8.8', [], airGapped), { allowed: false, class: 'public', reason: /air-gapped/ })
  t.notOk(isAllowedOutbound('not an address', ['0.0.0.0/0'], open))
})

t.test('CIDRs are parsed strictly', async (t) => {
  t.equal(parseCidrs(['10.0.0.0/8', ' fd00::/8 ']).length, 2)
  for (const bad of ['10.0.0.0', '10.0.0.0/33', 'fd00::/129', 'host/8', '10.0.0.0/-1', '10.0.0.0/x'])
    t.throws(() => parseCidrs([bad]), /not a CIDR/, bad)
})

/** A resolver answering from a table, as a hostile or misconfigured DNS could. */
const table = (answers: Record<string, string[]>): Resolver & { asked: string[] } => {
  const asked: string[] = []
  return Object.assign(
    async (host: string) => {
      asked.push(host)
      const list = answers[host]
      if (!list) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' })
      return list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))
    },
    { asked },
  )
}

t.test('a hostname is judged by every address it resolves to', async (t) => {
  const dns = table({
    'metadata.internal': ['169.254.169.254'],
    'rebind.example': ['93.184.216.34', '127.0.0.1'],
    'mapped.example': ['::ffff:169.254.169.254'],
    'public.example': ['93.184.216.34', '2606:2800:220:1::1'],
    'intranet.example': ['10.20.30.40'],
    'nothing.example': [],
  })
  const policy = { allowedCidrs: ['10.0.0.0/8'], airGapped: false }
  const refused = async (host: string, pattern: RegExp) => {
    const err = await checkHost(host, policy, dns).then(
      () => null,
      (e: unknown) => e,
    )
    t.ok(err instanceof OutboundRefused, `${host} refused`)
    t.match((err as Error).message, pattern)
  }
  await refused(
    'metadata.internal',
    /metadata\.internal \(169\.254\.169\.254\) refused: metadata addresses are never reachable/,
  )
  await refused('rebind.example', /127\.0\.0\.1.*loopback address outside OUTBOUND_ALLOWED_NETWORKS/)
  await refused('mapped.example', /metadata/)
  await refused('nothing.example', /no addresses/)
  t.same(await checkHost('public.example', policy, dns), ['93.184.216.34', '2606:2800:220:1::1'])
  t.same(await checkHost('intranet.example', policy, dns), ['10.20.30.40'])
  await t.rejects(checkHost('intranet.example', { allowedCidrs: [], airGapped: false }, dns), OutboundRefused)
  await t.rejects(
    checkHost('public.example', { allowedCidrs: ['10.0.0.0/8'], allowedDomains: ['example'], airGapped: true }, dns),
    /air-gapped: only addresses inside OUTBOUND_ALLOWED_NETWORKS/,
  )
  await t.rejects(checkHost('missing.example', policy, dns), { code: 'ENOTFOUND' }, 'resolution failures pass through')

  dns.asked.length = 0
  await t.rejects(checkHost('0xA9FEA9FE', policy, dns), /metadata/)
  t.same(await checkHost('10.1.1.1', policy, dns), ['10.1.1.1'])
  t.same(dns.asked, [], 'IP literals, however written, are judged without asking DNS')
})

t.test(
  'air-gapped, a name outside OUTBOUND_ALLOWED_DOMAINS is refused without a DNS query; one under it is judged by its addresses',
  async (t) => {
    const dns = table({
      'llm.corp.example': ['10.1.2.3'],
      'LLM.Corp.Example.': ['10.1.2.3'],
      'corp.example': ['10.1.2.4'],
      'evil-corp.example': ['10.6.6.6'],
      'far.corp.example': ['93.184.216.34'],
    })
    const gapped = { allowedCidrs: ['10.0.0.0/8'], allowedDomains: ['corp.example'], airGapped: true }
    for (const host of ['api.openai.com', 'evil-corp.example', 'corpXexample', 'localhost']) {
      const err = await checkHost(host, gapped, dns).then(
        () => null,
        (e: unknown) => e,
      )
      t.ok(err instanceof OutboundRefused, `${host} refused`)
      t.match(
        err,
        {
          reason: 'air-gapped: only names under OUTBOUND_ALLOWED_DOMAINS are looked up',
          remedy: 'OUTBOUND_ALLOWED_DOMAINS',
          address: '',
        },
        `${host}: the setting that would allow it is named`,
      )
    }
    t.same(dns.asked, [], 'none of them was looked up')
    t.same(await checkHost('llm.corp.example', gapped, dns), ['10.1.2.3'], 'a name under a listed domain')
    t.same(await checkHost('LLM.Corp.Example.', gapped, dns), ['10.1.2.3'], 'in any case, with a trailing dot')
    t.same(await checkHost('corp.example', gapped, dns), ['10.1.2.4'], 'the domain itself')
    const caught = (p: Promise<unknown>) =>
      p.then(
        () => null,
        (e: unknown) => e,
      )
    t.match(
      await caught(checkHost('far.corp.example', gapped, dns)),
      { reason: /air-gapped: only addresses inside OUTBOUND_ALLOWED_NETWORKS/, remedy: 'OUTBOUND_ALLOWED_NETWORKS' },
      'a listed name still needs an allowed address',
    )
    t.same(await checkHost('10.9.9.9', gapped, dns), ['10.9.9.9'], 'an address needs no domain')
    const loose = { ...gapped, allowedDomains: [' .Corp.Example. ', ''] }
    t.same(
      await checkHost('llm.corp.example', loose, dns),
      ['10.1.2.3'],
      'listed domains are taken as config/schema.ts writes them',
    )
    t.match(
      await caught(checkHost('x..', loose, table({ 'x..': ['10.1.2.3'] }))),
      { remedy: 'OUTBOUND_ALLOWED_DOMAINS' },
      'an empty entry lists nothing',
    )
    dns.asked.length = 0
    t.same(
      await checkHost(
        'llm.example',
        { allowedCidrs: [], airGapped: false },
        table({ 'llm.example': ['93.184.216.34'] }),
      ),
      ['93.184.216.34'],
      'connected, the domains do not matter',
    )
    t.match(
      await caught(checkHost('169.254.169.254', gapped, dns)),
      { remedy: null, reason: /never reachable/ },
      'metadata: no setting allows it',
    )
  },
)

t.test('the system resolver: localhost is loopback', async (t) => {
  await t.rejects(
    checkHost('localhost', { allowedCidrs: [], airGapped: false }),
    /loopback address outside OUTBOUND_ALLOWED_NETWORKS/,
  )
  const ok = await checkHost('localhost', {
    allowedCidrs: ['127.0.0.0/8', '::1/128'],
    allowedDomains: ['localhost'],
    airGapped: true,
  })
  t.ok(ok.length >= 1 && ok.every((a) => a === '::1' || a.startsWith('127.')))
})

/** A local HTTP server counting what reaches it. */
async function server(t: Test, handler: http.RequestListener) {
  let hits = 0
  const port = await listenLoopback(
    t,
    http.createServer((req, res) => {
      hits++
      handler(req, res)
    }),
  )
  return { port, hits: () => hits }
}

t.test('outbound fetch connects only where the policy allows, to the address it judged', async (t) => {
  const srv = await server(t, (req, res) => {
    let body = ''
    req.on('data', (c) => (body += c))
    req.on('end', () => {
      if (req.url === '/redirect') return res.writeHead(302, { location: 'http://169.254.169.254/' }).end()
      if (req.url === '/big') return res.end(Buffer.alloc(4096, 'x'))
      if (req.url === '/gzip')
        return res
          .writeHead(200, { 'content-encoding': 'gzip', 'content-type': 'application/json' })
          .end(gzipSync('{"zipped":true}'))
      if (req.url === '/slow') return setTimeout(() => res.end('late'), 2000)
      res.writeHead(201, { 'content-type': 'application/json', 'x-echo': req.headers['content-type'] ?? '' })
      res.end(JSON.stringify({ method: req.method, body }))
    })
  })
  const closed = (f: { close(): void }) => t.teardown(() => f.close())

  const strict = outboundFetch({ allowedCidrs: [], airGapped: false })
  closed(strict)
  for (const host of [
    `127.0.0.1:${srv.port}`,
    `localhost:${srv.port}`,
    `[::ffff:127.0.0.1]:${srv.port}`,
    `2130706433:${srv.port}`,
  ]) {
    const err = await strict(`http://${host}/`).then(
      () => null,
      (e: unknown) => e,
    )
    t.ok(err instanceof TypeError, `${host}: fails like fetch`)
    t.match(
      refusalIn(err),
      { reason: /loopback address outside OUTBOUND_ALLOWED_NETWORKS/ },
      `${host}: the policy's refusal is the cause`,
    )
  }
  t.equal(srv.hits(), 0, 'nothing reached the server')

  const allowed = outboundFetch(
    { allowedCidrs: ['127.0.0.0/8', '::1/128'], airGapped: false },
    { maxResponseBytes: 1024, timeoutMs: 500 },
  )
  closed(allowed)
  const post = await allowed(`http://localhost:${srv.port}/echo`, {
    method: 'POST',
    body: new URLSearchParams({ a: '1', b: 'two' }),
  })
  t.equal(post.status, 201)
  t.same(await post.json(), { method: 'POST', body: 'a=1&b=two' })
  t.match(post.headers.get('x-echo'), /^application\/x-www-form-urlencoded/)
  const redirect = await allowed(`http://127.0.0.1:${srv.port}/redirect`, { redirect: 'manual' })
  t.equal(redirect.status, 302, 'redirects are handed back, never followed')
  t.equal(redirect.headers.get('location'), 'http://169.254.169.254/')
  const gz = await allowed(`http://127.0.0.1:${srv.port}/gzip`)
  t.same(await gz.json(), { zipped: true })
  t.equal(gz.headers.get('content-encoding'), null)
  await t.rejects(allowed(`http://127.0.0.1:${srv.port}/big`), {
    message: 'fetch failed',
    cause: { message: /larger than 1024 bytes/ },
  })
  await t.rejects(allowed(`http://127.0.0.1:${srv.port}/slow`), {
    message: 'fetch failed',
    cause: { code: 'ETIMEDOUT' },
  })
  await t.rejects(
    allowed(`http://127.0.0.1:${srv.port}/slow`, { signal: AbortSignal.timeout(50) }),
    { name: 'TimeoutError' },
    "the caller's signal ends it as fetch would",
  )
  const aborted = new AbortController()
  aborted.abort()
  await t.rejects(allowed(`http://127.0.0.1:${srv.port}/echo`, { signal: aborted.signal }), { name: 'AbortError' })
  await t.rejects(allowed('ftp://127.0.0.1/'), /only http: and https:/)

  const metadata = outboundFetch({ allowedCidrs: ['0.0.0.0/0'], airGapped: false })
  closed(metadata)
  for (const url of [
    'http://169.254.169.254/latest/meta-data/',
    'http://2852039166/',
    'http://0xA9FEA9FE/',
    'http://[::ffff:a9fe:a9fe]/',
    'http://[fd00:ec2::254]/',
  ]) {
    const err = await metadata(url).then(
      () => null,
      (e: unknown) => e,
    )
    t.match(refusalIn(err), { reason: /metadata addresses are never reachable/ }, url)
  }

  // A name that resolves to a forbidden address is caught at connect time, through the pinned lookup.
  const hostile = outboundFetch(
    compilePolicy({ allowedCidrs: [], airGapped: false }, table({ 'idp.example': ['169.254.169.254'] })),
  )
  closed(hostile)
  const err = await hostile('http://idp.example/.well-known/openid-configuration').then(
    () => null,
    (e: unknown) => e,
  )
  t.match(refusalIn(err), { host: 'idp.example', address: '169.254.169.254' })
})

t.test('the connect-time lookup answers in both shapes net asks for, allowed addresses only', async (t) => {
  const p = compilePolicy(
    { allowedCidrs: ['10.0.0.0/8', 'fd00::/8'], airGapped: false },
    table({ 'both.example': ['10.0.0.7', 'fd00::7'], 'bad.example': ['10.0.0.7', '169.254.169.254'] }),
  )
  const ask = (host: string, options: { all?: boolean; family?: number }) =>
    new Promise<{ err: unknown; address: unknown; family: unknown }>((resolve) =>
      p.lookup(host, options, (err, address, family) => resolve({ err, address, family })),
    )
  t.match(await ask('both.example', { all: true }), {
    err: null,
    address: [
      { address: '10.0.0.7', family: 4 },
      { address: 'fd00::7', family: 6 },
    ],
  })
  t.match(await ask('both.example', {}), { err: null, address: '10.0.0.7', family: 4 })
  t.match(await ask('both.example', { family: 6 }), { err: null, address: 'fd00::7', family: 6 })
  t.match(await ask('bad.example', { all: true }), { err: { name: 'OutboundRefused', address: '169.254.169.254' } })
  const v4only = compilePolicy(
    { allowedCidrs: ['10.0.0.0/8'], airGapped: false },
    table({ 'v4.example': ['10.0.0.7'] }),
  )
  const none = await new Promise<unknown>((resolve) =>
    v4only.lookup('v4.example', { family: 6 }, (err) => resolve(err)),
  )
  t.match(none, { code: 'ENOTFOUND' })
  t.equal(refusalIn(new Error('other')), null)
})

t.test('truncateResponse keeps the first maxResponseBytes of a larger response instead of failing', async (t) => {
  const body = Buffer.from('0123456789abcdefghijklmnopqrstuvwxyz'.repeat(3).slice(0, 100))
  const gzipped = gzipSync(body)
  const srv = await server(t, (req, res) => {
    if (req.url === '/gzip')
      return res.writeHead(200, { 'content-encoding': 'gzip', 'content-type': 'text/plain' }).end(gzipped)
    if (req.url === '/exact') return res.writeHead(200, { 'content-type': 'text/plain' }).end(body.subarray(0, 16))
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(body.length) }).end(body)
  })
  t.equal(body.length, 100)
  const policy = { allowedCidrs: ['127.0.0.0/8'], airGapped: false }

  const truncating = outboundFetch(policy, { maxResponseBytes: 16, truncateResponse: true, timeoutMs: 2000 })
  t.teardown(() => truncating.close())
  const res = await truncating(`http://127.0.0.1:${srv.port}/`)
  t.equal(res.status, 200)
  t.equal(res.headers.get('content-type'), 'text/plain')
  t.same(Buffer.from(await res.arrayBuffer()), body.subarray(0, 16), 'the first 16 bytes')
  const gz = await truncating(`http://127.0.0.1:${srv.port}/gzip`)
  t.equal(gz.status, 200)
  t.equal(await gz.text(), body.subarray(0, 16).toString(), 'a compressed body is cut after decoding')
  t.equal(gz.headers.get('content-encoding'), null)
  const exact = await truncating(`http://127.0.0.1:${srv.port}/exact`)
  t.equal(await exact.text(), body.subarray(0, 16).toString(), 'a body of exactly the limit is whole')
  const again = await truncating(`http://127.0.0.1:${srv.port}/`)
  t.equal(Buffer.from(await again.arrayBuffer()).length, 16, 'the next request, after a cut one, works as well')

  const strict = outboundFetch(policy, { maxResponseBytes: 16, timeoutMs: 2000 })
  t.teardown(() => strict.close())
  const err = await strict(`http://127.0.0.1:${srv.port}/`).then(
    () => null,
    (e: unknown) => e,
  )
  t.ok(err instanceof TypeError, 'fails like fetch')
  t.match(err, { message: 'fetch failed', cause: { message: /larger than 16 bytes/ } })
  t.equal(refusalIn(err), null, 'not a policy refusal')
  await t.rejects(
    strict(`http://127.0.0.1:${srv.port}/gzip`),
    { message: 'fetch failed', cause: { message: /larger than 16 bytes/ } },
    'the decoded size counts',
  )
  t.equal(
    await (await strict(`http://127.0.0.1:${srv.port}/exact`)).text(),
    body.subarray(0, 16).toString(),
    'exactly the limit is not larger',
  )

  // The policy still applies to a truncating fetch.
  const closedOff = outboundFetch(
    { allowedCidrs: [], airGapped: false },
    { maxResponseBytes: 16, truncateResponse: true },
  )
  t.teardown(() => closedOff.close())
  const refused = await closedOff(`http://127.0.0.1:${srv.port}/`).then(
    () => null,
    (e: unknown) => e,
  )
  t.match(refusalIn(refused), { reason: /loopback address outside OUTBOUND_ALLOWED_NETWORKS/ })
  t.equal(srv.hits(), 7, 'the refused request never reached the server')
})

t.test(
  'an allow-listed IPv4 network admits its IPv4-mapped form only, not NAT64 or 6to4 addresses that reach a gateway first',
  async (t) => {
    const allowed = ['10.0.0.0/8']
    for (const airGapped of [false, true]) {
      t.equal(
        decideOutbound('::ffff:10.0.0.1', allowed, { airGapped }).allowed,
        true,
        `IPv4-mapped (air-gapped ${airGapped})`,
      )
      for (const ip of ['2002:a00:1::1', '64:ff9b::a00:1']) {
        t.equal(decideOutbound(ip, allowed, { airGapped }).allowed, false, `${ip} (air-gapped ${airGapped})`)
      }
    }
  },
)

t.test(
  'stream: the response resolves at its headers and its body arrives as the server sends it, bounded all the same',
  async (t) => {
    // The server sends the next piece only once the client has seen the previous one: a buffered
    // fetch would wait forever, a streamed one reads it piece by piece.
    const gates: (() => void)[] = []
    const released: string[] = []
    const srv = await server(t, (req, res) => {
      if (req.url === '/gated') {
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        let n = 0
        const next = () => {
          if (n === 3) return void res.end('data: end\n\n')
          res.write(`data: ${n++}\n\n`)
          gates.push(next)
        }
        return next()
      }
      if (req.url === '/gzip') {
        res.writeHead(200, { 'content-encoding': 'gzip' })
        return void res.end(gzipSync('zipped and streamed'))
      }
      if (req.url === '/big') {
        res.writeHead(200)
        res.write(Buffer.alloc(10, 'a'))
        return void setTimeout(() => res.end(Buffer.alloc(100, 'b')), 20)
      }
      if (req.url === '/endless') {
        res.writeHead(200)
        res.write('first\n')
        const tick = setInterval(() => res.write('more\n'), 10)
        res.on('close', () => {
          clearInterval(tick)
          released.push(req.url!)
        })
        return
      }
      if (req.url === '/die') {
        res.writeHead(200)
        res.write('partial')
        return void setTimeout(() => res.destroy(), 20)
      }
      res.writeHead(204).end()
    })
    const policy = { allowedCidrs: ['127.0.0.0/8'], airGapped: false }
    const streaming = outboundFetch(policy, { stream: true, maxResponseBytes: 64, timeoutMs: 2000 })
    t.teardown(() => streaming.close())
    const base = `http://127.0.0.1:${srv.port}`

    const res = await streaming(`${base}/gated`)
    t.equal(res.status, 200)
    t.equal(res.headers.get('content-type'), 'text/event-stream')
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader()
    const seen: string[] = []
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      seen.push(value)
      gates.shift()?.()
    }
    t.same(seen, ['data: 0\n\n', 'data: 1\n\n', 'data: 2\n\n', 'data: end\n\n'], 'each piece before the next was sent')

    t.equal(await (await streaming(`${base}/gzip`)).text(), 'zipped and streamed', 'decoded as it streams')
    t.equal((await streaming(`${base}/none`)).body, null, 'no body for 204')

    const big = await streaming(`${base}/big`)
    t.equal(big.status, 200, 'the headers arrive before the limit is passed')
    await t.rejects(big.text(), { message: 'fetch failed', cause: { message: /larger than 64 bytes/ } })

    const truncating = outboundFetch(policy, {
      stream: true,
      maxResponseBytes: 64,
      truncateResponse: true,
      timeoutMs: 2000,
    })
    t.teardown(() => truncating.close())
    t.equal(
      await (await truncating(`${base}/big`)).text(),
      'a'.repeat(10) + 'b'.repeat(54),
      'truncateResponse ends the stream at the limit',
    )
    await t.rejects(
      (await streaming(`${base}/die`)).text(),
      { message: 'fetch failed', cause: { code: 'ECONNRESET' } },
      'a connection lost mid-body errors it',
    )

    const controller = new AbortController()
    const endless = await streaming(`${base}/endless`, { signal: controller.signal })
    const r = endless.body!.getReader()
    t.equal(new TextDecoder().decode((await r.read()).value), 'first\n')
    controller.abort()
    await t.rejects(r.read(), { name: 'AbortError' }, 'an abort mid-body errors the body')

    const slow = outboundFetch(policy, { stream: true, maxResponseBytes: 1_000_000, timeoutMs: 100 })
    t.teardown(() => slow.close())
    const timed = await slow(`${base}/endless`)
    await t.rejects(
      timed.text(),
      { message: 'fetch failed', cause: { code: 'ETIMEDOUT' } },
      'the whole-exchange timeout ends the body',
    )

    const cancelled = await streaming(`${base}/endless`)
    await cancelled.body!.cancel()
    await new Promise((resolve) => setTimeout(resolve, 50))
    t.equal(released.length, 3, 'abort, timeout and cancel each closed the connection')

    const refusing = outboundFetch({ allowedCidrs: [], airGapped: false }, { stream: true })
    t.teardown(() => refusing.close())
    t.match(
      refusalIn(await refusing(`${base}/gated`).catch((e: unknown) => e)),
      { reason: /loopback/ },
      'the policy still applies',
    )
  },
)
