// A tenant's team: members are invited, change role or status, and are removed; an invitee accepts
// with the token they were sent and chooses a password.
//
// Who may do what (the routes' OpenAPI descriptions say the same):
// - Acting on a member, or granting a role, needs authority over that role. Only an owner (a signed-
//   in user whose role is owner) has it over the owner role. Anyone else has it over a role whose
//   permissions they hold in full: admins over admin, member and viewer; an API key with '*' like an
//   admin (never like an owner); a narrower key only over the roles its permissions cover.
// - Nobody changes their own role, status or membership, except an owner stepping down (to another
//   role, or out of the team) while another active owner remains.
// - The last active owner cannot be demoted, disabled or removed.
// - An invited member has not joined yet: their status cannot change (remove them to withdraw the
//   invitation).
// The last two are rules of accounts whoever changes them, decided by the users module; the team
// module applies them, with the others, on the rows it locks.
// Any change to a member ends their sessions in the same transaction, and their cached credentials
// on every replica right after it commits, so what they may do changes at once. Disabling or removing
// them revokes their API keys; a demotion revokes the keys holding more than the new role.
import type { Actor, Origin } from '../../domain/actor.js'
import { AppError, forbidden, invalid, notFound, unauthorized } from '../../domain/errors.js'
import type { Credentials } from '../../domain/credentials.js'
import { covers, ROLE_PERMISSIONS, type Role } from '../../domain/permissions.js'
import type { Principal } from '../../domain/principal.js'
import { newId, randomBase62 } from '../../../common/ids.js'
import { isUniqueViolation, type Db, type TxSql } from '../../platform/db.js'
import { credentialTags } from '../../platform/credential-tags.js'
import type { Secrets } from '../../platform/secrets.js'
import { audit, auditBy } from '../audit/service.js'
import { accountOf, hashToken, type Account, type AuthService, type StartedSession } from '../sign-in/service.js'
import { findAccount, revokeUserSessions, signingIn } from '../sign-in/accounts.js'
import { EMAIL_RE } from '../../../common/email.js'
import { hashPassword } from '../users/passwords.js'
import {
  acceptInvited,
  changesInvitedStatus,
  deleteMember,
  getMember,
  insertInvited,
  leavesNoActiveOwner,
  listMembersPage,
  lockMemberAndOwners,
  updateMember,
  type MemberRow,
} from '../users/service.js'
import { consumeInvitation, deleteOpenInvitations, findInvitation, insertInvitation, revokeUserKeys } from './store.js'
import { dateClock } from '../../clock.js'

export const INVITATION_TTL_SECONDS = 7 * 24 * 3600
// Invitation tokens: ati_ + 43 base62 characters (about 256 random bits) + the 8-character tag of
// platform/credential-tags.ts; stored as SHA-256 only. Tokens made before tags have none.
const INVITATION_TOKEN_RE = /^ati_[A-Za-z0-9]{43}(?:[A-Za-z0-9]{8})?$/
/** An invitation token of the format before tags (which memory cannot tell from a made-up one). */
export const isLegacyInvitationToken = (token: string) => token.length === 'ati_'.length + 43
const INVALID_INVITATION = 'The invitation is invalid, expired or already used'

export interface Invitation {
  token: string
  expiresAt: string
  acceptUrl: string
}
export interface MemberChange {
  role?: Role
  status?: 'active' | 'disabled'
}

/** Whether the principal has authority over members holding `role` (see the rules above). */
export const mayHandle = (p: Principal, role: Role): boolean =>
  role === 'owner' ? p.kind === 'user' && p.role === 'owner' : covers(p.permissions, ROLE_PERMISSIONS[role])

/** Refuses a principal without authority over `role`, to grant it or to manage a member holding it. */
function assertMayHandle(p: Principal, role: Role, doing: 'grant' | 'manage'): void {
  if (mayHandle(p, role)) return
  const what = doing === 'grant' ? `grant the ${role} role` : `change, disable or remove a member whose role is ${role}`
  throw role === 'owner'
    ? forbidden(`Only an owner may ${what}`, { reason: 'owner_only', role })
    : forbidden(`This credential lacks the permissions of the ${role} role, so it may not ${what}`, {
        reason: 'role_not_covered',
        role,
      })
}

const refusedChange = (reason: string, field: string, message: string) =>
  new AppError('VALIDATION_ERROR', message, { reason, errors: [{ field, message }] })

