// The GDPR export (Art. 15 and 20): everything Atrium holds about the person who asks, as one JSON
// document. docs/portability.md says what each part holds and what is not in it (chat messages
// carry no author: they are the tenant's, in the tenant export).
import type { Clock } from '../../clock.js'
import type { Actor } from '../../domain/actor.js'
import { forbidden } from '../../domain/errors.js'
import type { Db } from '../../platform/db.js'
import { auditBy } from '../audit/service.js'
import * as store from './store.js'

export const GDPR_FORMAT = 'atrium.gdpr-export' as const
export const GDPR_FORMAT_VERSION = 1

const iso = (d: Date | null) => d?.toISOString() ?? null

export function gdprService(deps: { db: Db; now?: Clock }) {
  const { db } = deps
  const clock = deps.now ?? Date.now
  return {
    /** The caller's own data; a credential that is no person's (an API key nobody made) has none to give. */
    async export(a: Actor) {
      const userId = a.principal.userId
      if (!userId)
        throw forbidden('A GDPR export is of a person: sign in as the user, or use a key the user made', {
          required: 'user',
        })
      const t = a.tenantId
      const doc = await db.tenant(t, async (sql) => {
        const [user] = await store.userRecord(sql, t, userId)
        if (!user) throw forbidden('The credential’s user no longer exists', { required: 'user' })
        const [tenant] = await store.membership(sql, t)
        const keys = await store.apiKeys(sql, t, userId)
        const [provider] = await store.llmProvider(sql, t)
        const doc = {
          format: GDPR_FORMAT as typeof GDPR_FORMAT,
          formatVersion: GDPR_FORMAT_VERSION,
          generatedAt: new Date(clock()).toISOString(),
          subject: { userId, email: user.email },
          personalData: {
            user: {
              id: user.id,
              email: user.email,
              name: user.name,
              role: user.role,
              status: user.status,
              createdAt: iso(user.created_at),
              updatedAt: iso(user.updated_at),
              lastLoginAt: iso(user.last_login_at),
            },
            memberships: tenant
              ? [
                  {
                    tenantId: tenant.id,
                    tenantName: tenant.name,
                    plan: tenant.plan,
                    role: user.role,
                    since: iso(user.created_at),
                  },
                ]
              : [],
            sessions: (await store.sessions(sql, t, userId)).map((s) => ({
              id: s.id,
              method: s.method,
              ip: s.ip,
              userAgent: s.user_agent,
              createdAt: iso(s.created_at),
              expiresAt: iso(s.expires_at),
              revokedAt: iso(s.revoked_at),
            })),
            apiKeys: keys.map((k) => ({
              id: k.id,
              name: k.name,
              type: k.type,
              prefix: k.prefix,
              lastFour: k.last_four,
              permissions: k.permissions,
              createdAt: iso(k.created_at),
              expiresAt: iso(k.expires_at),
              revokedAt: iso(k.revoked_at),
              lastUsedAt: iso(k.last_used_at),
            })),
          },
          processingHistory: (
            await store.auditEntries(
              sql,
              t,
              userId,
              keys.map((k) => k.id),
            )
          ).map((e) => ({
            id: e.id,
            at: iso(e.created_at),
            action: e.action,
            actor: { type: e.actor_type, id: e.actor_id },
            target: { type: e.target_type, id: e.target_id },
            ip: e.ip,
            userAgent: e.user_agent,
            details: e.details,
          })),
          consentRecords: (await store.invitations(sql, t, userId))
            .filter((i) => i.accepted_at)
            .map((i) => ({
              kind: 'invitation-accepted',
              at: iso(i.accepted_at),
              invitationId: i.id,
              invitedBy: i.invited_by,
            })) as Record<string, unknown>[],
          dataSharingLog: [
            ...(await store.runsStarted(sql, t, userId)).map((r) => ({
              recipient: 'model-provider',
              provider: provider?.provider ?? null,
              host: provider?.base_url ? new URL(provider.base_url).host : null,
              what: 'the goal of an agent run the person started, and the project files the run read',
              runId: r.id,
              agentId: r.agent_id,
              model: r.model,
              at: iso(r.started_at),
            })),
            ...(await store.webhookDeliveries(sql, t, [userId, user.email])).map((d) => ({
              recipient: 'webhook-receiver',
              host: new URL(d.url).host,
              what: `a ${d.type} event naming the person`,
              eventId: d.event_id,
              status: d.status,
              attempts: d.attempts,
              at: iso(d.first_attempt_at),
            })),
          ] as Record<string, unknown>[],
        }
        // Exporting a person's data is itself recorded (and appears in their next export).
        await auditBy(sql, a, { action: 'gdpr.exported', target: { type: 'user', id: userId } })
        return doc
      })
      // Device logins the person approved live outside any tenant's reach until approved: read across.
      const approvals = await db.system((sql) => store.cliApprovals(sql, t, userId))
      doc.consentRecords.push(
        ...approvals.map((c) => ({
          kind: 'cli-login-approved',
          at: iso(c.approved_at),
          loginId: c.login_id,
          cliVersion: c.cli_version,
          platform: c.platform,
          ip: c.approved_ip,
          usedAt: iso(c.consumed_at),
        })),
      )
      return doc
    },
  }
}

export type GdprService = ReturnType<typeof gdprService>
