// 'atrium-projects': projects, their versions, files and backups, under /api/v1. The backups'
// retention sweep and the object collector (collector.ts) are queues 'projects.backup-retention'
// and 'projects.collect-objects' (server/jobs.ts).
import fp from 'fastify-plugin'
import { API_PREFIX } from '../../http/auth.js'
import type { Platform } from '../../platform/index.js'
import { filesRoutes } from './files-routes.js'
import type { ProjectFilesService } from './files-service.js'
import { projectsRoutes } from './routes.js'
import type { ProjectsService } from './service.js'

export const projectsPlugin = fp(
  async (app, o: { projects: ProjectsService; files: ProjectFilesService; platform: Pick<Platform, 'db'> }) => {
    await app.register(projectsRoutes, { prefix: API_PREFIX, projects: o.projects })
    // A scope of its own: its body parser (raw bytes of any type) must not reach the other routes.
    await app.register(filesRoutes, { prefix: API_PREFIX, files: o.files, db: o.platform.db })
  },
  { name: 'atrium-projects', dependencies: ['atrium-platform', 'atrium-jobs', 'atrium-auth', 'atrium-license'] },
)
