// Renders config/atrium.env.example from the schema. `npm run config:generate` (config/bundles.ts)
// rewrites it with the other generated files; a test fails when the committed file is not what this renders.
import { fileURLToPath } from 'node:url'
import { settings, type Setting } from './schema.js'
import { isSecret } from './secrets.js'

export const ENV_TEMPLATE_PATH = fileURLToPath(new URL('./atrium.env.example', import.meta.url))

function shown(s: Setting): string {
  if (Array.isArray(s.default)) return s.default.join(',')
  return String(s.default)
}

export function renderEnvTemplate(): string {
  const lines = [
    '# Atrium settings. Generated from config/schema.ts by `npm run config:generate`: do not edit by hand.',
    '# Empty values use the embedded defaults (fine for trying Atrium, not for production).',
    '# Keep this file mode 0600 once it holds secrets.',
  ]
  let group = ''
  for (const [name, s] of Object.entries(settings) as [string, Setting][]) {
    if (s.group !== group) {
      group = s.group
      lines.push('', `# --- ${group} ---`)
    }
    const notes = [isSecret(name) ? 'secret' : '', s.requiredInProduction ? 'required in production' : ''].filter(
      Boolean,
    )
    lines.push(`# ${s.description}${notes.length ? ` [${notes.join(', ')}]` : ''}`)
    if (s.type === 'enum') lines.push(`# one of: ${s.values.join(', ')}`)
    if (s.type === 'int' || s.type === 'number') lines.push(`# ${s.min}..${s.max}`)
    lines.push(`${name}=${isSecret(name) ? '' : shown(s)}`)
  }
  return lines.join('\n') + '\n'
}
