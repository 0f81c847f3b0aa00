// The questions of the interactive installer, with their defaults and validation. Pure: the Ink
// screens ask them one by one and show what `check` says; the rules are the one config schema's.
import { defaultText } from '../../config/bundles.js'
import { COMPOSE_SERVICE_SETTINGS } from '../../config/compose-variables.js'
import { usesBundled } from './compose-bundle.js'
import { parseSetting, settings, type Setting, type SettingName } from '../../config/schema.js'
import { isSecret } from '../../config/secrets.js'
import { EMAIL_RE } from '../../common/email.js'
import { registryProblem } from '../../config/images.js'
import type { VerifyOptions } from '../../licenses/license.js'
import { bindAddressProblem, cidrList, type Answers } from './answers.js'
import { serviceEgress } from './helm-values.js'
import { licenseAnswerProblem } from './license.js'

const ANSWER_KEYS = [
  'dataPath',
  'outputDir',
  'namespace',
  'release',
  'registry',
  'bindAddress',
  'tenantName',
  'adminEmail',
] as const
type AnswerKey = (typeof ANSWER_KEYS)[number]

export interface Prompt {
  /** An answers-file field (dataPath, outputDir, servicesCidrs) or an Atrium setting. */
  key: AnswerKey | 'servicesCidrs' | SettingName
  label: string
  secret: boolean
  /** The value offered when the admin just presses Enter ('' when there is none). */
  initial: string
  required: boolean
}

/** Compose brings its own PostgreSQL, Redis and MinIO: these may stay empty there. */
const BUNDLED = Object.keys(COMPOSE_SERVICE_SETTINGS) as SettingName[]

const SETTING_PROMPTS: {
  name: SettingName
  label: string
  required: boolean
  /** Asked only for these answers (all when not given). */
  when?: (answers: Answers) => boolean
}[] = [
  { name: 'PUBLIC_URL', label: 'Public URL users reach Atrium at (https://...)', required: true },
  { name: 'DATABASE_URL', label: 'PostgreSQL 15+ URL (postgres://user:password@host:5432/db)', required: true },
  {
    name: 'REDIS_URL',
    label:
      'Redis 7+ URL (redis://host:6379, redis+sentinel://h1:26379,h2:26379/master, redis+cluster://h1:6379,h2:6379)',
    required: true,
  },
  { name: 'R2_ENDPOINT', label: 'S3-compatible endpoint (http(s)://host:port)', required: true },
  { name: 'R2_BUCKET', label: 'Bucket', required: true },
  { name: 'R2_ACCESS_KEY_ID', label: 'S3 access key id', required: true },
  { name: 'R2_SECRET_ACCESS_KEY', label: 'S3 secret access key', required: true },
  { name: 'LICENSE_KEY', label: 'License key (from your vendor)', required: true },
  // What an air-gapped server may still reach: its model server, webhook receivers, the identity provider.
  {
    name: 'OUTBOUND_ALLOWED_NETWORKS',
    label:
      'Networks the server may still reach, comma-separated CIDRs (a model server, webhook receivers, the identity provider; empty: none)',
    required: false,
    when: (a) => a.mode === 'air-gapped',
  },
  {
    name: 'OUTBOUND_ALLOWED_DOMAINS',
    label: 'Domains it may reach them by, comma-separated (e.g. corp.example; any other name is refused; empty: none)',
    required: false,
    when: (a) => a.mode === 'air-gapped',
  },
]

/**
 * Compose: where on this machine Atrium is published. What is written stays. On a first install,
 * an https PUBLIC_URL means a proxy terminates TLS in front of Atrium (which speaks plain HTTP), so
 * loopback is offered, unless the bundled MinIO is used: users' browsers fetch downloads from it
 * directly. Otherwise users reach Atrium directly, on every interface.
 */
function bindAddressPrompt(answers: Answers, existing: Record<string, string> | null): Prompt {
  const answered = (name: SettingName) => {
    const v = answers.config[name]
    return typeof v === 'string' ? v : (existing?.[name] ?? '')
  }
  const proxied = answered('PUBLIC_URL').startsWith('https://') && !usesBundled(answered('R2_ENDPOINT'))
  const offered = proxied ? '127.0.0.1' : '0.0.0.0'
  return {
    key: 'bindAddress',
    label:
      'Address on this machine to publish Atrium (and the bundled MinIO) at: 127.0.0.1 when a reverse proxy on this machine fronts it, 0.0.0.0 for every interface',
    secret: false,
    initial: answers.bindAddress || existing?.ATRIUM_BIND_ADDRESS || offered,
    required: true,
  }
}

