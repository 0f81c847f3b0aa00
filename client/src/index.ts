// @atrium/client: the TypeScript client of the Atrium API. See ../README.md for a quick start.
import { dataOf, Transport, type TransportOptions } from './transport.js'
import { Agents, ApiKeys, Chat, Portability, Projects, Regions, Team, Tenant, Webhooks } from './resources.js'

export { AtriumError, AtriumNetworkError, type ErrorCode } from './errors.js'
export { EXPIRY_BUFFER_MS, type Credentials, type RefreshedSession } from './tokens.js'
export type { TransportOptions } from './transport.js'
export type { StreamEvent, StreamOptions } from './sse.js'
export type * from './resources.js'
export type { paths, components } from './openapi.js'

export interface ClientOptions extends Omit<TransportOptions, 'credentials'> {
  /** An API key (svc_sdk_... for applications, svc_ci_... for automation). */
  apiKey?: string
  /** See Credentials: sessionToken, refreshToken, onRefreshToken, accessToken. */
  credentials?: TransportOptions['credentials']
}

export class AtriumClient {
  private readonly t: Transport
  /** Every route of the server, typed from its OpenAPI document (openapi-fetch). */
  readonly api: Transport['api']
  readonly projects: Projects
  readonly agents: Agents
  readonly chat: Chat
  readonly tenant: Tenant
  readonly team: Team
  readonly apiKeys: ApiKeys
  readonly webhooks: Webhooks
  readonly regions: Regions
  /** Export, scheduled export, restore and the GDPR export. */
  readonly data: Portability

  constructor(o: ClientOptions) {
    const { apiKey, credentials, ...rest } = o
    this.t = new Transport({ ...rest, credentials: apiKey ? { ...credentials, apiKey } : credentials })
    this.api = this.t.api
    this.projects = new Projects(this.t)
    this.agents = new Agents(this.t)
    this.chat = new Chat(this.t)
    this.tenant = new Tenant(this.t)
    this.team = new Team(this.t)
    this.apiKeys = new ApiKeys(this.t)
    this.webhooks = new Webhooks(this.t)
    this.regions = new Regions(this.t)
    this.data = new Portability(this.t)
  }

  /** The user, tenant and credential the client acts as. */
  me() {
    return dataOf(this.api.GET('/api/v1/auth/me'))
  }

  /** Ends the session on the server (access tokens minted from it stop working) and forgets the tokens. */
  async logout(): Promise<void> {
    try {
      await dataOf(this.api.POST('/api/v1/auth/logout', { body: {} }))
    } finally {
      this.t.tokens.clear()
    }
  }

  /** The access token held now and when it counts as expired (null with an API key or before the first call). */
  get accessToken() {
    return this.t.tokens.current
  }

  /** A request the typed API cannot express (a raw path), with the client's credential and handling. */
  request(method: string, path: string, init?: RequestInit & { retry?: boolean }) {
    return this.t.request(method, path, init)
  }
}

/**
 * Signs in with email and password: an identity session token, to exchange (AtriumClient's credentials.sessionToken).
 */
export async function login(
  baseUrl: string,
  body: { email: string; password: string; tenantId?: string },
  o: { fetch?: typeof fetch } = {},
) {
  const t = new Transport({ baseUrl, credentials: { anonymous: true }, ...(o.fetch ? { fetch: o.fetch } : {}) })
  return dataOf(t.api.POST('/api/v1/auth/login', { body }))
}
