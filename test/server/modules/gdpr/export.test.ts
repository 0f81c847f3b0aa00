// The GDPR export: a person invited into a tenant (a webhook receiver hears of it), who accepts, makes
// a key, starts an agent run, then asks for their data: each part holds what it should, and nothing
// of anyone else.
import t from 'tap'
import { caller } from '../../../helpers/app.js'
import { fakeLlm } from '../../../helpers/fake-llm.js'
import { suffix } from '../../../helpers/platform.js'
import { receiver, SECRET, webhookApp } from '../webhooks/helpers.js'
import { apiKeyTags } from '../../../../server/modules/api-keys/keys.js'
import { createKey } from '../../../../server/modules/api-keys/service.js'

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const PASSWORD = 'a long enough passphrase'

const h = await webhookApp(t, {}, { webhookWorker: { pollMs: 50, schedule: [0.1, 0.1] }, jobs: { pollMs: 50 } })
const llm = await fakeLlm(t)
const owner = await h.tenant('enterprise')
const rx = await receiver(t)
if (
  (await owner.call('POST', '/api/v1/webhooks', { url: rx.url, events: ['user.created'], secret: SECRET })).status !==
  201
)
  throw new Error('webhook')
await owner.call('PATCH', '/api/v1/tenant/settings/llm', {
  provider: 'openai-compatible',
  baseUrl: llm.url,
  model: 'test-model',
  apiKey: 'sk-gdpr-test-0123456789',
})

// The person: invited, accepted (a consent), signed in.
const email = `person-${suffix()}@example.com`
const invited = await owner.call('POST', '/api/v1/tenant/team/members', { email, role: 'admin' })
const userId = invited.body.data.member.id as string
const accepted = await h.anonymous(
  'POST',
  '/api/v1/auth/invitations/accept',
  { token: invited.body.data.invitation.token, password: PASSWORD },
  { 'user-agent': 'gdpr-test-browser' },
)
const access = (await h.anonymous('POST', '/api/v1/auth/exchange', { token: accepted.body.data.token })).body.data
  .accessToken as string
const person = caller(h.app, access)
await rx.waitFor(1, 10_000)

// What they do: a key, and an agent run.
const key = (
  await person('POST', '/api/v1/api-keys', { name: 'my laptop', type: 'sdk', permissions: ['projects:read'] })
).body.data
const project = (await person('POST', '/api/v1/projects', { name: 'Theirs' })).body.data
const agent = (
  await person('POST', '/api/v1/agents', { name: 'Aide', systemPrompt: '', config: { autonomyLevel: 'low' } })
).body.data
llm.push({ text: 'done', usage: { input: 3, output: 1 } })
const run = (await person('POST', `/api/v1/agents/${agent.id}/execute`, { goal: 'tidy up', projectId: project.id }))
  .body.data
for (
  let i = 0;
  i < 200 && (await person('GET', `/api/v1/agents/${agent.id}/runs/${run.id}`)).body.data.status !== 'completed';
  i++
)
  await sleep(50)

// Someone else in the same tenant, whose data must not appear.
const other = await owner.call('POST', '/api/v1/tenant/team/members', {
  email: `other-${suffix()}@example.com`,
  role: 'member',
})

t.test('the person’s export: personal data, processing history, consents and who got their data', async (t) => {
  const r = await person('POST', '/api/v1/gdpr/export', { format: 'json' })
  t.equal(r.status, 200, JSON.stringify(r.body))
  const doc = r.body.data
  t.match(doc, { format: 'atrium.gdpr-export', formatVersion: 1, subject: { userId, email } })
  t.match(doc.personalData.user, { id: userId, email, role: 'admin', status: 'active', lastLoginAt: String })
  t.match(doc.personalData.memberships, [{ tenantId: owner.tenantId, role: 'admin' }])
  t.match(doc.personalData.sessions, [{ method: 'invitation', userAgent: 'gdpr-test-browser' }])
  t.match(doc.personalData.apiKeys, [{ id: key.id, name: 'my laptop', type: 'sdk', permissions: ['projects:read'] }])
  t.notMatch(JSON.stringify(doc), new RegExp(key.key), 'never a key’s secret')
  const actions = doc.processingHistory.map((e: { action: string }) => e.action)
  t.ok(
    ['key.created', 'agent.run_started', 'auth.invitation_accepted'].every((a) => actions.includes(a)),
    `what they did: ${actions.join(', ')}`,
  )
  t.ok(
    doc.processingHistory.some((e: { target: { id: string } }) => e.target.id === userId),
    'what was done to their account',
  )
  t.match(doc.consentRecords, [{ kind: 'invitation-accepted', at: String }])
  t.match(
    doc.dataSharingLog.find((s: { recipient: string }) => s.recipient === 'model-provider'),
    { runId: run.id, host: new URL(llm.url).host, model: null },
  )
  t.match(
    doc.dataSharingLog.find((s: { recipient: string }) => s.recipient === 'webhook-receiver'),
    { host: new URL(rx.url).host, what: /user\.created/, status: 'succeeded' },
  )
  t.notMatch(JSON.stringify(doc), new RegExp(other.body.data.member.id), 'nothing of another person')
})

t.test('the export is itself recorded, and is in the next one', async (t) => {
  const r = await person('POST', '/api/v1/gdpr/export', {})
  t.ok(r.body.data.processingHistory.some((e: { action: string }) => e.action === 'gdpr.exported'))
})

t.test('a credential that is no person’s is FORBIDDEN; a bad body is VALIDATION_ERROR', async (t) => {
  const nobodys = await h.platform.db.system((sql) =>
    createKey(sql, apiKeyTags(h.platform.secrets), { tenantId: owner.tenantId, type: 'ci', permissions: ['*'] }),
  )
  const r = await caller(h.app, nobodys.key)('POST', '/api/v1/gdpr/export', {})
  t.equal(r.status, 403, 'a key made by no user')
  t.equal(r.body.error.code, 'FORBIDDEN')
  t.same(r.body.error.details, { required: 'user' })
  const bad = await person('POST', '/api/v1/gdpr/export', { format: 'xml' })
  t.equal(bad.status, 400)
  t.equal(bad.body.error.code, 'VALIDATION_ERROR')
  t.equal((await h.anonymous('POST', '/api/v1/gdpr/export', {})).status, 401)
})
