// The endpoint rules of webhooks/service.ts on their own: the plan's endpoint limit, which events an
// endpoint may hear, what an update changes (and what disabling or enabling it resets), secret
// rotation, and when a test event or a retry is refused. What the service reads and writes is
// replaced by rows in memory: no database. routes.test.ts checks the same through the API.
import t, { type Test } from 'tap'
import type * as Service from '../../../../server/modules/webhooks/service.js'
import type { DeliveryRow, Owner, WebhookRow } from '../../../../server/modules/webhooks/store.js'
import type { Actor } from '../../../../server/domain/actor.js'
import type { Principal } from '../../../../server/domain/principal.js'
import { compilePolicy } from '../../../../server/platform/outbound.js'
import type { SecretContext, Secrets } from '../../../../server/platform/secrets.js'
import { fakeDb, replacing } from '../../../helpers/fake-db.js'

type Plan = NonNullable<Principal['plan']>
const TENANT = '01900000-0000-7000-8000-0000000000aa'
const NOW = Date.parse('2030-01-01T00:00:00Z')
const SECRET = 'a-raw-secret-of-enough-characters'
const URL_OK = 'https://hooks.example.com/atrium'
const origin = { ip: '10.0.0.1', userAgent: 'unit' }

const principal = (plan: Plan | null): Principal => ({
  kind: 'api_key',
  id: 'key-1',
  tenantId: TENANT,
  plan,
  userId: 'user-1',
  role: null,
  sessionId: null,
  permissions: new Set(['*']),
})
const webhook = (over: Partial<WebhookRow> = {}): WebhookRow => ({
  id: 'wh-1',
  tenant_id: TENANT,
  url: URL_OK,
  description: '',
  events: ['project.created'],
  secret_sealed: `sealed:${SECRET}`,
  previous_secret_sealed: null,
  previous_secret_expires_at: null,
  secret_rotated_at: null,
  status: 'enabled',
  disabled_reason: null,
  disabled_message: null,
  disabled_at: null,
  failing_since: null,
  last_success_at: null,
  created_at: new Date(0),
  updated_at: new Date(0),
  ...over,
})
const delivery = (status: DeliveryRow['status']) =>
  ({ id: 'd-1', webhook_id: 'wh-1', event_id: 'e-1', status }) as DeliveryRow

/** Sealing that shows what it sealed, for which field: enough to see which secret went where. */
const secrets = {
  keyId: 'k',
  encrypt: (plain: string, ctx: SecretContext) => `sealed:${plain}${ctx.field === 'secret' ? '' : `:${ctx.field}`}`,
  decrypt: (stored: string) => stored.replace(/^sealed:/, '').replace(/:previous_secret$/, ''),
  deriveKey: () => Buffer.alloc(32),
} satisfies Secrets

interface World {
  count?: number
  current?: WebhookRow
  delivery?: DeliveryRow
}

/** The webhooks service on rows in memory; `log` is every write, in order. */
async function hooks(t: Test, world: World = {}) {
  const log: unknown[][] = []
  const { webhooksService } = await replacing<typeof Service>(
    t,
    import.meta.url,
    '../../../../server/modules/webhooks/service.js',
    {
      './store.js': {
        countWebhooksForCreation: async () => (log.push(['count']), world.count ?? 0),
        insertWebhook: async (_sql: unknown, w: { owner: string | null; events: string[]; secretSealed: string }) => (
          log.push(['insert', w.owner, w.events]),
          webhook({ events: w.events })
        ),
        selectWebhook: async () => (world.current ? [world.current] : []),
        updateWebhook: async (_sql: unknown, _owner: unknown, _id: string, c: Record<string, unknown>) => (
          log.push(['update', c]),
          webhook()
        ),
        failPendingDeliveries: async () => void log.push(['fail pending']),
        rotateSecret: async (_sql: unknown, _owner: unknown, _id: string, r: Record<string, unknown>) => (
          log.push(['rotate', r]),
          webhook()
        ),
        insertDirectEvent: async (_sql: unknown, e: { type: string }) => void log.push(['event', e.type]),
        selectDelivery: async () => (world.delivery ? [world.delivery] : []),
        requeueDelivery: async () => void log.push(['requeue']),
        selectAttempts: async () => [],
      },
      '../audit/service.js': {
        auditBy: async (_sql: unknown, _a: Actor, e: { action: string; details: unknown }) =>
          void log.push(['audit', e.action, e.details]),
      },
    },
  )
  const resolver = async () => [{ address: '93.184.216.34', family: 4 }] // every name is a public host
  const db = fakeDb()
  const service = webhooksService({
    db,
    secrets,
    policy: compilePolicy({ allowedCidrs: [], airGapped: false }, resolver),
    allowHttp: false,
    now: () => NOW,
    onDue: () => void log.push(['due']),
  })
  const tenant = (plan: Plan | null = 'pro'): Actor<Owner> => ({ tenantId: TENANT, principal: principal(plan), origin })
  const platform: Actor<Owner> = { tenantId: null, principal: { ...principal(null), tenantId: null }, origin }
  return { service, log, db, tenant, platform }
}

