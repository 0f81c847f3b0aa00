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
// The counters live in the rate-limit store (platform/counters.ts: Redis keys that expire with
// their window), so a flood of made-up addresses leaves bounded state. Password checks (scrypt,
// 32 MiB and tens of milliseconds each) run through a gate: a few at a time per replica, a bounded
// queue in which trusted devices go first, 503 beyond it, and at most two per address in it (429
// beyond), so one client's flood takes two places, not the queue.
import { availableParallelism } from 'node:os'
import { AppError } from '../../http/errors.js'
import { randomBase62 } from '../../ids.js'
import { CounterState, type Counters, type WindowCounter } from '../../platform/counters.js'
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
  /** Password checks one address may have running or waiting at once (trusted devices aside). */
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

/** Who is trying: the address, the account (a hash of the address typed, real or not), the device cookie's id when it is one this account trusts. */
export interface Attempt { ip: string; account: string; device: string | null }

export interface LoginThrottle {
  /** 429 when this attempt must wait (the same for real and made-up accounts). */
  check(a: Attempt): Promise<void>
  failed(a: Attempt): Promise<void>
  succeeded(a: Attempt): Promise<void>
  /** Runs a password check through the gate (trusted devices first); 503 when the queue is full. */
  passwordCheck<T>(a: Attempt, check: () => Promise<T>): Promise<T>
}

const over = (state: CounterState | null, counter: WindowCounter) => state !== null && state.consumedPoints >= counter.points
function tooMany(state: CounterState): AppError {
  const retry = Math.max(1, Math.ceil(state.msBeforeNext / 1000))
  return new AppError('RATE_LIMIT_EXCEEDED', `Too many failed sign-ins; try again in ${retry} s`, { reason: 'sign_in_throttled', retryAfterSeconds: retry }, { 'retry-after': String(retry) })
}
/** Counts a failure; being past the limit already is no error here (the attempt was answered). */
const count = (counter: WindowCounter, key: string) => counter.consume(key).catch((err: unknown) => {
  if (err instanceof CounterState) return err
  throw err
})

export function loginThrottle(o: { counters: Counters; keyPrefix: string; limits?: Partial<LoginLimits> }): LoginThrottle {
  const l = { ...LOGIN_LIMITS, ...o.limits }
  const counter = (name: string, points: number, windowSeconds: number) =>
    o.counters.counter({ points, windowSeconds, keyPrefix: `${o.keyPrefix}:login:${name}`, name: `login:${name}` })
  const ip = counter('ip', l.failuresPerIp, l.ipWindowSeconds)
  const account = counter('account', l.failuresPerAccount, l.accountWindowSeconds)
  const device = counter('device', l.failuresPerDevice, l.deviceWindowSeconds)
  // Consecutive failures of a pair (kept as long as the longest wait), and its wait: blocked keys.
  const streak = counter('pair', Number.MAX_SAFE_INTEGER, l.pairMaxWaitSeconds * 4)
  const wait = counter('pair-wait', 1, l.pairMaxWaitSeconds)
  const pairOf = (a: Attempt) => `${a.account}:${a.ip}`
  const gate = workGate(l.passwordChecks, l.passwordQueue, l.passwordChecksPerIp)

  /** Whether the device is one this account trusts and has not failed too often. */
  const trusted = async (a: Attempt) => a.device !== null && !over(await device.get(a.device), device)

  return {
    async check(a) {
      if (await trusted(a)) return
      const [byIp, byAccount, waiting] = await Promise.all([ip.get(a.ip), account.get(a.account), wait.get(pairOf(a))])
      for (const [state, c] of [[byIp, ip], [byAccount, account], [waiting, wait]] as const) {
        if (state && over(state, c)) throw tooMany(state)
      }
    },
    async failed(a) {
      const isTrusted = await trusted(a)
      const [, , , run] = await Promise.all([
        count(ip, a.ip),
        count(account, a.account),
        isTrusted ? count(device, a.device!) : null,
        isTrusted ? null : count(streak, pairOf(a)),
      ])
      const n = run?.consumedPoints ?? 0
      if (n >= l.pairFreeFailures) {
        await wait.block(pairOf(a), Math.min(l.pairMaxWaitSeconds, l.pairFirstWaitSeconds * 2 ** (n - l.pairFreeFailures)))
      }
    },
    async succeeded(a) {
      await Promise.all([streak.delete(pairOf(a)), wait.delete(pairOf(a))])
    },
    async passwordCheck(a, check) {
      const isTrusted = await trusted(a)
      return gate(isTrusted ? null : a.ip, isTrusted, check)
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
    const mine = key === null ? 0 : held.get(key) ?? 0
    if (mine >= perKey) {
      throw new AppError('RATE_LIMIT_EXCEEDED', 'Too many sign-ins at once from this address; retry in a moment', { reason: 'sign_in_busy', retryAfterSeconds: 1 }, { 'retry-after': '1' })
    }
    if (running >= concurrency && first.length + rest.length >= queue) {
      throw new AppError('SERVICE_UNAVAILABLE', 'Too many sign-ins at once; retry in a moment', { reason: 'sign_in_busy' }, { 'retry-after': '1' })
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
