// The event streams' shared rules (server/http/sse.ts): what a Last-Event-ID may be, on the run and
// the chat stream alike.
import t from 'tap'
import { MAX_EVENT_ID } from '../../../server/http/sse.js'
import { testApp } from '../../helpers/app.js'

// No job runner: the run stays queued until cancelled, so the test needs no model.
const h = await testApp(t, { OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' })

t.test(
  'a Last-Event-ID beyond the largest event id is VALIDATION_ERROR on the run and chat streams, never 500',
  async (t) => {
    // found by the second hardening round: ids from 2^31 to 9,999,999,999 failed in PostgreSQL's integer with 500
    const { call } = await h.tenant()
    await call('PATCH', '/api/v1/tenant/settings/llm', {
      provider: 'openai-compatible',
      baseUrl: 'http://127.0.0.1:9/v1',
      model: 'm',
    })
    const projectId = (await call('POST', '/api/v1/projects', { name: 'streams' })).body.data.id
    const agentId = (
      await call('POST', '/api/v1/agents', { name: 'a', systemPrompt: '', config: { autonomyLevel: 'low' } })
    ).body.data.id
    // No job runner here: the run stays queued (wait=0: the request does not wait for it).
    const run = (await call('POST', `/api/v1/agents/${agentId}/execute?wait=0`, { goal: 'g', projectId })).body.data
    t.equal(
      (await call('POST', `/api/v1/agents/${agentId}/runs/${run.id}/cancel`)).status,
      202,
      'the run has ended: its stream ends too',
    )
    const sessionId = (await call('POST', '/api/v1/chat/sessions')).body.data.id
    const streams = [`/api/v1/agents/${agentId}/runs/${run.id}/stream`, `/api/v1/chat/sessions/${sessionId}/stream`]
    for (const url of streams) {
      for (const id of [String(MAX_EVENT_ID + 1), '4294967296', '9999999999']) {
        const header = await call('GET', url, undefined, { 'last-event-id': id })
        t.equal(header.status, 400, `${url} Last-Event-ID ${id}`)
        t.match(header.body.error, { code: 'VALIDATION_ERROR', details: { errors: [{ field: 'Last-Event-ID' }] } })
        const query = await call('GET', `${url}?lastEventId=${id}`)
        t.equal(query.status, 400, `${url}?lastEventId=${id}`)
      }
    }
    const last = await call('GET', streams[0]!, undefined, { 'last-event-id': String(MAX_EVENT_ID) })
    t.equal(last.status, 200, 'the largest id is one a stream could have sent: nothing after it')
    t.equal(last.raw.toString('utf8').match(/^id: /gm), null, 'no events after it')
  },
)
