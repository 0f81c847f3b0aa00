// Reads raw TAP (tap --output-file) on stdin and prints "N passed, N failed".
// A test is an innermost t.test (or a whole file that has none, or one that crashed before its
// first test). A parent that fails while all its children passed (an error thrown in teardown,
// say) counts as one more failure. Skipped and todo tests count as neither.
import { Parser } from 'tap-parser'

let passed = 0
let failed = 0
const watch = (p, depth) => {
  let lastChild = null
  p.on('child', (c) => {
    p.hasSub = true
    lastChild = c
    watch(c, depth + 1)
  })
  p.on('assert', (res) => {
    if (!(res.closingTestPoint || depth === 0)) return // a plain assertion inside a test
    if (res.skip || res.todo) return
    const child = lastChild
    lastChild = null
    if (!child || !child.hasSub) {
      if (res.ok) passed++
      else failed++
    } else if (!res.ok && !child.failedBelow) failed++
    if (!res.ok || child?.failedBelow) p.failedBelow = true
  })
}
const parser = new Parser()
watch(parser, 0)
parser.on('complete', () => console.log(`${passed} passed, ${failed} failed`))
process.stdin.pipe(parser)
