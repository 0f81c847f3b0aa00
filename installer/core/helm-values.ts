// The configuration for the helm target: a values file with the ordinary settings, and a
// Kubernetes Secret manifest with the secret ones, which the chart reads through `existingSecret`
// (so the secrets never sit in Helm's release history). The Secret carries
// `helm.sh/resource-policy: keep` in spirit of the chart's own: deleting a release must not lose
// ENCRYPTION_MASTER_KEY.
import { existsSync, readFileSync } from 'node:fs'
import { parse, stringify } from 'yaml'
import { CHART_FIXED, CONTAINER_FIXED, helmValue } from '../../config/bundles.js'
import { settings, type Setting, type SettingName } from '../../config/schema.js'
import { isSecret } from '../../config/secrets.js'
import type { EnvValues } from './config-file.js'

export interface HelmFiles {
  values: string
  secret: string
}

/**
 * Named for who writes it: never like the chart's own objects (its ConfigMap is <fullname>-config,
 * its Secret <fullname>-secrets), so `kubectl get` shows which is which. Installations written
 * by 0.1.0 used <release>-config; a re-run writes this one, and the old Secret stays (kept) until
 * removed by hand.
 */
export const secretName = (release: string) => `${release}-installer-secrets`

/**
 * The chart's values: typed as its values.schema.json wants them (numbers, booleans), without the
 * settings the chart fixes itself (port, data folder, production mode), AIR_GAPPED as `airGapped`.
 */
export function renderHelmFiles(values: EnvValues, opts: { release: string; namespace: string }): HelmFiles {
  const env: Record<string, string | number | boolean> = {}
  const stringData: Record<string, string> = {}
  for (const name of Object.keys(settings) as SettingName[]) {
    const v = values[name]
    if (v === undefined || v === '' || name in CONTAINER_FIXED || name in CHART_FIXED || name === 'AIR_GAPPED') continue
    if (isSecret(name)) stringData[name] = v
    else env[name] = helmValue(settings[name] as Setting, v)
  }
  const header = '# Written by the Atrium installer; re-run it to change these.\n'
  return {
    values:
      header +
      stringify({
        airGapped: values.AIR_GAPPED === 'true',
        existingSecret: secretName(opts.release),
        env,
      }),
    secret:
      header +
      stringify({
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: {
          name: secretName(opts.release),
          namespace: opts.namespace,
          labels: { 'app.kubernetes.io/name': 'atrium', 'app.kubernetes.io/instance': opts.release },
          annotations: { 'helm.sh/resource-policy': 'keep' },
        },
        type: 'Opaque',
        stringData,
      }),
  }
}

/** The settings written earlier (values env plus Secret stringData), or null on a first run. */
export function readHelmFiles(valuesPath: string, secretPath: string): Record<string, string> | null {
  if (!existsSync(valuesPath) && !existsSync(secretPath)) return null
  const out: Record<string, string> = {}
  const read = (path: string, pick: (doc: Record<string, unknown>) => unknown) => {
    if (!existsSync(path)) return
    const doc = parse(readFileSync(path, 'utf8')) as Record<string, unknown> | null
    const map = doc ? pick(doc) : null
    if (map && typeof map === 'object')
      for (const [k, v] of Object.entries(map))
        if (['string', 'number', 'boolean'].includes(typeof v)) out[k] = String(v)
  }
  read(valuesPath, (d) => ({
    ...(d.env as object),
    ...(d.airGapped === true ? { AIR_GAPPED: 'true' } : {}),
    NODE_ENV: CONTAINER_FIXED.NODE_ENV,
  }))
  read(secretPath, (d) => d.stringData)
  return out
}
