// The rules that share a replica's delivery slots between tenants, on their own.
import t from 'tap'
import { fairLimits, nextFair, rankFair, type Candidate, type Share } from '../../../server/platform/fairness.js'

let seq = 0
/** `n` due deliveries of one endpoint, the first due earliest. */
const due = (
  tenant: string | null,
  key: string,
  n: number,
  o: { healthy?: boolean; from?: number } = {},
): Candidate[] =>
  Array.from({ length: n }, (_, i) => ({
    id: `${key}-${String(i).padStart(4, '0')}-${seq++}`,
    tenant,
    key,
    healthy: o.healthy ?? true,
    dueAt: new Date((o.from ?? 0) + i),
  }))
const held = (tenant: string | null, key: string, n: number, healthy = true): Share[] =>
  Array.from({ length: n }, () => ({ tenant, key, healthy }))
const owners = (cs: readonly Candidate[]) => cs.map((c) => c.tenant ?? 'platform')

t.test(
  "a quarter of the slots is out of reach of one tenant's endpoints not known to work, from two slots up",
  async (t) => {
    t.same(
      [1, 2, 3, 4, 8, 16].map((c) => fairLimits(c).unhealthyPerTenant),
      [1, 1, 2, 3, 6, 12],
    )
    t.equal(fairLimits(8).unhealthyPerKey, 1)
  },
)

t.test("a tenant with one due delivery is served before another tenant's backlog, however old", async (t) => {
  const backlog = due('a', 'a1', 1000) // due long before b's
  const b = due('b', 'b1', 1, { from: 10_000 })
  const ranked = rankFair([...backlog, ...b], [], fairLimits(8), 2)
  t.same(owners(ranked), ['a', 'b'], "b's one delivery comes second, not 1001st")
  t.same(
    owners(rankFair([...backlog, ...b], held('a', 'a1', 3), fairLimits(8), 1)),
    ['b'],
    'and first when a already holds slots',
  )
})

t.test('tenants take turns by what they hold; within a tenant, its endpoints do', async (t) => {
  const ranked = rankFair(
    [...due('a', 'a1', 5), ...due('a', 'a2', 5), ...due('b', 'b1', 5), ...due(null, 'p1', 5)],
    held('b', 'b1', 2),
    fairLimits(8),
    8,
  )
  // b holds two already: a and the platform catch up first, then all three alternate.
  t.same(owners(ranked), ['a', 'platform', 'a', 'platform', 'a', 'b', 'platform', 'a'])
  t.same(
    ranked.filter((c) => c.tenant === 'a').map((c) => c.key),
    ['a1', 'a2', 'a1', 'a2'],
    "a's endpoints alternate",
  )
  t.same(
    ranked.filter((c) => c.key === 'a1').map((c) => c.dueAt.getTime()),
    [0, 1],
    'each endpoint in due order',
  )
})

t.test('one tenant alone with endpoints that work gets every slot it asks for', async (t) => {
  const ranked = rankFair(due('a', 'a1', 40), held('a', 'a1', 10), fairLimits(8), 16)
  t.equal(ranked.length, 16)
})

t.test(
  "endpoints not known to work hold one delivery each, and one tenant's together never more than its share",
  async (t) => {
    const limits = fairLimits(8) // 6 of 8
    const hanging = Array.from({ length: 24 }, (_, i) => due('a', `a${i}`, 3, { healthy: false })).flat()
    const ranked = rankFair(hanging, [], limits, 16)
    t.equal(ranked.length, 6, 'six, though sixteen were asked for')
    t.equal(new Set(ranked.map((c) => c.key)).size, 6, 'one per endpoint')
    t.same(
      rankFair(hanging, held('a', 'a0', 1, false), limits)
        .map((c) => c.key)
        .includes('a0'),
      false,
      'an endpoint already holding one gets no second',
    )
    t.equal(rankFair(hanging, held('a', 'x', 6, false), limits).length, 0, 'none once the share is held')

    // The rest go to other tenants, their new endpoints included, and to the hanging tenant's endpoints that work.
    const others = [...due('b', 'b1', 1, { healthy: false }), ...due('c', 'c1', 2), ...due('a', 'aw', 5)]
    const mixed = rankFair([...hanging, ...others], held('a', 'x', 6, false), limits)
    t.same(
      mixed.map((c) => c.key),
      ['b1', 'c1', 'c1', 'aw', 'aw', 'aw', 'aw', 'aw'],
    )
  },
)

t.test('the claim-ahead order never breaks a limit when some ranked ones are lost to another replica', async (t) => {
  const limits = fairLimits(4) // 3 of 4
  const ranked = rankFair(
    [...Array.from({ length: 5 }, (_, i) => due('a', `a${i}`, 2, { healthy: false })).flat(), ...due('b', 'b1', 8)],
    [],
    limits,
    8,
  )
  // Whatever part of the order is leased, at most 3 are for a's endpoints not known to work, one each.
  const unhealthy = ranked.filter((c) => !c.healthy)
  t.equal(unhealthy.length, 3)
  t.equal(new Set(unhealthy.map((c) => c.key)).size, 3)
})

t.test(
  'a freed slot starts the claimed delivery of the tenant with least in flight, then the earliest claimed',
  async (t) => {
    const waiting: Share[] = [...held('a', 'a1', 3), { tenant: 'b', key: 'b1', healthy: true }, ...held('a', 'a2', 1)]
    t.equal(nextFair(waiting, held('a', 'a1', 4)), 3, "b's, though claimed after a's")
    t.equal(
      nextFair(waiting, [...held('a', 'a1', 2), ...held('b', 'b1', 3)]),
      4,
      "a's endpoint with none in flight, before a1's",
    )
    t.equal(nextFair(waiting, []), 0, 'the earliest claimed when nothing runs')
    t.equal(nextFair([], []), -1)
  },
)
