// Checks of the tools a deploy target needs: Docker with Compose v2 for compose, Helm for helm.
// The versions are read through the command runner; grading is pure.
import type { Runner } from '../run.js'
import { compareVersions, parseVersion } from '../../../common/version-numbers.js'
import { check, type CheckResult, type CheckStatus } from './check.js'

export { compareVersions, parseVersion }

export const TOOL_MINIMUMS = {
  // 20.10: Debian 12's own docker.io, on which test/compose/site.test.ts runs a whole site.
  docker: '20.10.0',
  compose: '2.20.0',
  helm: '3.12.0',
} as const

export type Tool = keyof typeof TOOL_MINIMUMS

const INSTALL: Record<Tool, string> = {
  docker:
    "Install Docker Engine 20.10 or newer: https://docs.docker.com/engine/install/ (air-gapped: from your OS vendor's mirror)",
  compose:
    'Install the Docker Compose v2 plugin (package docker-compose-plugin), so that `docker compose version` works',
  helm: 'Install Helm 3.12 or newer: https://helm.sh/docs/intro/install/ (air-gapped: copy the helm binary from a release tarball)',
}

const TITLES: Record<Tool, string> = { docker: 'Docker Engine', compose: 'Docker Compose v2', helm: 'Helm' }

const toolCheck = (tool: Tool, status: CheckStatus, found: string, fix: string) =>
  check(`tools.${tool}`, TITLES[tool], status, found, `${TITLES[tool]} ${TOOL_MINIMUMS[tool]} or newer`, fix)

/** Grades what `<tool> version` printed (null output: the tool is missing). */
export function gradeTool(tool: Tool, output: string | null): CheckResult {
  if (output === null) return toolCheck(tool, 'fail', 'not installed (not on PATH)', INSTALL[tool])
  const version = parseVersion(output)
  if (!version) return toolCheck(tool, 'fail', `could not read a version from "${output.slice(0, 80)}"`, INSTALL[tool])
  const found = version.join('.')
  if (compareVersions(version, parseVersion(TOOL_MINIMUMS[tool])!) < 0)
    return toolCheck(tool, 'fail', found, `Upgrade: ${INSTALL[tool]}`)
  return toolCheck(tool, 'pass', found, '')
}

const VERSION_COMMANDS: Record<Tool, [string, string[]]> = {
  docker: ['docker', ['version', '--format', '{{.Server.Version}}']],
  // Without --short, which older v2 plugins lack: "Docker Compose version v2.29.7".
  compose: ['docker', ['compose', 'version']],
  helm: ['helm', ['version', '--short']],
}

export const TARGET_TOOLS = { compose: ['docker', 'compose'], helm: ['helm'] } as const satisfies Record<
  string,
  readonly Tool[]
>

/** Asks each tool of the target for its version and grades it. */
export async function toolChecks(target: keyof typeof TARGET_TOOLS, runner: Runner): Promise<CheckResult[]> {
  return Promise.all(
    TARGET_TOOLS[target].map(async (tool) => {
      const [file, args] = VERSION_COMMANDS[tool]
      const r = await runner(file, args, { timeoutMs: 15_000 })
      if (r.notFound) return gradeTool(tool, null)
      if (r.exitCode !== 0) {
        const why = (r.stderr || r.stdout).split('\n')[0] ?? ''
        return toolCheck(
          tool,
          'fail',
          `\`${r.command}\` failed: ${why.slice(0, 160)}`,
          tool === 'docker'
            ? 'Start the Docker daemon and make sure this user may use it (docker group or root)'
            : INSTALL[tool],
        )
      }
      return gradeTool(tool, r.stdout.trim())
    }),
  )
}
