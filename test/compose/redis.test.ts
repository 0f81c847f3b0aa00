// The Compose bundle's Redis (the redis service in compose/compose.yaml), started as its container starts it, with
// the real redis-server: the password reaches it on standard input, so no command line on the machine (the host's
// `ps` lists a container's processes) ever holds it; the server asks for it, the healthcheck passes with it, and
// redis-server is the first process (docker stop's SIGTERM reaches it). A password that cannot be part of REDIS_URL
// as it is stops the service with the reason.
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFileSync, writeFileSync, chmodSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { parse } from 'yaml'
import { ROOT } from '../helpers/cli.js'
import { secretsIn, watchCommandLines } from '../helpers/leaks.js'
import { freePort, tempDir } from '../helpers/platform.js'
import { findTool, runTool } from '../helpers/tools.js'

const REDIS = findTool('redis-server')
const skip = !REDIS && 'needs redis-server (CI has it)'

const service = () =>
  (
    parse(readFileSync(join(ROOT, 'compose/compose.yaml'), 'utf8')) as {
      services: { redis: { command: string[]; healthcheck: { test: string[] }; environment: Record<string, string> } }
    }
  ).services.redis

/** The service's command as the container runs it (Compose turns $$ into $), on a port of the test's own. */
async function start(t: Test, password: string) {
  const [shell, flags, script] = service().command
  t.equal(`${shell} ${flags}`, 'sh -ec', 'the command is a shell script')
  const port = await freePort()
  const dir = tempDir(t)
  // The image's redis-server, here on a free port and writing into a folder of the test's: the arguments Compose
  // gives it come first, unchanged.
  const bin = tempDir(t)
  writeFileSync(
    join(bin, 'redis-server'),
    `#!/bin/sh\nexec ${REDIS} "$@" --port ${port} --bind 127.0.0.1 --dir ${dir} --save ''\n`,
  )
  chmodSync(join(bin, 'redis-server'), 0o755)
  const child = spawn('sh', ['-ec', script!.replaceAll('$$', '$')], {
    env: { PATH: `${bin}:${process.env.PATH}`, REDIS_PASSWORD: password },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s))
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
  t.teardown(() => void child.kill('SIGKILL'))
  return { child, port, exited, stderr: () => stderr }
}

const cli = (port: number, args: string[], auth?: string) =>
  runTool('redis-cli', ['-p', String(port), ...args], { env: auth ? { REDISCLI_AUTH: auth } : {} })

t.test(
  "the bundled Redis gets its password on standard input: on no command line, asked of every client, and the service's healthcheck passes",
  { skip },
  async (t) => {
    const password = randomBytes(24).toString('hex')
    const watch = watchCommandLines(100)
    const redis = await start(t, password)
    let up = false
    for (let i = 0; i < 100 && !up; i++) {
      up = (await cli(redis.port, ['ping'], password)).stdout.trim() === 'PONG'
      if (!up) await new Promise((r) => setTimeout(r, 100))
    }
    t.ok(up, `redis-server answers: ${redis.stderr()}`)
    t.equal(
      readFileSync(`/proc/${redis.child.pid}/comm`, 'utf8').trim(),
      'redis-server',
      'redis-server is the process the container starts (exec), so docker stop reaches it',
    )
    t.match((await cli(redis.port, ['ping'])).stdout, /NOAUTH/, 'a client without the password is refused')
    const wrong = await cli(redis.port, ['ping'], 'not-the-password')
    t.match(wrong.stdout + wrong.stderr, /WRONGPASS|NOAUTH/, 'nor one with another')
    // The healthcheck as Compose runs it in the container: its command, the service's REDISCLI_AUTH.
    const [kind, tool, ...args] = service().healthcheck.test
    t.equal(kind, 'CMD')
    t.match(service().environment.REDISCLI_AUTH, /REDIS_PASSWORD/, 'the healthcheck authenticates with the password')
    t.equal(
      (await runTool(tool!, ['-p', String(redis.port), ...args], { env: { REDISCLI_AUTH: password } })).stdout.trim(),
      'PONG',
    )
    t.same((await cli(redis.port, ['config', 'get', 'maxmemory-policy'], password)).stdout.trim().split('\n'), [
      'maxmemory-policy',
      'noeviction',
    ])
    t.same((await cli(redis.port, ['config', 'get', 'appendonly'], password)).stdout.trim().split('\n'), [
      'appendonly',
      'yes',
    ])
    const { samples, commandLines } = watch.stop()
    t.ok(samples > 1, `the process list was read ${samples} times`)
    t.ok(
      commandLines.some((l) => l.startsWith('redis-server ') || l.includes(`/redis-server `)),
      'the watch saw redis-server',
    )
    t.same(secretsIn(commandLines, { REDIS_PASSWORD: password }), [], 'no command line held the password')
    redis.child.kill('SIGTERM')
    t.equal(await redis.exited, 0, 'SIGTERM stops it cleanly')
  },
)

t.test(
  'a REDIS_PASSWORD that cannot be part of REDIS_URL as it is (or none) stops the service with the reason (exit 1), not echoing it',
  { skip },
  async (t) => {
    for (const password of ['has a space', 'quote"d', 'back\\slash', '']) {
      const redis = await start(t, password)
      t.equal(await redis.exited, 1, JSON.stringify(password))
      t.match(
        redis.stderr(),
        password
          ? /REDIS_PASSWORD must be letters, digits and \. _ ~ -/
          : /REDIS_PASSWORD: set REDIS_PASSWORD in \.env/,
      )
      if (password) t.notOk(redis.stderr().includes(password), 'the value is not printed')
    }
  },
)
