// The exit guard preloaded into every test process (exit-when-done.mjs): a finished process leaves with its own exit
// code after its own exit listeners ran, and work still pending (a timer) is never cut short.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import t from 'tap'

const GUARD = fileURLToPath(new URL('./exit-when-done.mjs', import.meta.url))

function run(script: string): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, ['--import', GUARD, '--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  child.stdout.on('data', (c: Buffer) => (out += c.toString()))
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, out })))
}

t.test("a finished process exits with the code it set, after its own 'exit' listeners", async (t) => {
  const r = await run(`process.on('exit', () => console.log('listener ran')); process.exitCode = 3`)
  t.equal(r.code, 3)
  t.equal(r.out, 'listener ran\n')
})

t.test('a process that finished cleanly exits 0', async (t) => {
  t.equal((await run(`console.log('done')`)).code, 0)
})

t.test('pending work keeps the process alive: a timer still fires, and work a beforeExit schedules runs', async (t) => {
  const r = await run(
    `setTimeout(() => console.log('timer'), 300)
     let again = true
     process.on('beforeExit', () => { if (again) { again = false; setTimeout(() => console.log('scheduled at beforeExit'), 100) } })`,
  )
  t.equal(r.code, 0)
  t.equal(r.out, 'timer\nscheduled at beforeExit\n')
})
