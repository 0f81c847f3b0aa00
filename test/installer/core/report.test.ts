// Reports in words: what each command's result says to a person, made from the data alone, and
// the exit codes scripts branch on.
import t from 'tap'
import { check, type CheckResult } from '../../../installer/core/checks/check.js'
import {
  configureText,
  EXIT,
  exitFor,
  imagesReport,
  reportText,
  type ConfigureReport,
  type InstallReport,
  type RestoreReport,
} from '../../../installer/core/report.js'
import type { StepRecord } from '../../../installer/core/steps.js'

const pass = check('cpu', 'CPU cores', 'pass', '8 cores', '4 minimum')
const warn = check('ssd', 'SSD', 'warn', 'spinning', 'an SSD', 'use an SSD')
const fail = check('license', 'License', 'fail', 'missing', 'a license', 'ask your vendor')

const configured = (over: Partial<ConfigureReport> = {}): ConfigureReport => ({
  command: 'configure',
  exitCode: EXIT.ok,
  status: 'pass',
  checks: [pass],
  stopped: null,
  accepted: [],
  problems: [],
  changes: [
    { name: 'PUBLIC_URL', change: 'added', shown: 'https://atrium.example.com' },
    { name: 'DATABASE_URL', change: 'added', shown: '(secret added)' },
  ],
  generated: ['ENCRYPTION_MASTER_KEY'],
  files: ['/out/.env', '/out/answers.yaml'],
  unchanged: [],
  leftBehind: false,
  staged: false,
  written: true,
  replay: 'npm run --silent installer -- configure --answers /out/answers.yaml --yes',
  ...over,
})

const installed = (over: Partial<InstallReport> = {}): InstallReport => ({
  ...configured(),
  command: 'install',
  deploy: [],
  steps: [],
  stage: 'done',
  upgrade: null,
  deployed: true,
  ready: true,
  url: 'https://atrium.example.com',
  firstAdmin: null,
  error: null,
  summary: ['Atrium is ready at https://atrium.example.com.'],
  record: [],
  ...over,
})

t.test('a failed check exits 3; a warning exits 4 only with --strict', async (t) => {
  const at = (checks: CheckResult[], strict: boolean) => exitFor(checks, strict)
  t.same(
    [at([pass], false), at([pass, warn], false), at([pass, warn], true), at([warn, fail], false), at([], true)],
    [0, 0, 4, 3, 0],
  )
})

t.test('preflight is its check list', async (t) => {
  t.same(reportText({ command: 'preflight', exitCode: EXIT.checkFailed, status: 'fail', checks: [pass, fail] }), {
    checks: [pass, fail],
    stdout: [],
    stderr: [],
  })
})

t.test(
  'configure lists the changes without a secret, what it generated, what it wrote and how to replay it',
  async (t) => {
    const text = configureText(configured())
    t.same(text.checks, [pass])
    t.same(text.stdout.filter(Boolean), [
      'Configuration changes:',
      '  added    PUBLIC_URL: https://atrium.example.com',
      '  added    DATABASE_URL: (secret added)',
      '  generated ENCRYPTION_MASTER_KEY (kept on every re-run; back it up: without it stored secrets cannot be read)',
      'Wrote /out/.env, /out/answers.yaml (mode 0600).',
      'Replay this run with: npm run --silent installer -- configure --answers /out/answers.yaml --yes',
    ])
    t.same(reportText(configured()), text, "configure's report text is its configuration part")
    const dry = configureText(
      configured({
        written: false,
        changes: [],
        generated: [],
        checks: [pass, fail],
        accepted: [{ id: 'license', by: 'alice', at: '2026-01-31T09:30:00.000Z' }],
        status: 'fail',
      }),
    ).stdout.join('\n')
    t.match(
      dry,
      /\nGoing on past checks that did not pass, accepted:\n {2}license \(accepted by alice at 2026-01-31T09:30:00\.000Z\)\nNo setting changes\.\n\nDry run: would write \/out\/\.env, \/out\/answers\.yaml; nothing was changed\./,
    )
    t.notMatch(dry, /Replay/, 'nothing to replay before it is written')
  },
)

