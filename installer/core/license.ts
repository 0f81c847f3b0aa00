// The license as a preflight check: validated offline, before anything changes, with the
// vendor's message for each way it can be wrong.
import { verifyLicense, type VerifyOptions } from '../../licenses/license.js'
import { check, type CheckResult, type CheckStatus } from './checks/check.js'

const STATUS: Record<string, CheckStatus> = { valid: 'pass', grace: 'warn', expired: 'fail', invalid: 'fail' }

export async function licenseCheck(key: string | undefined, opts: VerifyOptions = {}): Promise<CheckResult> {
  const r = await verifyLicense(key, opts)
  const status = STATUS[r.status]!
  const found = r.status === 'invalid' ? `${r.reason.replace(/_/g, ' ')}` : r.message
  return check(
    'license',
    'License',
    status,
    found,
    `a valid license key signed by the vendor${opts.airGapped ? ' that allows air-gapped use' : ''}`,
    r.message,
  )
}
