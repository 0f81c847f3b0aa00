// The client library's cost per call: GET /api/v1/projects/:id made through @atrium/client
// (openapi-fetch, the credential, the envelope unwrapped, errors typed) against the same request
// made with bare fetch from this process, same server, same key, same concurrency. Then the same
// with an access token the client exchanged for itself (it renews only when stale).
import { AtriumClient, login } from '../client/src/index.js'
import { createTenant, pool, printTable, start, stop } from './lib.js'

const CALLS = Number(process.env.BENCH_CLIENT_CALLS ?? 3000)
const PARALLEL = 16

async function rate(job: () => Promise<unknown>): Promise<number> {
  await pool(200, PARALLEL, async () => void (await job())) // warm-up
  const t0 = performance.now()
  await pool(CALLS, PARALLEL, async () => void (await job()))
  return CALLS / ((performance.now() - t0) / 1000)
}

export async function benchClient(env: Record<string, string>) {
  const server = await start('server/main.ts', env)
  try {
    const { apiKey } = await createTenant(env, [
      '--email',
      'client-bench@example.com',
      '--password',
      'bench password 1',
    ])
    const client = new AtriumClient({ baseUrl: server.base, apiKey })
    const project = await client.projects.create({ name: 'bench' })
    const url = `${server.base}/api/v1/projects/${project.id}`
    const session = await login(server.base, { email: 'client-bench@example.com', password: 'bench password 1' })
    const jwtClient = new AtriumClient({ baseUrl: server.base, credentials: { sessionToken: session.token } })
    const callers = {
      bare: async () => {
        const r = await fetch(url, { headers: { authorization: `Bearer ${apiKey}` } })
        if (r.status !== 200) throw new Error(`GET: ${r.status}`)
        return ((await r.json()) as { data: unknown }).data
      },
      viaClient: () => client.projects.get(project.id),
      viaJwt: () => jwtClient.projects.get(project.id),
    }
    // Three rounds, the callers taking turns, the best of each kept: the server and this process
    // warm up during the first, which would otherwise favour whoever runs last.
    const best = { bare: 0, viaClient: 0, viaJwt: 0 }
    for (let round = 0; round < 3; round++) {
      for (const k of Object.keys(callers) as (keyof typeof callers)[])
        best[k] = Math.max(best[k], await rate(callers[k]))
    }
    return best
  } finally {
    await stop(server)
  }
}

export function printClient(r: Awaited<ReturnType<typeof benchClient>>) {
  console.log(
    `\nclient library: GET /api/v1/projects/:id, ${PARALLEL} at a time from this process; the best of three rounds of ${CALLS}`,
  )
  printTable([
    ['caller', 'req/s', 'of the baseline'],
    ['bare fetch with the API key (baseline)', r.bare.toFixed(0), '100%'],
    ['@atrium/client, API key', r.viaClient.toFixed(0), `${((r.viaClient / r.bare) * 100).toFixed(1)}%`],
    ['@atrium/client, exchanged access token', r.viaJwt.toFixed(0), `${((r.viaJwt / r.bare) * 100).toFixed(1)}%`],
  ])
}
