// A database stand-in for service tests that need none. The test replaces the store functions the
// service calls (replacing, below); transactions here only run their function, on a handle that
// refuses every query, so a store call left unreplaced fails the test instead of reaching a database.
import { dirname, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Test } from 'tap'
import type { Db, TxSql } from '../../server/platform/db.js'

const refuse = () => {
  throw new Error('a query reached the fake database: replace the store function that made it')
}

/** Refuses being called (a query or a fragment) and every helper read from it. */
export const noSql = new Proxy(refuse, { get: () => refuse, apply: refuse }) as unknown as TxSql

export interface FakeDb extends Db {
  /** The transactions and reads that ran, in order: `system`, or the tenant's id. */
  readonly opened: string[]
}

export function fakeDb(): FakeDb {
  const opened: string[] = []
  return {
    mode: 'postgres',
    opened,
    get sql(): never {
      return refuse()
    },
    async system(fn) {
      opened.push('system')
      return fn(noSql)
    },
    async tenant(tenantId, fn) {
      opened.push(tenantId)
      return fn(noSql)
    },
    async tenantSnapshot(tenantId, fn) {
      opened.push(tenantId)
      return fn(noSql)
    },
    async tenantRead(tenantId, query) {
      opened.push(tenantId)
      return query(noSql)
    },
    ping: async () => {},
    close: async () => {},
  }
}

/**
 * `module` (a path from `from`, the test's import.meta.url) loaded afresh with some exports of the
 * modules it imports replaced, the rest of each kept real; `replaced` is keyed by the import paths
 * as the module writes them. Only the module's own imports can be replaced: t.mockImport does not
 * reach through a module it did not replace (a .ts file imported as .js is loaded the ordinary way).
 */
export async function replacing<T>(
  t: Test,
  from: string,
  module: string,
  replaced: Record<string, Record<string, unknown>>,
): Promise<T> {
  const target = new URL(module, from)
  const mocks: Record<string, Record<string, unknown>> = {}
  for (const [path, exports] of Object.entries(replaced)) {
    const url = new URL(path, target).href
    mocks[url] = { ...(await import(url)), ...exports }
  }
  // t.mockImport reads a relative module path from the file that calls it: this one.
  return t.mockImport<T>(relative(dirname(fileURLToPath(import.meta.url)), fileURLToPath(target)), mocks)
}
