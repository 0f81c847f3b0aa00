// A built app on a test platform, plus a tenant factory and a terse way to call the API.
import type { FastifyInstance, InjectOptions } from 'fastify'
import type { Test } from 'tap'
import { buildApp, type AppOptions } from '../../server/app.js'
import { createTenant } from '../../server/modules/tenants/service.js'
import type { Platform } from '../../server/platform/index.js'
import { suffix, testPlatform } from './platform.js'

export interface Called {
  status: number
  headers: Record<string, string | string[] | number | undefined>
  body: any // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON from the API under test
  raw: Buffer
}

export type Caller = (
  method: InjectOptions['method'],
  url: string,
  body?: unknown,
  headers?: Record<string, string>,
) => Promise<Called>

/** Calls `app` with `key` as a Bearer token if given, from `remoteAddress` if given (else light-my-request's own). */
export function caller(app: FastifyInstance, key?: string, remoteAddress?: string): Caller {
  return async (method, url, body, headers = {}) => {
    const res = await app.inject({
      method,
      url,
      headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers },
      ...(remoteAddress === undefined ? {} : { remoteAddress }),
      ...(body === undefined ? {} : { payload: body as InjectOptions['payload'] }),
    })
    const raw = res.rawPayload
    let parsed: unknown = null
    if (String(res.headers['content-type'] ?? '').includes('json')) parsed = JSON.parse(raw.toString('utf8'))
    return { status: res.statusCode, headers: res.headers, body: parsed, raw }
  }
}

export interface TestApp {
  app: FastifyInstance
  platform: Platform
  /** A new tenant with an all-permissions key, and a caller that uses the key. */
  tenant(
    plan?: 'free' | 'pro' | 'growth' | 'enterprise',
  ): Promise<{ tenantId: string; userId: string; apiKey: string; call: Caller }>
  anonymous: Caller
}

export async function testApp(
  t: Test,
  overrides: Record<string, string> = {},
  opts: AppOptions & { routes?: (app: FastifyInstance) => void } = {},
): Promise<TestApp> {
  const platform = await testPlatform(t, overrides)
  return appOn(t, platform, opts)
}

/** Another app on the same platform services (a second replica). */
export async function appOn(
  t: Test,
  platform: Platform,
  opts: AppOptions & { routes?: (app: FastifyInstance) => void } = {},
): Promise<TestApp> {
  // No webhook deliveries or job runner unless a test asks for them: they are background work on timers.
  const app = await buildApp(platform, {
    rateLimitPrefix: opts.rateLimitPrefix ?? `atrium:test:${suffix()}`,
    webhookWorker: false,
    jobs: false,
    ...opts,
  })
  opts.routes?.(app)
  await app.ready()
  t.teardown(() => app.close())
  return {
    app,
    platform,
    anonymous: caller(app),
    async tenant(plan = 'enterprise') {
      const created = await createTenant(platform, {
        name: `tenant ${suffix()}`,
        plan,
        email: `owner-${suffix()}@example.com`,
      })
      return { ...created, call: caller(app, created.apiKey) }
    },
  }
}
