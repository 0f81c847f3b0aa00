// support-bundle: one zip for the vendor's support, of the site as it is.
import { siteConfig, type Resolved } from '../core/context.js'
import { runPreflight } from '../core/preflight.js'
import { EXIT, type SupportBundleReport } from '../core/report.js'
import { run } from '../core/run.js'
import { writeSupportBundle } from '../core/support-bundle.js'
import { siteCommand, type FlagValues, type Hooks } from './command.js'
import { output, site } from './flags.js'

const flags = { ...site, output }

export type SupportBundleOptions = FlagValues<typeof flags> & Hooks

export async function supportBundleCommand(ctx: Resolved, o: SupportBundleOptions = {}): Promise<SupportBundleReport> {
  const runner = o.runner ?? run
  // The site as it is: the written configuration is what runs, so it is what support needs to see.
  const config = siteConfig(ctx)
  const checks = await runPreflight(ctx.answers, config, { runner })
  const path = o.output ?? `atrium-support-${new Date().toISOString().replace(/[:.]/g, '-')}.zip`
  const r = await writeSupportBundle(path, {
    answers: ctx.answers,
    config,
    checks,
    runner,
    envFile: ctx.files.target === 'compose' ? ctx.files.env : '',
  })
  return { command: 'support-bundle', exitCode: EXIT.ok, path, size: r.size, sha256: r.sha256 }
}

export const supportBundle = siteCommand({
  name: 'support-bundle',
  summary:
    "one zip for the vendor's support: versions, check results, the configuration\nwith secrets redacted, recent logs",
  flags,
  run: supportBundleCommand,
})