const input = (over: Partial<Service.CreateInput> = {}): Service.CreateInput => ({
  url: URL_OK,
  events: ['project.created'],
  secret: SECRET,
  ...over,
})

t.test("a tenant registers endpoints up to its plan's limit, counted under the registration's lock", async (t) => {
  const limits: [Plan | null, number][] = [
    ['free', 2],
    ['pro', 10],
    ['growth', 25],
    ['enterprise', 100],
    [null, 2],
  ]
  for (const [plan, limit] of limits) {
    const full = await hooks(t, { count: limit })
    await t.rejects(
      full.service.create(full.tenant(plan), input()),
      {
        code: 'FORBIDDEN',
        message: new RegExp(
          `The ${plan ?? 'free'} plan allows ${limit} webhook endpoints and this tenant has ${limit}`,
        ),
        details: { reason: 'plan_limit', limit, plan: plan ?? 'free' },
      },
      `${plan ?? 'no plan (free)'}: ${limit}`,
    )
    t.same(full.log, [['count']], `${plan}: nothing inserted`)
    const room = await hooks(t, { count: limit - 1 })
    await room.service.create(room.tenant(plan), input())
    t.same(
      room.log.map((e) => e[0]),
      ['count', 'insert', 'audit'],
      `${plan}: one place left`,
    )
  }
})

t.test("the platform's own endpoints are not counted, and their changes are in no tenant's audit log", async (t) => {
  const { service, log, platform } = await hooks(t, { count: 1000 })
  await service.create(platform, input({ events: ['tenant.created', 'project.created'] }))
  t.same(log, [['insert', null, ['tenant.created', 'project.created']]])
})

t.test("a tenant's endpoint cannot hear tenant.created; events are kept once each", async (t) => {
  const { service, log, tenant, db } = await hooks(t)
  await t.rejects(service.create(tenant(), input({ events: ['project.created', 'tenant.created'] })), {
    code: 'VALIDATION_ERROR',
    details: { errors: [{ field: 'events', message: /platform endpoints/ }] },
  })
  t.same(db.opened, [], 'refused before any transaction')
  await service.create(tenant(), input({ events: ['project.created', 'user.created', 'project.created'] }))
  t.same(
    log.find((e) => e[0] === 'insert'),
    ['insert', TENANT, ['project.created', 'user.created']],
  )
})

