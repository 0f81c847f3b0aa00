// A database stand-in for service tests that need none. The test replaces the store functions the
// service calls (t.mockImport); transactions here only run their function, on a handle that refuses
// every query, so a store call left unreplaced fails the test instead of reaching a database.
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
    async tenantRead(tenantId, query) {
      opened.push(tenantId)
      return query(noSql)
    },
    ping: async () => {},
    close: async () => {},
  }
}
