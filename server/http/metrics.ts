// Prometheus metrics: request counts and latency by route template (never by raw URL, which would
// make one series per project id).
import { statfs } from 'node:fs/promises'
import type { StatsFs } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import fp from 'fastify-plugin'
import { named, perScrape } from '../platform/metrics.js'
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'

export function createRegistry(): Registry {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  return registry
}

/** 'atrium-metrics': every answered request counted and timed in the app's registry. */
export const metricsPlugin = fp(
  async (app) => {
    const registry = app.registry
    // The deployment's mode, for dashboards and alerts: an air-gapped site with this at 0 has lost
    // its setting (and would try features that need outside APIs).
    new Gauge({
      name: 'atrium_air_gapped',
      help: 'AIR_GAPPED: 1 when features that need outside APIs are off, 0 otherwise',
      registers: [registry],
    }).set(app.platform.config.AIR_GAPPED ? 1 : 0)
    // The disk under DATA_DIR (the embedded database, local blobs, the generated key): read when
    // scraped, once for both gauges. A folder not made yet (a site on PostgreSQL and S3 may never
    // write one) reports nothing.
    const disk = perScrape(() => statfs(app.platform.config.DATA_DIR).catch(() => null))
    for (const [name, help, bytes] of [
      [
        'atrium_data_path_free_bytes',
        'Bytes available to this process on the filesystem holding DATA_DIR',
        (s: StatsFs) => s.bavail * s.bsize,
      ],
      ['atrium_data_path_size_bytes', 'Size of the filesystem holding DATA_DIR', (s: StatsFs) => s.blocks * s.bsize],
    ] as const)
      new Gauge({
        ...named(name, registry),
        help,
        async collect() {
          const s = await disk()
          if (s) this.set(bytes(s))
        },
      })
    const labelNames = ['method', 'route', 'status_code'] as const
    const requests = new Counter({
      name: 'http_requests_total',
      help: 'HTTP requests answered',
      labelNames,
      registers: [registry],
    })
    const duration = new Histogram({
      name: 'http_request_duration_seconds',
      help: 'Time to answer HTTP requests',
      labelNames,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    })
    // One labelled child per (method, route, status), found by a string key: cheaper per request
    // than prom-client hashing a label object on every observation.
    const children = new Map<
      string,
      { count: ReturnType<typeof requests.labels>; time: ReturnType<typeof duration.labels> }
    >()
    app.addHook('onResponse', (request, reply, done) => {
      const route = request.routeOptions.url ?? 'unmatched'
      const key = `${request.method} ${route} ${reply.statusCode}`
      let child = children.get(key)
      if (!child) {
        const labels = { method: request.method, route, status_code: reply.statusCode }
        child = { count: requests.labels(labels), time: duration.labels(labels) }
        children.set(key, child)
      }
      child.count.inc()
      child.time.observe(reply.elapsedTime / 1000)
      done()
    })
  },
  { name: 'atrium-metrics', dependencies: ['atrium-platform'] },
)

/**
 * /metrics on a port of its own (METRICS_PORT), for sites whose API port is public: an ingress
 * routes to the API port only, and Prometheus scrapes this one. Nothing else is served here.
 */
export async function listenMetrics(
  registry: Registry,
  o: { port: number; host: string },
): Promise<{ address: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('only GET /metrics is served on this port\n')
      return
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      () => res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics could not be collected\n'),
    )
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(o.port, o.host, () => resolve())
  })
  const { address, port } = server.address() as AddressInfo
  return {
    address: `http://${address.includes(':') ? `[${address}]` : address}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections() // a scraper's kept-alive connection must not hold the shutdown
      }),
  }
}
