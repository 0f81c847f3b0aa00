import { readFileSync } from 'node:fs'
import t from 'tap'
import { ENV_TEMPLATE_PATH, renderEnvTemplate } from '../../config/env-template.js'
import { parseConfig, settings } from '../../config/schema.js'
import { isSecret } from '../../config/secrets.js'

t.test(
  'config/atrium.env.example is what the schema renders (run `npm run config:generate` after changing it)',
  async (t) => {
    t.equal(readFileSync(ENV_TEMPLATE_PATH, 'utf8'), renderEnvTemplate())
  },
)

t.test('the template names every setting, leaves secrets empty and parses cleanly', async (t) => {
  const text = renderEnvTemplate()
  const env: Record<string, string> = {}
  for (const line of text.split('\n')) {
    const m = /^([A-Z0-9_]+)=(.*)$/.exec(line)
    if (m) env[m[1]!] = m[2]!
  }
  t.same(Object.keys(env).sort(), Object.keys(settings).sort())
  const secrets = Object.keys(settings).filter(isSecret)
  t.ok(
    secrets.includes('ENCRYPTION_MASTER_KEY'),
    `the secrets are found (a rule finding none would check nothing below): ${secrets}`,
  )
  for (const name of secrets) t.equal(env[name], '', `${name} is empty`)
  t.same(parseConfig(env).problems, [])
})
