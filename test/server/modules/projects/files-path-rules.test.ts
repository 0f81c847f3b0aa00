import t from 'tap'
import { AppError } from '../../../../server/domain/errors.js'
import { MAX_PATH_BYTES, normalizePath } from '../../../../server/modules/projects/files-service.js'

const ruleOf = (path: string): string | null => {
  try {
    normalizePath(path)
    return null
  } catch (err) {
    if (!(err instanceof AppError) || err.code !== 'VALIDATION_ERROR') throw err
    return (err.details as { rule: string }).rule
  }
}

t.test('good paths are kept, NFC-normalised', async (t) => {
  for (const p of [
    'a',
    'src/index.ts',
    'a b/c d.txt',
    '.gitignore',
    'dir/.hidden',
    '..x',
    'x..',
    'a.b/c',
    'ünï/cödé',
    '日本/語',
    '😀',
  ])
    t.equal(normalizePath(p), p, p)
  t.equal(normalizePath('cafe\u0301.txt'), 'caf\u00e9.txt', 'a decomposed é becomes one code point')
  t.equal(normalizePath('x'.repeat(MAX_PATH_BYTES)), 'x'.repeat(MAX_PATH_BYTES), 'exactly the byte limit')
})

t.test('each refusal names its rule', async (t) => {
  const cases: [string, string][] = [
    ['', 'empty'],
    ['/etc/passwd', 'absolute'],
    ['/', 'absolute'],
    ['..', 'dot-segment'],
    ['../x', 'dot-segment'],
    ['a/../b', 'dot-segment'],
    ['a/..', 'dot-segment'],
    ['.', 'dot-segment'],
    ['./a', 'dot-segment'],
    ['a/./b', 'dot-segment'],
    ['a//b', 'empty-segment'],
    ['a/', 'empty-segment'],
    ['a\\b', 'backslash'],
    ['..\\x', 'backslash'],
    ['a\u0000b', 'control-character'],
    ['a\nb', 'control-character'],
    ['a\tb', 'control-character'],
    ['a\u007fb', 'control-character'],
    ['a\u0085b', 'control-character'],
    ['a\ud800b', 'invalid-unicode'],
    ['x'.repeat(MAX_PATH_BYTES + 1), 'too-long'],
    ['é'.repeat(MAX_PATH_BYTES / 2 + 1), 'too-long'],
  ]
  for (const [p, rule] of cases) t.equal(ruleOf(p), rule, JSON.stringify(p.slice(0, 20)))
  // The byte limit counts UTF-8 after normalisation: 512 two-byte letters fit, 513 do not.
  t.equal(ruleOf('é'.repeat(512)), null)
})

t.test('the error names the field and the rule for the client', async (t) => {
  const err = t.throws(() => normalizePath('a/../b')) as AppError
  t.equal(err.code, 'VALIDATION_ERROR')
  t.match(err.details, { rule: 'dot-segment', errors: [{ field: 'path', rule: 'dot-segment' }] })
})
