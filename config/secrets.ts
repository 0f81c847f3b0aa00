// The one rule for what is secret. A module of its own so that every renderer in config/ (the env
// templates, the bundles) and the installer can import it without an import cycle.
import { COMPOSE_SERVICE_SETTINGS } from './compose-variables.js'
import { settings, type Setting, type SettingName } from './schema.js'

// Names that say "credential": any *PASSWORD*, *SECRET*, *TOKEN*, *CREDENTIAL*, and KEY, PASS or PWD
// as a word of their own (so KEYCLOAK_URL and BYPASS_CACHE do not count). camelCase reads as words.
const SECRET_NAME = /password|passwd|passphrase|secret|token|credential|apikey|(?:^|_)(?:key|pass|pwd)(?:_|$)/

/** Whether a name reads like a credential's: SMTP_PASSWORD, GITHUB_TOKEN, clientSecret, apiKey. */
function looksSecret(name: string): boolean {
  return SECRET_NAME.test(name.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase())
}

/**
 * The one rule for what is secret, for every name the installer and the generated files write or
 * read back: an Atrium setting is what its `secret` flag in config/schema.ts says (the server's own
 * parsing reads that flag directly, and for a setting this rule is that flag); a Compose bundle
 * variable is secret when a secret setting is made from it (POSTGRES_PASSWORD goes into
 * DATABASE_URL), so the bundle never lists its secrets a second time; any other name (a line added
 * to .env by hand, a field inside a JSON setting such as OIDC_PROVIDERS' clientSecret) is secret
 * when it reads like one. Unknown names err towards secret.
 */
export function isSecret(name: string): boolean {
  if (Object.hasOwn(settings, name)) return (settings[name as SettingName] as Setting).secret
  const madeInto = Object.entries(COMPOSE_SERVICE_SETTINGS)
    .filter(([, made]) => made.includes(`\${${name}}`))
    .map(([setting]) => setting)
  return madeInto.some(isSecret) || looksSecret(name)
}
