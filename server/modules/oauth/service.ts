// Sign-in with the deployment's own identity provider (OpenID Connect, authorization code flow with
// PKCE S256, state and nonce). start stores the flow's secrets (the state only as a hash) bound to
// the browser that started it; authorize takes the state out once, redeems the code with the
// verifier, checks the ID token's nonce, and turns a verified email address into an Atrium session.
//
// Who may sign in: an account with that email address (an address may have one in each of several
// tenants). A provider with a tenantId signs in only that tenant's account, accepting its pending
// invitation and creating a member for an address it has not seen (just in time). One without
// serves every tenant, but only accounts already in use: it never accepts an invitation (the
// invitation's own link does), so a tenant cannot pull someone in by inviting their address first.
// An address with accounts in several tenants names the one to sign in to when starting.
import { timingSafeEqual } from 'node:crypto'
import * as client from 'openid-client'
import type { Logger } from 'pino'
import { AppError, forbidden, invalid, notFound, unauthorized } from '../../domain/errors.js'
import { newId } from '../../../common/ids.js'
import { isUniqueViolation, type Db } from '../../platform/db.js'
import type { Origin } from '../../domain/actor.js'
import { audit } from '../audit/service.js'
import { accountOf, hashToken, type Account, type AuthService, type StartedSession } from '../sign-in/service.js'
import {
  findAccount,
  findAccountsByEmail,
  maySignIn,
  signInRefusal,
  signingIn,
  type AccountRow,
} from '../sign-in/accounts.js'
import { emitUserCreated, insertUser } from '../users/service.js'
import { isNetworkFailure, unavailable, type Provider, type Providers } from './providers.js'
import { activateInvited, consumeState, deleteExpiredStates, findTenant, insertState } from './store.js'
import { dateClock } from '../../clock.js'

/** How long a started sign-in may take at the identity provider. */
export const STATE_TTL_SECONDS = 600

const INVALID_STATE = 'This sign-in is unknown, expired or already used; start signing in again'

export interface OAuthServiceOptions {
  db: Db
  auth: AuthService
  providers: Providers
  log: Logger
  now?: () => number
}

export type OAuthService = ReturnType<typeof oauthService>

/** A refusal decided inside the transaction, audited outside it (a thrown error would roll the audit back). */
interface Refusal {
  error: AppError
  account?: AccountRow
}

