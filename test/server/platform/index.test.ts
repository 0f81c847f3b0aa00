import t, { type Test } from 'tap'
import { createLogger } from '../../../server/logger.js'
import { openPlatform } from '../../../server/platform/index.js'
import { configFrom, testEnv } from '../../helpers/platform.js'

async function migrationsTable(overrides: Record<string, string>, t: Test) {
  const env = await testEnv(t, overrides, { emptyDatabase: true })
  const platform = await openPlatform(configFrom(env), createLogger('silent'))
  try {
    const [row] = await platform.db.sql<{ table: string | null }[]>`select to_regclass('atrium_migrations')::text as table`
    return row!.table
  } finally {
    await platform.close()
  }
}

t.test('start-up applies the migrations by default', async (t) => {
  t.equal(await migrationsTable({}, t), 'atrium_migrations')
})

t.test('MIGRATE_ON_START=false leaves the database to a separate migration job', async (t) => {
  t.equal(await migrationsTable({ MIGRATE_ON_START: 'false' }, t), null)
})
