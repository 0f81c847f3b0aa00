// The check list reads without colour: status words, what was found, and for every problem what is
// needed and how to fix it; it fits an 80-column terminal.
import React from 'react'
import t from 'tap'
import { render } from 'ink-testing-library'
import { CheckList } from '../../../installer/ui/CheckList.js'
import type { CheckResult } from '../../../installer/core/checks/check.js'

const checks: CheckResult[] = [
  { id: 'cpu', title: 'CPU cores', status: 'pass', found: '8 cores', required: '4 minimum, 8 recommended', fix: '' },
  {
    id: 'memory',
    title: 'Memory',
    status: 'warn',
    found: '11.7 GiB',
    required: '8 GB minimum, 16 GB recommended',
    fix: 'Add memory for production loads',
  },
  {
    id: 'postgres.version',
    title: 'PostgreSQL version',
    status: 'fail',
    found: 'PostgreSQL 13.4',
    required: 'PostgreSQL 15 or newer',
    fix: 'Upgrade PostgreSQL to 15 or newer',
  },
]

t.test('each check shows its status in words, and problems say what is needed and how to fix them', async (t) => {
  const { lastFrame, unmount } = render(<CheckList checks={checks} width={80} />)
  t.teardown(unmount)
  const frame = lastFrame() ?? ''
  t.match(frame, /\[PASS\] CPU cores: 8 cores/)
  t.match(frame, /\[WARN\] Memory: 11\.7 GiB/)
  t.match(frame, /\[FAIL\] PostgreSQL version: PostgreSQL 13\.4/)
  t.match(frame, /needs: PostgreSQL 15 or newer/)
  t.match(frame, /fix: Upgrade PostgreSQL to 15 or newer/)
  t.notMatch(frame, /fix: *\n/, 'no empty fix line for a passing check')
  t.match(frame.replace(/\s+/g, ' '), /1 passed, 1 warnings, 1 failed\. Some minimums are not met/)
  for (const line of frame.split('\n')) t.ok(line.length <= 80, `fits 80 columns: ${line}`)
})

t.test('all passing says so', async (t) => {
  const { lastFrame, unmount } = render(<CheckList checks={[checks[0]!]} />)
  t.teardown(unmount)
  t.match(lastFrame() ?? '', /1 passed, 0 warnings, 0 failed\. Every check passed\./)
})

t.test(
  'on the interactive screen, a problem and its fix are wrapped at 80 columns, never cut, within the rows',
  async (t) => {
    const long: CheckResult = {
      id: 'postgres.connect',
      title: 'PostgreSQL reachable',
      status: 'fail',
      found: 'password authentication failed for user "atrium" at db.internal.example:5432',
      required: 'reachable',
      fix: 'Check DATABASE_URL: the user, the password and that pg_hba.conf lets this host in (host atrium atrium 10.0.0.0/8 scram-sha-256), then run the checks again',
    }
    const { lastFrame, unmount } = render(<CheckList checks={[checks[0]!, long]} width={80} rows={23} />)
    t.teardown(unmount)
    const frame = lastFrame() ?? ''
    for (const line of frame.split('\n')) t.ok(line.length <= 80, `fits 80 columns: ${line}`)
    const flat = frame.replace(/\s+/g, ' ')
    t.ok(flat.includes(`fix: ${long.fix}`), 'the whole fix')
    t.ok(flat.includes(long.found), 'the whole finding')
    t.match(frame, /^ {7}fix: Check DATABASE_URL/m, 'under its check')
  },
)
