import t from 'tap'
import { hashPassword, verifyPassword } from '../../../../server/modules/users/passwords.js'

t.test('a password verifies against its own hash only', async (t) => {
  const stored = await hashPassword('correct horse battery staple')
  t.match(stored, /^scrypt\$32768\$8\$1\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/)
  t.ok(await verifyPassword('correct horse battery staple', stored))
  t.notOk(await verifyPassword('correct horse battery stapl', stored))
  t.notOk(await verifyPassword('', stored))
})

t.test('the same password hashes differently each time (salted)', async (t) => {
  t.not(await hashPassword('same password'), await hashPassword('same password'))
})

t.test('unicode forms of the same password match', async (t) => {
  const stored = await hashPassword('caf\u00e9 au lait')
  t.ok(await verifyPassword('cafe\u0301 au lait', stored))
})

t.test('a malformed stored hash never verifies', async (t) => {
  for (const s of ['', 'plain', 'bcrypt$x$y', 'scrypt$1$1$1$$']) t.notOk(await verifyPassword('x', s), s)
})
