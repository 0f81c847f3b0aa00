// The redactor finds a secret however it was written down, and touches nothing else.
import t from 'tap'
import { MIN_SECRET_LENGTH, redactor } from '../../common/redact.js'

t.test('a secret that reads like escapes (%41, \\n, \\u0041) is found printed as it is and encoded', async (t) => {
  const secret = 'p%41ss\\n\\u0041-x'
  const redact = redactor([secret], '***')
  t.equal(redact(`raw ${secret} end`), 'raw *** end')
  t.equal(redact(`url ${encodeURIComponent(secret)} end`), 'url *** end')
  t.equal(redact(`json ${JSON.stringify(secret)} end`), 'json "***" end')
})

t.test('secrets that overlap or touch are one redaction, and the text around stays as it was', async (t) => {
  const redact = redactor(['correct-horse', 'horse-battery', 'staple'], '***')
  t.equal(redact('a correct-horse-batterystaple b\ncorrect-horse staple'), 'a *** b\n*** ***')
})

t.test('a value shorter than the floor is not looked for in any spelling; one at the floor is', async (t) => {
  const short = 'x'.repeat(MIN_SECRET_LENGTH - 1)
  const text = `${short} ${Buffer.from(short).toString('hex')} ${Buffer.from(short).toString('base64')}`
  t.equal(redactor([short], '***')(text), text)
  t.equal(redactor(['x'.repeat(MIN_SECRET_LENGTH)], '***')(`a ${'x'.repeat(MIN_SECRET_LENGTH)} b`), 'a *** b')
  t.equal(redactor([], '***')(text), text, 'no secrets: the text as it is')
})
