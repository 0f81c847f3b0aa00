// The command runner: no shell, never throws, says when a program is missing or too slow.
import t from 'tap'
import { run } from '../../../installer/core/run.js'

t.test('a command runs without a shell and its output comes back', async (t) => {
  const r = await run(process.execPath, [
    '-e',
    'process.stdout.write(process.argv[1]); process.stderr.write("warn")',
    '$(echo not expanded); rm -rf /',
  ])
  t.equal(r.exitCode, 0)
  t.equal(r.stdout, '$(echo not expanded); rm -rf /', 'arguments are passed as they are')
  t.equal(r.stderr, 'warn')
  t.notOk(r.notFound)
})

t.test('a failing command, a missing program and a timeout are results, not exceptions', async (t) => {
  const failed = await run(process.execPath, ['-e', 'process.exit(3)'])
  t.equal(failed.exitCode, 3)
  const missing = await run('atrium-no-such-program', ['--version'])
  t.ok(missing.notFound)
  const slow = await run(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { timeoutMs: 200 })
  t.ok(slow.timedOut)
  t.not(slow.exitCode, 0)
})

t.test('input goes to the command on stdin', async (t) => {
  const r = await run(process.execPath, ['-e', 'process.stdin.pipe(process.stdout)'], { input: 'hello' })
  t.equal(r.stdout, 'hello')
})
