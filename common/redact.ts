// Finding secret values in text in every spelling a program is likely to print them in: raw,
// percent-encoded (either case of hex), JSON-escaped (\" \\ \/ \n, \uXXXX for any character) or any
// mix of those; as hex (lower or upper case) of the value, and of the bytes it stands for when it
// is itself hex or base64 (a key); as base64 or base64url, padded or not, alone or inside a longer
// encoded value (an HTTP Basic credential is base64 of `user:password`, a Kubernetes Secret holds
// whole files in base64); and split across lines (PEM's 64- or 76-column lines, a log's wrapping).
//
// One pass over each text, whatever the number of secrets. A regular expression with every
// spelling of every secret is what this replaces: past a few secrets V8 runs such a pattern at
// seconds per megabyte, and its wrapped forms (a gap allowed between any two characters) at tens
// of seconds. Instead the text is read once into a canonical byte form (escapes decoded, line
// breaks and the blanks around them dropped, the characters that base64url, form encoding and
// base64 spell differently folded into one), each secret's spellings are reduced the same way, and
// an Aho-Corasick automaton over them finds every occurrence in time linear in the text.

/**
 * Shorter values are not searched for: they would match all over, and guessing one is trivial
 * anyway. Their encoded forms are as long or longer, so the same floor serves those.
 */
export const MIN_SECRET_LENGTH = 4

/**
 * An encoded spelling (hex, base64) carries at least this many of the value's bits, or it would turn up in any long
 * enough hex or base64 text.
 */
const MIN_BITS = 32

/**
 * Values decoded as a key (hex or base64) when they stand for at least this many bytes: shorter, any word of four
 * letters would.
 */
const MIN_KEY_BYTES = 16

/**
 * What a byte becomes in the canonical form: a space, `+` (a space in form encoding, 62 in base64)
 * and `-` (62 in base64url) are one; `_` (63 in base64url) is `/`. A secret is reduced the same
 * way, so the only cost is a match where a secret's `-` stood as a space, which is still the secret.
 */
const FOLD = Uint8Array.from({ length: 256 }, (_, b) => (b === 0x20 || b === 0x2d ? 0x2b : b === 0x5f ? 0x2f : b))
const JSON_ESCAPES: Record<string, number> = {
  '"': 0x22,
  '\\': 0x5c,
  '/': 0x2f,
  b: 0x08,
  f: 0x0c,
  n: 0x0a,
  r: 0x0d,
  t: 0x09,
}

/** A text in canonical form: its bytes, and for each the span of the text it was read from. */
interface Canonical {
  bytes: Uint8Array
  from: Int32Array
  to: Int32Array
  length: number
}

const hexValue = (c: number) =>
  c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : c >= 0x41 && c <= 0x46 ? c - 0x37 : -1
const hexAt = (text: string, at: number, digits: number) => {
  let value = 0
  for (let i = at; i < at + digits; i++) {
    const d = i < text.length ? hexValue(text.charCodeAt(i)) : -1
    if (d < 0) return -1
    value = value * 16 + d
  }
  return value
}
const isHigh = (u: number) => u >= 0xd800 && u <= 0xdbff
const isLow = (u: number) => u >= 0xdc00 && u <= 0xdfff

/**
 * The canonical form of a text: %XX (with `percent`), and \uXXXX (a surrogate pair of them as one
 * character) and JSON's short escapes (with `escapes`), read as what they stand for; characters as
 * UTF-8; every line break dropped with the blanks on either side (a wrapped value reads as one, and
 * a JSON string's \n is a line break like any other); then folded (FOLD).
 */
