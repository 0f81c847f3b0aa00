// One full interactive run, driven as a person would through a real terminal (tmux, 80x24): the
// welcome, target and mode, every question (answers refused first, then cleared with Backspace and
// Ctrl-U), the checks, the plan, and the configuration written. Services are the real ones when
// TEST_* name them; otherwise they do not answer, their checks cannot be accepted, and the run ends
// at the checks (exit 3).
import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { ROOT } from '../helpers/cli.js'
import { testLicense, testVendor } from '../helpers/license.js'
import { freshBucket, services, suffix, tempDir } from '../helpers/platform.js'
import { realServices } from '../helpers/installer.js'
import { hasTmux, terminal } from '../helpers/tmux.js'

t.test(
  'an admin answers the questions in a terminal and gets a written configuration',
  { skip: !hasTmux && 'tmux is not installed' },
  async (t) => {
    const dir = tempDir(t)
    const out = join(dir, 'out')
    const bucket = services.s3Endpoint ? await freshBucket(t) : `atrium-t-${suffix()}`
    const term = terminal(t, `${process.execPath} --import tsx installer/cli.ts; echo "EXIT=$?"`, { cwd: ROOT })

    await term.waitFor(/Press Enter to start/)
    const welcome = term.screen()
    for (const line of welcome.split('\n')) t.ok(line.length <= 80, 'fits 80 columns')
    // A screen takes its keys once it is drawn and its handler attached: on a busy machine a key
    // pressed as soon as it shows can come first, so Enter is pressed again until the next screen.
    const enterUntil = async (next: RegExp) => {
      for (let waited = 0; !next.test(term.screen()) && waited < 30_000; waited += 500) {
        term.press('Enter')
        await new Promise((r) => setTimeout(r, 500))
      }
      return term.waitFor(next)
    }
    await enterUntil(/Where will Atrium run\?/)
    await enterUntil(/Does this site reach the internet\?/) // Docker Compose, the first choice
    await enterUntil(/Configuration \(1 of 13\)/) // connected

    const answer = async (n: number, value: string) => {
      await term.waitFor(new RegExp(`Configuration \\(${n} of 13\\)`))
      term.type(value)
      // Enter only once the field shows the text (or its mask): sent in the same burst, the
      // terminal hands both over as one paste, and the field takes the Enter as one more character.
      await term.waitFor(
        new RegExp(`^> (?:${value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}|\\*{${value.length}})\\s*$`, 'm'),
      )
      term.press('Enter')
    }
    await answer(1, dir)
    await answer(2, out)
    await answer(3, 'not a url')
    await term.waitFor(/Not accepted: PUBLIC_URL must be a URL/)
    await term.repeat('BSpace', 'not a url'.length)
    await term.waitFor(/^>\s*$/m)
    await answer(3, 'http://127.0.0.1:99999')
    await term.waitFor(/Not accepted: PUBLIC_URL has port 99999, out of range \(1-65535\)/)
    term.press('C-u')
    await term.waitFor(/^>\s*$/m)
    t.notMatch(term.screen(), /^> *u/m, 'Ctrl-U clears the field; no "u" is typed')
    await answer(3, 'https://atrium.example.com')
    await answer(4, services.databaseUrl || 'postgres://atrium@127.0.0.1:1/atrium')
    await answer(5, services.redisUrl || 'redis://127.0.0.1:1')
    await answer(6, services.s3Endpoint || 'http://127.0.0.1:1')
    await term.waitFor(/Bucket \(Enter for atrium\)/)
    await answer(7, bucket)
    await answer(8, services.s3AccessKey)
    await answer(9, services.s3SecretKey)
    t.notMatch(term.screen(), new RegExp(services.s3SecretKey), 'a secret is masked as it is typed')
    // Behind TLS with its own S3, loopback is offered for where Atrium is published: Enter takes it.
    t.match(
      await term.waitFor(/Configuration \(10 of 13\)/),
      /Address on this machine[\s\S]*\(Enter for 127\.0\.0\.1\)/,
    )
    term.press('Enter')
    // A license cut short is refused at its question; one whole but signed by a key this installer
    // does not know (only the vendor can sign one it trusts) is taken, and the checks judge it.
    const license = await testLicense(testVendor())
    await term.waitFor(/Configuration \(11 of 13\)/)
    term.type(license.slice(0, -20))
    await term.waitFor(/\*{20}/)
    await new Promise((r) => setTimeout(r, 300))
    term.press('Enter')
    await term.waitFor(/Not accepted: The license key is not a license \(it is cut short/)
    term.press('C-u')
    await term.waitFor(/^>\s*$/m)
    term.type(license)
    for (let waited = 0; waited < 10_000; waited += 100) {
      if (term.screen().replace(/\s+/g, '').includes('*'.repeat(license.length))) break
      await new Promise((r) => setTimeout(r, 100))
    }
    term.press('Enter')
    await answer(12, 'Example Corp')
    await answer(13, 'admin@example.com')

    // No valid license here (only the vendor can sign one), so the checks fail and say why.
    const checks = await term.waitFor(/r: run (the checks )?again/, 60_000)
    for (const line of checks.split('\n')) t.ok(line.length <= 80, 'fits 80 columns')
    if (!realServices) {
      t.match(
        checks.replace(/\s+/g, ' '),
        /postgres\.connect, redis\.connect, s3\.roundtrip cannot be accepted: Atrium cannot start/,
      )
      t.notMatch(checks, /c: accept/)
      term.type('q')
      await term.waitFor(/EXIT=3/)
      t.throws(() => readFileSync(join(out, '.env')), 'nothing written')
      return
    }
    t.match(checks, /c: accept these and continue/)
    t.match(checks, /b: back to the questions/)
    term.press('c')
    const plan = await term.waitFor(/y: write it/)
    t.match(plan, /ENCRYPTION_MASTER_KEY is generated now and kept on every re-run/)
    t.notMatch(plan, new RegExp(services.s3SecretKey))
    term.type('y')
    await term.waitFor(/Replay:\s+npm\s+--prefix\s+\S+\s+run\s+--silent\s+installer\s+--\s+configure\s+--answers/)
    term.press('Enter')
    await term.waitFor(/EXIT=0/)

    const env = readFileSync(join(out, '.env'), 'utf8')
    t.equal(statSync(join(out, '.env')).mode & 0o777, 0o600)
    t.match(env, /^PUBLIC_URL=https:\/\/atrium\.example\.com$/m)
    t.match(env, new RegExp(`^R2_BUCKET=${bucket}$`, 'm'))
    t.match(env, /^ATRIUM_BIND_ADDRESS=127\.0\.0\.1$/m)
    t.match(env, /^ENCRYPTION_MASTER_KEY=.{44}$/m)
    const replay = readFileSync(join(out, 'answers.yaml'), 'utf8')
    t.notMatch(replay, new RegExp(services.s3SecretKey), 'the answers hold secrets by reference only')
    t.match(replay, /R2_SECRET_ACCESS_KEY:\n\s+env: ATRIUM_R2_SECRET_ACCESS_KEY/)
    t.match(
      replay,
      /\nacceptedChecks:\n(.*\n)*? {2}- id: license\n {4}by: \S+\n {4}at: \d{4}-/,
      'the license accepted at c',
    )
  },
)