t.test(
  'configure says one true thing about what it wrote: up to date and nothing written, or what it wrote and what was up to date already',
  async (t) => {
    const said = (over: Partial<ConfigureReport>) => configureText(configured(over)).stdout.filter(Boolean)
    const replay = 'Replay this run with: npm run --silent installer -- configure --answers /out/answers.yaml --yes'
    const same = { changes: [], generated: [], unchanged: ['/out/.env', '/out/answers.yaml'] }
    t.same(said(same), ['The configuration is already up to date: nothing was written.', replay])
    t.same(said({ ...same, written: false }), [
      'Dry run: the configuration is already up to date; nothing would be written.',
    ])
    t.same(
      said({ changes: [], generated: [], unchanged: ['/out/.env'] }),
      ['No setting changes.', 'Wrote /out/answers.yaml (mode 0600) (/out/.env: already up to date).', replay],
      'the answers changed (a tenant name, say), the settings did not',
    )
    for (const lines of [said(same), said({ ...same, written: false })])
      t.notOk(
        lines.some((l) => /^Wrote|would write /.test(l)),
        'never "up to date" and "Wrote" together',
      )
  },
)

t.test(
  'configure stopped at the checks shows them, how to accept those that may be accepted and why the others cannot be; stopped at problems lists them on stderr',
  async (t) => {
    const pg = check('postgres.connect', 'PostgreSQL reachable', 'fail', 'authentication failed', 'a server', 'fix it')
    const cpu = check('cpu', 'CPU cores', 'fail', '2 cores', '4 minimum', 'more cores')
    t.same(configureText(configured({ stopped: 'checks', exitCode: EXIT.checkFailed, checks: [fail] })), {
      checks: [fail],
      stdout: [
        'To go on without fixing this, accept it (recorded in answers.yaml with who and when): --accept-check license',
      ],
      stderr: [],
    })
    const both = configureText(
      configured({ stopped: 'checks', exitCode: EXIT.checkFailed, checks: [pass, warn, cpu, pg, fail] }),
    )
    t.match(both.stdout, [
      'To go on without fixing these, accept each (recorded in answers.yaml with who and when): --accept-check cpu --accept-check license',
      /^postgres\.connect cannot be accepted: Atrium cannot start without its own PostgreSQL, Redis and S3 answering to these settings: .*; correct the setting \(or start the service\) and run again\.$/,
    ])
    t.same(
      configureText(configured({ stopped: 'checks', exitCode: EXIT.warningsOnly, checks: [pass, warn] })).stdout,
      ['To go on without fixing this, accept it (recorded in answers.yaml with who and when): --accept-check ssd'],
      '--strict: the warnings are what stopped it',
    )
    t.same(
      configureText(
        configured({ stopped: 'problems', exitCode: EXIT.badInput, problems: ['PORT must be a whole number'] }),
      ),
      {
        checks: null,
        stdout: [],
        stderr: ['The configuration has problems; nothing was written:', '  - PORT must be a whole number'],
      },
    )
  },
)

t.test('install ends on the deploy: the commands of a dry run, the summary, or the error on stderr', async (t) => {
  const base = installed()
  t.same(
    reportText(base),
    { checks: null, stdout: ['', 'Atrium is ready at https://atrium.example.com.'], stderr: [] },
    'the configuration part was shown as it finished',
  )
  const dry = {
    ...base,
    written: false,
    stage: null,
    deploy: [{ title: 'Look', command: ['kubectl', 'get', 'namespace', 'ai'] }],
  }
  t.same(reportText(dry).stdout, ['Deploy would run:', '  kubectl get namespace ai'])
  t.same(reportText({ ...base, exitCode: EXIT.error, stage: 'deploy', error: 'Deploy failed at: docker compose up' }), {
    checks: null,
    stdout: [],
    stderr: ['Deploy failed at: docker compose up'],
  })
  t.same(
    reportText({ ...base, stopped: 'checks', exitCode: EXIT.checkFailed }),
    { checks: null, stdout: [], stderr: [] },
    'stopped at configure: nothing more to say',
  )
})

