// Project rules: every change keeps a version, pruned to the plan's limit; a restore is itself a
// change (the history only grows); a backup is a zip in blob storage behind a time-limited link.
import { createHash } from 'node:crypto'
import { AppError, notFound } from '../../http/errors.js'
import { toPage, decodeCursor } from '../../http/pagination.js'
import type { Principal } from '../../http/principal.js'
import { newId } from '../../ids.js'
import type { Blobs } from '../../platform/blobs.js'
import type { Db, TxSql } from '../../platform/db.js'
import { buildZip, json } from '../../zip.js'
import { PLAN_LIMITS } from '../tenants/plans.js'
import * as store from './store.js'
import type { ProjectFields, ProjectRow, VersionRow } from './store.js'

export const BACKUP_FORMAT = 'atrium.project-backup'
export const BACKUP_FORMAT_VERSION = 1
/** Same validity as export links in the specification. */
export const BACKUP_LINK_SECONDS = 7 * 24 * 3600

export interface PageRequest { limit: number; cursor?: string }
export type CreateInput = { name: string; description?: string; language?: string }
export type PatchInput = Partial<ProjectFields>

export interface Actor { tenantId: string; principal: Principal }

export function projectsService(deps: { db: Db; blobs: Blobs; version: string }) {
  const { db, blobs } = deps

  const found = (id: string, rows: readonly ProjectRow[]) => {
    if (!rows[0]) throw notFound('project', id)
    return rows[0]
  }
  const load = async (sql: TxSql, tenantId: string, id: string, lock = false) => found(id, await store.selectProject(sql, tenantId, id, { lock }))

  /** Records the project's current state as a version and drops versions beyond the plan's limit. */
  const recordVersion = async (sql: TxSql, a: Actor, project: ProjectRow, change: VersionRow['change'], restoredFrom: number | null = null) => {
    await store.insertVersion(sql, { id: newId(), tenantId: a.tenantId, project, change, restoredFrom })
    const keep = PLAN_LIMITS[a.principal.plan ?? 'free'].projectVersions
    if (keep !== null) await store.pruneVersions(sql, a.tenantId, project.id, project.version, keep)
  }

  return {
    async list(tenantId: string, page: PageRequest) {
      const before = decodeCursor(page.cursor)
      const rows = await db.tenantRead(tenantId, (sql) => store.listProjects(sql, tenantId, page.limit + 1, before))
      return toPage(rows, page.limit)
    },

    get: async (tenantId: string, id: string) => found(id, await db.tenantRead(tenantId, (sql) => store.selectProject(sql, tenantId, id))),

    create: (a: Actor, input: CreateInput) =>
      db.tenant(a.tenantId, async (sql) => {
        const project = await store.insertProject(sql, a.tenantId, newId(), {
          name: input.name.trim(),
          description: input.description ?? '',
          language: input.language ?? '',
        })
        await recordVersion(sql, a, project, 'created')
        return project
      }),

    update: (a: Actor, id: string, patch: PatchInput) =>
      db.tenant(a.tenantId, async (sql) => {
        const current = await load(sql, a.tenantId, id, true)
        const next = { ...pick(current), ...patch, ...(patch.name !== undefined ? { name: patch.name.trim() } : {}) }
        if (store.PROJECT_FIELDS.every((f) => next[f] === current[f])) return current // nothing changed: no new version
        const project = await store.updateProject(sql, a.tenantId, id, next)
        await recordVersion(sql, a, project, 'updated')
        return project
      }),

    remove: (tenantId: string, id: string) =>
      db.tenant(tenantId, async (sql) => {
        if (!(await store.deleteProject(sql, tenantId, id))) throw notFound('project', id)
      }),

    async versions(tenantId: string, projectId: string, page: PageRequest) {
      const before = decodeCursor(page.cursor)
      const rows = await db.tenant(tenantId, async (sql) => {
        await load(sql, tenantId, projectId)
        return store.listVersions(sql, tenantId, projectId, page.limit + 1, before)
      })
      return toPage(rows, page.limit)
    },

    restoreVersion: (a: Actor, projectId: string, versionId: string) =>
      db.tenant(a.tenantId, async (sql) => {
        await load(sql, a.tenantId, projectId, true)
        const v = await store.getVersion(sql, a.tenantId, projectId, versionId)
        if (!v) throw notFound('version', versionId)
        const project = await store.updateProject(sql, a.tenantId, projectId, pick(v))
        await recordVersion(sql, a, project, 'restored', v.version)
        return project
      }),

    async backup(a: Actor, projectId: string, opts: { includeHistory: boolean; includeAgents: boolean }) {
      const { project, versions } = await db.tenant(a.tenantId, async (sql) => {
        const project = await load(sql, a.tenantId, projectId)
        const versions = opts.includeHistory ? await store.listVersions(sql, a.tenantId, projectId, 1_000_000, null) : []
        return { project, versions }
      })
      const backupId = newId()
      const createdAt = new Date()
      const entries = [
        {
          name: 'manifest.json',
          data: json({
            format: BACKUP_FORMAT,
            formatVersion: BACKUP_FORMAT_VERSION,
            atriumVersion: deps.version,
            backupId,
            createdAt: createdAt.toISOString(),
            tenantId: a.tenantId,
            projectId,
            includes: { history: opts.includeHistory, agents: opts.includeAgents },
          }),
        },
        { name: 'project.json', data: json(project) },
        ...(opts.includeHistory ? [{ name: 'versions.json', data: json(versions) }] : []),
        // Agents arrive with the agents module, which adds them here; until then a project has none.
        ...(opts.includeAgents ? [{ name: 'agents.json', data: json([]) }] : []),
      ]
      const zip = await buildZip(entries, createdAt)
      const checksum = `sha256:${createHash('sha256').update(zip).digest('hex')}`
      const blobKey = `tenants/${a.tenantId}/backups/projects/${projectId}/${backupId}.zip`
      const filename = `project-${projectId}-${createdAt.toISOString().replace(/[:.]/g, '-')}.zip`
      try {
        await blobs.put(blobKey, zip, 'application/zip')
      } catch (err) {
        throw new AppError('SERVICE_UNAVAILABLE', 'Object storage is unavailable; try the backup again later', { reason: (err as Error).name })
      }
      await db.tenant(a.tenantId, (sql) =>
        store.insertBackup(sql, {
          id: backupId, tenantId: a.tenantId, projectId, blobKey, size: zip.length, checksum,
          includeHistory: opts.includeHistory, includeAgents: opts.includeAgents,
        }),
      )
      const downloadUrl = await blobs.presignGet(blobKey, { expiresSeconds: BACKUP_LINK_SECONDS, filename })
      return {
        backupId,
        downloadUrl,
        expiresAt: new Date(createdAt.getTime() + BACKUP_LINK_SECONDS * 1000).toISOString(),
        size: zip.length,
        checksum,
      }
    },
  }
}

export type ProjectsService = ReturnType<typeof projectsService>

const pick = (p: ProjectFields): ProjectFields => ({ name: p.name, description: p.description, language: p.language })
