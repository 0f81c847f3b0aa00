// The tenant's LLM connection (provider, base URL, model, generation defaults, API key). The API key
// is write-only: sealed by the secrets adapter and bound to this tenant's row, never returned, never
// logged, never put in an audit event. Clients only learn whether one is set and, for keys long
// enough that it gives little away, its last four characters. The base URL gets the outbound policy
// webhooks get: judged when it is set, and at every connection through LlmConnection.fetch.
import { Type } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import type { Actor } from '../../domain/actor.js'
import { invalid } from '../../domain/errors.js'
import { oneOf } from '../../domain/one-of.js'
import { outboundUrl } from '../../domain/outbound-url.js'
import type { Db, TxSql } from '../../platform/db.js'
import { LLM_PROVIDERS, type LlmProvider, type LlmTarget } from '../../platform/llm.js'
import { outboundFetch, outboundHostAllowed, type CompiledPolicy } from '../../platform/outbound.js'
import type { SecretContext, Secrets } from '../../platform/secrets.js'
import { auditBy } from '../audit/service.js'
import {
  ensureLlmSettings,
  selectLlmSettings,
  updateLlmSettings,
  type LlmSettingsFields,
  type LlmSettingsRow,
} from './store.js'
import { dateClock } from '../../clock.js'

/** A key shorter than this shows no last four: four characters would be too much of it. */
export const LAST_FOUR_MIN_KEY_LENGTH = 12

/** A model's answer can take minutes and run to megabytes; the guarded fetch still bounds both. */
const LLM_CALL_TIMEOUT_MS = 300_000
const LLM_MAX_RESPONSE_BYTES = 32 * 1024 * 1024

