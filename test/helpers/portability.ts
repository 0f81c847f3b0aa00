// Exports and restores driven through the API as a client would: ask, poll until the job ends,
// download the archive, upload one as multipart/form-data.
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join, sep } from 'node:path'
import type { TestApp, Caller } from './app.js'
import { s3Client } from './platform.js'

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** A multipart/form-data body: the archive in the part named file, options as JSON (when given). */
export function restoreForm(
  archive: Buffer,
  options?: unknown,
  o: { fileField?: string } = {},
): { payload: Buffer; headers: Record<string, string> } {
  const boundary = `----atrium-test-${Math.random().toString(16).slice(2)}`
  const parts: Buffer[] = []
  if (options !== undefined) {
    parts.push(
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="options"\r\n\r\n${typeof options === 'string' ? options : JSON.stringify(options)}\r\n`,
      ),
    )
  }
  parts.push(
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="${o.fileField ?? 'file'}"; filename="export.zip"\r\nContent-Type: application/zip\r\n\r\n`,
    ),
    archive,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  )
  return { payload: Buffer.concat(parts), headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } }
}

async function until<T>(what: string, probe: () => Promise<T | null>, tries = 600): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const v = await probe()
    if (v !== null) return v
    await sleep(50)
  }
  throw new Error(`${what} did not end`)
}

export function portability(h: TestApp) {
  const download = async (url: string): Promise<Buffer> => {
    const u = new URL(url)
    if (h.platform.blobs.kind === 'local')
      return (await h.app.inject({ method: 'GET', url: u.pathname + u.search })).rawPayload
    return Buffer.from(await (await fetch(u)).arrayBuffer())
  }
  const job = (call: Caller, url: string, done: string[]) =>
    until(url, async () => {
      const r = await call('GET', url)
      if (r.status !== 200) throw new Error(`${url}: ${r.status} ${JSON.stringify(r.body)}`)
      return done.includes(r.body.data.status) ? r.body.data : null
    })
  return {
    download,
    /** Exports a tenant and waits for the job; the job and, when completed, its archive. */
    async exported(call: Caller, tenantId: string, body: Record<string, unknown> = {}) {
      const asked = await call('POST', `/api/v1/platform/tenants/${tenantId}/export`, body)
      if (asked.status !== 202) throw new Error(`export: ${asked.status} ${JSON.stringify(asked.body)}`)
      const done = await job(call, `/api/v1/platform/tenants/${tenantId}/export/${asked.body.data.exportId}`, [
        'completed',
        'failed',
      ])
      return {
        job: done,
        archive: done.status === 'completed' && done.downloadUrl ? await download(done.downloadUrl) : null,
      }
    },
    /** Backs a project up (POST /projects/{projectId}/backup) and downloads the zip its link serves. */
    async backedUp(call: Caller, projectId: string, body: { includeHistory?: boolean; includeAgents?: boolean } = {}) {
      const r = await call('POST', `/api/v1/projects/${projectId}/backup`, body)
      if (r.status !== 201) throw new Error(`backup: ${r.status} ${JSON.stringify(r.body)}`)
      const backup = r.body.data as { downloadUrl: string; expiresAt: string; size: number; checksum: string }
      return { backup, archive: await download(backup.downloadUrl) }
    },
    /** Uploads an archive to restore; the answer as it came. */
    async upload(key: string, tenantId: string, archive: Buffer, options?: unknown, o: { fileField?: string } = {}) {
      const { payload, headers } = restoreForm(archive, options, o)
      const r = await h.app.inject({
        method: 'POST',
        url: `/api/v1/platform/tenants/${tenantId}/restore`,
        payload,
        headers: { ...headers, authorization: `Bearer ${key}` },
      })
      return { status: r.statusCode, body: r.json() }
    },
    /** Uploads and waits for the restore to end. */
    async restored(call: Caller, key: string, tenantId: string, archive: Buffer, options?: unknown) {
      const r = await this.upload(key, tenantId, archive, options)
      if (r.status !== 202) throw new Error(`restore: ${r.status} ${JSON.stringify(r.body)}`)
      return job(call, `/api/v1/platform/tenants/${tenantId}/restore/${r.body.data.restoreId}`, ['completed', 'failed'])
    },
  }
}

/** A project of the caller's tenant holding `files` (text, by path): its record. */
export async function projectWithFiles(call: Caller, name: string, files: Record<string, string>) {
  const project = (await call('POST', '/api/v1/projects', { name })).body.data
  for (const [path, content] of Object.entries(files))
    await call('PUT', `/api/v1/projects/${project.id}/files/${path}`, content, { 'content-type': 'text/plain' })
  return project
}

/** What a tenant holds, row by row, and the objects under its projects' prefix: to prove what a restore changed or not. */
export async function tenantState(h: TestApp, tenantId: string) {
  const rows = await h.platform.db.system(
    (sql) => sql`
      select json_build_object(
        'projects', (select json_agg(p order by id) from projects p where tenant_id = ${tenantId}),
        'versions', (select json_agg(v order by id) from project_versions v where tenant_id = ${tenantId}),
        'files', (select json_agg(f order by project_id, path) from project_files f where tenant_id = ${tenantId}),
        'manifests', (select json_agg(m order by project_id, version, path) from project_version_files m where tenant_id = ${tenantId}),
        'agents', (select json_agg(a order by id) from agents a where tenant_id = ${tenantId}),
        'runs', (select json_agg(r order by id) from agent_runs r where tenant_id = ${tenantId}),
        'sessions', (select json_agg(s order by id) from chat_sessions s where tenant_id = ${tenantId}),
        'messages', (select json_agg(m order by id) from chat_messages m where tenant_id = ${tenantId}),
        'llm', (select json_agg(l) from tenant_llm_settings l where tenant_id = ${tenantId})
      ) as s`,
  )
  return { rows: rows[0]!.s, objects: await storedKeys(h, `tenants/${tenantId}/projects/`) }
}

/** The keys of the objects stored under a prefix of the test's store (the S3 bucket, or the local folder). */
export async function storedKeys(h: TestApp, prefix: string): Promise<string[]> {
  const c = h.platform.config
  if (c.R2_ENDPOINT) {
    const client = s3Client(c.R2_ENDPOINT, c.R2_ACCESS_KEY_ID, c.R2_SECRET_ACCESS_KEY, c.R2_REGION)
    const keys: string[] = []
    for await (const o of client.listObjectsV2(c.R2_BUCKET, prefix, true)) keys.push((o as { name: string }).name)
    return keys.sort()
  }
  const root = join(c.DATA_DIR, 'blobs')
  const dir = join(root, prefix)
  if (!existsSync(dir)) return []
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((p) => statSync(join(dir, p), { throwIfNoEntry: false })?.isFile()) // (one removed meanwhile is not there)
    .map((p) => `${prefix}${p.split(sep).join('/')}`)
    .sort()
}

/**
 * Waits until nothing is stored under a prefix (an upload is removed just after its restore ends); what is left after
 * `ms`.
 */
export async function goneFrom(h: TestApp, prefix: string, ms = 5000): Promise<string[]> {
  let left = await storedKeys(h, prefix)
  for (const end = Date.now() + ms; left.length && Date.now() < end; left = await storedKeys(h, prefix)) await sleep(50)
  return left
}
