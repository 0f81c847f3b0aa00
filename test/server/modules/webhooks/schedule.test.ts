import t from 'tap'
import {
  JITTER,
  MAX_RETRY_AFTER_SECONDS,
  nextAttemptAt,
  parseRetryAfter,
  RETRY_SCHEDULE_SECONDS,
} from '../../../../server/modules/webhooks/schedule.js'

t.test('the retry schedule is the Standard Webhooks one, with at most 10% jitter added', async (t) => {
  t.same(RETRY_SCHEDULE_SECONDS, [5, 300, 1800, 7200, 18_000, 36_000, 50_400, 72_000, 86_400])
  for (const [i, wait] of RETRY_SCHEDULE_SECONDS.entries()) {
    t.equal(nextAttemptAt(i + 1, 0, { random: () => 0 }), wait * 1000, `after attempt ${i + 1}: ${wait} s`)
    t.equal(nextAttemptAt(i + 1, 0, { random: () => 0.999999 }), Math.round(wait * 1000 * (1 + JITTER * 0.999999)))
  }
  t.equal(nextAttemptAt(10, 0), null, 'after the tenth attempt there is no other')
})

t.test('Retry-After is honoured when longer than the scheduled wait, and capped at a day', async (t) => {
  t.equal(nextAttemptAt(1, 1000, { random: () => 0, retryAfterSeconds: 60 }), 61_000)
  t.equal(
    nextAttemptAt(2, 0, { random: () => 0, retryAfterSeconds: 60 }),
    300_000,
    'a shorter Retry-After does not hasten the schedule',
  )
  t.equal(nextAttemptAt(1, 0, { random: () => 0, retryAfterSeconds: 10 ** 9 }), MAX_RETRY_AFTER_SECONDS * 1000)
})

t.test('Retry-After is read as seconds or as an HTTP date', async (t) => {
  const now = Date.parse('2026-11-23T12:00:00Z')
  t.equal(parseRetryAfter('120', now), 120)
  t.equal(parseRetryAfter(' 7 ', now), 7)
  t.equal(parseRetryAfter('Mon, 23 Nov 2026 12:01:30 GMT', now), 90)
  t.equal(parseRetryAfter('Mon, 23 Nov 2026 11:00:00 GMT', now), 0, 'a date in the past: now')
  t.equal(parseRetryAfter('soon', now), null)
  t.equal(parseRetryAfter('-5', now), null)
  t.equal(parseRetryAfter(null, now), null)
})
