import { chmodSync, lstatSync, mkdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import pino from 'pino'
import t from 'tap'
import { privateDir, tightenTree } from '../../../server/platform/data-dir.js'
import { tempDir } from '../../helpers/platform.js'

const modeOf = (path: string) => statSync(path).mode & 0o7777
const capture = () => {
  const lines: string[] = []
  return { lines, log: pino({ level: 'info' }, { write: (l: string) => void lines.push(l) }) }
}

t.test(
  'a data folder is created private, and an existing one open to others is tightened, with a warning',
  async (t) => {
    const { lines, log } = capture()
    const fresh = join(tempDir(t), 'a', 'b')
    t.equal(privateDir(fresh, log), fresh)
    t.equal(modeOf(fresh), 0o700, 'created 0700')
    t.same(lines, [], 'nothing to report')

    const open = join(tempDir(t), 'data')
    mkdirSync(open)
    chmodSync(open, 0o2775) // as a volume prepared for a group might be
    privateDir(open, log)
    t.equal(modeOf(open), 0o2700, 'group and other permissions removed, the rest kept')
    t.equal(lines.length, 1)
    t.match(JSON.parse(lines[0]!), {
      level: 40,
      path: open,
      was: '2775',
      now: '2700',
      msg: /open to other local users: made private/,
    })

    privateDir(open, log)
    t.equal(lines.length, 1, 'a private folder is left as it is, silently')
  },
)

t.test(
  'everything under a folder loses group and other permissions; symbolic links under it and what they point to are left alone',
  async (t) => {
    const { lines, log } = capture()
    const root = tempDir(t)
    const outside = join(tempDir(t), 'outside.txt')
    writeFileSync(outside, 'not ours to change')
    chmodSync(outside, 0o644)
    const files: [string, number, number][] = [
      ['loose.txt', 0o666, 0o600],
      ['sub/deeper/key', 0o644, 0o600],
      ['sub/run.sh', 0o755, 0o700],
      ['private.txt', 0o600, 0o600],
    ]
    mkdirSync(join(root, 'sub', 'deeper'), { recursive: true })
    for (const [path, mode] of files) {
      writeFileSync(join(root, path), 'x')
      chmodSync(join(root, path), mode)
    }
    for (const d of ['sub', 'sub/deeper']) chmodSync(join(root, d), 0o777)
    chmodSync(root, 0o755)
    symlinkSync(outside, join(root, 'link'))
    const alias = join(tempDir(t), 'alias') // DATA_DIR may itself be a link to the real folder
    symlinkSync(root, alias)

    tightenTree(alias, log)
    for (const [path, , want] of files) t.equal(modeOf(join(root, path)), want, path)
    for (const d of ['', 'sub', 'sub/deeper']) t.equal(modeOf(join(root, d)), 0o700, `folder ${d || '.'}`)
    t.ok(lstatSync(join(root, 'link')).isSymbolicLink())
    t.equal(modeOf(outside), 0o644, 'the target of a link is not touched')
    t.match(JSON.parse(lines[0]!), { level: 30, path: alias, tightened: 6 })

    tightenTree(join(root, 'loose.txt'), log)
    t.equal(lines.length, 1, 'a single file may be given; already private, nothing to report')
  },
)
