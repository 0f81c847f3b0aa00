// Tool checks: the version each target needs, read from the real command (here a stand-in script
// on PATH, since Docker cannot run on this machine), graded at, under and over the minimum.
import { chmodSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import {
  compareVersions,
  gradeTool,
  parseVersion,
  toolChecks,
  TOOL_MINIMUMS,
} from '../../../../installer/core/checks/tools.js'
import { run, type Runner } from '../../../../installer/core/run.js'
import { tempDir } from '../../../helpers/platform.js'

t.test('versions are read from what the tools print', async (t) => {
  t.same(parseVersion('Docker version 27.3.1, build ce12230'), [27, 3, 1])
  t.same(parseVersion('v3.21.4+gabcdef'), [3, 21, 4])
  t.same(parseVersion('2.29'), [2, 29, 0])
  t.equal(parseVersion('no digits'), null)
  t.equal(compareVersions([2, 20, 0], [2, 20, 0]), 0)
  t.equal(compareVersions([2, 19, 9], [2, 20, 0]), -1)
  t.equal(compareVersions([10, 0, 0], [9, 99, 99]), 1)
})

t.test('each tool passes at its minimum and fails just under it', async (t) => {
  const under = { docker: '20.9.99', compose: '2.19.9', helm: 'v3.11.99' }
  const over = { docker: '20.10.1', compose: '2.20.1', helm: 'v3.12.1' }
  for (const tool of ['docker', 'compose', 'helm'] as const) {
    t.equal(gradeTool(tool, TOOL_MINIMUMS[tool]).status, 'pass', `${tool} at the minimum`)
    t.equal(gradeTool(tool, over[tool]).status, 'pass', `${tool} just over`)
    const low = gradeTool(tool, under[tool])
    t.equal(low.status, 'fail', `${tool} just under`)
    t.match(low.fix, /Upgrade/)
    t.match(low.required, TOOL_MINIMUMS[tool])
  }
  const missing = gradeTool('helm', null)
  t.match(missing, { status: 'fail', found: /not installed/, fix: /Install Helm/ })
  t.match(gradeTool('docker', 'garbage'), { status: 'fail', found: /could not read a version/ })
})

/** A runner whose PATH holds only the given folder, as on a machine with just those tools. */
const onPath =
  (dir: string): Runner =>
  (file, args, opts) =>
    run(file, args, { ...opts, env: { PATH: dir } })

function tool(dir: string, name: string, script: string) {
  const path = join(dir, name)
  writeFileSync(path, `#!/bin/sh\n${script}\n`)
  chmodSync(path, 0o755)
}

t.test('the helm target asks helm itself, through the command runner', async (t) => {
  const dir = tempDir(t)
  t.match(await toolChecks('helm', onPath(dir)), [{ id: 'tools.helm', status: 'fail', found: /not installed/ }])
  tool(dir, 'helm', 'echo "v3.11.3+g66a969e"')
  t.match(await toolChecks('helm', onPath(dir)), [{ status: 'fail', found: '3.11.3' }])
  tool(dir, 'helm', 'echo "v3.21.4+g1234567"')
  t.match(await toolChecks('helm', onPath(dir)), [{ status: 'pass', found: '3.21.4' }])
})

t.test('the compose target needs the engine running and the Compose v2 plugin', async (t) => {
  const dir = tempDir(t)
  tool(
    dir,
    'docker',
    [
      'if [ "$1" = compose ]; then echo "Docker Compose version v2.29.7"; exit 0; fi',
      'echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2; exit 1',
    ].join('\n'),
  )
  const [engine, compose] = await toolChecks('compose', onPath(dir))
  t.match(engine, {
    id: 'tools.docker',
    status: 'fail',
    found: /Cannot connect to the Docker daemon/,
    fix: /Start the Docker daemon/,
  })
  t.match(compose, { id: 'tools.compose', status: 'pass', found: '2.29.7' })
})
