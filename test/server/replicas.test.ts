// Three server processes behind a real load balancer (HAProxy, as docs/operations.md sets it up for a
// site that outgrows one replica) on one PostgreSQL, Redis and store: under a steady load of reads
// and writes through it, each replica in turn is stopped with SIGTERM (as Compose, systemd or
// Kubernetes stop one) and started again. No request fails: a stopping replica finishes what it has
// (server/lifecycle.ts drains its open connections), the balancer stops sending it new ones once its
// /readyz fails, and a connection it refuses meanwhile is tried again on another.
import t from 'tap'
import { adminTenant, serverProcess, type ServerProcess } from '../helpers/cli.js'
import { startHaproxy } from '../helpers/haproxy.js'
import { freePort, services, testEnv } from '../helpers/platform.js'
import { findTool } from '../helpers/tools.js'
import { quantile } from '../../bench/lib.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

t.test(
  'three replicas behind HAProxy, restarted one at a time under load: no request fails',
  {
    skip: !findTool('haproxy')
      ? 'needs haproxy (apt-get install haproxy)'
      : !services.databaseUrl && 'needs TEST_DATABASE_URL: replicas share one PostgreSQL',
  },
  async (t) => {
    const env = await testEnv(t, { RATE_LIMIT_MAX: '1000000' })
    const { apiKey } = await adminTenant(t, env, 'Replicas', 'enterprise')
    const ports = await Promise.all([freePort(), freePort(), freePort()])
    const replicas: ServerProcess[] = await Promise.all(
      ports.map((port) => serverProcess(t, { ...env, PORT: String(port) })),
    )
    const lb = await startHaproxy(await freePort(), ports)
    t.teardown(() => lb.stop())
    const base = `http://127.0.0.1:${lb.port}`
    const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }

    // The balancer's first checks have seen every replica.
    for (let i = 0; i < 100; i++) {
      const r = await fetch(`${base}/readyz`)
      if (r.status === 200 && i >= 10) break
      await sleep(100)
    }
    const outcomes: { at: number; ms: number; ok: boolean; what: string }[] = []
    const written: string[] = []
    let stopping = false
    const client = async (n: number) => {
      for (let i = 0; !stopping; i++) {
        const started = Date.now()
        const write = i % 2 === 0
        let what: string
        try {
          const r = write
            ? await fetch(`${base}/api/v1/projects`, {
                method: 'POST',
                headers,
                body: JSON.stringify({ name: `c${n}-${i}` }),
              })
            : await fetch(`${base}/api/v1/projects/${written.at(-1) ?? '00000000-0000-4000-8000-000000000000'}`, {
                headers,
              })
          const text = await r.text()
          const body = (r.headers.get('content-type')?.includes('json') ? JSON.parse(text) : {}) as {
            data?: { id: string }
          }
          if (write && r.status === 201) written.push(body.data!.id)
          what = `${r.status} ${write ? 'POST' : 'GET'}: ${text.slice(0, 120)}`
          outcomes.push({
            at: started,
            ms: Date.now() - started,
            ok: write ? r.status === 201 : r.status === 200 || r.status === 404,
            what,
          })
        } catch (err) {
          what = (err as Error & { cause?: { code?: string } }).cause?.code ?? (err as Error).message
          outcomes.push({ at: started, ms: Date.now() - started, ok: false, what })
        }
      }
    }
    const clients = [0, 1, 2, 3].map(client)
    await sleep(2000)
    const rollStarted = Date.now()
    for (let i = 0; i < replicas.length; i++) {
      const old = replicas[i]!
      old.child.kill('SIGTERM')
      const ran = await old.done
      t.equal(ran.code, 0, `replica ${i + 1} stopped cleanly on SIGTERM`)
      replicas[i] = await serverProcess(t, { ...env, PORT: String(ports[i]) })
      for (let j = 0; j < 100 && (await fetch(`${replicas[i]!.base}/readyz`)).status !== 200; j++) await sleep(100)
      await sleep(1000) // HAProxy's next checks put it back
    }
    const rollEnded = Date.now()
    await sleep(2000)
    stopping = true
    await Promise.all(clients)

    const failed = outcomes.filter((o) => !o.ok)
    const during = outcomes.filter((o) => o.at >= rollStarted && o.at <= rollEnded)
    t.ok(outcomes.length > 200, `${outcomes.length} requests`)
    t.same(
      failed.map((o) => o.what),
      [],
      'no request failed',
    )
    // Every replica serves after the roll: each answers through its own port, and the balancer reaches it.
    for (const [i, r] of replicas.entries())
      t.equal((await fetch(`${r.base}/readyz`)).status, 200, `replica ${i + 1} ready`)
    const p99 = (list: typeof outcomes) =>
      quantile(
        list.map((o) => o.ms),
        0.99,
      )
    t.comment(
      `${outcomes.length} requests, ${during.length} during the ${rollEnded - rollStarted} ms roll, ${failed.length} failed; ` +
        `p99 ${p99(outcomes.filter((o) => o.at < rollStarted))} ms before, ${p99(during)} ms during`,
    )
  },
)
