// The one constructor of a check result: a fix exactly when the check did not pass, the one meant
// for its status; and the overall status is the worst one.
import t from 'tap'
import { check, grade, overallStatus } from '../../../../installer/core/checks/check.js'

t.test('a passing check never carries a fix; one that did not pass carries the one for its status', async (t) => {
  const fixes = { warn: 'recommended: add memory', fail: 'required: add memory' }
  t.same(check('memory', 'Memory', 'pass', '16 GiB', '8 GB', fixes), {
    id: 'memory',
    title: 'Memory',
    status: 'pass',
    found: '16 GiB',
    required: '8 GB',
    fix: '',
  })
  t.equal(check('memory', 'Memory', 'warn', '12 GiB', '8 GB', fixes).fix, 'recommended: add memory')
  t.equal(check('memory', 'Memory', 'fail', '4 GiB', '8 GB', fixes).fix, 'required: add memory')
  t.equal(check('x', 'X', 'pass', 'ok', 'ok', 'do something').fix, '', 'a text fix is dropped on a pass too')
  t.equal(check('x', 'X', 'fail', 'bad', 'good', 'do something').fix, 'do something')
  t.equal(
    check('x', 'X', 'warn', 'meh', 'good', { fail: 'the only fix given' }).fix,
    'the only fix given',
    'a status without its own fix takes the other',
  )
  t.equal(check('x', 'X', 'fail', 'bad', 'good').fix, '', 'no fix given: empty')
})

t.test('the overall status is the worst of the checks; none is a pass', async (t) => {
  const at = (status: 'pass' | 'warn' | 'fail') => check(status, status, status, '', '')
  t.equal(overallStatus([]), 'pass')
  t.equal(overallStatus([at('pass'), at('warn')]), 'warn')
  t.equal(overallStatus([at('warn'), at('fail'), at('pass')]), 'fail')
  t.same(
    [3, 4, 7, 8].map((n) => grade(n, 4, 8)),
    ['fail', 'warn', 'warn', 'pass'],
  )
})
