// The license on every /api/v1 request: a header while in grace or expired, and, once an expired
// license makes the API read-only (production), 403 for every request that would change data.
// Reads stay open, and so do signing in and out and exports: an expired license must never lock a
// customer out of their own data. Judged from the clock on each request (platform/license.ts), so a
// running server changes state without a restart. The clock it is judged by is the trusted time
// (platform/trusted-time.ts), read again every hour (queue 'license.clock', server/jobs.ts): a clock
// set back does not revive a license.
import type { FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { Gauge } from 'prom-client'
import { isApiPath } from './auth.js'
import { forbidden } from '../domain/errors.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * true for writes that must work while the API is read-only: they change no tenant data (sign-in, sign-out,
     * exports).
     */
    readOnlyAllowed?: boolean
  }
}

export const LICENSE_HEADER = 'x-atrium-license'
const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])

/** After 'atrium-auth' (its dependency): a bad credential is still 401 and still rate limited first. */
export const licensePlugin = fp(
  async (app) => {
    const { license, time } = app.platform
    new Gauge({
      name: 'atrium_clock_behind_seconds',
      help: "How far this process's clock is behind the database's clock or the latest time recorded; the license is judged by the later time",
      registers: [app.registry],
      collect() {
        this.set(Math.round(time.behindMs() / 1000))
      },
    })
    new Gauge({
      name: 'atrium_license_read_only',
      help: 'Whether an expired license has made the API read-only: 1 read-only, 0 not',
      registers: [app.registry],
      collect() {
        this.set(license.readOnly() ? 1 : 0)
      },
    })
    if (!license.claims) return // unlicensed development: nothing to say or enforce
    // For the alert that warns weeks ahead, and the grace period's countdown on a dashboard.
    new Gauge({
      name: 'atrium_license_expiry_timestamp_seconds',
      help: 'When the license expires (Unix time); its grace period starts then',
      registers: [app.registry],
    }).set(Math.floor(license.claims.expiresAt.getTime() / 1000))
    const apiRequest = (request: FastifyRequest) => {
      const routed = request.routeOptions.url !== undefined
      return isApiPath(routed ? request.routeOptions.url! : request.url)
    }
    app.addHook('onRequest', async (request) => {
      // Unmatched URLs are left to their 404: only a route that would run is refused.
      if (!WRITES.has(request.method) || request.routeOptions.url === undefined || !apiRequest(request)) return
      if (request.routeOptions.config?.readOnlyAllowed || !license.readOnly()) return
      throw forbidden(license.message(), { reason: 'license_expired' })
    })
    // On every /api/v1 response, errors included, so a client sees it whatever it called.
    app.addHook('onSend', async (request, reply) => {
      if (!apiRequest(request)) return
      const { status, daysLeft } = license.status()
      if (status === 'grace') reply.header(LICENSE_HEADER, `grace; days-left=${daysLeft}`)
      else if (status === 'expired') reply.header(LICENSE_HEADER, 'expired')
    })
  },
  { name: 'atrium-license', dependencies: ['atrium-platform', 'atrium-auth'] },
)
