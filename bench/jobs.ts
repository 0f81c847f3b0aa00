// The job runner's throughput on real PostgreSQL: a backlog of jobs with an empty handler, claimed
// and completed by one runner (8 at a time, the jobs spread over 20 tenants so the fair claim does
// its work), against the bare stack doing the same work: postgres.js workers, each claiming one row
// with FOR UPDATE SKIP LOCKED and marking it done, 8 at a time, no leases, fairness or records.
// Run alone with `tsx bench/jobs.ts`; `npm run bench` runs it after the HTTP benchmarks.
import { randomBytes, randomUUID } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import pino from 'pino'
import postgres from 'postgres'
import { openDb } from '../server/platform/db.js'
import { createJobRunner } from '../server/platform/jobs.js'
import { migrate } from '../server/platform/migrate.js'

const JOBS = Number(process.env.BENCH_JOBS ?? 5000)
const CONCURRENCY = 8
const TENANTS = 20

export async function benchJobs(databaseUrl: string): Promise<{ runner: number; raw: number; jobs: number }> {
  const admin = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  const name = `atrium_bench_jobs_${randomBytes(4).toString('hex')}`
  await admin.unsafe(`create database ${name}`)
  const url = new URL(databaseUrl)
  url.pathname = `/${name}`
  const log = pino({ level: 'warn' })
  const db = await openDb({ databaseUrl: url.toString(), dataDir: '', poolMax: 10, log })
  try {
    await migrate(db.sql)
    const tenants = Array.from({ length: TENANTS }, () => randomUUID())
    for (const id of tenants) await db.sql`insert into tenants (id, name, plan) values (${id}, 'bench', 'pro')`
    const backlog = (queue: string) => db.sql`
      insert into jobs (id, queue, tenant_id, payload, run_at, created_at)
      select gen_random_uuid(), ${queue}, (${tenants}::uuid[])[1 + i % ${TENANTS}], '{}', now(), now() from generate_series(1, ${JOBS}) i`

    // Baseline: the bare claim-and-mark loop.
    await db.sql`create table bench_raw (id bigserial primary key, done boolean not null default false)`
    await db.sql`insert into bench_raw (done) select false from generate_series(1, ${JOBS})`
    const t0 = performance.now()
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        for (;;) {
          const rows =
            await db.sql`update bench_raw set done = true where id = (select id from bench_raw where not done order by id limit 1 for update skip locked) returning id`
          if (!rows.length) return
        }
      }),
    )
    const raw = JOBS / ((performance.now() - t0) / 1000)

    await backlog('bench.empty')
    let done = 0
    let finished!: () => void
    const all = new Promise<void>((r) => (finished = r))
    const runner = createJobRunner({ db, log, pollMs: 100 })
    runner.define({
      name: 'bench.empty',
      concurrency: CONCURRENCY,
      handler: async () => {
        if (++done === JOBS) finished()
      },
    })
    const t1 = performance.now()
    await runner.start()
    await all
    // Counted when the last outcome is written, not when the last handler returns.
    for (;;) {
      const [left] = await db.sql<
        { n: number }[]
      >`select count(*)::int as n from jobs where queue = 'bench.empty' and status <> 'completed'`
      if (!left?.n) break
      await new Promise((r) => setTimeout(r, 5))
    }
    const rate = JOBS / ((performance.now() - t1) / 1000)
    await runner.stop()
    return { runner: rate, raw, jobs: JOBS }
  } finally {
    await db.close()
    await admin.unsafe(`drop database if exists ${name} with (force)`)
    await admin.end()
  }
}

export function printJobs(r: { runner: number; raw: number; jobs: number }) {
  console.log(
    `\njobs: ${r.jobs} queued jobs with an empty handler, ${CONCURRENCY} at a time, spread over ${TENANTS} tenants`,
  )
  console.log(`  baseline, postgres.js claiming one row with SKIP LOCKED and marking it done: ${r.raw.toFixed(0)}/s`)
  console.log(
    `  Atrium's job runner (fair claim, lease, handler, recorded outcome): ${r.runner.toFixed(0)} jobs claimed and completed/s = ${((r.runner / r.raw) * 100).toFixed(1)}% of the baseline`,
  )
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  printJobs(await benchJobs(process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'))
}
