// install: configure, then deploy (deploy/install.ts's step list), wait for /readyz and make the
// first tenant. Over a running Atrium it is the upgrade, which backs the site up first.
import type { Resolved } from '../core/context.js'
import { EXIT, type InstallReport } from '../core/report.js'
import { registryProblem } from '../../config/images.js'
import { kitRegistryProblem } from '../deploy/deploy.js'
import { installPlan, runInstall, summaryLines } from '../deploy/install.js'
import {
  BadInput,
  passphraseOf,
  planned,
  siteCommand,
  stepReport,
  trustOf,
  type FlagValues,
  type Hooks,
} from './command.js'
import type { Progress } from '../ui/output.js'
import { configureStep } from './configure.js'
import {
  acceptCheck,
  allowSkip,
  allowUnsigned,
  dryRun,
  images,
  passphraseFile,
  registry,
  site,
  skipBackup,
  strict,
  yes,
} from './flags.js'

const flags = {
  ...site,
  yes,
  dryRun,
  strict,
  acceptCheck,
  images,
  registry,
  allowUnsigned,
  allowSkip,
  passphraseFile,
  skipBackup,
}

export type InstallOptions = FlagValues<typeof flags> & Hooks

/** configure, then the deploy commands, the wait for /readyz and the first tenant. A dry run lists the commands. */
export async function installCommand(
  ctx: Resolved,
  o: InstallOptions = {},
  progress: Progress = {},
): Promise<InstallReport> {
  // Refused before anything is configured (runInstall refuses it too, for the interactive installer).
  const noRegistry =
    (o.registry ? registryProblem(o.registry) : null) ??
    kitRegistryProblem(ctx.answers, { kit: o.images, registry: o.registry })
  if (noRegistry) throw new BadInput(noRegistry)
  // An unreadable passphrase file is bad input before anything is written, not after.
  const backup = {
    skipBackup: o.skipBackup,
    backupPassphrase: o.passphraseFile ? passphraseOf(o.passphraseFile) : undefined,
  }
  // Staged: the files in use change once the deploy answers (core/staged.ts).
  const { report: configured, result } = await configureStep(ctx, { ...o, stage: true })
  progress.configured?.(configured)
  const report: InstallReport = {
    ...configured,
    command: 'install',
    deploy: [],
    steps: [],
    stage: null,
    deployed: false,
    ready: false,
    url: null,
    firstAdmin: null,
    error: null,
    summary: [],
    upgrade: null,
    record: [],
  }
  if (configured.stopped || !result) return report
  const options = { kit: o.images, registry: o.registry, trust: trustOf(o), allowSkip: o.allowSkip }
  if (o.dryRun) return { ...report, deploy: installPlan(ctx, options).map(planned) }
  const r = await runInstall(
    ctx,
    result.plan.values,
    { ...options, ...backup, runner: o.runner, readyTimeoutMs: o.readyTimeoutMs, staged: true },
    progress.step,
  )
  return {
    ...report,
    exitCode: r.ok ? EXIT.ok : EXIT.error,
    steps: r.steps.map(stepReport),
    stage: r.stage,
    deployed: r.stage !== 'bundle' && r.stage !== 'deploy',
    ready: r.ok || r.stage === 'tenant',
    url: r.url,
    firstAdmin: r.created ?? r.existing,
    error: r.error ?? null,
    summary: summaryLines(ctx.answers, r),
    upgrade: r.upgrade ?? null,
    record: r.record ?? [],
  }
}

export const install = siteCommand({
  name: 'install',
  summary:
    'configure, then deploy (compose: docker compose up --wait; helm: upgrade --install\n--wait --atomic) and wait until /readyz answers. Over a running Atrium it is the\nupgrade: it backs the site up first (--passphrase-file, or --skip-backup)',
  flags,
  needs: {
    answers: 'the interactive installer writes one: run the installer without a command',
    yes: true,
    writes: true,
  },
  run: installCommand,
})
