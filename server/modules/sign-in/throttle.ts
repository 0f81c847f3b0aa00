// Password sign-in throttling, after OWASP's Authentication Cheat Sheet and "Blocking Brute Force
// Attacks": slow guessing down without letting an attacker lock the owner out.
//
// - Per address: failed sign-ins from it, for any account. Past the limit its attempts wait out the
//   window (429), except from a device the account trusts.
// - Per account and address: consecutive failures. From the fifth on, that pair waits 30 s,
//   doubling with each further failure up to 15 minutes; a success clears it. An attacker slows
//   down their own address only: the owner elsewhere is not affected.
// - Per account: failures from anywhere (slow guessing spread over many addresses). Past the
//   limit, only devices the account trusts may try until the window ends.
// - A trusted device: a browser that signed in to the account before holds a device cookie
//   (tagged, bound to the account). It skips the address and account limits and has its own
//   instead: after that many failures it is trusted no more.
//
// - Unlocking: OWASP asks for a way out of an account lockout other than waiting, and the owner
//   may be the organization's only administrator. An operator lifts it with the admin CLI
//   (`unlock-sign-in`, unlock.ts): the account's count and the waits of every address that failed
//   for it go. Not a tenant's admin: the throttle counts the address typed, whose accounts in other
//   organizations it protects too.
//
// The counters live in the rate-limit store (platform/counters.ts: Redis keys that expire with
// their window), so a flood of made-up addresses leaves bounded state. Password checks (scrypt,
// 32 MiB and tens of milliseconds each) run through a gate: a few at a time per replica, a bounded
// queue in which trusted devices go first, 503 beyond it; an address that has been failing holds
// at most two places (429 beyond), so one client's flood of guesses takes two places, not the queue,
// while clients sharing a clean address (an office) wait their turn as before.
import { createHash } from 'node:crypto'
import { availableParallelism } from 'node:os'
import { AppError } from '../../domain/errors.js'
import { randomBase62 } from '../../../common/ids.js'
import type { Counters, CounterState, WindowCounter } from '../../platform/counters.js'
import { limitExceeded } from '../../domain/rate-limit.js'
import type { CredentialTags } from '../../platform/credential-tags.js'

export interface LoginLimits {
  failuresPerIp: number
  ipWindowSeconds: number
  /** Consecutive failures of one account from one address before it has to wait. */
  pairFreeFailures: number
  pairFirstWaitSeconds: number
  pairMaxWaitSeconds: number
  failuresPerAccount: number
  accountWindowSeconds: number
  failuresPerDevice: number
  deviceWindowSeconds: number
  /** Password checks at once per replica, and how many may wait for one. */
  passwordChecks: number
  passwordQueue: number
  /** Password checks an address that has been failing may have running or waiting at once (trusted devices aside). */
  passwordChecksPerIp: number
}

export const LOGIN_LIMITS: LoginLimits = {
  failuresPerIp: 50,
  ipWindowSeconds: 900,
  pairFreeFailures: 5,
  pairFirstWaitSeconds: 30,
  pairMaxWaitSeconds: 900,
  failuresPerAccount: 100,
  accountWindowSeconds: 3600,
  failuresPerDevice: 10,
  deviceWindowSeconds: 3600,
  passwordChecks: Math.max(1, availableParallelism()),
  passwordQueue: 32,
  passwordChecksPerIp: 2,
}

/** What the throttle knows of an address typed (the account): a hash, whether or not an account has it. */
export const accountKey = (email: string) =>
  createHash('sha256').update('atrium-login:').update(email.trim().toLowerCase()).digest('hex')

/**
 * Who is trying: the address, the account (accountKey of the address typed), the device cookie's id when it is one this
 * account trusts.
 */
export interface Attempt {
  ip: string
  account: string
  device: string | null
}

/** What the check found: whether the device is trusted, whether the address has been failing. */
export interface Standing {
  trusted: boolean
  suspect: boolean
}

export interface LoginThrottle {
  /** 429 when this attempt must wait (the same for real and made-up accounts). */
  check(a: Attempt): Promise<Standing>
  failed(a: Attempt, s: Standing): Promise<void>
  succeeded(a: Attempt): Promise<void>
  /**
   * Runs the attempt's password checks through the gate (one place per attempt, trusted devices
   * first); 503 when the queue is full; 429 beyond two places for an address that has been failing.
   */
  passwordCheck<T>(a: Attempt, s: Standing, check: () => Promise<T>): Promise<T>
  /** Lifts the account's limits: its failures from everywhere, and every address's streak and wait for it. */
  unlock(account: string): Promise<Unlocked>
}

/** What an unlock cleared. */
export interface Unlocked {
  /** Failures the account had in its window, from every address. */
  failures: number
  /** Whether they had reached the account's limit (only trusted devices could try). */
  locked: boolean
  /** Addresses with failures in a row for the account, and of them those that had to wait. */
  addresses: number
  waiting: number
}

/** Failures of an address (in its window) from which it holds at most passwordChecksPerIp places. */
export const SUSPECT_FAILURES = 5

const over = (state: CounterState | null, counter: WindowCounter) =>
  state !== null && state.consumedPoints >= counter.points
const tooMany = (state: CounterState, c: WindowCounter) =>
  limitExceeded(
    state,
    { max: c.points, windowSeconds: c.windowSeconds, reason: 'sign_in_throttled' },
    (retry) => `Too many failed sign-ins; try again in ${retry} s`,
  )

