// How a replica shares its slots between tenants (webhook deliveries, every job queue). The claim reads the next due
// deliveries of every endpoint with work (a few each, never anyone's whole backlog); this decides which of them to
// take, and which of those taken to start when a slot frees up:
//
// - Round-robin by what each tenant already holds on this replica (in flight and claimed ahead):
//   the tenant holding least goes first, then its endpoint holding least, then the longest due. A
//   tenant with one due delivery is served before another tenant's next one, however long that
//   tenant's backlog.
// - Endpoints not known to work (no attempt has succeeded yet, or the last one failed: a timeout,
//   a refusal, a non-2xx) hold at most one delivery each, and those of one tenant together at most
//   `unhealthyPerTenant` of the replica's slots (three quarters). A tenant whose receivers hang
//   until the attempt timeout cannot take every slot: the rest stay free for the other tenants,
//   and for its own endpoints that answer. New endpoints are tried one delivery at a time until
//   one succeeds.
// - Nothing else is capped: when one tenant alone has work for endpoints that answer, it gets every
//   slot.
//
// Shares are per replica (each replica divides its own slots); the database's SKIP LOCKED claim
// still gives each unit of work to one replica at a time. A unit of work is a tenant, a key (a
// webhook endpoint; the tenant itself for jobs) and whether the key is known to work. The job
// runner (jobs.ts) ranks every queue's claims here, webhook deliveries included.

export interface Share {
  /** Whose work: a tenant, or null for the platform's own (one more party to share with). */
  tenant: string | null
  /** Where the work goes (the endpoint): limits and round-robin within a tenant are by key. */
  key: string
  /** Whether the key is known to work: its last attempt succeeded. */
  healthy: boolean
}

export interface Candidate extends Share {
  id: string
  dueAt: Date
}

export interface FairLimits {
  /** Slots one tenant's keys not known to work may hold together. */
  unhealthyPerTenant: number
  /** What one key not known to work may hold. */
  unhealthyPerKey: number
}

/**
 * The limits for a replica of `concurrency` slots: a quarter of them (at least one, from two slots
 * up) out of reach of any one tenant's keys not known to work.
 */
export function fairLimits(concurrency: number): FairLimits {
  const kept = concurrency > 1 ? Math.ceil(concurrency / 4) : 0
  return { unhealthyPerTenant: Math.max(1, concurrency - kept), unhealthyPerKey: 1 }
}

class Counts {
  private readonly byTenant = new Map<string | null, number>()
  private readonly byKey = new Map<string, number>()
  private readonly unhealthyByTenant = new Map<string | null, number>()

  constructor(held: Iterable<Share>) {
    for (const s of held) this.add(s)
  }

  add(s: Share) {
    this.byTenant.set(s.tenant, this.tenant(s) + 1)
    this.byKey.set(s.key, this.key(s) + 1)
    if (!s.healthy) this.unhealthyByTenant.set(s.tenant, this.unhealthy(s) + 1)
  }

  tenant = (s: Share) => this.byTenant.get(s.tenant) ?? 0
  key = (s: Share) => this.byKey.get(s.key) ?? 0
  /** What the tenant of `s` holds for keys not known to work. */
  unhealthy = (s: Share) => this.unhealthyByTenant.get(s.tenant) ?? 0

  /** Negative when `a` is the fairer to serve: its tenant holds less, then its key. */
  compare(a: Share, b: Share): number {
    return this.tenant(a) - this.tenant(b) || this.key(a) - this.key(b)
  }
}

/**
 * The candidates in the order to claim them, at most `max`, leaving out what the limits forbid
 * given what is `held` and what comes earlier in the order. Claiming fewer than ranked (another
 * replica took some) never breaks a limit: each one ranked counted as held for those after it.
 */
export function rankFair<T extends Candidate>(
  candidates: readonly T[],
  held: Iterable<Share>,
  limits: FairLimits,
  max = Infinity,
): T[] {
  const counts = new Counts(held)
  const queues = new Map<string, T[]>()
  for (const c of candidates) {
    const q = queues.get(c.key)
    if (q) q.push(c)
    else queues.set(c.key, [c])
  }
  for (const q of queues.values()) q.sort((a, b) => a.dueAt.getTime() - b.dueAt.getTime() || (a.id < b.id ? -1 : 1))
  const allowed = (c: T) =>
    c.healthy || (counts.unhealthy(c) < limits.unhealthyPerTenant && counts.key(c) < limits.unhealthyPerKey)

  const ranked: T[] = []
  while (ranked.length < max) {
    let best: T | undefined
    for (const q of queues.values()) {
      const c = q[0]
      if (!c || !allowed(c)) continue
      if (
        !best ||
        (counts.compare(c, best) || c.dueAt.getTime() - best.dueAt.getTime() || (c.id < best.id ? -1 : 1)) < 0
      )
        best = c
    }
    if (!best) break
    queues.get(best.key)!.shift()
    ranked.push(best)
    counts.add(best)
  }
  return ranked
}

/**
 * Which of the claimed, not yet started, to start next: the fairest against what is `running`; the earlier claimed on a
 * tie.
 */
export function nextFair(waiting: readonly Share[], running: Iterable<Share>): number {
  const counts = new Counts(running)
  let best = -1
  for (const [i, s] of waiting.entries()) if (best < 0 || counts.compare(s, waiting[best]!) < 0) best = i
  return best
}
