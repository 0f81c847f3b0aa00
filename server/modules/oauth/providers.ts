// The deployment's identity providers (OIDC_PROVIDERS): checked against the outbound policy at
// start-up, discovered lazily on first use and cached. Every request to a provider goes through the
// outbound fetch, so discovery documents that point elsewhere, or names that re-resolve, are judged
// at connect time as well.
import * as client from 'openid-client'
import type { Logger } from 'pino'
import type { OidcProviderSetting } from '../../../config/schema.js'
import { AppError } from '../../domain/errors.js'
import { outboundFetch, parseIp, refusalIn, type CompiledPolicy } from '../../platform/outbound.js'

export interface Provider {
  readonly setting: OidcProviderSetting
  /** What the identity provider has registered for this client. */
  readonly redirectUri: string
  /** The discovered configuration; SERVICE_UNAVAILABLE when the provider cannot be reached. */
  configuration(): Promise<client.Configuration>
}

export interface ProvidersOptions {
  providers: readonly OidcProviderSetting[]
  publicUrl: string
  /** The deployment's outbound policy as services.ts compiled it: its resolver is the one providers are judged by. */
  policy: CompiledPolicy
  log: Logger
  now?: () => number
  /** Per request to a provider. */
  timeoutSeconds?: number
}

// Re-discovering now and then picks up endpoint changes without a restart; signing keys are
// refetched by openid-client itself whenever an unknown key id appears.
const DISCOVERY_TTL_MS = 60 * 60 * 1000

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'OAUTH_TIMEOUT',
  'OAUTH_ABORT',
  'UND_ERR_CONNECT_TIMEOUT',
])

/** Whether a failure is the network's (or the policy's), as opposed to something the provider said. */
export function isNetworkFailure(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    const x = e as { code?: string; name?: string; message?: string }
    if (refusalIn(x) || NETWORK_CODES.has(String(x.code)) || x.name === 'TimeoutError' || x.name === 'AbortError')
      return true
    if (e instanceof TypeError && x.message === 'fetch failed') return true
  }
  return false
}

/** SERVICE_UNAVAILABLE naming the provider and what went wrong (never a secret: the URL and the cause). */
export function unavailable(p: OidcProviderSetting, err: unknown, during: string): AppError {
  const refused = refusalIn(err)
  if (refused) {
    return new AppError(
      'SERVICE_UNAVAILABLE',
      `The identity provider ${p.name} may not be contacted: ${refused.reason} (${refused.host})`,
      { provider: p.id, reason: 'outbound_refused' },
    )
  }
  if (isNetworkFailure(err)) {
    return new AppError(
      'SERVICE_UNAVAILABLE',
      `The identity provider ${p.name} could not be reached (${during}); try again later`,
      { provider: p.id, reason: 'unreachable' },
    )
  }
  return new AppError(
    'SERVICE_UNAVAILABLE',
    `The identity provider ${p.name} gave an unusable answer (${during}); an administrator should check its configuration`,
    {
      provider: p.id,
      reason: 'invalid_provider_response',
    },
  )
}

/**
 * Refuses, before anything is contacted, providers the policy forbids: in air-gapped mode every
 * issuer must be named under OUTBOUND_ALLOWED_DOMAINS (or be an address) and resolve inside
 * OUTBOUND_ALLOWED_NETWORKS; an issuer given as an IP address is judged
 * in any mode. (In connected mode hostnames are judged when connecting: a DNS hiccup at start-up
 * must not stop the server.) The policy is the one the site compiled once (server/services.ts).
 */
export async function assertProvidersAllowed(
  providers: readonly OidcProviderSetting[],
  compiled: CompiledPolicy,
): Promise<void> {
  const { airGapped } = compiled.policy
  const problems: string[] = []
  for (const p of providers) {
    const host = new URL(p.issuer).hostname
    if (!airGapped && !parseIp(host)) continue
    try {
      await compiled.resolveAllowed(host)
    } catch (err) {
      const refused = refusalIn(err)
      problems.push(
        refused
          ? `provider "${p.id}" (issuer host ${host}) is refused: ${refused.reason}`
          : `provider "${p.id}": its issuer host ${host} could not be resolved (${(err as { code?: string }).code ?? (err as Error).message}), so it cannot be shown to be inside OUTBOUND_ALLOWED_NETWORKS`,
      )
    }
  }
  if (problems.length) {
    throw new Error(
      `OIDC_PROVIDERS: ${problems.join('; ')}${airGapped ? ' (AIR_GAPPED=true: identity providers must be named under OUTBOUND_ALLOWED_DOMAINS and be inside OUTBOUND_ALLOWED_NETWORKS)' : ''}`,
    )
  }
}

export async function openProviders(o: ProvidersOptions) {
  await assertProvidersAllowed(o.providers, o.policy)
  const now = o.now ?? Date.now
  const fetchOut = outboundFetch(o.policy, {
    timeoutMs: (o.timeoutSeconds ?? 10) * 1000,
    maxResponseBytes: 1024 * 1024,
  })
  const customFetch: client.CustomFetch = (url, options) => {
    if (options.body instanceof ReadableStream)
      throw new TypeError('streamed request bodies are not sent to identity providers')
    return fetchOut(url, { ...options, body: options.body ?? null })
  }

  const byId = new Map<string, Provider>()
  for (const setting of o.providers) {
    let cached: { at: number; config: Promise<client.Configuration> } | null = null
    const discover = () =>
      client.discovery(
        new URL(setting.issuer),
        setting.clientId,
        { client_secret: setting.clientSecret },
        setting.tokenAuthMethod === 'client_secret_post'
          ? client.ClientSecretPost(setting.clientSecret)
          : client.ClientSecretBasic(setting.clientSecret),
        {
          [client.customFetch]: customFetch,
          timeout: o.timeoutSeconds ?? 10,
          execute: setting.allowHttp ? [client.allowInsecureRequests] : [],
        },
      )
    byId.set(setting.id, {
      setting,
      redirectUri: `${o.publicUrl}/oauth/${setting.id}/callback`,
      async configuration() {
        if (!cached || now() - cached.at > DISCOVERY_TTL_MS) {
          const attempt = { at: now(), config: discover() }
          cached = attempt
          // A failed discovery is not kept: the next sign-in tries again.
          attempt.config.catch(() => {
            if (cached === attempt) cached = null
          })
        }
        try {
          return await cached.config
        } catch (err) {
          o.log.warn({ err, provider: setting.id }, 'OpenID Connect discovery failed')
          throw unavailable(setting, err, 'discovery')
        }
      },
    })
  }

  return {
    get: (id: string): Provider | undefined => byId.get(id),
    list: (): Provider[] => [...byId.values()],
    close: () => fetchOut.close(),
  }
}

export type Providers = Awaited<ReturnType<typeof openProviders>>