export function loginThrottle(o: {
  counters: Counters
  keyPrefix: string
  limits?: Partial<LoginLimits>
}): LoginThrottle {
  const l = { ...LOGIN_LIMITS, ...o.limits }
  const counter = (name: string, points: number, windowSeconds: number) =>
    o.counters.counter({ points, windowSeconds, keyPrefix: `${o.keyPrefix}:login:${name}`, name: `login:${name}` })
  const ip = counter('ip', l.failuresPerIp, l.ipWindowSeconds)
  const account = counter('account', l.failuresPerAccount, l.accountWindowSeconds)
  const device = counter('device', l.failuresPerDevice, l.deviceWindowSeconds)
  // Consecutive failures of a pair (each failure keeps the streak for the longest wait again), and
  // its wait: blocked keys.
  const streak = counter('pair', Number.MAX_SAFE_INTEGER, l.pairMaxWaitSeconds * 4)
  const wait = counter('pair-wait', 1, l.pairMaxWaitSeconds)
  const pairOf = (a: Attempt) => `${a.account}:${a.ip}`
  const gate = workGate(l.passwordChecks, l.passwordQueue, l.passwordChecksPerIp)

  return {
    async check(a) {
      // A device the account trusts, and that has not failed too often, skips the address and account limits.
      const [byDevice, byIp, byAccount, waiting] = await Promise.all([
        a.device === null ? null : device.get(a.device),
        ip.get(a.ip),
        account.get(a.account),
        wait.get(pairOf(a)),
      ])
      const trusted = a.device !== null && !over(byDevice, device)
      if (!trusted) {
        for (const [state, c] of [
          [byIp, ip],
          [byAccount, account],
          [waiting, wait],
        ] as const) {
          if (state && over(state, c)) throw tooMany(state, c)
        }
      }
      return { trusted, suspect: (byIp?.consumedPoints ?? 0) >= SUSPECT_FAILURES }
    },
    async failed(a, s) {
      const [, , , run] = await Promise.all([
        ip.hit(a.ip),
        account.hit(a.account),
        s.trusted ? device.hit(a.device!) : null,
        s.trusted ? null : streak.hit(pairOf(a)),
      ])
      const n = run?.consumedPoints ?? 0
      if (n >= l.pairFreeFailures) {
        await Promise.all([
          streak.set(pairOf(a), n),
          wait.block(pairOf(a), Math.min(l.pairMaxWaitSeconds, l.pairFirstWaitSeconds * 2 ** (n - l.pairFreeFailures))),
        ])
      }
    },
    async succeeded(a) {
      await Promise.all([streak.delete(pairOf(a)), wait.delete(pairOf(a))])
    },
    passwordCheck(a, s, check) {
      return gate(s.suspect && !s.trusted ? a.ip : null, s.trusted, check)
    },
    async unlock(key) {
      const state = await account.get(key)
      // deleteStartingWith, which fails rather than fall back to memory: an account's key (a hash,
      // all of one length) starts only itself; a pair's is the account's, then the address (pairOf).
      const [, addresses, waiting] = await Promise.all([
        account.deleteStartingWith(key),
        streak.deleteStartingWith(`${key}:`),
        wait.deleteStartingWith(`${key}:`),
      ])
      return {
        failures: state?.consumedPoints ?? 0,
        locked: over(state, account),
        addresses: addresses.length,
        waiting: waiting.length,
      }
    },
  }
}

/**
 * At most `concurrency` tasks at once and `queue` waiting, priority ones first (503 beyond); a key
 * (an address) at most `perKey` running or waiting (429 beyond), a null key without that bound.
 */
export function workGate(concurrency: number, queue: number, perKey = Infinity) {
  let running = 0
  const first: (() => void)[] = []
  const rest: (() => void)[] = []
  const held = new Map<string, number>()
  const next = () => {
    const go = first.shift() ?? rest.shift()
    if (go) go()
    else running--
  }
  return async <T>(key: string | null, priority: boolean, task: () => Promise<T>): Promise<T> => {
    const mine = key === null ? 0 : (held.get(key) ?? 0)
    if (mine >= perKey) {
      throw new AppError(
        'RATE_LIMIT_EXCEEDED',
        'Too many sign-ins at once from this address; retry in a moment',
        { reason: 'sign_in_busy', retryAfterSeconds: 1 },
        { 'retry-after': '1' },
      )
    }
    if (running >= concurrency && first.length + rest.length >= queue) {
      throw new AppError(
        'SERVICE_UNAVAILABLE',
        'Too many sign-ins at once; retry in a moment',
        { reason: 'sign_in_busy' },
        { 'retry-after': '1' },
      )
    }
    if (key !== null) held.set(key, mine + 1)
    try {
      if (running < concurrency) running++
      // A finishing task hands its slot over (running stays the same).
      else await new Promise<void>((resolve) => (priority ? first : rest).push(resolve))
      try {
        return await task()
      } finally {
        next()
      }
    } finally {
      if (key !== null) {
        const left = (held.get(key) ?? 1) - 1
        if (left) held.set(key, left)
        else held.delete(key)
      }
    }
  }
}

/**
 * Trusted-device cookies: `atd_<account>_<id>` and a tag (platform/credential-tags.ts), bound to one
 * account (the hash of its address). Made here, they need no storage: the tag proves them.
 */
export const DEVICE_COOKIE = 'atrium_device'
export const DEVICE_COOKIE_DAYS = 180
const DEVICE_RE = /^atd_([0-9a-f]{32})_([A-Za-z0-9]{22})[A-Za-z0-9]{8}$/

export function deviceCookies(tags: CredentialTags) {
  return {
    issue: (account: string) => tags.sign(`atd_${account.slice(0, 32)}_${randomBase62(22)}`),
    /** The device id when the cookie is one of ours for this account; null otherwise. */
    trustedFor(cookie: string | undefined, account: string): string | null {
      const m = cookie ? DEVICE_RE.exec(cookie) : null
      return m && m[1] === account.slice(0, 32) && tags.verify(cookie!) ? m[2]! : null
    },
  }
}
