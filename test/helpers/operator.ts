// A platform operator's key (an admin key of no tenant, holding every permission), as tests that call the
// /api/v1/platform routes need one.
import { ALL } from '../../server/domain/permissions.js'
import { createKey } from '../../server/modules/api-keys/service.js'
import { apiKeyTags } from '../../server/modules/api-keys/keys.js'
import { caller, type Caller, type TestApp } from './app.js'

/** A new operator key on the app's platform, and a caller that uses it; `name` is how the key is listed. */
export async function operatorKey(
  h: Pick<TestApp, 'app' | 'platform'>,
  name = 'operator',
): Promise<{ key: string; call: Caller }> {
  const { key } = await h.platform.db.system((sql) =>
    createKey(sql, apiKeyTags(h.platform.secrets), {
      tenantId: null,
      userId: null,
      type: 'admin',
      name,
      permissions: [ALL],
    }),
  )
  return { key, call: caller(h.app, key) }
}
