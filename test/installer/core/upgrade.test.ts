import t from 'tap'
import { upgradeProblem } from '../../../installer/core/upgrade.js'

t.test(
  "a Compose upgrade follows the chart's guard: forward one minor (or to the next major's .0) at a time, never back",
  async (t) => {
    t.equal(upgradeProblem('0.1.0', '0.1.0'), null, 'a re-run')
    t.equal(upgradeProblem('0.1.0', '0.1.7'), null)
    t.equal(upgradeProblem('0.1.3', '0.2.0'), null)
    t.equal(upgradeProblem('1.9.2', '2.0.0'), null)
    t.equal(upgradeProblem('', '0.2.0'), null, 'nothing running: a first install')
    t.equal(
      upgradeProblem('0.3.0', '0.2.5'),
      'upgrade guard: going back from 0.3.0 to 0.2.5 is not supported (database migrations only go forward); restore a backup taken before the upgrade instead',
    )
    t.equal(
      upgradeProblem('0.1.0', '0.3.0'),
      'upgrade guard: 0.1.0 to 0.3.0 skips a minor version; upgrade to 0.2 first (or pass --allow-skip after reading the release notes)',
    )
    t.equal(
      upgradeProblem('1.4.0', '3.0.0'),
      'upgrade guard: 1.4.0 to 3.0.0 skips a major version; upgrade to 2.0 first (or pass --allow-skip after reading the release notes)',
    )
    t.match(upgradeProblem('1.4.0', '2.1.0'), /skips a major version/, 'a new major starts at its .0')
  },
)
