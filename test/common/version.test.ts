import t from 'tap'
import { SCHEMA_VERSION } from '../../common/version.js'
import { loadMigrations } from '../../server/platform/migrate.js'

t.test(
  'SCHEMA_VERSION is the number of the last migration this release brings (what a site backup records and a restore compares)',
  async (t) => {
    t.equal(SCHEMA_VERSION, loadMigrations().at(-1)!.version)
  },
)
