// The app's wiring: every plugin is named and lists the plugins it needs, so Fastify refuses to
// start when one is missing or comes later, instead of a request meeting a missing check.
import Fastify, { type FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import t, { type Test } from 'tap'
import { authPlugin } from '../../server/http/auth.js'
import { envelopePlugin } from '../../server/http/envelope.js'
import { licensePlugin } from '../../server/http/license.js'
import { auditPlugin } from '../../server/modules/audit/plugin.js'
import { projectsPlugin } from '../../server/modules/projects/plugin.js'
import { testApp } from '../helpers/app.js'

const refusal = (missing: string, by: string) => ({
  code: 'FST_ERR_PLUGIN_DEPENDENCY_NOT_REGISTERED',
  message: new RegExp(`'${missing}'.*'${by}'`),
})

/**
 * A bare app with the plugins registered in this order (they are refused before they run, so before they read their
 * options).
 */
// A module's plugin takes the services it serves as its options.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function start(t: Test, ...plugins: FastifyPluginAsync<any>[]) {
  const app = Fastify({ logger: false })
  t.teardown(() => app.close())
  for (const plugin of plugins) await app.register(plugin)
}

// Only their names: the checks below never reach the point where a plugin reads what they decorate.
const named = (name: string) => fp(async () => {}, { name })
const platformNamed = named('atrium-platform')

t.test('a module registered before the plugins it needs is refused at start', async (t) => {
  await t.rejects(start(t, projectsPlugin), refusal('atrium-platform', 'atrium-projects'))
  await t.rejects(start(t, platformNamed, projectsPlugin), refusal('atrium-jobs', 'atrium-projects'))
  await t.rejects(start(t, platformNamed, named('atrium-jobs'), auditPlugin), refusal('atrium-auth', 'atrium-audit'))
})

t.test('the license is checked after authentication, or the app does not start', async (t) => {
  await t.rejects(
    start(t, platformNamed, named('atrium-jobs'), envelopePlugin, licensePlugin),
    refusal('atrium-auth', 'atrium-license'),
  )
  await t.rejects(start(t, platformNamed, envelopePlugin, authPlugin), refusal('atrium-limits', 'atrium-auth'))
})

t.test('modules reach what they share through declared decorations', async (t) => {
  const { app } = await testApp(t)
  for (const name of [
    'platform',
    'now',
    'registry',
    'outbound',
    'credentials',
    'limits',
    'jobs',
    'addAuthenticator',
    'signIn',
    'tokens',
    'routeTable',
    'draining',
  ]) {
    t.ok(app.hasDecorator(name), name)
  }
  t.ok(app.hasRequestDecorator('principal'))
  for (const name of [
    'atrium-platform',
    'atrium-envelope',
    'atrium-jobs',
    'atrium-auth',
    'atrium-license',
    'atrium-sign-in',
    'atrium-projects',
    'atrium-webhooks',
    'atrium-exports',
    'atrium-restores',
  ]) {
    t.ok(app.hasPlugin(name), name)
  }
  // Each module defined its queues on the one runner; the runner's upkeep is the jobs plugin's own.
  t.same([...app.jobs.queues].sort(), [
    'agents.run',
    'audit.retention',
    'chat.reply',
    'exports.backups',
    'exports.run',
    'exports.scheduled',
    'jobs.sweep',
    'license.clock',
    'projects.backup-retention',
    'projects.collect-objects',
    'restores.run',
    'webhooks.events-retention',
  ])
})
