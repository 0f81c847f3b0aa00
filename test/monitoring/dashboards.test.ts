// The Grafana dashboards the chart ships (charts/atrium/files/monitoring/dashboards/): their shape as Grafana and
// the chart's sidecar read it, and every panel's query run by a real Prometheus that scrapes a real server process
// carrying traffic of every kind the panels show. A query that does not parse, a metric renamed on one side, a
// label a panel groups by that the server does not set: each fails here, not on an operator's first day. The same
// Prometheus loads the shipped alert rules: each evaluates, and the database's go pending while it is cut.
import { readdirSync, readFileSync } from 'node:fs'
import http from 'node:http'
import { join } from 'node:path'
import t from 'tap'
import { ROOT, serverProcessOf } from '../helpers/cli.js'
import { fakeLlm } from '../helpers/fake-llm.js'
import { faultProxy } from '../helpers/fault-proxy.js'
import { adminTrusting, spawnTrusting, testLicense, testVendor } from '../helpers/license.js'
import { listenLoopback } from '../helpers/listen.js'
import { freePort, services, testEnv } from '../helpers/platform.js'
import { needsPrometheus, needsPromtool, PrometheusError, startPrometheus, type Series } from '../helpers/prometheus.js'
import { runTool } from '../helpers/tools.js'

const DIR = join(ROOT, 'charts/atrium/files/monitoring/dashboards')
const FILES = readdirSync(DIR)
  .filter((f) => f.endsWith('.json'))
  .sort()

interface Target {
  expr: string
  refId: string
  datasource?: { type: string; uid: string }
}
interface Panel {
  id: number
  type: string
  title: string
  datasource?: { type: string; uid: string }
  targets?: Target[]
  panels?: Panel[]
}
interface Variable {
  name: string
  type: string
  query?: string | { query: string }
  definition?: string
  includeAll?: boolean
  multi?: boolean
  allValue?: string
}
interface Dashboard {
  uid: string
  title: string
  schemaVersion: number
  panels: Panel[]
  templating: { list: Variable[] }
}

const SOURCE = { type: 'prometheus', uid: '${datasource}' }
const dashboards = FILES.map((f) => ({ file: f, d: JSON.parse(readFileSync(join(DIR, f), 'utf8')) as Dashboard }))
const panelsOf = (d: Dashboard): Panel[] =>
  d.panels.flatMap((p) => [p, ...(p.panels ?? [])]).filter((p) => p.type !== 'row')
/** Grafana's interval variables as it fills them in for a 1-minute window. */
const withWindow = (expr: string) => expr.replaceAll(/\$\{?(__rate_interval|__interval|__range)\}?/g, '1m')
/** The expression as Grafana sends it with every replica selected ("All" is .*). */
const substituted = (expr: string) => withWindow(expr).replaceAll(/\$\{?(namespace|instance)\}?/g, '.*')

interface Selector {
  name: string
  matchers: { type: string; name: string; value: string }[]
}
/** The vector and range selectors of a parsed expression (/api/v1/parse_query's tree). */
function selectorsOf(node: unknown): Selector[] {
  if (Array.isArray(node)) return node.flatMap(selectorsOf)
  if (!node || typeof node !== 'object') return []
  const n = node as Record<string, unknown>
  if (n.type === 'vectorSelector' || n.type === 'matrixSelector') return [n as unknown as Selector]
  return Object.values(n).flatMap(selectorsOf)
}

