// 'atrium-platform': what buildApp is given, as decorations of the root instance, so that every
// other plugin reads the same platform, clock, registry and outbound policy from the instance and
// says so in its `dependencies`.
import fp from 'fastify-plugin'
import type { Registry } from 'prom-client'
import type { Platform } from '../platform/index.js'
import { compilePolicy, outboundPolicyOf, type CompiledPolicy, type Resolver } from '../platform/outbound.js'
import { createRegistry } from './metrics.js'

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
  }
}

export interface PlatformOptions {
  /** Separate registries let tests build several apps in one process. */
  registry?: Registry
  /** The clock of every expiry rule (tokens, sessions, device logins); tests move it forward. */
  now?: () => number
  /** How outbound calls resolve names (tests); the system resolver otherwise. */
  resolver?: Resolver
}

export const platformPlugin = fp(
  async (app, o: PlatformOptions & { platform: Platform }) => {
    const { config } = o.platform
    app.decorate('platform', o.platform)
    app.decorate('now', o.now ?? Date.now)
    app.decorate('registry', o.registry ?? createRegistry())
    app.decorate('outbound', compilePolicy(outboundPolicyOf(config), o.resolver))
    // Said at start-up, not first at a refused delivery: a site upgraded from before the setting existed refuses every name.
    if (config.AIR_GAPPED && !config.OUTBOUND_ALLOWED_DOMAINS.length) {
      app.log.warn('AIR_GAPPED=true and OUTBOUND_ALLOWED_DOMAINS is empty: webhooks, model servers and identity providers can only be given as addresses (docs/air-gap.md)')
    }
  },
  { name: 'atrium-platform' },
)
