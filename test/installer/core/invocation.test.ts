// Every command the installer prints runs where it is printed. Each printed command is taken from
// what the installer itself printed (the report, the answers file's header, the usage, the
// summary's hints), then run through a shell from another working directory: from this checkout
// (npm's script), and from the one-file installer the air-gap kit carries (its own script, with
// no npm and no node_modules anywhere around it).
import { spawn } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { configureCommand } from '../../../installer/commands/configure.js'
import { interactive } from '../../../installer/commands/interactive.js'
import { loadContext } from '../../../installer/core/context.js'
import { installerCommand, installerPrefix, shellWord } from '../../../installer/core/invocation.js'
import { buildInstaller } from '../../../installer/build.js'
import { INSTALL_STEPS, runInstall, summaryLines } from '../../../installer/deploy/install.js'
import { VERSION } from '../../../common/version.js'
import { finished, ROOT, type Ran } from '../../helpers/cli.js'
import { acceptUnmet, installer, tools, UNMET_HERE } from '../../helpers/installer.js'
import { freePort, tempDir } from '../../helpers/platform.js'
import { passphraseFile } from '../fixtures.js'

t.setTimeout(600_000)

/** A command line as an admin pastes it into a shell, run from `cwd` with only PATH and HOME. */
const sh = (command: string, cwd: string): Promise<Ran> =>
  finished(
    spawn('sh', ['-c', command], {
      cwd,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  )

/** The printed command in a line of text: from where this installer's words start to the end of the line. */
function commandIn(text: string, prefix: string): string {
  const at = text.indexOf(prefix)
  if (at < 0) throw new Error(`no command starting with ${prefix} in:\n${text}`)
  return text.slice(at).split('\n')[0]!
}

/** The report a command printed with --json, for the checks below. */
const reportOf = (r: Ran): { command: string; exitCode: number } => {
  try {
    return JSON.parse(r.stdout)
  } catch {
    throw new Error(`not one JSON object (exit ${r.code}): ${r.stdout}${r.stderr}`)
  }
}

/** A Compose site's answers, relative paths and all, in a folder of their own. */
function answersIn(dir: string): string {
  const path = join(dir, 'answers.yaml')
  writeFileSync(
    path,
    ['target: compose', 'dataPath: ./data', 'outputDir: ./out', 'config:', '  PUBLIC_URL: https://atrium.example.com']
      .join('\n')
      .concat('\n'),
  )
  return path
}

t.test('a word is quoted for the shell only when it must be, and reads back as it was', async (t) => {
  const words = ['/opt/atrium kit/atrium-installer', "it's", '--answers', '/srv/a,b:c=d@e+f%g', '$HOME', '`x`', '']
  t.same(words.map(shellWord).slice(2, 4), ['--answers', '/srv/a,b:c=d@e+f%g'], 'plain words stay plain')
  const echoed = await sh(`printf '%s\\n' ${words.map(shellWord).join(' ')}`, tempDir(t))
  t.same(echoed.stdout.split('\n').slice(0, -1), words, 'the shell gives every word back')
  t.equal(shellWord('<your passphrase file>'), '<your passphrase file>', 'a placeholder stays one, to be filled in')
  t.same(installerPrefix(false), ['npm', '--prefix', ROOT.replace(/\/$/, ''), 'run', '--silent', 'installer', '--'])
  t.same(installerPrefix(true), [join(ROOT, 'atrium-installer')], "the kit's script beside installer/cli.js")
  t.equal(installerCommand(['x'], { release: '0.0.9' }), '<the 0.0.9 installer> x', 'another release: named')
})

t.test('from a source checkout, every command the installer prints runs from any working directory', async (t) => {
  const prefix = installerCommand([])
  t.match(prefix, /^npm --prefix \/\S+ run --silent installer --$/)
  const site = tempDir(t)
  const answers = answersIn(site)
  const elsewhere = tempDir(t)

  // What configure prints: the replay, and the answers file's header.
  const ctx = loadContext({ answersPath: answers })
  const configured = await configureCommand(ctx, { runner: tools().runner, acceptCheck: UNMET_HERE })
  t.equal(configured.written, true)
  const replay = configured.replay!
  const written = join(site, 'out/answers.yaml')
  const header = commandIn(readFileSync(written, 'utf8'), prefix)
  t.equal(replay, `${prefix} configure --answers ${written} --yes`)
  t.equal(header, `${prefix} install --answers ${written} --yes`)

  // What install prints when the site does not become ready, and after an upgrade (the rollback).
  const ready = INSTALL_STEPS.filter((s) => s.name === 'ready')
  const port = await freePort()
  const notReady = await runInstall(ctx, { PORT: String(port) }, { readyTimeoutMs: 1 }, () => {}, ready)
  t.equal(notReady.ok, false)
  const supportBundle = commandIn(notReady.error!, prefix)
  t.equal(supportBundle, `${prefix} support-bundle --answers ${written}`)
  const backup = join(site, 'backup.tar')
  writeFileSync(backup, 'not an archive')
  const summary = summaryLines(ctx.answers, {
    ok: true,
    stage: 'done',
    url: 'https://atrium.example.com',
    steps: [],
    created: null,
    existing: null,
    upgrade: { from: '0.0.9', backup: { path: backup, sha256: 'x' } },
  }).join('\n')
  // The release gone back to has its own installer: named, then filled in here with this one.
  const rollback = commandIn(summary, '<the 0.0.9 installer>')
  t.equal(
    rollback,
    `<the 0.0.9 installer> restore --answers ${written} --input ${backup} --passphrase-file <your passphrase file> --force --yes`,
  )

  // What the interactive installer says without a terminal, and the usage.
  const noTerminal = await interactive
    .run({ flags: { json: true }, action: undefined, progress: {} })
    .catch((err: Error) => err.message)
  const forJson = commandIn(String(noTerminal), prefix)
  t.equal(forJson, `${prefix} configure --answers FILE --yes --json`)
  const help = await installer(['--help', '--json'], {}, { cwd: elsewhere })
  const usage = commandIn((reportOf(help) as unknown as { usage: string }).usage, 'Run as: ')
  t.equal(usage, `Run as: ${prefix} [command] [options]`)

  // Each one run as printed (a placeholder filled in), from elsewhere; those that change things as a dry run.
  const runs: [string, string, string, number[]][] = [
    ['the replay', `${replay} --dry-run --json`, 'configure', [0, 3]],
    ["the answers file's header", `${header} --dry-run --json`, 'install', [0, 3]],
    ['the support bundle', `${supportBundle} --output ${join(elsewhere, 'bundle.zip')} --json`, 'support-bundle', [0]],
    [
      'the rollback',
      `${rollback.replace('<the 0.0.9 installer>', prefix).replace('<your passphrase file>', passphraseFile(t))} --dry-run --json`,
      'restore',
      [1],
    ],
    ['the JSON hint', `${forJson.replace('FILE', written)} --dry-run`, 'configure', [0, 3]],
    ['the usage', `${prefix} --version --json`, 'help', [0]],
  ]
  for (const [what, command, name, codes] of runs) {
    const r = await sh(command, elsewhere)
    const report = reportOf(r)
    t.equal(report.command, name, `${what} runs: ${command}`)
    t.ok(codes.includes(r.code!), `${what} exits ${r.code} (${codes.join(' or ')}): ${r.stderr}`)
  }
  const restore = JSON.parse((await sh(runs[3]![1], elsewhere)).stdout)
  t.match(restore, { refused: true, error: /backup\.tar/ }, 'the rollback read the archive it names, and refused it')
  t.ok(existsSync(join(elsewhere, 'bundle.zip')), 'the support bundle was written where it was asked')
})

t.test(
  "from the kit's one-file installer, the commands it prints name its script by absolute path and run from anywhere",
  async (t) => {
    const kit = join(tempDir(t), 'atrium kit') // a space in the path: the printed command quotes it
    await buildInstaller(kit)
    const site = tempDir(t)
    answersIn(site)
    const script = join(kit, 'atrium-installer')
    const prefix = shellWord(script)

    // Started relative to its folder, as the kit's instructions start it.
    const help = await sh('./atrium-installer --help --json', kit)
    t.equal(help.code, 0, help.stderr)
    t.equal(commandIn(JSON.parse(help.stdout).usage, 'Run as: '), `Run as: ${prefix} [command] [options]`)
    const configured = await sh(
      `${prefix} configure --answers answers.yaml --yes ${acceptUnmet.join(' ')} --json`,
      site,
    )
    t.equal(configured.code, 0, configured.stderr)
    const written = join(site, 'out/answers.yaml')
    const replay = (reportOf(configured) as unknown as { replay: string }).replay
    t.equal(replay, `${prefix} configure --answers ${written} --yes`)
    const header = commandIn(readFileSync(written, 'utf8'), prefix)
    t.equal(header, `${prefix} install --answers ${written} --yes`)
    t.notMatch(readFileSync(written, 'utf8'), /npm run/, 'no npm at a kit site')

    const elsewhere = tempDir(t)
    for (const [command, name] of [
      [`${replay} --dry-run --json`, 'configure'],
      [`${header} --dry-run --json`, 'install'],
      [`${prefix} --version --json`, 'help'],
    ] as const) {
      const r = await sh(command, elsewhere)
      t.equal(reportOf(r).command, name, command)
      t.ok([0, 3].includes(r.code!), `exit ${r.code}: ${r.stderr}`)
    }
    t.match(JSON.parse((await sh(`${prefix} --version --json`, elsewhere)).stdout).usage, VERSION, "the kit's own")
  },
)
