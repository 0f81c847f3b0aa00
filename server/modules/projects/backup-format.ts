// The project backup's format (docs/api.md "Backups", docs/portability.md): what the zip of
// POST /projects/{projectId}/backup holds. The backup writes it (service.ts), the restore reads it
// (server/modules/restores/project-backup.ts), and both take the names from here.
export const BACKUP_FORMAT = 'atrium.project-backup'
/**
 * The version this server writes; a restore reads it and older ones. 2: files.json and files/<path>
 * (the project's current files) joined the archive.
 */
export const BACKUP_FORMAT_VERSION = 2

/**
 * Every entry a project backup may hold, by name: the manifest, the project's record, the current
 * files' list and their bytes, and with the options of the backup the versions and the agents.
 * Anything else in a backup is refused.
 */
export const BACKUP_ENTRIES = [
  { name: 'manifest', re: /^manifest\.json$/, holds: 'manifest' },
  { name: 'project', re: /^project\.json$/, holds: 'project' },
  { name: 'files', re: /^files\.json$/, holds: 'files' },
  { name: 'files/<path>', re: /^files\/(.+)$/, holds: 'file' },
  { name: 'versions', re: /^versions\.json$/, holds: 'versions' },
  { name: 'agents', re: /^agents\.json$/, holds: 'agents' },
] as const satisfies readonly { name: string; re: RegExp; holds: string }[]

export interface BackupManifest {
  format: typeof BACKUP_FORMAT
  formatVersion: number
  atriumVersion: string
  backupId: string
  createdAt: string
  /** The tenant and the project the backup was made of. */
  tenantId: string
  projectId: string
  /** What the backup holds beyond the project's record (version 1 had no files, and no `files`). */
  includes: { history: boolean; agents: boolean; files?: boolean }
}

/** A current file as files.json lists it. */
export interface BackupFile {
  path: string
  size: number
  sha256: string
  contentType: string
}
