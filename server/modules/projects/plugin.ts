// 'atrium-projects': projects, their versions and backups, under /api/v1, and the backups'
// retention sweep on the job runner.
import fp from 'fastify-plugin'
import { VERSION } from '../../../common/version.js'
import { API_PREFIX } from '../../http/auth.js'
import { projectsRoutes } from './routes.js'
import { defineProjectJobs, projectsService } from './service.js'

export const projectsPlugin = fp(
  async (app) => {
    const {
      platform: { db, storage, log },
      now,
    } = app
    defineProjectJobs(app.jobs, { db, storage, log: log.child({ module: 'projects' }), now })
    await app.register(projectsRoutes, { prefix: API_PREFIX, projects: projectsService({ db, storage, version: VERSION, now }) })
  },
  { name: 'atrium-projects', dependencies: ['atrium-platform', 'atrium-jobs', 'atrium-auth', 'atrium-license'] },
)
