import t from 'tap'
import pino from 'pino'
import { startWebhookWorker } from '../../../../server/modules/webhooks/worker.js'
import type { Db } from '../../../../server/platform/db.js'
import { compilePolicy } from '../../../../server/platform/outbound.js'
import { createSecrets } from '../../../../server/platform/secrets.js'

t.test('a lease that could end while its attempt still runs is refused before anything starts', async (t) => {
  const base = {
    db: {} as Db, secrets: createSecrets(Buffer.alloc(32)), policy: compilePolicy({ allowedCidrs: [], airGapped: false }),
    log: pino({ level: 'silent' }), concurrency: 1, userAgent: 'test',
  }
  t.throws(() => startWebhookWorker({ ...base, attemptTimeoutMs: 15_000, leaseMs: 15_000 }), /leaseMs \(15000\) must be longer than the attempt timeout \(15000\)/)
  t.throws(() => startWebhookWorker({ ...base, leaseMs: 1000 }), /must be longer/, 'against the default 15 s timeout too')
})