function canonical(text: string, decode: { percent: boolean; escapes: boolean }): Canonical {
  let capacity = text.length + 16
  let bytes = new Uint8Array(capacity)
  let from = new Int32Array(capacity)
  let to = new Int32Array(capacity)
  let n = 0
  let blanks = 0 // blanks at the end so far, dropped if a line break follows
  let wrapped = false // just after a line break: blanks are dropped
  const push = (b: number, start: number, end: number) => {
    if (b === 0x0a || b === 0x0d) {
      n -= blanks
      blanks = 0
      wrapped = true
      return
    }
    if (b === 0x20 || b === 0x09) {
      if (wrapped) return
      blanks++
    } else {
      blanks = 0
      wrapped = false
    }
    if (n === capacity) {
      capacity *= 2
      const grown = [new Uint8Array(capacity), new Int32Array(capacity), new Int32Array(capacity)] as const
      grown[0].set(bytes)
      grown[1].set(from)
      grown[2].set(to)
      ;[bytes, from, to] = grown
    }
    bytes[n] = FOLD[b]!
    from[n] = start
    to[n] = end
    n++
  }
  // A lone surrogate becomes U+FFFD, as Buffer.from makes it of a secret.
  const pushCharacter = (cp: number, start: number, end: number) => {
    if (cp < 0x80) push(cp, start, end)
    else if (cp < 0x800) {
      push(0xc0 | (cp >> 6), start, end)
      push(0x80 | (cp & 63), start, end)
    } else if (cp < 0x10000) {
      if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd
      push(0xe0 | (cp >> 12), start, end)
      push(0x80 | ((cp >> 6) & 63), start, end)
      push(0x80 | (cp & 63), start, end)
    } else {
      push(0xf0 | (cp >> 18), start, end)
      push(0x80 | ((cp >> 12) & 63), start, end)
      push(0x80 | ((cp >> 6) & 63), start, end)
      push(0x80 | (cp & 63), start, end)
    }
  }
  for (let i = 0; i < text.length;) {
    const c = text.charCodeAt(i)
    if (decode.percent && c === 0x25) {
      const byte = hexAt(text, i + 1, 2)
      if (byte >= 0) {
        push(byte, i, i + 3)
        i += 3
        continue
      }
    }
    if (decode.escapes && c === 0x5c) {
      const unit = text[i + 1] === 'u' ? hexAt(text, i + 2, 4) : -1
      if (unit >= 0) {
        const low = isHigh(unit) && text.startsWith('\\u', i + 6) ? hexAt(text, i + 8, 4) : -1
        const pair = isLow(low)
        pushCharacter(pair ? 0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00) : unit, i, i + (pair ? 12 : 6))
        i += pair ? 12 : 6
        continue
      }
      const short = JSON_ESCAPES[text[i + 1] ?? '']
      if (short !== undefined) {
        push(short, i, i + 2)
        i += 2
        continue
      }
    }
    const pair = isHigh(c) && isLow(text.charCodeAt(i + 1))
    pushCharacter(pair ? text.codePointAt(i)! : c, i, i + (pair ? 2 : 1))
    i += pair ? 2 : 1
  }
  return { bytes, from, to, length: n }
}

/**
 * A spelling to look for: its canonical bytes, and for a base64 one the characters that may stand
 * just before and after it, each holding some of the value's bits and some of its neighbours'.
 */
interface Needle {
  bytes: Uint8Array
  head?: Uint8Array
  tail?: Uint8Array
}

const folded = (ascii: string): Needle => ({ bytes: Uint8Array.from(ascii, (c) => FOLD[c.charCodeAt(0)]!) })
const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'

/**
 * The value's bytes in base64 inside any longer value: each of the three places it may start in a
 * 3-byte group gives other characters. Those carrying only the value's bits are matched exactly;
 * the one at either end that shares its bits with a neighbour's is matched by the characters it
 * can be (`head`, `tail`). So a Basic credential is found whatever the user name before the
 * password, and padding or its absence makes no difference.
 */
function base64Needles(value: Uint8Array): Needle[] {
  return [0, 1, 2].map((shift) => {
    const lo = 8 * shift
    const hi = lo + 8 * value.length
    const first = Math.floor(lo / 6)
    const last = Math.ceil(hi / 6) - 1
    // With zero bytes for neighbours: the exact characters, and the value's bits in the partial ones.
    const chars = Buffer.concat([Buffer.alloc(shift), value, Buffer.alloc(2)]).toString('base64')
    const partial = (at: number, known: number, mask: number) => {
      if (known >= 6) return undefined
      const bits = B64.indexOf(chars[at]!) & mask
      return Uint8Array.from(
        { length: 256 },
        (_, b) => +[...B64].some((c, v) => (v & mask) === bits && FOLD[c.charCodeAt(0)] === b),
      )
    }
    const headBits = 6 * (first + 1) - lo
    const tailBits = hi - 6 * last
    const head = partial(first, headBits, (1 << headBits) - 1)
    const tail = partial(last, tailBits, ((1 << tailBits) - 1) << (6 - tailBits))
    return { ...folded(chars.slice(head ? first + 1 : first, tail ? last : last + 1)), head, tail }
  })
}

/**
 * The bytes a value stands for when it is a key: hex, or base64 (or base64url) that decodes and encodes back to itself.
 */
function keyBytes(value: string): Uint8Array | null {
  if (/^(?:[0-9a-f]{2})+$/i.test(value)) return value.length >= 2 * MIN_KEY_BYTES ? Buffer.from(value, 'hex') : null
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(value)) return null
  const bytes = Buffer.from(value, 'base64')
  const same = bytes.toString('base64url') === value.replace(/=+$/, '').replace(/\+/g, '-').replace(/\//g, '_')
  return same && bytes.length >= MIN_KEY_BYTES ? bytes : null
}