/** The questions for this target, offering what is already configured (or the schema's default). */
export function promptsFor(answers: Answers, existing: Record<string, string> | null): Prompt[] {
  const path = (key: AnswerKey, label: string, required = true): Prompt => ({
    key,
    label,
    secret: false,
    initial: answers[key],
    required,
  })
  const head = [
    path('dataPath', 'Data path on this machine'),
    path('outputDir', 'Folder to write the configuration to'),
  ]
  if (answers.target === 'helm')
    head.push(path('namespace', 'Kubernetes namespace'), path('release', 'Helm release name'))
  // An air-gapped cluster pulls from the site's own registry (installer images push puts them there).
  if (answers.target === 'helm' && answers.mode === 'air-gapped')
    head.push(path('registry', 'Private registry that holds the images (host[:port][/path])'))
  const settingPrompts = SETTING_PROMPTS.filter((p) => !p.when || p.when(answers)).map(
    ({ name, label, required }): Prompt => {
      const fallback = defaultText(settings[name] as Setting)
      const given = answers.config[name]
      const bundled = answers.target === 'compose' && BUNDLED.includes(name)
      return {
        key: name,
        label: bundled ? `${label}; empty: the bundled one` : label,
        secret: isSecret(name),
        initial: (typeof given === 'string' ? given : undefined) ?? existing?.[name] ?? fallback,
        required: required && !bundled,
      }
    },
  )
  // The bind address after PUBLIC_URL and the S3 store, which decide what it offers.
  const bind = answers.target === 'compose' ? [bindAddressPrompt(answers, existing)] : []
  const license = settingPrompts.findIndex((p) => p.key === 'LICENSE_KEY')
  return [
    ...head,
    ...settingPrompts.slice(0, license),
    ...bind,
    ...settingPrompts.slice(license),
    ...servicesCidrsPrompt(answers, existing),
    path('tenantName', 'Name of the first tenant (your organization)'),
    path('adminEmail', 'Email of its first admin (empty: create tenants later with the admin CLI)', false),
  ]
}

/**
 * Air-gapped helm, once a service is named by a host name outside the cluster: the networks that
 * the egress policy is to admit (the answers are asked in order, so the services come first).
 */
function servicesCidrsPrompt(answers: Answers, existing: Record<string, string> | null): Prompt[] {
  if (answers.target !== 'helm' || answers.mode !== 'air-gapped') return []
  const typed = Object.entries(answers.config).filter((e): e is [string, string] => typeof e[1] === 'string' && !!e[1])
  const { byName } = serviceEgress({ ...existing, ...Object.fromEntries(typed) }, answers)
  if (!byName.length) return []
  const hosts = [...new Set(byName.map((s) => s.host))].join(', ')
  return [
    {
      key: 'servicesCidrs',
      label: `Networks (CIDRs, comma-separated) of ${hosts}: the only ones the cluster lets Atrium reach`,
      secret: false,
      initial: answers.servicesCidrs.join(','),
      required: true,
    },
  ]
}

/** Null when the answer is acceptable, else what is wrong (never echoing a secret). */
export function checkAnswer(p: Prompt, value: string): string | null {
  const v = value.trim()
  if (!v) return p.required ? `${p.label.split(' (')[0]} is required` : null
  if (p.key === 'adminEmail') return EMAIL_RE.test(v) ? null : 'Email must be an address like admin@example.com'
  if (p.key === 'registry') return registryProblem(v, 'The registry')
  if (p.key === 'bindAddress') {
    const problem = bindAddressProblem(v)
    return problem && `The address ${problem}`
  }
  if (p.key === 'servicesCidrs') {
    const cidrs = cidrList(v)
    return 'problem' in cidrs ? `The networks: ${cidrs.problem}` : null
  }
  if (!(p.key in settings)) return null
  const r = parseSetting(p.key, settings[p.key as SettingName] as Setting, v)
  return 'problem' in r ? r.problem : null
}

/**
 * What checkAnswer says, and for the license key whether it is the license as issued: a key cut
 * short or altered is refused at the prompt, not after every question (core/license.ts).
 */
export async function answerProblem(
  p: Prompt,
  value: string,
  o: Pick<VerifyOptions, 'keys'> = {},
): Promise<string | null> {
  const problem = checkAnswer(p, value)
  if (problem || p.key !== 'LICENSE_KEY' || !value.trim()) return problem
  return licenseAnswerProblem(value, o)
}

/** Records an answer where it belongs in the answers. */
export function applyAnswer(answers: Answers, p: Prompt, value: string): Answers {
  const v = value.trim()
  if (p.key === 'servicesCidrs') {
    const cidrs = cidrList(v)
    return 'value' in cidrs ? { ...answers, servicesCidrs: cidrs.value } : answers
  }
  if ((ANSWER_KEYS as readonly string[]).includes(p.key)) return { ...answers, [p.key]: v }
  return { ...answers, config: { ...answers.config, [p.key]: v } }
}
