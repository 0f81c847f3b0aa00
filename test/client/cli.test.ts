// The `atrium` binary as a user runs it, against a real listening server: the full device login
// (the CLI starts it, a browser-like client signs in and approves, the CLI stores the token and
// `whoami` names the user and tenant), a renewal under a stale access token, logout, API keys from
// the environment, files, an agent run streamed, chat, export and restore, --json, and the
// documented exit codes.
import { readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { agent } from '../helpers/agents.js'
import { testApp } from '../helpers/app.js'
import { cliDeviceLogin, finished, spawnScript } from '../helpers/cli.js'
import { fakeLlm } from '../helpers/fake-llm.js'
import { freePort, tempDir } from '../helpers/platform.js'
import { PASSWORD, user } from '../server/modules/cli-auth/helpers.js'

// Each test runs the CLI as its own process (tsx compiling it first): on a slow or busy machine
// the file took close to the suite's 180 s per file, and once past it.
t.setTimeout(600_000)

const CLI = 'client/src/cli/main.ts'
const port = await freePort()
const base = `http://127.0.0.1:${port}`
const h = await testApp(t, { PUBLIC_URL: base, OUTBOUND_ALLOWED_NETWORKS: '127.0.0.1/32' }, { jobs: { pollMs: 50 } })
await h.app.listen({ host: '127.0.0.1', port })

const atrium = (args: string[], env: Record<string, string>) => finished(spawnScript(CLI, args, env))

t.test('device login through the binary, then whoami, projects, a renewal and logout', async (t) => {
  const u = await user(h)
  const config = tempDir(t, 'atrium-cli-')
  const env = { ATRIUM_CONFIG_DIR: config }
  const started = await cliDeviceLogin(base, env)
  const { done } = started

  // The browser: signs in (the session cookie), checks the code, approves.
  const params = new URL(started.authUrl).searchParams
  const browser = { origin: base, 'sec-fetch-site': 'same-origin', 'content-type': 'application/json' }
  const signedIn = await fetch(`${base}/api/v1/auth/login`, {
    method: 'POST',
    headers: browser,
    body: JSON.stringify({ email: u.email, password: PASSWORD }),
  })
  t.equal(signedIn.status, 200)
  const cookie = signedIn.headers
    .getSetCookie()
    .map((c) => c.split(';')[0])
    .join('; ')
  const info = await (
    await fetch(`${base}/cli/auth/info?loginId=${params.get('loginId')}`, { headers: { ...browser, cookie } })
  ).json()
  t.equal(info.data.verificationCode, started.code, 'the browser shows the code the terminal shows')
  const approved = await fetch(`${base}/cli/auth/complete`, {
    method: 'POST',
    headers: { ...browser, cookie },
    body: JSON.stringify({ loginId: params.get('loginId'), state: params.get('state') }),
  })
  t.equal(approved.status, 200)

  const login = await done
  t.equal(login.code, 0, login.stderr)
  t.match(login.stdout, `as ${u.email}`)
  const file = join(config, 'credentials.json')
  t.equal(statSync(file).mode & 0o777, 0o600, 'credentials readable by the user alone')
  t.equal(statSync(config).mode & 0o777, 0o700)
  const stored = JSON.parse(readFileSync(file, 'utf8'))
  t.match(stored, {
    url: base,
    kind: 'device',
    refreshToken: /^ats_/,
    user: { email: u.email },
    tenant: { id: u.tenantId },
  })

  const who = await atrium(['whoami'], env)
  t.equal(who.code, 0, who.stderr)
  t.match(who.stdout, u.email)
  t.match(who.stdout, u.tenantId)
  const whoJson = JSON.parse((await atrium(['whoami', '--json'], env)).stdout)
  t.match(whoJson, {
    user: { id: u.userId, email: u.email },
    tenant: { id: u.tenantId },
    credential: { type: 'access_token' },
  })

  const made = await atrium(['projects', 'create', '--name', 'From the CLI', '--json'], env)
  t.equal(made.code, 0, made.stderr)
  const listed = JSON.parse((await atrium(['projects', 'list', '--json'], env)).stdout)
  t.same(
    listed.map((p: { name: string }) => p.name),
    ['From the CLI'],
  )

  // The access token counts as expired: the next command renews it with the refresh token, once.
  writeFileSync(file, JSON.stringify({ ...stored, staleAt: 0 }), { mode: 0o600 })
  const renewed = await atrium(['whoami', '--json'], env)
  t.equal(renewed.code, 0, renewed.stderr)
  const after = JSON.parse(readFileSync(file, 'utf8'))
  t.not(after.refreshToken, stored.refreshToken, 'the rotated refresh token is stored')
  t.not(after.accessToken, stored.accessToken)
  t.ok(after.staleAt > Date.now())

  const out = await atrium(['logout'], env)
  t.equal(out.code, 0, out.stderr)
  t.throws(() => statSync(file), 'the credentials are gone')
  const gone = await atrium(['whoami', '--url', base, '--json'], env)
  t.equal(gone.code, 3, 'not signed in: exit 3')
  t.match(JSON.parse(gone.stdout), { error: { code: 'NOT_SIGNED_IN' } })
  const revoked = await fetch(`${base}/api/v1/auth/me`, { headers: { authorization: `Bearer ${after.accessToken}` } })
  t.equal(revoked.status, 401, 'logout ended the session on the server')
})

t.test('an API key from the environment; login --api-key stores it', async (t) => {
  const tn = await h.tenant('pro')
  const config = tempDir(t, 'atrium-cli-')
  const viaEnv = await atrium(['projects', 'list', '--json'], {
    ATRIUM_CONFIG_DIR: config,
    ATRIUM_URL: base,
    ATRIUM_API_KEY: tn.apiKey,
  })
  t.equal(viaEnv.code, 0, viaEnv.stderr)
  t.same(JSON.parse(viaEnv.stdout), [])

  const stored = await atrium(['login', '--api-key', tn.apiKey, '--url', base], { ATRIUM_CONFIG_DIR: config })
  t.equal(stored.code, 0, stored.stderr)
  t.equal(statSync(join(config, 'credentials.json')).mode & 0o777, 0o600)
  const who = JSON.parse((await atrium(['whoami', '--json'], { ATRIUM_CONFIG_DIR: config })).stdout)
  t.match(who, { tenant: { id: tn.tenantId }, credential: { type: 'api_key' } })
})

t.test('exit codes: refused, bad usage, bad key, unreachable', async (t) => {
  const tn = await h.tenant('pro')
  const env = { ATRIUM_CONFIG_DIR: tempDir(t, 'atrium-cli-'), ATRIUM_URL: base, ATRIUM_API_KEY: tn.apiKey }
  const missing = await atrium(['projects', 'get', '00000000-0000-4000-8000-000000000000', '--json'], env)
  t.equal(missing.code, 1)
  t.match(JSON.parse(missing.stdout), { error: { code: 'RESOURCE_NOT_FOUND', requestId: String } })
  const usage = await atrium(['projects', 'frobnicate'], env)
  t.equal(usage.code, 2)
  t.match(usage.stderr, 'Usage: atrium')
  const badKey = await atrium(['whoami', '--json'], { ...env, ATRIUM_API_KEY: 'svc_sdk_not-a-real-key' })
  t.equal(badKey.code, 3)
  t.match(JSON.parse(badKey.stdout), { error: { code: 'UNAUTHORIZED' } })
  const down = await atrium(['whoami'], { ...env, ATRIUM_URL: 'http://127.0.0.1:1' })
  t.equal(down.code, 4)
  t.notMatch(down.stderr + down.stdout, tn.apiKey, 'the key is not printed')
})

t.test('files, an agent run streamed to the end, chat, and an export restored', async (t) => {
  const llm = await fakeLlm(t)
  const tn = await h.tenant('enterprise')
  const work = tempDir(t, 'atrium-cli-work-')
  const env = { ATRIUM_CONFIG_DIR: tempDir(t, 'atrium-cli-'), ATRIUM_URL: base, ATRIUM_API_KEY: tn.apiKey }
  await tn.call('PATCH', '/api/v1/tenant/settings/llm', {
    provider: 'openai-compatible',
    baseUrl: llm.url,
    model: 'm',
    apiKey: 'sk-cli-test-00000000',
  })
  const project = JSON.parse((await atrium(['projects', 'create', '--name', 'Work', '--json'], env)).stdout)

  writeFileSync(join(work, 'notes.md'), '# Notes\n')
  t.equal((await atrium(['files', 'put', project.id, 'docs/notes.md', join(work, 'notes.md')], env)).code, 0)
  const listed = JSON.parse((await atrium(['files', 'list', project.id, '--json'], env)).stdout)
  t.match(listed, [{ path: 'docs/notes.md', size: 8 }])
  const got = await atrium(['files', 'get', project.id, 'docs/notes.md'], env)
  t.equal(got.stdout, '# Notes\n')

  const agentId = await agent(tn.call, { autonomyLevel: 'low' }, 'Be brief.')
  llm.push({ text: 'Here is the summary.' })
  const ran = await atrium(['agents', 'run', agentId, '--goal', 'summarize', '--project', project.id], env)
  t.equal(ran.code, 0, ran.stderr)
  t.match(ran.stdout, 'Here is the summary.', 'the output streamed to stdout')

  llm.push({ text: 'Hello from the model.' })
  const chat = await atrium(['chat', '--message', 'hello', '--json'], env)
  t.equal(chat.code, 0, chat.stderr)
  t.match(JSON.parse(chat.stdout), {
    message: { content: 'hello' },
    reply: { content: 'Hello from the model.', status: 'completed' },
  })

  const archive = join(work, 'backup.zip')
  const exported = await atrium(['export', '--output', archive, '--json'], env)
  t.equal(exported.code, 0, exported.stderr)
  const job = JSON.parse(exported.stdout)
  t.match(job, { status: 'completed', output: archive })
  t.equal(statSync(archive).size, job.size, 'the whole archive downloaded')
  const restored = await atrium(['restore', archive, '--merge', '--json'], env)
  t.equal(restored.code, 0, restored.stderr)
  t.match(JSON.parse(restored.stdout), { status: 'completed' })
  const checked = await atrium(['restore', join(work, 'notes.md'), '--json'], env)
  t.not(checked.code, 0, 'a file that is no archive is refused')

  // A project backup, downloaded from its link, restored as a new project.
  const backup = (await tn.call('POST', `/api/v1/projects/${project.id}/backup`, {})).body.data
  const projectArchive = join(work, 'project-backup.zip')
  writeFileSync(projectArchive, Buffer.from(await (await fetch(backup.downloadUrl)).arrayBuffer()))
  const copied = await atrium(['restore', projectArchive, '--as-new-project', '--json'], env)
  t.equal(copied.code, 0, copied.stderr)
  const copy = JSON.parse(copied.stdout)
  t.match(copy, { status: 'completed', asNewProject: true, report: { project: { created: true } } })
  t.match(JSON.parse((await atrium(['files', 'list', copy.projectId, '--json'], env)).stdout), [
    { path: 'docs/notes.md', size: 8 },
  ])
})
