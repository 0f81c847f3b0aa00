// Team members of the authenticated tenant (docs/identity.md, "Team": list, invite, change role,
// remove), and accepting an invitation, which signs the invitee in.
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyContextConfig } from 'fastify'
import { actorOf, originOf } from '../../http/actor.js'
import { ok } from '../../http/envelope.js'
import { created, listSchema, pageOf, sessionStarted } from '../../http/route-schemas.js'
import { apiErrors, Envelope, errors, RoleName, SessionStarted } from '../../http/schemas.js'
import { setSessionCookie } from '../../http/session-cookie.js'
import type { SignInGuard } from '../../http/signin-guard.js'
import { MIN_PASSWORD_LENGTH } from '../tenants/service.js'
import type { MemberRow } from '../users/service.js'
import { isLegacyInvitationToken, type TeamService } from './service.js'

const tags = ['team']
const Member = Type.Object({
  id: Type.String({ format: 'uuid' }),
  email: Type.String(),
  name: Type.String(),
  role: RoleName,
  status: Type.Union([Type.Literal('active'), Type.Literal('disabled'), Type.Literal('invited')], {
    description: 'invited: has not accepted the invitation yet',
  }),
  createdAt: Type.String({ format: 'date-time' }),
  lastLoginAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
})
const present = (m: MemberRow) => ({
  id: m.id,
  email: m.email,
  name: m.name,
  role: m.role,
  status: m.status,
  createdAt: m.created_at.toISOString(),
  lastLoginAt: m.last_login_at?.toISOString() ?? null,
})
const Invitation = Type.Object({
  token: Type.String({ description: 'Shown once; the invitee accepts with it' }),
  expiresAt: Type.String({ format: 'date-time' }),
  acceptUrl: Type.String({ description: 'Link to send the invitee (the token is in the fragment)' }),
})
const Invited = Envelope(Type.Object({ member: Member, invitation: Invitation }))
const Name = Type.String({ maxLength: 200 })
const UserParams = Type.Object({ userId: Type.String({ format: 'uuid' }) })

const read: FastifyContextConfig = { permission: 'team:read' }
const manage: FastifyContextConfig = { permission: 'team:manage' }
const RULES =
  'Only an owner may grant, take away or act on the owner role; others act on the roles whose permissions they hold (an API key with * like an admin). Nobody changes themselves, except an owner stepping down while another active owner remains; the last active owner stays. FORBIDDEN (details.reason owner_only, role_not_covered, self) or VALIDATION_ERROR (details.reason last_owner, invited).'

export const teamRoutes: FastifyPluginAsyncTypebox<{ team: TeamService; guard: SignInGuard }> = async (
  app,
  { team, guard },
) => {
  app.get(
    '/tenant/team/members',
    { config: read, schema: listSchema(tags, 'List team members in the order they joined', Member, 'FORBIDDEN') },
    async (req) => pageOf(req, await team.list(actorOf(req).tenantId, req.query), present),
  )

  app.get(
    '/tenant/team/members/:userId',
    {
      config: read,
      schema: {
        tags,
        summary: 'Get a team member',
        params: UserParams,
        response: { 200: Envelope(Member), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req) => ok(req, present(await team.get(actorOf(req).tenantId, req.params.userId))),
  )

  app.post(
    '/tenant/team/members',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Invite a member',
        description: `The member is listed as invited until they accept. The invitation token is shown once and expires after 7 days. ${RULES}`,
        body: Type.Object(
          { email: Type.String({ minLength: 3, maxLength: 320 }), role: RoleName, name: Type.Optional(Name) },
          { additionalProperties: false },
        ),
        response: { 201: Invited, ...apiErrors('FORBIDDEN') },
      },
    },
    async (req, reply) => {
      const r = await team.invite(actorOf(req), req.body)
      return created(req, reply, { member: present(r.member), invitation: r.invitation })
    },
  )

  app.post(
    '/tenant/team/members/:userId/invitation',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Send a member who has not joined a new invitation (earlier ones stop working)',
        params: UserParams,
        response: { 201: Invited, ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req, reply) => {
      const r = await team.resendInvitation(actorOf(req), req.params.userId)
      return created(req, reply, { member: present(r.member), invitation: r.invitation })
    },
  )

  app.patch(
    '/tenant/team/members/:userId',
    {
      config: manage,
      schema: {
        tags,
        summary: "Change a member's role or status",
        description: `Ends the member's sessions; disabling also revokes their API keys, a demotion the keys holding more than the new role. ${RULES}`,
        params: UserParams,
        body: Type.Object(
          {
            role: Type.Optional(RoleName),
            status: Type.Optional(Type.Union([Type.Literal('active'), Type.Literal('disabled')])),
          },
          { additionalProperties: false, minProperties: 1 },
        ),
        response: { 200: Envelope(Member), ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND') },
      },
    },
    async (req) => ok(req, present(await team.update(actorOf(req), req.params.userId, req.body))),
  )

  app.delete(
    '/tenant/team/members/:userId',
    {
      config: manage,
      schema: {
        tags,
        summary: 'Remove a member (an invited one: withdraw the invitation)',
        description: `Revokes their API keys and sessions, then deletes the account. ${RULES}`,
        params: UserParams,
        response: {
          200: Envelope(Type.Object({ id: Type.String({ format: 'uuid' }), removed: Type.Literal(true) })),
          ...apiErrors('FORBIDDEN', 'RESOURCE_NOT_FOUND'),
        },
      },
    },
    async (req) => {
      await team.remove(actorOf(req), req.params.userId)
      return ok(req, { id: req.params.userId, removed: true as const })
    },
  )

  app.post(
    '/auth/invitations/accept',
    {
      config: { auth: false, rateLimit: false },
      schema: {
        tags: ['auth'],
        summary: 'Accept an invitation: choose a password and sign in',
        security: [],
        description:
          'Answers like POST /auth/login (session token, also set as an HttpOnly cookie). 401 when the token is unknown, expired, already used or withdrawn.',
        body: Type.Object(
          {
            token: Type.String({ minLength: 1, maxLength: 200 }),
            password: Type.String({ minLength: MIN_PASSWORD_LENGTH, maxLength: 1024 }),
            name: Type.Optional(Name),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Envelope(SessionStarted),
          ...errors('VALIDATION_ERROR', 'UNAUTHORIZED', 'FORBIDDEN', 'RATE_LIMIT_EXCEEDED'),
        },
      },
    },
    async (req, reply) => {
      // Failures count against the address (http/signin-guard.ts).
      const r = await guard(req.ip, { legacy: isLegacyInvitationToken(req.body.token) }, () =>
        team.accept(req.body, originOf(req)),
      )
      setSessionCookie(req, reply, r.session.token, r.session.expiresAt)
      return ok(req, sessionStarted(r))
    },
  )
}
