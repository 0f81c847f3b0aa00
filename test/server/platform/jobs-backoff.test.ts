// How long a failed job waits before its next attempt: the runner's default (5 s doubling to 1 h, within 10% either
// side) and the registry's own (data work 5 s to a minute, agent runs 1 s to 30 s, neither jittered).
import t from 'tap'
import { QUEUES } from '../../../server/jobs.js'
import { defaultBackoffMs, exponentialBackoff } from '../../../server/platform/jobs.js'

const waits = (backoff: (attempt: number) => number) => [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12].map(backoff)

t.test('without jitter a wait doubles from the first up to the cap', async (t) => {
  t.same(
    waits(exponentialBackoff({ firstMs: 100, capMs: 1000, jitter: false })),
    [100, 200, 400, 800, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000],
  )
})

t.test('the default doubles from 5 s to 1 h, each wait within 10% either side', async (t) => {
  const exact = waits(exponentialBackoff({ firstMs: 5000, capMs: 3600_000, jitter: false }))
  t.equal(exact.at(-1), 3600_000)
  for (let round = 0; round < 20; round++) {
    const got = waits(defaultBackoffMs)
    t.ok(
      got.every((ms, i) => ms >= exact[i]! * 0.9 && ms <= exact[i]! * 1.1),
      `${got.join(', ')} within 10% of ${exact.join(', ')}`,
    )
  }
})

t.test("the registry's queues back off as they did", async (t) => {
  const data = [5000, 10_000, 20_000, 40_000, 60_000, 60_000, 60_000, 60_000, 60_000, 60_000, 60_000, 60_000]
  for (const q of ['exports.run', 'exports.scheduled', 'restores.run'] as const)
    t.same(waits(QUEUES[q].backoffMs!), data, q)
  t.same(
    waits(QUEUES['agents.run'].backoffMs!),
    [1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000, 30_000, 30_000, 30_000, 30_000],
  )
  t.equal(QUEUES['chat.reply'].backoffMs, undefined, "chat replies take the runner's default")
})
