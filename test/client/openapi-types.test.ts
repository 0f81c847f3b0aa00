// The client's types are the server's OpenAPI document as it is now: regenerated from a server on
// embedded defaults and compared with client/src/openapi.ts (run `npm run client:types` when this fails).
import { readFileSync } from 'node:fs'
import t from 'tap'
import { serverDocument, TYPES_FILE, typesOf } from '../../client/scripts/openapi-types.js'

// One server boot (embedded PostgreSQL) serves both tests.
const doc = await serverDocument()

t.test('client/src/openapi.ts is what the server document generates', async (t) => {
  const fresh = await typesOf(doc)
  t.ok(fresh.includes('"/api/v1/projects": {'), 'the generated types hold the routes')
  t.equal(readFileSync(TYPES_FILE, 'utf8'), fresh, 'stale: run `npm run client:types` and commit client/src/openapi.ts')
})

t.test('a document that changes gives different types: the comparison can fail', async (t) => {
  const changed = structuredClone(doc)
  delete changed.paths!['/api/v1/projects']
  t.not(await typesOf(changed), readFileSync(TYPES_FILE, 'utf8'))
})
