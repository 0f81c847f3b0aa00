// 'atrium-limits': the counters every limit of the app counts in (platform/counters.ts), under one
// key prefix, and the sign-in guard that several modules' sign-in steps share.
import fp from 'fastify-plugin'
import { openCounters, RATE_LIMIT_PREFIX, type Counters } from '../platform/counters.js'
import { signInGuard, type SignInGuard } from './signin-guard.js'

declare module 'fastify' {
  interface FastifyInstance {
    limits: Limits
  }
}

export interface Limits {
  counters: Counters
  /** Every limit's keys start with it; each limit adds its own part. */
  keyPrefix: string
  /** Failed sign-in steps (session, invitation and device-login tokens) per address. */
  signIn: SignInGuard
}

export interface LimitsOptions {
  /** Rate-limit keys are prefixed so tests sharing one Redis do not share counters by accident. */
  rateLimitPrefix?: string
  /** Failed sign-in steps (session, invitation and device-login tokens) per address and window. */
  signInFailures?: { max?: number; windowSeconds?: number }
}

export const limitsPlugin = fp(
  async (app, o: LimitsOptions) => {
    const { cache, log } = app.platform
    const counters = openCounters({ redis: cache.redis, log, registry: app.registry })
    const keyPrefix = o.rateLimitPrefix ?? RATE_LIMIT_PREFIX
    app.decorate('limits', { counters, keyPrefix, signIn: signInGuard(counters, { keyPrefix, ...o.signInFailures }) })
  },
  { name: 'atrium-limits', dependencies: ['atrium-platform'] },
)
