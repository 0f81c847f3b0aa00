// The plans a tenant or a license can be on, smallest first. The license tool and the installer
// need the names; what each plan allows is the server's (server/domain/plans.ts).
export const PLANS = ['free', 'pro', 'growth', 'enterprise'] as const
export type Plan = (typeof PLANS)[number]

export const isPlan = (name: string): name is Plan => (PLANS as readonly string[]).includes(name)
