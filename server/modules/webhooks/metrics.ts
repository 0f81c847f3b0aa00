// The delivery worker's Prometheus metrics. Nothing per tenant or endpoint (a series each would be
// too many): attempts by outcome, attempts in flight on this replica, and how long the oldest due
// delivery has waited, which grows when delivery falls behind for anyone.
import { Counter, Gauge, type Registry } from 'prom-client'
import { named } from '../../platform/metrics.js'
import type { AttemptOutcome } from './store.js'

const ATTEMPT_OUTCOMES: readonly AttemptOutcome[] = ['succeeded', 'retrying', 'failed']

export interface WorkerMetrics {
  attempted(outcome: AttemptOutcome): void
}

export function workerMetrics(
  registry: Registry,
  read: { inFlight: () => number; oldestDueSeconds: () => Promise<number> },
): WorkerMetrics {
  // A worker started again on the same registry (tests) replaces the one before: its readers are gone (named).
  const attempts = new Counter({
    ...named('atrium_webhook_attempts_total', registry),
    help: 'Webhook delivery attempts made by this replica, by outcome (succeeded, retrying, failed)',
    labelNames: ['outcome'] as const,
  })
  new Gauge({
    ...named('atrium_webhook_attempts_in_flight', registry),
    help: 'Webhook delivery attempts this replica has in flight',
    collect() {
      this.set(read.inFlight())
    },
  })
  let last = 0
  new Gauge({
    ...named('atrium_webhook_oldest_due_seconds', registry),
    help: 'How long the oldest due webhook delivery that no replica is attempting has waited (0: none waits)',
    async collect() {
      // The database away: the last value stands (the scrape still answers).
      last = await read.oldestDueSeconds().catch(() => last)
      this.set(last)
    },
  })
  // Exported at 0 from the start: a series that first appears at 1 has no increase, so the first
  // delivery to fail for good would not raise AtriumWebhookDeliveriesFailing.
  for (const outcome of ATTEMPT_OUTCOMES) attempts.inc({ outcome }, 0)
  return { attempted: (outcome) => attempts.inc({ outcome }) }
}
