// The server reads its environment only through config/schema.ts.
import { parseConfig, parseSettings, type Config, type SettingName } from '../config/schema.js'

export type { Config }

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.join('\n')}`)
  }
}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const { config, problems } = parseConfig(env)
  if (problems.length) throw new ConfigError(problems)
  return config
}

/** Prints one line per problem (no stack trace) and exits with EX_CONFIG. */
export function loadConfigOrExit(env: Record<string, string | undefined> = process.env): Config {
  try {
    return loadConfig(env)
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    return exitWith(err.problems)
  }
}

/** Only the settings named (parseSettings), or one line per problem and EX_CONFIG. */
export function loadSettingsOrExit<K extends SettingName>(
  names: readonly K[],
  env: Record<string, string | undefined> = process.env,
): Pick<Config, K> {
  const { config, problems } = parseSettings(env, names)
  return problems.length ? exitWith(problems) : config
}

function exitWith(problems: string[]): never {
  for (const p of problems) process.stderr.write(`config error: ${p}\n`)
  process.exit(78)
}
