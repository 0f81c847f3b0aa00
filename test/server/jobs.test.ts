// The job registry (server/jobs.ts): docs/architecture.md's table of queues says what it lists, and
// initJobs defines every queue and schedule of it on the runner as it says.
import { readFileSync } from 'node:fs'
import t from 'tap'
import { initJobs, QUEUES, type JobHandlers, type QueueEntry, type QueueName } from '../../server/jobs.js'
import type { JobRunner, QueueDefinition, ScheduleDefinition } from '../../server/platform/jobs.js'

const entries = Object.entries(QUEUES) as [QueueName, QueueEntry][]

/** The rows of the table under "### Queues": each row's cells, trimmed. */
function docsTable(): Record<string, string>[] {
  const text = readFileSync(new URL('../../docs/architecture.md', import.meta.url), 'utf8')
  const lines = text.slice(text.indexOf('\n### Queues\n')).split('\n')
  const first = lines.findIndex((l) => l.startsWith('|'))
  const table = lines.slice(
    first,
    lines.findIndex((l, i) => i > first && !l.startsWith('|')),
  )
  const cells = (l: string) =>
    l
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim())
  const head = cells(table[0]!)
  return table.slice(2).map((l) => Object.fromEntries(cells(l).map((c, i) => [head[i], c])))
}

const lease = (ms: number) => (ms >= 120_000 ? `${ms / 60_000} min` : `${ms / 1000} s`)
const schedule = (q: QueueEntry) =>
  !q.schedule
    ? null
    : 'everyMs' in q.schedule
      ? `every ${q.schedule.everyMs / 3600_000} h`
      : `cron \`${q.schedule.cron}\``

t.test("docs/architecture.md's table of queues is the registry's", async (t) => {
  const rows = docsTable()
  t.same(
    rows.map((r) => r.queue),
    entries.map(([name]) => `\`${name}\``),
    'the same queues, in the same order',
  )
  for (const [name, q] of entries) {
    const row = rows.find((r) => r.queue === `\`${name}\``)
    if (!row) continue
    const concurrency = typeof q.concurrency === 'string' ? `\`${q.concurrency}\`` : String(q.concurrency ?? 1)
    t.equal(row.concurrency, concurrency, `${name}: concurrency`)
    t.equal(row.lease, lease(q.leaseMs ?? 60_000), `${name}: lease`)
    const s = schedule(q)
    if (s) t.equal(row.schedule, s, `${name}: schedule`)
    else t.notMatch(row.schedule, /^(every|cron)/, `${name}: no schedule of its own`)
  }
})

t.test(
  'initJobs defines every queue, and a schedule for each recurring one, with the settings and options applied',
  async (t) => {
    const defined: QueueDefinition[] = []
    const scheduled: ScheduleDefinition[] = []
    const runner = {
      define: (d: QueueDefinition) => defined.push(d),
      schedule: (s: ScheduleDefinition) => scheduled.push(s),
    } as unknown as JobRunner
    const handlers = Object.fromEntries(entries.map(([name]) => [name, async () => {}])) as unknown as JobHandlers
    initJobs(runner, handlers, { AGENT_RUNS_PER_REPLICA: 7 }, { chatReplyConcurrency: 3, exportLeaseMs: 2000 })
    t.same(
      defined.map((d) => d.name),
      entries.map(([name]) => name),
    )
    const def = (name: QueueName) => defined.find((d) => d.name === name)!
    t.equal(def('agents.run').concurrency, 7, 'a setting')
    t.equal(def('chat.reply').concurrency, 3, 'an option replaces the setting')
    t.equal(def('exports.run').leaseMs, 2000, 'an option replaces the lease')
    t.equal(def('exports.scheduled').leaseMs, 2000)
    t.equal(def('restores.run').leaseMs, 15_000)
    t.equal(def('exports.run').maxAttempts, 3)
    for (const [name] of entries) t.equal(def(name).handler, handlers[name], `${name}: its handler`)
    t.same(
      scheduled.map((s) => [s.name, s.queue, s.everyMs ?? s.cron, s.immediately]),
      entries
        .filter(([, q]) => q.schedule)
        .map(([name, q]) => [
          name,
          name,
          'everyMs' in q.schedule! ? q.schedule.everyMs : q.schedule!.cron,
          'everyMs' in q.schedule!,
        ]),
    )
    t.equal(def('jobs.sweep').pollMs, 60_000, 'recurring work waits for its schedule')
    t.equal(def('exports.scheduled').pollMs, 10_000)
  },
)