const DECODE_ALL = { percent: true, escapes: true }

/**
 * Every spelling of a secret (see the top of this file), as needles. Its text as a text holding it
 * reads once decoded: printed as it is (what in it reads like an escape decoded too), JSON-escaped
 * (its %XX still decoded), or percent- or \u-escaped throughout (nothing of it decoded further).
 * For a secret without `%` or `\` the three are one.
 */
function needlesOf(secret: string): Needle[] {
  const texts = new Map<string, Needle>()
  for (const decode of [DECODE_ALL, { percent: true, escapes: false }, { percent: false, escapes: false }]) {
    const c = canonical(secret, decode)
    const bytes = c.bytes.slice(0, c.length)
    texts.set(Buffer.from(bytes).toString('latin1'), { bytes })
  }
  const key = keyBytes(secret)
  const binary = [Buffer.from(secret), ...(key ? [key] : [])].flatMap((bytes) => {
    const hex = Buffer.from(bytes).toString('hex')
    return [folded(hex), folded(hex.toUpperCase())]
      .filter((n) => 4 * n.bytes.length >= MIN_BITS)
      .concat(base64Needles(bytes).filter((n) => 6 * n.bytes.length >= MIN_BITS))
  })
  return [...[...texts.values()].filter((n) => n.bytes.length >= MIN_SECRET_LENGTH), ...binary]
}

/**
 * An Aho-Corasick automaton over the needles: one step per byte of text, a failed step falling
 * back along the suffix links (linear in the text overall). Its size is the needles' total length,
 * nine or so times the secrets' (a few thousand nodes for a site). Returns the spans of the text
 * the needles were found in, sorted and merged.
 */
function finder(needles: Needle[]): (text: Canonical) => [number, number][] {
  const children: Map<number, number>[] = [new Map()]
  const found: (number[] | null)[] = [null]
  needles.forEach((needle, id) => {
    let node = 0
    for (const b of needle.bytes) {
      let child = children[node]!.get(b)
      if (child === undefined) {
        child = children.length
        children.push(new Map())
        found.push(null)
        children[node]!.set(b, child)
      }
      node = child
    }
    ;(found[node] ??= []).push(id)
  })
  const fail = new Int32Array(children.length)
  const step = (node: number, b: number): number => {
    for (;;) {
      const child = children[node]!.get(b)
      if (child !== undefined) return child
      if (node === 0) return 0
      node = fail[node]!
    }
  }
  // Breadth first, so a node's suffix link is set before its children's. The needles found at a
  // node: its own, else those its longest suffix finds (shorter ones lie inside the longer's span).
  const queue = [0]
  for (let q = 0; q < queue.length; q++) {
    const node = queue[q]!
    for (const [b, child] of children[node]!) {
      fail[child] = node === 0 ? 0 : step(fail[node]!, b)
      found[child] ??= found[fail[child]!] ?? null
      queue.push(child)
    }
  }
  return (text) => {
    const spans: [number, number][] = []
    let state = 0
    for (let j = 0; j < text.length; j++) {
      state = step(state, text.bytes[j]!)
      const ids = found[state]
      if (!ids) continue
      for (const id of ids) {
        const needle = needles[id]!
        let start = j + 1 - needle.bytes.length
        let end = j + 1
        if (needle.head && start > 0 && needle.head[text.bytes[start - 1]!]) start--
        if (needle.tail && end < text.length && needle.tail[text.bytes[end]!]) end++
        spans.push([text.from[start]!, text.to[end - 1]!])
      }
    }
    spans.sort((a, b) => a[0] - b[0])
    const merged: [number, number][] = []
    for (const [start, end] of spans) {
      const last = merged.at(-1)
      if (last && start <= last[1]) last[1] = Math.max(last[1], end)
      else merged.push([start, end])
    }
    return merged
  }
}

/**
 * Replaces every secret (of MIN_SECRET_LENGTH or more characters) in a text, in any of its spellings, by `replacement`.
 */
export function redactor(secrets: Iterable<string>, replacement: string): (text: string) => string {
  const needles = [...new Set(secrets)].filter((s) => s.length >= MIN_SECRET_LENGTH).flatMap(needlesOf)
  if (!needles.length) return (text) => text
  const find = finder(needles)
  return (text) => {
    let out = ''
    let at = 0
    for (const [start, end] of find(canonical(text, DECODE_ALL))) {
      out += text.slice(at, start) + replacement
      at = end
    }
    return at ? out + text.slice(at) : text
  }
}
