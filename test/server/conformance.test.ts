// Conformance to the API specification (docs/api-spec.md), driven by its own tables: every endpoint
// called over HTTP with exactly the spec's field names, on the real services when TEST_* are set, its
// answer held to what the spec says (test/helpers/conformance.ts); and the same check run against an
// app with one route changed to refuse a spec field, to show that it reports exactly that.
import { readFileSync } from 'node:fs'
import t from 'tap'
import type { FastifyInstance, RouteOptions } from 'fastify'
import { checkConformance, conformanceTarget, type Finding, type Report } from '../helpers/conformance.js'
import { loadSpec, SPEC_FILE } from '../helpers/spec.js'

// Two whole runs (jobs, a model reply, a device login, a sign-in at an identity provider, the rate limit spent).
t.setTimeout(900_000)

const named = (f: Finding) => `${f.endpoint} ${f.check}`

t.test('the spec is read from its tables: every endpoint row, each request and response understood', async (t) => {
  const markdown = readFileSync(SPEC_FILE, 'utf8')
  const endpointsSection = markdown.slice(markdown.indexOf('\n## Endpoints'), markdown.indexOf('\n## Authentication'))
  const rows = endpointsSection.split('\n').filter((l) => /^\| (GET|POST|PUT|PATCH|DELETE|\(see gaps\)) \|/.test(l))
  const spec = loadSpec(markdown)
  t.equal(spec.endpoints.length, rows.length, 'one endpoint per row of the Endpoints tables')
  t.same(
    spec.errors.map((e) => [e.code, e.status]),
    [
      ['UNAUTHORIZED', 401],
      ['FORBIDDEN', 403],
      ['RESOURCE_NOT_FOUND', 404],
      ['VALIDATION_ERROR', 400],
      ['RATE_LIMIT_EXCEEDED', 429],
      ['INTERNAL_ERROR', 500],
    ],
  )
  t.same(spec.rateLimitHeaders, ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'])
  t.match(
    spec.endpoints.find((e) => e.key === 'POST /api/v1/auth/exchange'),
    { rateLimitExempt: true },
  )
  t.match(spec.endpoints.find((e) => e.key === 'POST /api/v1/chat/export')?.request, {
    kind: 'fields',
    fields: [
      { name: 'dateRange.start', type: 'date' },
      { name: 'dateRange.end' },
      { name: 'format', given: 'json' },
      {},
    ],
  })
  t.throws(
    () => loadSpec(markdown.replace('| partial project fields |', '| some project fields |')),
    /request cell "some project fields" is neither field names nor known prose/,
    'a request cell nobody mapped fails loudly',
  )
})

let baseline: Report | null = null

t.test('every endpoint of the spec answers as the spec says, called with exactly its field names', async (t) => {
  const report = await checkConformance(await conformanceTarget(t))
  baseline = report
  for (const e of report.endpoints) {
    const skipped = report.skipped.find((s) => s.endpoint === e.key)
    const found = report.findings.filter((f) => f.endpoint === e.key).map((f) => `${f.check}: ${f.message}`)
    t.same(found, [], e.key, skipped ? { skip: skipped.why } : {})
    if (skipped) continue
    if (e.request.kind === 'multipart') {
      const { jsonPart, options } = e.request
      t.same(
        report.sent[e.key]?.slice(1),
        options.map((f) => `${jsonPart}.${f.name}`),
        `${e.key}: one file part, and ${jsonPart} holding JSON with the spec's fields`,
      )
    }
    if (e.request.kind !== 'fields') continue
    // What was sent is the spec's names: all of them, but for fields the spec marks optional and the run left out.
    const specNames = e.request.fields.map((f) => f.name)
    const sent = report.sent[e.key] ?? []
    t.same(
      sent.filter((n) => !specNames.includes(n)),
      [],
      `${e.key}: no field the spec does not name`,
    )
    t.same(
      e.request.fields.filter((f) => !sent.includes(f.name) && f.required !== false).map((f) => f.name),
      [],
      `${e.key}: every field the spec names, but optional ones`,
    )
  }
  t.same(
    report.findings.filter((f) => f.endpoint === 'errors').map((f) => `${f.check}: ${f.message}`),
    [],
    'errors: the spec codes with their statuses, in the envelope; rate-limit headers on a refusal',
  )
})

/**
 * POST /api/v1/projects made to refuse `language`, one of the spec's fields, as a route whose schema drifted from the
 * spec would: its body schema without the property, nothing else allowed.
 */
function refuseLanguage(app: FastifyInstance): void {
  app.addHook('onRoute', (route: RouteOptions) => {
    if (route.method !== 'POST' || route.url !== '/api/v1/projects') return
    const body = route.schema?.body as { properties: Record<string, unknown> } | undefined
    if (!body) return
    const { language: _refused, ...properties } = body.properties
    route.schema = { ...route.schema, body: { ...body, properties, additionalProperties: false } }
  })
}

t.test('a route made to refuse a spec field is reported, and nothing else changes', async (t) => {
  if (!baseline) {
    t.fail('needs the run above')
    return
  }
  const report = await checkConformance(await conformanceTarget(t, { alter: refuseLanguage }))
  const before = new Set(baseline.findings.map(named))
  const after = new Set(report.findings.map(named))
  t.same(
    report.findings.filter((f) => !before.has(named(f))).map(named),
    ['POST /api/v1/projects status'],
    'exactly one new finding: the route that refuses the field',
  )
  t.match(
    report.findings.find((f) => named(f) === 'POST /api/v1/projects status')?.message,
    /^400 VALIDATION_ERROR.*language/,
    'the refusal names the field',
  )
  t.same(
    baseline.findings.filter((f) => !after.has(named(f))).map(named),
    [],
    'and every finding of the run above is there still',
  )
})
