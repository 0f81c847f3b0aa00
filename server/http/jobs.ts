// 'atrium-jobs': the one job runner (platform/jobs.ts). Modules define their queues and schedules
// on `app.jobs` as they register; the runner starts once the app is ready and drains on close
// (running handlers finish or are handed back), before the platform's pools close.
import fp from 'fastify-plugin'
import { createJobRunner, defineJobUpkeep, type JobRunner, type JobRunnerOptions } from '../platform/jobs.js'

declare module 'fastify' {
  interface FastifyInstance {
    jobs: JobRunner
  }
}

export interface JobsOptions {
  /** The job runner: started with the app unless false; tests shorten its poll and schedule tick. */
  jobs?: false | Partial<Pick<JobRunnerOptions, 'pollMs' | 'scheduleTickMs'>>
}

export const jobsPlugin = fp(
  async (app, o: JobsOptions) => {
    const { platform, now, registry } = app
    const { config, db, log } = platform
    const jobs = createJobRunner({ db, log: log.child({ module: 'jobs' }), registry, now, ...(o.jobs || {}) })
    defineJobUpkeep(jobs, db, now)
    app.decorate('jobs', jobs)
    if (o.jobs === false) return
    app.addHook('onReady', () => jobs.start())
    // Half the shutdown budget, so the pools still have time to close after it.
    app.addHook('onClose', () => jobs.stop({ graceMs: Math.max(1000, (config.SHUTDOWN_TIMEOUT_SECONDS * 1000) / 2) }))
  },
  { name: 'atrium-jobs', dependencies: ['atrium-platform'] },
)
