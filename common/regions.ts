// The regions of the API specification and the compliance frameworks each one serves. On premise a
// region is a storage location the deployment's operator declares (DEFAULT_REGION, REGION_STORES):
// the server, the installer and the configuration all read the codes from here.

export interface RegionInfo {
  code: string
  name: string
  city: string
  /** The compliance frameworks the specification lists for it. */
  frameworks: readonly string[]
}

export const REGIONS = [
  { code: 'us-east', name: 'US East', city: 'Virginia', frameworks: ['CCPA', 'HIPAA', 'SOC2'] },
  { code: 'us-west', name: 'US West', city: 'Los Angeles', frameworks: ['CCPA', 'HIPAA', 'SOC2'] },
  { code: 'ca-central', name: 'Canada Central', city: 'Toronto', frameworks: ['PIPEDA'] },
  { code: 'sa-east', name: 'South America East', city: 'Sao Paulo', frameworks: ['LGPD'] },
  { code: 'eu-west', name: 'EU West', city: 'Frankfurt', frameworks: ['GDPR'] },
  { code: 'eu-west-uk', name: 'EU West (UK)', city: 'London', frameworks: ['GDPR', 'UK-GDPR'] },
  { code: 'eu-north', name: 'EU North', city: 'Stockholm', frameworks: ['GDPR'] },
  { code: 'me-south', name: 'Middle East South', city: 'Dubai', frameworks: ['PDPL'] },
  { code: 'af-south', name: 'Africa South', city: 'Johannesburg', frameworks: ['POPIA'] },
  { code: 'ap-southeast', name: 'Asia Pacific Southeast', city: 'Singapore', frameworks: ['PDPA'] },
  { code: 'ap-northeast', name: 'Asia Pacific Northeast', city: 'Tokyo', frameworks: ['APPI'] },
  { code: 'ap-south', name: 'Asia Pacific South', city: 'Mumbai', frameworks: ['DPDPA'] },
  { code: 'ap-southeast-au', name: 'Asia Pacific Southeast (Australia)', city: 'Sydney', frameworks: ['Privacy Act'] },
  { code: 'ap-east', name: 'Asia Pacific East', city: 'Hong Kong', frameworks: ['PDPO'] },
  { code: 'ap-northeast-kr', name: 'Asia Pacific Northeast (Korea)', city: 'Seoul', frameworks: ['PIPA'] },
] as const satisfies readonly RegionInfo[]

export type RegionCode = (typeof REGIONS)[number]['code']
export const REGION_CODES = REGIONS.map((r) => r.code) as RegionCode[]
export const isRegionCode = (code: string): code is RegionCode => (REGION_CODES as string[]).includes(code)

/**
 * The compliance levels a tenant may choose: standard (any region), and one per framework of the
 * specification's table, allowed only in the regions that serve that framework.
 */
export const COMPLIANCE_LEVELS = {
  standard: null,
  gdpr: 'GDPR',
  'uk-gdpr': 'UK-GDPR',
  hipaa: 'HIPAA',
  ccpa: 'CCPA',
  soc2: 'SOC2',
  pipeda: 'PIPEDA',
  lgpd: 'LGPD',
  pdpl: 'PDPL',
  popia: 'POPIA',
  pdpa: 'PDPA',
  appi: 'APPI',
  dpdpa: 'DPDPA',
  'privacy-act': 'Privacy Act',
  pdpo: 'PDPO',
  pipa: 'PIPA',
} as const satisfies Record<string, string | null>

export type ComplianceLevel = keyof typeof COMPLIANCE_LEVELS
export const COMPLIANCE_LEVEL_NAMES = Object.keys(COMPLIANCE_LEVELS) as ComplianceLevel[]

/** Whether a region serves a compliance level. */
export function regionServes(code: RegionCode, level: ComplianceLevel): boolean {
  const framework = COMPLIANCE_LEVELS[level]
  return (
    framework === null || (REGIONS.find((r) => r.code === code)!.frameworks as readonly string[]).includes(framework)
  )
}