export function teamService(deps: {
  db: Db
  /** Tags invitation tokens (derived from the master key). */
  secrets: Pick<Secrets, 'deriveKey'>
  auth: Pick<AuthService, 'startSession'>
  credentials: Pick<Credentials, 'invalidate'>
  publicUrl: string
  now?: () => number
}) {
  const { db, auth, credentials } = deps
  const now = dateClock(deps.now)
  const tags = credentialTags(deps.secrets, 'invitation')
  const base = deps.publicUrl.replace(/\/+$/, '')

  async function issueInvitation(sql: TxSql, a: Actor, userId: string): Promise<Invitation> {
    const token = tags.sign(`ati_${randomBase62(43)}`)
    const createdAt = now()
    const expiresAt = new Date(createdAt.getTime() + INVITATION_TTL_SECONDS * 1000)
    await insertInvitation(sql, {
      id: newId(),
      tenantId: a.tenantId,
      userId,
      tokenHash: hashToken(token),
      invitedBy: a.principal.userId,
      createdAt,
      expiresAt,
    })
    // In the fragment, the token never reaches a server's access log on the way to the page.
    return { token, expiresAt: expiresAt.toISOString(), acceptUrl: `${base}/invitations/accept#token=${token}` }
  }

  /** Locks the member and the active owners; the member must exist in the tenant. */
  async function lockTarget(sql: TxSql, tenantId: string, userId: string) {
    const rows = await lockMemberAndOwners(sql, tenantId, userId)
    const target = rows.find((r) => r.id === userId)
    if (!target) throw notFound('member', userId)
    const otherActiveOwners = rows.filter((r) => r.id !== userId && r.role === 'owner' && r.status === 'active').length
    return { target, otherActiveOwners }
  }

  const ownerSteppingDown = (p: Principal, target: MemberRow) =>
    p.kind === 'user' && p.role === 'owner' && target.role === 'owner'

  return {
    list: (tenantId: string, page: { limit: number; cursor?: string }) => listMembersPage(db, tenantId, page),

    get: (tenantId: string, userId: string): Promise<MemberRow> => getMember(db, tenantId, userId),

    async invite(
      a: Actor,
      input: { email: string; role: Role; name?: string },
    ): Promise<{ member: MemberRow; invitation: Invitation }> {
      const email = input.email.trim()
      if (!EMAIL_RE.test(email)) throw invalid('email', 'is not an email address')
      assertMayHandle(a.principal, input.role, 'grant')
      const userId = newId()
      try {
        return await db.tenant(a.tenantId, async (sql) => {
          const member = await insertInvited(sql, {
            id: userId,
            tenantId: a.tenantId,
            email,
            name: input.name?.trim() ?? '',
            role: input.role,
          })
          const invitation = await issueInvitation(sql, a, userId)
          await auditBy(sql, a, {
            action: 'team.member_invited',
            target: { type: 'user', id: userId },
            details: { email, role: input.role },
          })
          return { member, invitation }
        })
      } catch (err) {
        // Unique within the tenant only: whether the address has an account in another tenant is
        // none of this one's business, and must not keep it from inviting that person.
        if (isUniqueViolation(err, 'users_tenant_email_key')) {
          throw new AppError('VALIDATION_ERROR', `${email} is already a member of this organization`, {
            errors: [{ field: 'email', message: 'is already a member' }],
          })
        }
        throw err
      }
    },

    /** A new invitation for a member who has not accepted yet; earlier ones stop working. */
    resendInvitation: (a: Actor, userId: string): Promise<{ member: MemberRow; invitation: Invitation }> =>
      db.tenant(a.tenantId, async (sql) => {
        const { target } = await lockTarget(sql, a.tenantId, userId)
        assertMayHandle(a.principal, target.role, 'manage')
        if (target.status !== 'invited') throw refusedChange('not_invited', 'userId', 'This member has already joined')
        await deleteOpenInvitations(sql, a.tenantId, userId)
        const invitation = await issueInvitation(sql, a, userId)
        await auditBy(sql, a, {
          action: 'team.member_invited',
          target: { type: 'user', id: userId },
          details: { email: target.email, role: target.role, resent: true },
        })
        return { member: target, invitation }
      }),

    async update(a: Actor, userId: string, change: MemberChange): Promise<MemberRow> {
      const p = a.principal
      const r = await db.tenant(a.tenantId, async (sql) => {
        const { target, otherActiveOwners } = await lockTarget(sql, a.tenantId, userId)
        const role = change.role ?? target.role
        const status = change.status ?? target.status
        assertMayHandle(p, target.role, 'manage')
        if (role !== target.role) assertMayHandle(p, role, 'grant')
        if (role === target.role && status === target.status) return { member: target, changed: false }

        if (p.userId === userId) {
          if (status !== target.status) throw forbidden('You cannot disable or enable yourself', { reason: 'self' })
          if (!ownerSteppingDown(p, target)) throw forbidden('You cannot change your own role', { reason: 'self' })
        }
        if (changesInvitedStatus(target, status)) {
          throw refusedChange(
            'invited',
            'status',
            'An invited member has not joined yet; remove them to withdraw the invitation',
          )
        }
        if (leavesNoActiveOwner(target, { role, status }, otherActiveOwners)) {
          throw refusedChange(
            'last_owner',
            change.role !== undefined && role !== 'owner' ? 'role' : 'status',
            'The last active owner cannot be demoted or disabled; make another member owner first',
          )
        }

        const at = now()
        const member = await updateMember(sql, a.tenantId, userId, { role, status })
        const sessions = await revokeUserSessions(sql, userId, at)
        const disabling = status === 'disabled' && target.status !== 'disabled'
        const keys = disabling
          ? await revokeUserKeys(sql, a.tenantId, userId, at)
          : role !== target.role
            ? await revokeUserKeys(sql, a.tenantId, userId, at, ROLE_PERMISSIONS[role])
            : []
        const revoked = { sessionsRevoked: sessions.length, apiKeysRevoked: keys }
        const event = (action: string, details: Record<string, unknown>) =>
          auditBy(sql, a, {
            action,
            target: { type: 'user', id: userId },
            details: { email: target.email, ...details, ...revoked },
          })
        if (role !== target.role) await event('team.member_role_changed', { from: target.role, to: role })
        if (status !== target.status) await event(disabling ? 'team.member_disabled' : 'team.member_enabled', { role })
        return { member, changed: true }
      })
      // After commit: a replica that still trusted the member's credentials drops them now.
      if (r.changed) await credentials.invalidate({ kind: 'user', id: userId })
      return r.member
    },

    async remove(a: Actor, userId: string): Promise<void> {
      const p = a.principal
      await db.tenant(a.tenantId, async (sql) => {
        const { target, otherActiveOwners } = await lockTarget(sql, a.tenantId, userId)
        assertMayHandle(p, target.role, 'manage')
        if (p.userId === userId && !ownerSteppingDown(p, target))
          throw forbidden('You cannot remove yourself', { reason: 'self' })
        if (leavesNoActiveOwner(target, null, otherActiveOwners)) {
          throw refusedChange(
            'last_owner',
            'userId',
            'The last active owner cannot be removed; make another member owner first',
          )
        }
        const at = now()
        // Keys outlive a deleted user (their user_id is set null), so they are revoked first.
        const keys = await revokeUserKeys(sql, a.tenantId, userId, at)
        const sessions = await revokeUserSessions(sql, userId, at)
        await deleteMember(sql, a.tenantId, userId)
        await auditBy(sql, a, {
          action: 'team.member_removed',
          target: { type: 'user', id: userId },
          details: {
            email: target.email,
            role: target.role,
            status: target.status,
            sessionsRevoked: sessions.length,
            apiKeysRevoked: keys,
          },
        })
      })
      await credentials.invalidate({ kind: 'user', id: userId })
    },

    /**
     * The invitee's password is set, the invitation used up and a session started, all at once. An
     * unknown, expired, used or withdrawn token is 401: the token is the invitee's credential.
     */
    async accept(
      input: { token: string; password: string; name?: string },
      origin: Origin,
    ): Promise<Account & { session: StartedSession }> {
      // Not issued here (tag): refused from memory.
      if (
        !INVITATION_TOKEN_RE.test(input.token) ||
        (!isLegacyInvitationToken(input.token) && !tags.verify(input.token))
      )
        throw unauthorized(INVALID_INVITATION)
      const hash = hashToken(input.token)
      const found = await db.system((sql) => findInvitation(sql, hash))
      if (!found || found.accepted_at || found.expires_at <= now() || found.user_status !== 'invited')
        throw unauthorized(INVALID_INVITATION)
      if (found.tenant_status !== 'active')
        throw forbidden('The organization of this invitation is suspended', { reason: 'tenant_suspended' })
      // Hashed outside the transaction (it takes a while), and only for a token that looked valid.
      const passwordHash = await hashPassword(input.password)
      return db.system(async (sql) => {
        const inv = await consumeInvitation(sql, hash, now())
        // A concurrent acceptance won, or the member was disabled or removed meanwhile: throwing
        // rolls the consumption back.
        const accepted =
          inv &&
          (await acceptInvited(
            sql,
            { tenantId: inv.tenant_id, userId: inv.user_id },
            { passwordHash, name: input.name?.trim() ?? null },
          ))
        if (!inv || !accepted) throw unauthorized(INVALID_INVITATION)
        const signer = signingIn(inv, origin)
        const session = await auth.startSession(sql, { ...signer, method: 'invitation' })
        await audit(sql, {
          ...signer,
          action: 'auth.invitation_accepted',
          target: { type: 'user', id: inv.user_id },
          details: { invitationId: inv.id, sessionId: session.sessionId },
        })
        const account = await findAccount(sql, inv.user_id)
        return { ...accountOf(account!), session }
      })
    },
  }
}

export type TeamService = ReturnType<typeof teamService>
