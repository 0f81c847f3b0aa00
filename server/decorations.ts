// What the request pipeline and the modules' plugins read of what buildServices (services.ts)
// built, as decorations of the root instance, each set by a named plugin that others list in their
// `dependencies`: 'atrium-platform' (the platform, clock, metrics registry, outbound policy and
// model calls), 'atrium-credentials' (the credential cache), 'atrium-limits' (counters and the
// sign-in guard) and 'atrium-jobs' (the job runner). They build nothing.
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Registry } from 'prom-client'
import type { Credentials } from './domain/credentials.js'
import type { Platform } from './platform/index.js'
import type { JobRunner } from './platform/jobs.js'
import type { Llm } from './platform/llm.js'
import type { CompiledPolicy } from './platform/outbound.js'
import type { Limits, Services } from './services.js'

declare module 'fastify' {
  interface FastifyInstance {
    platform: Platform
    /** The clock of every expiry rule (tokens, sessions, device logins) and of the job runner. */
    now: () => number
    /** This app's Prometheus metrics (GET /metrics). */
    registry: Registry
    /**
     * One outbound policy for every call out: webhook URLs and LLM base URLs when they are set, and
     * the connections of the webhook worker and of model calls.
     */
    outbound: CompiledPolicy
    /** Model calls (platform/llm.ts); their target comes from the tenant's settings (`llmSettings.connection`). */
    llm: Llm
    /** Principals this replica trusts, and the message that drops them everywhere. */
    credentials: Credentials
    limits: Limits
    jobs: JobRunner
  }
}

type Shared = Pick<
  FastifyInstance,
  'platform' | 'now' | 'registry' | 'outbound' | 'llm' | 'credentials' | 'limits' | 'jobs'
>

const decorations = (name: string, keys: (keyof Shared)[]) =>
  fp(
    async (app, services: Services) => {
      for (const key of keys) app.decorate(key, services[key] as never)
    },
    { name, dependencies: name === 'atrium-platform' ? [] : ['atrium-platform'] },
  )

/** In the order they are registered. */
export const DECORATIONS = [
  decorations('atrium-platform', ['platform', 'now', 'registry', 'outbound', 'llm']),
  decorations('atrium-credentials', ['credentials']),
  decorations('atrium-limits', ['limits']),
  decorations('atrium-jobs', ['jobs']),
]
