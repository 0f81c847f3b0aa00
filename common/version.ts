import { readFileSync } from 'node:fs'

export const VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version

/**
 * The newest database migration this release brings (server/platform/migrations/NNNN_*.sql): the
 * schema version a site backup records and a restore compares with. The installer runs without the
 * server's files, so it is written here; a test keeps it equal to the last migration's number.
 */
export const SCHEMA_VERSION = 18