// What the settings take: PATCH /tenant/settings/llm validates its body with this schema, and
// validate() holds settings that arrive another way (a restore) to the same schema and checks.
export const Provider = oneOf(LLM_PROVIDERS)
export const Temperature = Type.Number({ minimum: 0, maximum: 2 })
export const MaxTokens = Type.Integer({ minimum: 1, maximum: 1_000_000 })
export const LlmPatch = Type.Object(
  {
    provider: Type.Optional(Provider),
    baseUrl: Type.Optional(
      Type.Union([
        Type.String({
          minLength: 1,
          maxLength: 2048,
          description:
            'http or https URL of the provider API (docs/llm.md gives it for each provider), without credentials, on a host the outbound policy lets the server reach (loopback and private addresses only inside OUTBOUND_ALLOWED_NETWORKS, metadata and link-local never)',
        }),
        Type.Null(),
      ]),
    ),
    model: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' }), Type.Null()])),
    defaults: Type.Optional(
      Type.Object(
        {
          temperature: Type.Optional(Type.Union([Temperature, Type.Null()])),
          maxTokens: Type.Optional(Type.Union([MaxTokens, Type.Null()])),
        },
        { additionalProperties: false },
      ),
    ),
    apiKey: Type.Optional(
      Type.Union([
        // Printable ASCII without inner spaces: the key travels in an HTTP header.
        Type.String({
          minLength: 1,
          maxLength: 500,
          pattern: '^\\s*[!-~]+\\s*$',
          description: 'Write-only; stored encrypted. null removes it',
        }),
        Type.Null(),
      ]),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
)

export interface LlmSettingsPatch {
  provider?: LlmProvider
  baseUrl?: string | null
  model?: string | null
  defaults?: { temperature?: number | null; maxTokens?: number | null }
  apiKey?: string | null
}

export interface LlmSettingsView {
  provider: LlmProvider
  baseUrl: string | null
  model: string | null
  defaults: { temperature: number | null; maxTokens: number | null }
  apiKey: { configured: boolean; lastFour: string | null }
  updatedAt: string | null
  updatedBy: string | null
}

/**
 * What the server itself uses to call the model, the key decrypted: the target platform/llm.ts
 * calls. Never sent to a client. Its `fetch` is the only way to reach the model (baseUrl or the
 * provider's default host): it connects only where the outbound policy allows, judging the address
 * at every connection, so a base URL stored before a policy change, or a name that now resolves
 * elsewhere, is refused there.
 */
export type LlmConnection = LlmTarget

// The column defaults of tenant_llm_settings: what a tenant has before its first change.
const DEFAULTS: LlmSettingsFields = {
  provider: 'openai-compatible',
  base_url: '',
  model: '',
  temperature: null,
  max_tokens: null,
  api_key_sealed: null,
  api_key_last_four: null,
}

/** The associated data that binds a sealed key to its tenant's row. */
export const llmKeyContext = (tenantId: string): SecretContext => ({
  tenantId,
  table: 'tenant_llm_settings',
  rowId: tenantId,
  field: 'api_key',
})

const view = (r: LlmSettingsFields & { updated_at?: Date; updated_by?: string | null }): LlmSettingsView => ({
  provider: r.provider as LlmProvider,
  baseUrl: r.base_url || null,
  model: r.model || null,
  defaults: { temperature: r.temperature, maxTokens: r.max_tokens },
  apiKey: { configured: r.api_key_sealed !== null, lastFour: r.api_key_last_four },
  updatedAt: r.updated_at?.toISOString() ?? null,
  updatedBy: r.updated_by ?? null,
})

/** The settings after the patch, and the names of the fields it changed (never their values). */
function apply(current: LlmSettingsFields, patch: LlmSettingsPatch, seal: (key: string) => string) {
  const next = { ...current }
  const changed: string[] = []
  const set = <K extends keyof LlmSettingsFields>(field: string, column: K, value: LlmSettingsFields[K]) => {
    if (next[column] === value) return
    next[column] = value
    changed.push(field)
  }
  if (patch.provider !== undefined) set('provider', 'provider', patch.provider)
  if (patch.baseUrl !== undefined) set('baseUrl', 'base_url', patch.baseUrl ?? '') // checked by the caller
  if (patch.model !== undefined) set('model', 'model', patch.model?.trim() ?? '')
  if (patch.defaults?.temperature !== undefined) set('defaults.temperature', 'temperature', patch.defaults.temperature)
  if (patch.defaults?.maxTokens !== undefined) set('defaults.maxTokens', 'max_tokens', patch.defaults.maxTokens)
  if (patch.apiKey === null && current.api_key_sealed !== null) {
    next.api_key_sealed = null
    next.api_key_last_four = null
    changed.push('apiKey')
  } else if (typeof patch.apiKey === 'string') {
    const key = patch.apiKey.trim()
    if (!key) throw invalid('apiKey', 'must not be blank; send null to remove the key')
    // Sealed afresh even when it is the same key: comparing would mean decrypting the old one.
    next.api_key_sealed = seal(key)
    next.api_key_last_four = key.length >= LAST_FOUR_MIN_KEY_LENGTH ? key.slice(-4) : null
    changed.push('apiKey')
  }
  return { next, changed }
}

export function llmSettingsService(deps: {
  db: Db
  secrets: Secrets
  /** The outbound policy (OUTBOUND_ALLOWED_NETWORKS, AIR_GAPPED), compiled: the one webhooks use. */
  policy: CompiledPolicy
  now?: () => number
}) {
  const { db, secrets, policy } = deps
  const now = dateClock(deps.now)
  const read = async (tenantId: string): Promise<LlmSettingsRow | null> =>
    (await db.tenantRead(tenantId, (sql) => selectLlmSettings(sql, tenantId)))[0] ?? null
  // Streamed: model answers arrive as server-sent events, read as they come.
  const guarded = outboundFetch(policy, {
    timeoutMs: LLM_CALL_TIMEOUT_MS,
    maxResponseBytes: LLM_MAX_RESPONSE_BYTES,
    stream: true,
  })

  /** An http(s) URL without credentials (they belong in apiKey, which is sealed) to a host the server may call. */
  async function checkBaseUrl(value: string): Promise<string> {
    const url = outboundUrl('baseUrl', value, { allowHttp: true, credentials: 'send the key as apiKey' })
    await outboundHostAllowed('baseUrl', url, policy)
    return value.trim()
  }

  return {
    /**
     * Settings that arrive another way than PATCH (a restore's), held to what PATCH holds them to:
     * its schema and the base URL's check (the outbound policy). VALIDATION_ERROR naming the field;
     * otherwise the fields as update() would store them (the API key aside: it is not given here).
     */
    async validate(given: unknown): Promise<Omit<LlmSettingsFields, 'api_key_sealed' | 'api_key_last_four'>> {
      const error = Value.Errors(LlmPatch, given).First()
      if (error) throw invalid(error.path.slice(1).replaceAll('/', '.') || 'body', error.message)
      const { apiKey: _, ...patch } = given as LlmSettingsPatch
      const { next } = apply(
        DEFAULTS,
        typeof patch.baseUrl === 'string' ? { ...patch, baseUrl: await checkBaseUrl(patch.baseUrl) } : patch,
        () => '',
      )
      return {
        provider: next.provider,
        base_url: next.base_url,
        model: next.model,
        temperature: next.temperature,
        max_tokens: next.max_tokens,
      }
    },

    async get(tenantId: string): Promise<LlmSettingsView> {
      return view((await read(tenantId)) ?? DEFAULTS)
    },

    /** Applies a partial change and records which fields changed, in one transaction. */
    async update(a: Actor, given: LlmSettingsPatch): Promise<LlmSettingsView> {
      // Before the transaction: a name lookup must not hold the row lock (or embedded mode's one connection).
      const patch = typeof given.baseUrl === 'string' ? { ...given, baseUrl: await checkBaseUrl(given.baseUrl) } : given
      return db.tenant(a.tenantId, async (sql: TxSql) => {
        const seal = (key: string) => secrets.encrypt(key, llmKeyContext(a.tenantId))
        let [row] = await selectLlmSettings(sql, a.tenantId, { lock: true })
        if (!row) {
          // Nothing stored yet: a patch that changes nothing leaves it that way. Otherwise make the
          // row and lock it, so that two first changes at once apply one after the other.
          if (!apply(DEFAULTS, patch, () => '').changed.length) return view(DEFAULTS)
          await ensureLlmSettings(sql, a.tenantId)
          ;[row] = await selectLlmSettings(sql, a.tenantId, { lock: true })
        }
        const { next, changed } = apply(row!, patch, seal)
        if (!changed.length) return view(row!)
        const saved = await updateLlmSettings(sql, a.tenantId, next, { userId: a.principal.userId, at: now() })
        await auditBy(sql, a, {
          action: 'settings.llm_changed',
          target: { type: 'tenant', id: a.tenantId },
          details: { fields: changed },
        })
        return view(saved)
      })
    },

    /**
     * The connection with its key decrypted, for the server's own calls to the model. The one entry
     * point for a model client: it must send every request through `fetch` (an SDK's fetch option),
     * never the global fetch, so that the outbound policy judges each connection.
     */
    async connection(tenantId: string): Promise<LlmConnection> {
      const r = (await read(tenantId)) ?? DEFAULTS
      return {
        provider: r.provider as LlmProvider,
        baseUrl: r.base_url || null,
        model: r.model || null,
        temperature: r.temperature,
        maxTokens: r.max_tokens,
        apiKey: r.api_key_sealed === null ? null : secrets.decrypt(r.api_key_sealed, llmKeyContext(tenantId)),
        fetch: guarded,
      }
    },

    /** Closes the guarded fetch's idle connections. */
    close: () => guarded.close(),
  }
}

export type LlmSettingsService = ReturnType<typeof llmSettingsService>
