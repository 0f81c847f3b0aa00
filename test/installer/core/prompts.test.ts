// The interactive questions: which are asked for which site, what each offers, how answers are judged and recorded,
// and what each refuses, the license key verified at the prompt.
import t from 'tap'
import { SignJWT } from 'jose'
import { DEFAULT_ANSWERS, parseAnswers, type Answers } from '../../../installer/core/answers.js'
import { answerProblem, applyAnswer, checkAnswer, promptsFor } from '../../../installer/core/prompts.js'
import { DAY, testLicense, testVendor } from '../../helpers/license.js'

const compose: Answers = { ...DEFAULT_ANSWERS, config: {} }
const keyOf = (a: Answers, existing: Record<string, string> | null = null) => promptsFor(a, existing).map((p) => p.key)
const promptOf = (a: Answers, key: string, existing: Record<string, string> | null = null) =>
  promptsFor(a, existing).find((p) => p.key === key)!

t.test('an air-gapped site is asked what its server may still reach, optionally; a connected one is not', async (t) => {
  const airGapped = { ...compose, mode: 'air-gapped' as const }
  const keys = keyOf(airGapped)
  t.ok(keys.indexOf('OUTBOUND_ALLOWED_NETWORKS') > keys.indexOf('LICENSE_KEY'), 'after the license')
  t.equal(keys.indexOf('OUTBOUND_ALLOWED_DOMAINS'), keys.indexOf('OUTBOUND_ALLOWED_NETWORKS') + 1)
  const networks = promptOf(airGapped, 'OUTBOUND_ALLOWED_NETWORKS')
  t.match(networks, { required: false, initial: '', label: /comma-separated CIDRs/ })
  t.equal(checkAnswer(networks, ''), null, 'Enter for none')
  t.equal(checkAnswer(networks, '10.20.0.0/16, 192.168.5.0/24'), null)
  t.match(checkAnswer(networks, '10.20.0.0/33'), /OUTBOUND_ALLOWED_NETWORKS/, 'a CIDR that is none is refused')
  const domains = promptOf(airGapped, 'OUTBOUND_ALLOWED_DOMAINS')
  t.equal(checkAnswer(domains, 'corp.example'), null)
  t.match(checkAnswer(domains, 'not a domain!'), /OUTBOUND_ALLOWED_DOMAINS/)
  t.same(applyAnswer(airGapped, networks, '10.20.0.0/16').config, { OUTBOUND_ALLOWED_NETWORKS: '10.20.0.0/16' })
  t.notOk(keyOf(compose).includes('OUTBOUND_ALLOWED_NETWORKS'), 'connected: not asked')
  t.notOk(keyOf(compose).includes('OUTBOUND_ALLOWED_DOMAINS'))
  t.match(
    promptOf(airGapped, 'OUTBOUND_ALLOWED_NETWORKS', { OUTBOUND_ALLOWED_NETWORKS: '10.9.0.0/16' }),
    { initial: '10.9.0.0/16' },
    'what is written is offered',
  )
})

t.test(
  'a Compose site is asked where it is published: loopback offered behind TLS with its own S3, every interface otherwise, what is written first',
  async (t) => {
    const keys = keyOf(compose)
    t.equal(keys.indexOf('bindAddress'), keys.indexOf('LICENSE_KEY') - 1, 'after the services, before the license')
    t.notOk(keyOf({ ...compose, target: 'helm' }).includes('bindAddress'), 'helm: the chart has no published port')
    const https = (config: Answers['config']) => ({
      ...compose,
      config: { PUBLIC_URL: 'https://ai.example', ...config },
    })
    t.equal(promptOf(https({ R2_ENDPOINT: 'https://s3.internal' }), 'bindAddress').initial, '127.0.0.1')
    t.equal(promptOf(https({ R2_ENDPOINT: '' }), 'bindAddress').initial, '0.0.0.0', "the bundled MinIO's links")
    t.equal(
      promptOf({ ...compose, config: { PUBLIC_URL: 'http://ai.example:8080' } }, 'bindAddress').initial,
      '0.0.0.0',
    )
    t.equal(
      promptOf(https({ R2_ENDPOINT: 'https://s3.internal' }), 'bindAddress', { ATRIUM_BIND_ADDRESS: '10.0.0.5' })
        .initial,
      '10.0.0.5',
      'what is written stays',
    )
    const bind = promptOf(compose, 'bindAddress')
    t.equal(checkAnswer(bind, '::1'), null)
    t.equal(checkAnswer(bind, '192.168.1.20'), null)
    for (const wrong of ['localhost', '0.0.0.0:8080', '10.0.0.256', 'every interface'])
      t.match(checkAnswer(bind, wrong), /^The address must be an IP address of this machine/, wrong)
    t.equal(applyAnswer(compose, bind, ' 127.0.0.1 ').bindAddress, '127.0.0.1')
  },
)