t.test('each dashboard: its own uid, the data source and replica variables, every query scoped by them', async (t) => {
  t.same(
    FILES,
    [
      'atrium-api.json',
      'atrium-jobs.json',
      'atrium-models.json',
      'atrium-process.json',
      'atrium-storage-database.json',
      'atrium-webhooks.json',
    ],
    'one file per area',
  )
  t.equal(new Set(dashboards.map(({ d }) => d.uid)).size, dashboards.length, 'uids unique')
  for (const { file, d } of dashboards) {
    t.equal(d.uid, file.replace(/\.json$/, ''), `${file}: the uid is the file's name`)
    t.ok(d.schemaVersion >= 36, `${file}: a schema Grafana 9 and later read as it is`)
    const vars = Object.fromEntries(d.templating.list.map((v) => [v.name, v]))
    t.match(vars.datasource, { type: 'datasource', query: 'prometheus' }, `${file}: the data source is chosen`)
    for (const name of ['namespace', 'instance'])
      // "All" is .*, which also matches a series without the label: Compose sites have no namespace.
      t.match(vars[name], { type: 'query', includeAll: true, multi: true, allValue: '.*' }, `${file}: $${name}`)
    const problems: string[] = []
    const ids = new Set<number>()
    for (const p of panelsOf(d)) {
      const at = `"${p.title}"`
      if (ids.has(p.id)) problems.push(`${at}: id ${p.id} taken`)
      ids.add(p.id)
      if (JSON.stringify(p.datasource) !== JSON.stringify(SOURCE)) problems.push(`${at}: not the chosen source`)
      if (!p.targets?.length) problems.push(`${at}: no query`)
      for (const target of p.targets ?? []) {
        if (JSON.stringify(target.datasource) !== JSON.stringify(SOURCE))
          problems.push(`${at} ${target.refId}: not the chosen source`)
        const selectors = [...target.expr.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*\{([^}]*)\}/g)].map((m) => m[1]!)
        if (!selectors.length) problems.push(`${at} ${target.refId}: selects no metric`)
        for (const s of selectors)
          if (!s.includes('namespace=~"$namespace"') || !s.includes('instance=~"$instance"'))
            problems.push(`${at} ${target.refId}: {${s}} not scoped by $namespace and $instance`)
      }
    }
    t.same(problems, [], `${file}: ${ids.size} panels, each on the chosen source, each query scoped`)
  }
})

/**
 * Metrics the traffic below cannot make and panels that may rightly be empty. Their queries must still parse.
 * Kept short: each entry is a panel an operator could not check here.
 */
const CONDITIONAL: Record<string, string> = {}