t.test(
  'install and restore end with what each step did, as a table of step, outcome and seconds, beside the error when one failed',
  async (t) => {
    const record: StepRecord[] = [
      { name: 'bundle', stage: 'bundle', outcome: 'done', ms: 240 },
      { name: 'running-version', stage: 'bundle', outcome: 'skipped', ms: 0 },
      { name: 'deploy', stage: 'deploy', outcome: 'failed', ms: 61_530 },
    ]
    const table = [
      '',
      '  step             outcome  seconds',
      '  bundle           done         0.2',
      '  running-version  skipped        -',
      '  deploy           failed      61.5',
    ]
    const install = installed({
      stage: 'deploy',
      deployed: false,
      ready: false,
      url: null,
      error: 'Deploy failed at: docker compose up',
      summary: ['Deploy failed at: docker compose up'],
      exitCode: EXIT.error,
      record,
    })
    t.same(reportText(install), { checks: null, stdout: table, stderr: ['Deploy failed at: docker compose up'] })
    const done = { ...record[0]!, name: 'ready', stage: 'ready' }
    t.same(
      reportText({ ...install, exitCode: EXIT.ok, stage: 'done', error: null, summary: ['Ready.'], record: [done] })
        .stdout,
      ['', 'Ready.', '', '  step   outcome  seconds', '  ready  done         0.2'],
    )
    const restore: RestoreReport = {
      command: 'restore',
      exitCode: EXIT.ok,
      input: 'site.tar',
      backup: null,
      refused: false,
      restored: true,
      steps: [],
      ready: true,
      url: 'https://atrium.example.com',
      error: null,
      summary: ['Restored site.tar.'],
      record,
    }
    t.same(reportText(restore).stdout, ['Restored site.tar.', ...table])
    t.same(reportText({ ...restore, error: 'The data is restored, but it failed' }).stderr, [
      'The data is restored, but it failed',
    ])
    t.same(reportText({ ...restore, record: [] }).stdout, ['Restored site.tar.'], 'no step ran: no table')
  },
)

t.test('the other commands: support bundle, images, help, and a command that could not run', async (t) => {
  t.same(reportText({ command: 'support-bundle', exitCode: EXIT.ok, path: 's.zip', size: 10, sha256: 'ab' }).stdout, [
    "Wrote s.zip (10 bytes, sha256 ab). Secrets are redacted; send it to your vendor's support.",
  ])
  const images = imagesReport('push')
  t.same(
    reportText({
      ...images,
      action: 'list',
      images: [
        { name: 'x', registry: 'docker.io', repository: 'a/x', tag: '1', usedBy: ['compose'], ref: 'docker.io/a/x:1' },
      ],
    }).stdout,
    ['docker.io/a/x:1'],
  )
  t.same(reportText({ ...images, commands: [{ title: 'Push', command: ['docker', 'push', 'r/a/x:1'] }] }).stdout, [
    'docker push r/a/x:1',
  ])
  t.same(reportText({ ...images, ok: false, exitCode: EXIT.error, error: 'Failed at: docker push' }).stderr, [
    'Failed at: docker push',
  ])
  const kit = {
    dir: '/k',
    path: '/k/atrium-images.tar',
    bytes: 9,
    images: [{ name: 'x', ref: 'docker.io/a/x:1', id: 'sha256:ab', digest: null, platform: 'linux/amd64' }],
    signedBy: null,
    fingerprint: null,
  }
  t.same(reportText({ ...images, action: 'save', kit }).stdout, [
    "Wrote the air-gap kit's images to /k (/k/atrium-images.tar, 9 bytes; images.json pins them; SHA256SUMS): carry the folder to the site.",
    '  docker.io/a/x:1  sha256:ab  linux/amd64',
  ])
  t.same(
    reportText({
      ...images,
      kit: { ...kit, signedBy: 'atrium-2026-1', fingerprint: '0ZuAj4zc8xj7EgbFP2RwG4TJZjzWY38Hsvm98Ayq9Vk' },
      pushed: [{ name: 'x', ref: 'r/a/x@sha256:cd' }],
    }).stdout,
    [
      'The kit in /k is signed by the vendor (key atrium-2026-1, fingerprint 0ZuAj4zc8xj7EgbFP2RwG4TJZjzWY38Hsvm98Ayq9Vk: compare it with the one your vendor publishes); every file matches SHA256SUMS and every image its pinned ID.',
      'Pushed, by digest (pin the chart to the server image with --set image.digest=sha256:...):',
      '  r/a/x@sha256:cd',
    ],
  )
  t.same(reportText({ command: 'help', exitCode: EXIT.ok, usage: 'Atrium installer' }).stdout, ['Atrium installer'])
  t.same(
    reportText({ command: 'preflight', exitCode: EXIT.badInput, failure: 'bad-input', problems: ['a', 'b'] }).stderr,
    ['a', 'b', '(run with --help for usage)'],
  )
  t.same(reportText({ command: null, exitCode: EXIT.error, failure: 'error', problems: ['Error: boom'] }).stderr, [
    'installer error: Error: boom',
  ])
})