t.test('an answers file may set the bind address, and it must be an IP address', async (t) => {
  t.equal(parseAnswers('bindAddress: 127.0.0.1\n').answers.bindAddress, '127.0.0.1')
  t.same(parseAnswers('bindAddress: ""\n').problems, [], 'empty: what is written, or every interface')
  t.match(parseAnswers('bindAddress: localhost\n').problems, [
    'bindAddress: must be an IP address of this machine (got "localhost"): 0.0.0.0 for every interface, 127.0.0.1 for this machine only',
  ])
})

t.test(
  'the license key is verified at the prompt: one cut short, altered or of another kind is refused there',
  async (t) => {
    const vendor = testVendor()
    const keys = vendor.keys
    const license = promptOf(compose, 'LICENSE_KEY')
    const key = await testLicense(vendor)
    t.equal(await answerProblem(license, key, { keys }), null)
    t.equal(await answerProblem(license, `  ${key}\n`, { keys }), null, 'pasted with spaces and a line end')
    const cut = /^The license key is not a license \(it is cut short/
    t.match(await answerProblem(license, key.slice(0, -12), { keys }), cut, 'cut short in its signature')
    t.match(await answerProblem(license, key.slice(0, key.lastIndexOf('.') - 5), { keys }), cut, 'cut in its claims')
    const [head, body, signature] = key.split('.')
    const flipped = `${head}.${body}.${signature![0] === 'A' ? 'B' : 'A'}${signature!.slice(1)}`
    t.match(await answerProblem(license, flipped, { keys }), /signature does not match/, 'altered')
    const other = await new SignJWT({ sub: 'x' })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT' })
      .sign(vendor.privateKey)
    t.match(await answerProblem(license, other, { keys }), /is not an Atrium license key/, 'another token')
    t.match(await answerProblem(license, '', { keys }), /License key is required/)

    // Its state is for the checks to judge, with what to do: the prompt takes it.
    const expired = await testLicense(vendor, {
      issuedAt: new Date(Date.now() - 400 * DAY),
      expiresAt: new Date(Date.now() - 100 * DAY),
    })
    t.equal(await answerProblem(license, expired, { keys }), null, 'expired: the checks say so')
    t.equal(await answerProblem(license, key), null, 'a key this installer does not know: the checks say so')
    t.match(await answerProblem(license, key.slice(0, -12)), cut, 'but cut short, it is refused all the same')
  },
)

const helm: Answers = { ...DEFAULT_ANSWERS, target: 'helm', mode: 'air-gapped', config: {} }
const asked = (answers: Answers, existing: Record<string, string> | null = null) =>
  promptsFor(answers, existing).find((p) => p.key === 'servicesCidrs')

t.test(
  'air-gapped helm asks for the networks of services named by host name, after the services and only then',
  async (t) => {
    t.notOk(asked(helm), 'no service named yet')
    const named = { ...helm, config: { DATABASE_URL: 'postgres://u:pw@db.corp.localhost/atrium' } }
    const prompt = asked(named)!
    t.match(prompt, { label: /^Networks \(CIDRs, comma-separated\) of db\.corp\.localhost:/, required: true })
    t.notMatch(prompt.label, /pw/, 'the host only, never the credentials')
    const keys = promptsFor(named, null).map((p) => p.key)
    t.ok(keys.indexOf('servicesCidrs') > keys.indexOf('R2_SECRET_ACCESS_KEY'), 'after every service setting')
    t.match(
      asked(helm, { REDIS_URL: 'redis://cache.corp.localhost' }),
      { label: /of cache\.corp\.localhost:/ },
      'a re-run judges what is written',
    )
    const inCluster = {
      ...helm,
      config: { DATABASE_URL: 'postgres://u:p@postgres/atrium', REDIS_URL: 'redis://10.0.0.5' },
    }
    t.notOk(asked(inCluster), 'cluster services and addresses are derived')
    t.notOk(asked({ ...named, mode: 'connected' }), 'connected: egress is open')
    t.notOk(asked({ ...named, target: 'compose' }), 'compose: no NetworkPolicy')
  },
)

t.test('the networks are checked as CIDRs and recorded as a list, offered again as typed', async (t) => {
  const named = { ...helm, config: { DATABASE_URL: 'postgres://u:p@db.corp.localhost/atrium' } }
  const prompt = asked(named)!
  t.equal(checkAnswer(prompt, '10.20.0.0/16, 10.30.0.7/32'), null)
  t.match(checkAnswer(prompt, '10.20.0.0/16, db.corp.localhost'), /^The networks: not CIDRs: db\.corp\.localhost/)
  t.match(checkAnswer(prompt, ''), /is required/)
  const answered = applyAnswer(named, prompt, ' 10.20.0.0/16, 10.30.0.7/32 ')
  t.same(answered.servicesCidrs, ['10.20.0.0/16', '10.30.0.7/32'])
  t.equal(asked(answered)!.initial, '10.20.0.0/16,10.30.0.7/32')
})
