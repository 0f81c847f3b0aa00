// Text and JSON the database can store. Text PostgreSQL cannot store: NUL, which JSON allows (\u0000), and a surrogate
// without its pair (\ud800 alone), which JSON also allows but is not Unicode: text columns would silently store U+FFFD
// and jsonb refuses it outright. What a client sends with them is refused (the request's validation); what a model or a
// store sends is made storable (storableText), since no one can be asked to send it again.

const UNPAIRED_RE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/
// eslint-disable-next-line no-control-regex -- matching NUL is the point
const UNSTORABLE_RE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g

/** Why `s` cannot be stored as text, or null when it can. */
export function textProblem(s: string): string | null {
  if (s.includes('\u0000')) return 'must not contain NUL (\\u0000) characters'
  if (UNPAIRED_RE.test(s)) return 'must not contain unpaired surrogates (\\ud800-\\udfff): it is not Unicode text'
  return null
}

/**
 * The first `max` UTF-16 units of `s`, or one fewer where the cut would fall between the halves of a
 * surrogate pair (an emoji): a half alone is not text, and jsonb refuses it.
 */
export function sliceText(s: string, max: number): string {
  if (s.length <= max) return s
  const last = s.charCodeAt(max - 1)
  return s.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max)
}

/** `s` with every NUL and unpaired surrogate replaced by U+FFFD (the replacement character). */
export const storableText = (s: string): string => s.replace(UNSTORABLE_RE, '\ufffd')

/**
 * Text as JSON writes it inside a string (control characters and unpaired surrogates escaped): safe to store and show
 * whatever it held.
 */
export const escapedText = (s: string): string => JSON.stringify(s).slice(1, -1)

/**
 * The first string or key in a value holding text PostgreSQL cannot store, with its path and why;
 * null when there is none. Walks with its own stack, not the call stack, so no value is too deep.
 */
export function findUnstorableText(value: unknown, path = 'body'): { field: string; message: string } | null {
  const todo: { value: unknown; path: string; key?: string }[] = [{ value, path }]
  for (let item = todo.pop(); item; item = todo.pop()) {
    const { value: v, path: at, key } = item
    const problem = (key === undefined ? null : textProblem(key)) ?? (typeof v === 'string' ? textProblem(v) : null)
    if (problem) return { field: at, message: problem }
    if (Array.isArray(v)) {
      // pushed in reverse so they come off in order: the first one in the text is the one named
      for (let i = v.length - 1; i >= 0; i--) todo.push({ value: v[i], path: `${at}.${i}` })
    } else if (v && typeof v === 'object' && !Buffer.isBuffer(v)) {
      // (a raw body, such as a file upload, is bytes: no text in it is stored as text)
      const entries = Object.entries(v)
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, child] = entries[i]!
        todo.push({ value: child, path: `${at}.${k}`, key: k })
      }
    }
  }
  return null
}

/**
 * A JSON value (at most MAX_JSON_DEPTH deep) with every string and key made storable; the value itself when nothing
 * needed it.
 */
export function storableJson<T>(value: T): T {
  if (findUnstorableText(value) === null) return value
  const copy = (v: unknown): unknown => {
    if (typeof v === 'string') return storableText(v)
    if (Array.isArray(v)) return v.map(copy)
    if (v && typeof v === 'object')
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [storableText(k), copy(x)]))
    return v
  }
  return copy(value) as T
}

/**
 * How deeply a JSON value may nest arrays and objects (the outermost one is level 1). Real bodies
 * and tool calls nest a few levels; the limit keeps every recursive walk of a value (validation,
 * JSON.stringify, PostgreSQL's jsonb) far from its stack limit.
 */
export const MAX_JSON_DEPTH = 64

/**
 * Whether JSON text nests arrays and objects more than `max` levels deep: one pass over the text,
 * skipping strings, so it is decided before anything builds or walks the nested value. Malformed
 * text gets some answer; the parser refuses it anyway.
 */
export function jsonTooDeep(text: string, max = MAX_JSON_DEPTH): boolean {
  let depth = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      // a string: jump to its closing quote, past escaped characters
      for (i++; i < text.length; i++) {
        const s = text.charCodeAt(i)
        if (s === 0x5c) i++
        else if (s === 0x22) break
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true
    } else if (c === 0x5d || c === 0x7d) {
      depth--
    }
  }
  return false
}
