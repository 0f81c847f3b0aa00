import { Ajv } from 'ajv'
import t from 'tap'
import { compileOnUse } from '../../../server/http/compile-on-use.js'
import { testApp } from '../../helpers/app.js'

t.test('route schemas wait for their first use, and every one of them compiles', async (t) => {
  const h = await testApp(t)
  const atStart = h.app.schemas.waiting
  t.ok(atStart > 100, `none compiled at start-up: ${atStart} waiting`)
  const { call } = await h.tenant()
  const listed = await call('GET', '/api/v1/projects')
  t.equal(listed.status, 200)
  t.same(listed.body.data, [], 'served through the serializer compiled on the spot')
  const after = h.app.schemas.waiting
  t.ok(after < atStart, `the requests compiled their routes' schemas: ${atStart - after}`)
  t.doesNotThrow(() => h.app.schemas.compileAll(), "every route's validators and serializers compile")
  t.equal(h.app.schemas.waiting, 0)
})

t.test("a route's first request is validated as strictly as any later one", async (t) => {
  const h = await testApp(t)
  const { call } = await h.tenant()
  for (const attempt of ['first', 'second']) {
    const r = await call('POST', '/api/v1/projects', { name: 42 })
    t.equal(r.status, 400, `${attempt} request`)
    t.equal(r.body.error.code, 'VALIDATION_ERROR')
    t.match(r.body.error.details.errors, [{ field: 'body.name' }])
  }
})

t.test('a validator compiled on use reports the errors of its last call', async (t) => {
  const c = compileOnUse()
  let compiled = 0
  const validate = c.lazily(() => (compiled++, new Ajv().compile({ type: 'object', required: ['a'] })))
  t.equal(compiled, 0, 'not compiled until called')
  t.equal(c.waiting, 1)
  t.equal(validate({}), false)
  t.match((validate as unknown as { errors: unknown }).errors, [{ keyword: 'required' }])
  t.equal(validate({ a: 1 }), true)
  t.equal((validate as unknown as { errors: unknown }).errors, null)
  t.equal(compiled, 1, 'compiled once')
  t.equal(c.waiting, 0)
  const broken = c.lazily(() => new Ajv().compile({ type: 'no such type' }))
  t.throws(() => c.compileAll(), 'compileAll reports a schema that cannot compile')
  t.throws(() => broken({}))
})