t.test(
  'every panel query parses in Prometheus and has data from a server under traffic of each kind; the alert rules evaluate on the same series',
  {
    skip:
      needsPrometheus() ||
      needsPromtool() ||
      (!services.databaseUrl && 'needs TEST_DATABASE_URL: the database is cut under the server for its 503s') ||
      (!services.redisUrl && 'needs TEST_REDIS_URL: Redis is cut under the server for its rate-limit fallbacks'),
  },
  async (t) => {
    const vendor = testVendor()
    const llm = await fakeLlm(t)
    // The first run streams for about 4 s while AGENT_RUNS_PER_REPLICA=1 keeps the second one queued and due
    // (running here, oldest waiting); the second streams for about 2 s, so that Prometheus sees the calls' counters
    // grow between scrapes; the third meets a rejected key (an LLM_* outcome, a failed run). The fourth comes once all
    // of that was scraped: a rate needs a series seen before it grew, and a ratio a rate that is not 0.
    const usage = { input: 120, output: 40 }
    llm.push(
      { text: 'slowly '.repeat(40), chunkDelayMs: 100, usage },
      { text: 'after a wait '.repeat(8), chunkDelayMs: 100, usage },
      { status: 401 },
      { text: 'Done.', usage },
    )
    const delivered: string[] = []
    const hook = http.createServer((req, res) => {
      let body = ''
      req.on('data', (c: Buffer) => (body += c.toString()))
      req.on('end', () => {
        delivered.push((JSON.parse(body) as { type: string }).type)
        res.writeHead(200).end()
      })
    })
    const hookPort = await listenLoopback(t, hook)

    const metricsPort = await freePort()
    const env = await testEnv(t, {
      LICENSE_KEY: await testLicense(vendor),
      OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32',
      WEBHOOK_ALLOW_HTTP: 'true',
      METRICS_PORT: String(metricsPort),
      METRICS_TENANT_LABEL: 'true',
      AGENT_RUNS_PER_REPLICA: '1',
    })
    const created = await adminTrusting(vendor, ['create-tenant', '--name', 'Dashboards', '--plan', 'enterprise'], env)
    t.equal(created.code, 0, created.stderr)
    const { apiKey } = JSON.parse(created.stdout) as { apiKey: string }
    // The server reaches PostgreSQL and Redis through proxies the test cuts; the admin CLI went direct.
    const db = await faultProxy(t, env.DATABASE_URL!)
    const redis = await faultProxy(t, env.REDIS_URL!)
    const server = await serverProcessOf(
      t,
      spawnTrusting(vendor, ['serve'], {
        ...env,
        DATABASE_URL: db.via(env.DATABASE_URL!),
        REDIS_URL: redis.via(env.REDIS_URL!),
      }),
    )
    const call = (method: string, path: string, body?: unknown, key = apiKey) => server.call(key, method, path, body)

    // With the shipped alert rules loaded: they are evaluated against the same real series.
    const prometheus = await startPrometheus(t, {
      targets: [`127.0.0.1:${metricsPort}`],
      ruleFiles: [join(ROOT, 'charts/atrium/files/monitoring/alerts.yaml')],
    })
    const instance = `127.0.0.1:${metricsPort}`
    await prometheus.until(`up{instance="${instance}"} == 1`)
    const start = Math.floor(Date.now() / 1000) - 2

    // Requests of several kinds: reads and writes, a known route's 404 and an unknown path's, 400, 401.
    t.equal((await fetch(`${server.base}/readyz`)).status, 200)
    t.equal((await fetch(`${server.base}/healthz`)).status, 200)
    const projectId = (await call('POST', '/api/v1/projects', { name: 'Watched' })).body.data.id as string
    t.equal((await call('GET', `/api/v1/projects/${projectId}`)).status, 200)
    t.equal((await call('GET', '/api/v1/projects')).status, 200)
    t.equal((await call('GET', '/api/v1/projects/00000000-0000-4000-8000-000000000000')).status, 404)
    t.equal((await fetch(`${server.base}/no/such/path`)).status, 404)
    t.equal((await call('POST', '/api/v1/projects', { name: 42 })).status, 400)
    t.equal((await call('GET', '/api/v1/projects', undefined, 'svc_ci_not-a-key')).status, 401)

    // Model calls, agent runs on the job runner, webhook deliveries of their events.
    const llmSettings = {
      provider: 'openai-compatible',
      baseUrl: llm.url,
      model: 'dash-model',
      apiKey: 'sk-dash-0000000',
    }
    t.equal((await call('PATCH', '/api/v1/tenant/settings/llm', llmSettings)).status, 200)
    const events = ['agent.started', 'agent.completed', 'agent.failed']
    const secret = 'whsec-dashboards-test-secret-0123456789'
    t.equal(
      (await call('POST', '/api/v1/webhooks', { url: `http://127.0.0.1:${hookPort}/h`, events, secret })).status,
      201,
    )
    const agentId = (
      await call('POST', '/api/v1/agents', { name: 'a', systemPrompt: '', config: { autonomyLevel: 'low' } })
    ).body.data.id as string
    const ended = async (runId: string) => {
      for (let i = 0; i < 600; i++) {
        const status = (await call('GET', `/api/v1/agents/${agentId}/runs/${runId}`)).body.data.status as string
        if (['completed', 'failed', 'cancelled'].includes(status)) return status
        await new Promise((r) => setTimeout(r, 50))
      }
      throw new Error(`run ${runId} did not end`)
    }
    const execute = async (goal: string) => {
      const r = await call('POST', `/api/v1/agents/${agentId}/execute?wait=0`, { goal, projectId })
      t.equal(r.status, 202, `run "${goal}" queued`)
      return r.body.data.id as string
    }
    const runs = [await execute('slow'), await execute('queued'), await execute('refused')]
    const statuses: string[] = []
    for (const runId of runs) statuses.push(await ended(runId))
    t.same(statuses, ['completed', 'completed', 'failed'], 'two runs answered, one refused by the provider')
    await prometheus.until(`sum(atrium_llm_requests_total{instance="${instance}"}) == 3`)
    t.equal(await ended(await execute('after a scrape')), 'completed')
    for (let i = 0; i < 200 && delivered.length < 8; i++) await new Promise((r) => setTimeout(r, 50))
    t.equal(delivered.length, 8, 'each run started and ended, delivered')

    // Redis away: the limits count in process (fallbacks), and it is an error of the cache dependency.
    redis.cut()
    for (let i = 0; i < 3; i++) t.equal((await call('GET', '/api/v1/projects')).status, 200, 'served without Redis')
    // The request limit spends tokens it reserved before; the sign-in throttles ask Redis on each attempt.
    const wrong = { email: 'nobody@example.com', password: 'not the password' }
    for (let i = 0; i < 3; i++) t.equal((await call('POST', '/api/v1/auth/login', wrong)).status, 401, 'refused')
    await prometheus.until(`atrium_rate_limit_fallback_total{instance="${instance}"} > 0`)
    redis.restore()
    // PostgreSQL away: 503s (the 5xx panels), not ready, an error of the database dependency.
    db.cut()
    let unavailable = 0
    for (let i = 0; i < 20 && unavailable < 3; i++)
      if ((await call('GET', '/api/v1/projects')).status === 503) unavailable++
    t.equal(unavailable, 3, 'answered 503 without its database')
    await prometheus.until(`http_requests_total{instance="${instance}", status_code="503"}`)
    // The alerts on it are pending (their `for` is minutes): the rules match the series as the server exports them.
    for (const alert of ['AtriumDatabaseUnavailable', 'AtriumNotReady', 'AtriumDatabaseErrors'])
      await prometheus.until(`ALERTS{alertname="${alert}", alertstate="pending"}`)
    t.pass('AtriumDatabaseUnavailable, AtriumNotReady and AtriumDatabaseErrors pending while the database is away')
    db.restore()
    for (let i = 0; i < 100 && (await fetch(`${server.base}/readyz`)).status !== 200; i++)
      await new Promise((r) => setTimeout(r, 100))
    t.equal((await fetch(`${server.base}/readyz`)).status, 200, 'ready again with its database back')
    // Two more scrapes: the last of the traffic is in the TSDB.
    await new Promise((r) => setTimeout(r, 2500))
    const end = Math.ceil(Date.now() / 1000)

    // Prometheus's own lint of what was scraped: names, types and suffixes as its conventions have them. Only
    // prom-client's default gauges named _total (its names, not Atrium's) are let through.
    const exposition = await (await fetch(`http://${instance}/metrics`)).text()
    const lint = await runTool('promtool', ['check', 'metrics'], { input: exposition })
    const findings = `${lint.stdout}${lint.stderr}`
      .split('\n')
      .filter((l) => l.trim() && !/^nodejs_active_(handles|requests|resources)_total non-counter metrics/.test(l))
    t.same(findings, [], `promtool check metrics (exit ${lint.code}) finds nothing of Atrium's`)

    // The variables' values: this replica among the instances; no namespace label here (a Compose site's case).
    const instances = await prometheus.api<string[]>('label/instance/values', { 'match[]': 'atrium_air_gapped' })
    t.same(instances, [instance], '$instance lists the replica')
    t.same(await prometheus.api('label/namespace/values', { 'match[]': 'atrium_air_gapped' }), [], 'no namespace')

    const present = new Map<string, boolean>()
    for (const { file, d } of dashboards)
      for (const p of panelsOf(d))
        for (const target of p.targets ?? []) {
          const what = `${file} "${p.title}" ${target.refId}`
          // Prometheus's own parser, the replica variables left in: every selector, however written, is scoped.
          let selectors: Selector[]
          try {
            selectors = selectorsOf(await prometheus.api('parse_query', { query: withWindow(target.expr) }))
          } catch (err) {
            t.fail(`${what}: ${err instanceof PrometheusError ? err.message : String(err)}\n${target.expr}`)
            continue
          }
          const unscoped = selectors
            .filter(
              (s) =>
                !['namespace', 'instance'].every((l) =>
                  s.matchers.some((m) => m.type === '=~' && m.name === l && m.value === `$${l}`),
                ),
            )
            .map((s) => s.name)
          t.same(unscoped, [], `${what}: every selector has namespace=~"$namespace" and instance=~"$instance"`)
          const metrics = [...new Set(selectors.map((s) => s.name))]
          const expr = substituted(target.expr)
          t.notMatch(expr, /\$/, `${what}: no variable left unknown`)
          let series: Series[]
          try {
            // As a time series panel asks: the test's whole window, a point a second.
            series = await prometheus.queryRange(expr, { start, end, step: 1 })
          } catch (err) {
            t.fail(`${what}: ${err instanceof PrometheusError ? err.message : String(err)}\n${expr}`)
            continue
          }
          const conditional = metrics.find((m) => m in CONDITIONAL)
          if (conditional) {
            t.pass(`${what}: parses (${conditional}: ${CONDITIONAL[conditional]})`)
            continue
          }
          for (const m of metrics)
            if (!present.has(m))
              present.set(
                m,
                (await prometheus.api<unknown[]>('series', { 'match[]': m, start: String(start), end: String(end) }))
                  .length > 0,
              )
          // `or vector(0)` gives a stat a value of its own: the metrics it reads must have been scraped too.
          t.same(
            metrics.filter((m) => !present.get(m)),
            [],
            `${what}: every metric it reads was scraped`,
          )
          const values = series.flatMap((s) => s.values.map(([, v]) => Number(v))).filter(Number.isFinite)
          t.ok(values.length, `${what}: has data\n${expr}`)
        }
    t.comment(`${present.size} metrics, ${[...present.values()].filter(Boolean).length} of them scraped`)

    // Every shipped alert rule evaluated against the real series without an error.
    const rules = (
      await prometheus.api<{ groups: { rules: { name: string; health: string; lastError?: string }[] }[] }>('rules')
    ).groups.flatMap((g) => g.rules)
    t.ok(rules.length >= 18, `${rules.length} rules loaded`)
    t.same(
      rules.filter((r) => r.health !== 'ok').map((r) => `${r.name}: ${r.health} ${r.lastError ?? ''}`),
      [],
      'every rule evaluates',
    )
  },
)
