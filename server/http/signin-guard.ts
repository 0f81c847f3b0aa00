// Sign-in steps that take a credential from callers not yet authenticated (a session token at
// exchange, refresh or logout; an invitation token; a device-login id): their failures count
// against the caller's address, and an address past its limit is answered 429 instead of 401 or
// 404. A credential issued here (its tag verifies) is always looked up, whatever its address has
// done: others' bad guesses cannot lock it out, and made-up ones never reach the database anyway.
// A credential of the format before tags is looked up only while its address is within the limit.
import { addressKey } from '../domain/client-address.js'
import { AppError } from '../domain/errors.js'
import { limitExceeded } from '../domain/rate-limit.js'
import type { Counters, CounterState } from '../platform/counters.js'

export const SIGN_IN_FAILURES = { max: 30, windowSeconds: 60 }

export type SignInGuard = <T>(ip: string, o: { legacy: boolean }, step: () => Promise<T>) => Promise<T>

const FAILURES = new Set(['UNAUTHORIZED', 'RESOURCE_NOT_FOUND'])

export function signInGuard(
  counters: Counters,
  o: { keyPrefix: string; max?: number; windowSeconds?: number },
): SignInGuard {
  const limit = { max: o.max ?? SIGN_IN_FAILURES.max, windowSeconds: o.windowSeconds ?? SIGN_IN_FAILURES.windowSeconds }
  const failures = counters.counter({
    points: limit.max,
    windowSeconds: limit.windowSeconds,
    keyPrefix: `${o.keyPrefix}:sign-in`,
    name: 'sign-in',
  })
  const refused = (state: CounterState) =>
    limitExceeded(
      state,
      { ...limit, reason: 'sign_in_failures' },
      (retry) => `Too many failed attempts from this address; retry in ${retry} s`,
    )
  return async (address, { legacy }, step) => {
    const ip = addressKey(address)
    if (legacy) {
      const state = await failures.get(ip)
      if (state && state.consumedPoints >= limit.max) throw refused(state)
    }
    try {
      return await step()
    } catch (err) {
      if (err instanceof AppError && FAILURES.has(err.code)) {
        const state = await failures.hit(ip)
        if (state.consumedPoints > limit.max) throw refused(state)
      }
      throw err
    }
  }
}
