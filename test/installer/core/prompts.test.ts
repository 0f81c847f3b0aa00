// The interactive installer's questions: which are asked for which site, and how answers are judged and recorded.
import t from 'tap'
import { DEFAULT_ANSWERS, type Answers } from '../../../installer/core/answers.js'
import { applyAnswer, checkAnswer, promptsFor } from '../../../installer/core/prompts.js'

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