export function oauthService(o: OAuthServiceOptions) {
  const now = dateClock(o.now)

  const providerOf = (id: string): Provider => {
    const p = o.providers.get(id)
    if (!p) throw notFound('identity provider', id)
    return p
  }

  /** The email claims, from the ID token or else from the UserInfo endpoint (where many providers keep them). */
  async function identityOf(
    p: Provider,
    config: client.Configuration,
    tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>,
  ) {
    const idToken = tokens.claims()
    if (!idToken) throw unauthorized('The identity provider returned no ID token')
    let claims: Record<string, unknown> = { ...idToken }
    // The address and whether it is verified are taken together from one statement, never mixed.
    let mail: Record<string, unknown> = claims
    if (
      (claims.email === undefined || claims.email_verified === undefined) &&
      config.serverMetadata().userinfo_endpoint
    ) {
      try {
        // fetchUserInfo insists on the ID token's subject.
        const info: Record<string, unknown> = await client.fetchUserInfo(config, tokens.access_token, idToken.sub)
        claims = { ...info, ...claims }
        if (info.email !== undefined) mail = info
      } catch (err) {
        if (isNetworkFailure(err)) throw unavailable(p.setting, err, 'user info request')
        o.log.info({ err, provider: p.setting.id }, 'OpenID Connect user info refused')
        throw new AppError('UNAUTHORIZED', 'The identity provider did not confirm who signed in', {
          reason: 'idp_error',
        })
      }
    }
    const email = typeof mail.email === 'string' ? mail.email.trim() : ''
    if (!email || email.length > 320 || !/^[^\s@]+@[^\s@]+$/.test(email)) {
      throw forbidden('The identity provider did not share an email address; allow the email scope for Atrium', {
        reason: 'email_missing',
        provider: p.setting.id,
      })
    }
    // Some providers send the flag as a string.
    if (mail.email_verified !== true && mail.email_verified !== 'true') {
      throw forbidden('The identity provider has not verified this email address', {
        reason: 'email_unverified',
        provider: p.setting.id,
      })
    }
    const given = [claims.given_name, claims.family_name].filter((x): x is string => typeof x === 'string').join(' ')
    const name = (typeof claims.name === 'string' && claims.name.trim() ? claims.name : given).trim().slice(0, 200)
    return { email, name, subject: idToken.sub }
  }

  /** The account the verified address signs in to, created or activated as the provider's rules say. */
  /** Of an address's accounts, the one a provider serving every tenant signs in to, or why none. */
  function platformWideAccount(accounts: AccountRow[]): { account: AccountRow } | Refusal {
    const usable = accounts.filter(maySignIn)
    if (usable.length === 1) return { account: usable[0]! }
    if (usable.length > 1) {
      return {
        error: forbidden(
          'This address has accounts in several organizations: start signing in again and choose one (tenantId)',
          {
            reason: 'tenant_required',
            tenants: usable.map((a) => ({ id: a.tenant_id, name: a.tenant_name })),
          },
        ),
      }
    }
    // None is usable: the first that has joined says why.
    const first = accounts.find((a) => a.user_status !== 'invited')
    const refused = first && signInRefusal(first)
    if (refused) return { error: refused, account: first }
    if (accounts.length)
      return {
        error: forbidden('Accept your invitation from the link you were sent first; then sign in here', {
          reason: 'invitation_pending',
        }),
      }
    return {
      error: forbidden('There is no account for this address; ask an administrator to invite you', {
        reason: 'no_account',
      }),
    }
  }

  async function signIn(
    p: Provider,
    who: { email: string; name: string; subject: string },
    origin: Origin,
    chosenTenant: string | null,
  ): Promise<(Account & { session: StartedSession }) | Refusal> {
    const s = p.setting
    const method = { method: 'oidc', provider: s.id }
    return o.db.system(async (sql) => {
      const at = now()
      // A provider bound to a tenant vouches for that tenant's people only: its administrators
      // must not be able to sign in as someone of another tenant by naming their address.
      const accounts = await findAccountsByEmail(sql, who.email, s.tenantId ?? chosenTenant ?? undefined)
      let account: AccountRow | undefined
      let created = false
      let activated = false
      if (!s.tenantId) {
        const found = platformWideAccount(accounts)
        if ('error' in found) return found
        account = found.account
      } else if ((account = accounts[0])) {
        const refused = signInRefusal(account)
        if (refused) return { error: refused, account }
        if (account.user_status === 'invited') activated = await activateInvited(sql, account.user_id, at)
      } else {
        const tenant = await findTenant(sql, s.tenantId)
        if (!tenant) {
          o.log.error({ provider: s.id, tenantId: s.tenantId }, 'OIDC_PROVIDERS names a tenant that does not exist')
          return { error: forbidden('There is no account for this address', { reason: 'no_account' }) }
        }
        if (tenant.status !== 'active')
          return {
            error: forbidden('The organization of this identity provider is suspended', { reason: 'tenant_suspended' }),
          }
        const userId = newId()
        await insertUser(sql, {
          id: userId,
          tenantId: tenant.id,
          email: who.email,
          name: who.name,
          role: s.defaultRole,
          passwordHash: null,
        })
        account = (await findAccount(sql, userId))!
        created = true
      }

      const signer = signingIn(account, origin)
      const user = { type: 'user', id: account.user_id }
      if (created || activated)
        await emitUserCreated(sql, account.tenant_id, account.user_id, created ? 'oidc' : 'invitation')
      if (created)
        await audit(sql, {
          ...signer,
          action: 'auth.user_provisioned',
          target: user,
          details: { ...method, role: account.role },
        })
      if (activated) await audit(sql, { ...signer, action: 'auth.invitation_accepted', target: user, details: method })
      const session = await o.auth.startSession(sql, { ...signer, method: 'oidc' })
      const target = { type: 'session', id: session.sessionId }
      await audit(sql, { ...signer, action: 'auth.login', target, details: method })
      return { ...accountOf(account), session }
    })
  }

  return {
    has: (id: string) => o.providers.get(id) !== undefined,

    list: (publicUrl: string) =>
      o.providers
        .list()
        .map((p) => ({ id: p.setting.id, name: p.setting.name, startUrl: `${publicUrl}/oauth/${p.setting.id}/start` })),

    /** The identity provider's authorization URL for a sign-in bound to `browser` (the binding cookie's value). */
    /** `tenantId`: the organization to sign in to, for an address with accounts in several. */
    async start(
      providerId: string,
      browser: string,
      tenantId: string | null = null,
    ): Promise<{ authorizationUrl: string; expiresAt: Date }> {
      const p = providerOf(providerId)
      const config = await p.configuration()
      const state = client.randomState()
      const nonce = client.randomNonce()
      const codeVerifier = client.randomPKCECodeVerifier()
      const at = now()
      const expiresAt = new Date(at.getTime() + STATE_TTL_SECONDS * 1000)
      await o.db.system(async (sql) => {
        await deleteExpiredStates(sql, at)
        await insertState(sql, {
          stateHash: hashToken(state),
          provider: p.setting.id,
          nonce,
          codeVerifier,
          browserHash: hashToken(browser),
          tenantId,
          createdAt: at,
          expiresAt,
        })
      })
      const url = client.buildAuthorizationUrl(config, {
        redirect_uri: p.redirectUri,
        scope: p.setting.scopes,
        state,
        nonce,
        code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
        code_challenge_method: 'S256',
      })
      return { authorizationUrl: url.href, expiresAt }
    },

    /**
     * Completes a sign-in from the parameters the identity provider redirected the browser with.
     * The state is consumed whatever the outcome: a second attempt with it is refused.
     */
    async authorize(
      providerId: string,
      input: { params: URLSearchParams; browser: string | null },
      origin: Origin,
    ): Promise<Account & { session: StartedSession }> {
      const p = providerOf(providerId)
      const state = input.params.get('state')
      if (!state) throw invalid('state', 'is required (the state the identity provider sent back)')
      if (!input.browser) {
        throw forbidden('This sign-in was not started in this browser; start signing in again', {
          reason: 'browser_mismatch',
        })
      }
      const row = await o.db.system((sql) => consumeState(sql, hashToken(state)))
      if (!row)
        throw new AppError('VALIDATION_ERROR', INVALID_STATE, {
          reason: 'state_invalid',
          errors: [{ field: 'state', message: 'is unknown, expired or already used' }],
        })
      if (row.provider !== p.setting.id) {
        throw new AppError(
          'VALIDATION_ERROR',
          'This sign-in was started with another identity provider; start signing in again',
          {
            reason: 'state_provider_mismatch',
            errors: [{ field: 'state', message: 'belongs to another identity provider' }],
          },
        )
      }
      if (!timingSafeEqual(row.browser_hash, hashToken(input.browser))) {
        // Login CSRF: someone else's sign-in would be completed in this browser.
        throw forbidden('This sign-in was not started in this browser; start signing in again', {
          reason: 'browser_mismatch',
        })
      }
      if (row.expires_at <= now())
        throw new AppError('VALIDATION_ERROR', INVALID_STATE, {
          reason: 'state_expired',
          errors: [{ field: 'state', message: 'has expired' }],
        })

      const config = await p.configuration()
      // openid-client derives redirect_uri from this URL (without its query): it must be the registered one.
      const callback = new URL(p.redirectUri)
      for (const [k, v] of input.params) callback.searchParams.append(k, v)
      let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>
      try {
        tokens = await client.authorizationCodeGrant(config, callback, {
          pkceCodeVerifier: row.code_verifier,
          expectedState: state,
          expectedNonce: row.nonce,
          idTokenExpected: true,
        })
      } catch (err) {
        if (isNetworkFailure(err)) throw unavailable(p.setting, err, 'token request')
        const said =
          err instanceof client.AuthorizationResponseError || err instanceof client.ResponseBodyError
            ? err.error
            : undefined
        o.log.info({ err, provider: p.setting.id }, 'OpenID Connect sign-in refused')
        throw new AppError(
          'UNAUTHORIZED',
          said
            ? `The identity provider refused the sign-in (${said}); start signing in again`
            : "The identity provider's answer could not be verified; start signing in again",
          { reason: 'idp_error', ...(said ? { error: said } : {}) },
        )
      }

      const who = await identityOf(p, config, tokens)
      let r: Awaited<ReturnType<typeof signIn>>
      try {
        r = await signIn(p, who, origin, row.chosen_tenant_id)
      } catch (err) {
        // Two first sign-ins of one new address at once: the second finds the account the first made.
        if (!isUniqueViolation(err, 'users_tenant_email_key')) throw err
        r = await signIn(p, who, origin, row.chosen_tenant_id)
      }
      if ('error' in r) {
        const { error, account } = r
        if (account) {
          await o.db.system((sql) =>
            audit(sql, {
              tenantId: account.tenant_id,
              actor: { type: 'anonymous', id: null },
              action: 'auth.login_failed',
              target: { type: 'user', id: account.user_id },
              origin,
              details: { method: 'oidc', provider: p.setting.id, reason: error.details.reason },
            }),
          )
        }
        throw error
      }
      return r
    },
  }
}
