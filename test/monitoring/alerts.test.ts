// The shipped alert rules, checked by Prometheus's own promtool: they load, and each alert fires on
// its condition and stays quiet without it (alerts.promtool.yaml). Also: every alert has such a
// case pair and a runbook section, and the chart and Compose ship the same rules.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { parse } from 'yaml'
import { MONITORING } from '../../config/bundles.js'
import { ROOT } from '../helpers/cli.js'
import { find, helmTemplate, needs, runTool } from '../helpers/tools.js'

const RULES = join(MONITORING.source, 'alerts.yaml')
const CASES = join(ROOT, 'test/monitoring/alerts.promtool.yaml')

interface Rule {
  alert?: string
  expr: string
  for?: string
  labels?: Record<string, string>
  annotations?: Record<string, string>
}
const groups = (parse(readFileSync(RULES, 'utf8')) as { groups: { name: string; rules: Rule[] }[] }).groups
const alerts = groups.flatMap((g) => g.rules).filter((r) => r.alert)

interface Case {
  name: string
  alert_rule_test: { alertname: string; exp_alerts: unknown[] }[]
}

t.test('promtool check rules accepts the rules file', { skip: needs('promtool') }, async (t) => {
  const r = await runTool('promtool', ['check', 'rules', RULES])
  t.equal(r.code, 0, r.stdout + r.stderr)
  t.match(r.stdout, `SUCCESS: ${alerts.length} rules found`)
})

t.test(
  'promtool test rules: each alert fires on its condition and stays quiet without it',
  { skip: needs('promtool') },
  async (t) => {
    const r = await runTool('promtool', ['test', 'rules', CASES])
    t.equal(r.code, 0, r.stdout + r.stderr)
    t.match(r.stdout, 'SUCCESS')
  },
)

t.test('every alert has a firing case, a quiet case and a runbook section with what to check and run', async (t) => {
  t.ok(alerts.length >= 18, `${alerts.length} alerts`)
  const cases = (parse(readFileSync(CASES, 'utf8')) as { tests: Case[] }).tests.flatMap((c) => c.alert_rule_test)
  const operations = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8')
  // GitHub's heading anchors: lower case, spaces to '-', punctuation dropped.
  const anchors = new Set(
    [...operations.matchAll(/^#+ (.+)$/gm)].map((m) =>
      m[1]!
        .toLowerCase()
        .replace(/[^a-z0-9 -]/g, '')
        .replace(/ /g, '-'),
    ),
  )
  for (const a of alerts) {
    const name = a.alert!
    const own = cases.filter((c) => c.alertname === name)
    t.ok(
      own.some((c) => c.exp_alerts.length > 0),
      `${name}: a case where it fires`,
    )
    t.ok(
      own.some((c) => c.exp_alerts.length === 0),
      `${name}: a case where it stays quiet`,
    )
    t.match(a.labels?.severity, /^(critical|warning)$/, `${name}: a severity`)
    t.ok(a.annotations?.summary && a.annotations.description, `${name}: a summary and a description`)
    const runbook = /^docs\/operations\.md#([a-z0-9-]+)$/.exec(a.annotations?.runbook ?? '')
    t.ok(runbook && anchors.has(runbook[1]!), `${name}: its runbook (${a.annotations?.runbook}) is a section`)
    t.match(a.expr, /job="atrium"/, `${name}: selects Atrium's targets by job="atrium"`)
  }
})

t.test(
  'the chart renders the same rules as a PrometheusRule when asked, and its ServiceMonitor sets job="atrium"',
  { skip: needs('helm') },
  async (t) => {
    const off = await helmTemplate(t, [])
    t.notOk(find(off.manifests, 'PrometheusRule'), 'none by default: the CRD may not exist')
    const { code, manifests, stderr } = await helmTemplate(t, [
      {
        metrics: {
          prometheusRule: { enabled: true, labels: { release: 'prometheus' } },
          serviceMonitor: { enabled: true },
        },
      },
    ])
    t.equal(code, 0, stderr)
    const rule = find(manifests, 'PrometheusRule')!
    t.equal(rule.apiVersion, 'monitoring.coreos.com/v1')
    t.equal(rule.metadata.labels!.release, 'prometheus', 'the labels the Prometheus selects rules by')
    t.same(rule.spec.groups, groups, 'the rules file, whole')
    const monitor = find(manifests, 'ServiceMonitor')!
    t.same(monitor.spec.endpoints[0].relabelings, [{ action: 'replace', targetLabel: 'job', replacement: 'atrium' }])
  },
)

t.test('Compose sites get the same rules file (compose/monitoring, a generated copy)', async (t) => {
  t.equal(readFileSync(join(MONITORING.copy, 'alerts.yaml'), 'utf8'), readFileSync(RULES, 'utf8'))
})