t.test(
  'an endpoint URL is refused before any transaction unless it is https, without credentials or a fragment, and not too long',
  async (t) => {
    const { service, tenant, db } = await hooks(t)
    const cases: [string, RegExp][] = [
      ['http://hooks.example.com/x', /must be an https URL .*WEBHOOK_ALLOW_HTTP/],
      ['https://user:pass@hooks.example.com/x', /must not contain credentials/],
      ['https://hooks.example.com/x#part', /#fragment/],
      [`https://hooks.example.com/${'x'.repeat(2048)}`, /at most 2048 characters/],
      ['not a url', /is not a URL/],
      ['https://10.0.0.5/x', /may not be called: private address outside OUTBOUND_ALLOWED_NETWORKS/],
    ]
    for (const [url, why] of cases) {
      await t.rejects(
        service.create(tenant(), input({ url })),
        { code: 'VALIDATION_ERROR', details: { errors: [{ field: 'url', message: why }] } },
        url.slice(0, 40),
      )
    }
    await t.rejects(service.create(tenant(), input({ secret: 'whsec_!!!!' })), {
      code: 'VALIDATION_ERROR',
      details: { errors: [{ field: 'secret' }] },
    })
    t.same(db.opened, [])
  },
)

t.test('an update that changes nothing writes nothing', async (t) => {
  const { service, log, tenant } = await hooks(t, { current: webhook() })
  await service.update(tenant(), 'wh-1', {
    url: ` ${URL_OK} `,
    events: ['project.created'],
    description: '',
    enabled: true,
  })
  t.same(log, [])
})

t.test('disabling fails the pending deliveries and says who; enabling starts afresh', async (t) => {
  const off = await hooks(t, { current: webhook({ failing_since: new Date(NOW - 1000) }) })
  await off.service.update(off.tenant(), 'wh-1', { enabled: false })
  t.match(off.log, [
    [
      'update',
      {
        status: 'disabled',
        disabledReason: 'manual',
        disabledMessage: 'Disabled by a person',
        disabledAt: new Date(NOW),
        failingSince: new Date(NOW - 1000),
      },
    ],
    ['fail pending'],
    ['audit', 'webhook.updated', { fields: ['enabled'], enabled: false }],
  ])
  const gone = webhook({
    status: 'disabled',
    disabled_reason: 'gone',
    disabled_message: 'answered 410',
    disabled_at: new Date(1),
    failing_since: new Date(1),
  })
  const on = await hooks(t, { current: gone })
  await on.service.update(on.tenant(), 'wh-1', { enabled: true })
  t.match(
    on.log,
    [
      [
        'update',
        { status: 'enabled', disabledReason: null, disabledMessage: null, disabledAt: null, failingSince: null },
      ],
      ['audit', 'webhook.updated', { fields: ['enabled'], enabled: true }],
    ],
    'the old run of failures no longer counts',
  )
  const edit = await hooks(t, { current: gone })
  await edit.service.update(edit.tenant(), 'wh-1', { description: 'still off' })
  t.match(
    edit.log[0],
    [
      'update',
      { status: 'disabled', disabledReason: 'gone', disabledMessage: 'answered 410', failingSince: new Date(1) },
    ],
    'an edit of a disabled endpoint keeps why it is off',
  )
  t.same(
    edit.log.filter((e) => e[0] === 'fail pending'),
    [],
    'and fails nothing again',
  )
})

t.test(
  'a rotation keeps the previous secret signing for the overlap, none when the overlap is 0; a generated secret is returned once',
  async (t) => {
    const { service, log, tenant } = await hooks(t, { current: webhook() })
    const generated = await service.rotateSecret(tenant(), 'wh-1', {})
    t.match(generated.secret, /^whsec_/)
    t.match(log[0], [
      'rotate',
      {
        secretSealed: `sealed:${generated.secret}`,
        previousSealed: `sealed:${SECRET}:previous_secret`,
        previousExpiresAt: new Date(NOW + 24 * 3600_000),
      },
    ])
    const given = await service.rotateSecret(tenant(), 'wh-1', {
      secret: 'another-raw-secret-long-enough',
      overlapSeconds: 0,
    })
    t.equal(given.secret, null, 'a secret the caller chose is not sent back')
    t.match(log.filter((e) => e[0] === 'rotate')[1], [
      'rotate',
      { secretSealed: 'sealed:another-raw-secret-long-enough', previousSealed: null, previousExpiresAt: null },
    ])
    t.same(
      log.filter((e) => e[0] === 'audit').map((e) => e[2]),
      [
        { overlapSeconds: 86400, generated: true },
        { overlapSeconds: 0, generated: false },
      ],
    )
  },
)

t.test(
  'a test event or a retry goes only to an enabled endpoint, a retry only for a delivery that is done',
  async (t) => {
    const off = await hooks(t, { current: webhook({ status: 'disabled' }), delivery: delivery('failed') })
    await t.rejects(off.service.sendTest(off.tenant(), 'wh-1'), {
      code: 'VALIDATION_ERROR',
      details: { reason: 'webhook_disabled' },
    })
    await t.rejects(off.service.retryDelivery(off.tenant(), 'wh-1', 'd-1'), {
      code: 'VALIDATION_ERROR',
      details: { reason: 'webhook_disabled' },
    })
    t.same(off.log, [])
    const pending = await hooks(t, { current: webhook(), delivery: delivery('pending') })
    await t.rejects(pending.service.retryDelivery(pending.tenant(), 'wh-1', 'd-1'), {
      code: 'VALIDATION_ERROR',
      details: { reason: 'delivery_pending' },
    })
    t.same(pending.log, [])
    const on = await hooks(t, { current: webhook(), delivery: delivery('failed') })
    await on.service.sendTest(on.tenant(), 'wh-1')
    await on.service.retryDelivery(on.tenant(), 'wh-1', 'd-1')
    t.same(
      on.log.map((e) => (e[0] === 'audit' ? e[1] : e[0])),
      ['event', 'due', 'requeue', 'webhook.delivery_retried', 'due'],
      'the worker is woken for each',
    )
  },
)
