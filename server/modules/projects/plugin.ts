// 'atrium-projects': projects, their versions, files and backups, under /api/v1, and the backups'
// retention sweep and the object collector (collector.ts) on the job runner. Backups list the project's agents through 'atrium-agents'.
import fp from 'fastify-plugin'
import { VERSION } from '../../../common/version.js'
import { API_PREFIX } from '../../http/auth.js'
import { filesRoutes } from './files-routes.js'
import { projectFilesService } from './files-service.js'
import { projectsRoutes } from './routes.js'
import { defineProjectJobs, projectsService } from './service.js'

export const projectsPlugin = fp(
  async (app) => {
    const {
      platform: { db, storage, log },
      now,
    } = app
    const moduleLog = log.child({ module: 'projects' })
    const files = projectFilesService({ db, storage, now, log: moduleLog })
    defineProjectJobs(app.jobs, { db, storage, log: moduleLog, files, now })
    await app.register(projectsRoutes, { prefix: API_PREFIX, projects: projectsService({ db, storage, version: VERSION, now, projectAgents: app.projectAgents }) })
    // A scope of its own: its body parser (raw bytes of any type) must not reach the other routes.
    await app.register(filesRoutes, { prefix: API_PREFIX, files, db })
  },
  { name: 'atrium-projects', dependencies: ['atrium-platform', 'atrium-jobs', 'atrium-auth', 'atrium-license', 'atrium-agents'] },
)
