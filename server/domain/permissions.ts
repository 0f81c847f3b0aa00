// What a principal may do. API keys carry permissions chosen when they are made; a signed-in user's
// come from their role in the tenant. '*' is every permission of the principal's tenant. Routes name
// theirs as a Permission, so a misspelt one does not compile.
export const PERMISSIONS = [
  'projects:read',
  'projects:write',
  'export',
  'restore',
  'keys:manage',
  'team:read',
  'team:manage',
  'settings:read',
  'settings:write',
  'audit:read',
  'webhooks:read',
  'webhooks:manage',
  'agents:read',
  'agents:write',
  'agents:run',
  'chat:read',
  'chat:write',
] as const
export type Permission = (typeof PERMISSIONS)[number]
export const ALL = '*'

export const isPermission = (p: string): boolean => p === ALL || (PERMISSIONS as readonly string[]).includes(p)

export const ROLES = ['owner', 'admin', 'member', 'viewer'] as const
export type Role = (typeof ROLES)[number]

// Owners and admins differ only in who may hand out or take away the owner role (team rules).
export const ROLE_PERMISSIONS: Record<Role, readonly (Permission | typeof ALL)[]> = {
  owner: [ALL],
  admin: [ALL],
  member: [
    'projects:read',
    'projects:write',
    'agents:read',
    'agents:write',
    'agents:run',
    'chat:read',
    'chat:write',
    'export',
    'team:read',
    'settings:read',
  ],
  viewer: ['projects:read', 'agents:read', 'chat:read', 'team:read', 'settings:read'],
}

/** What of `wanted` a holder of `held` lacks; '*' is lacked unless held (nobody grants more than they have). */
export const uncovered = (held: ReadonlySet<string>, wanted: readonly string[]): string[] =>
  held.has(ALL) ? [] : wanted.filter((p) => p === ALL || !held.has(p))

/** Whether a holder of `held` may hand out `wanted`. */
export const covers = (held: ReadonlySet<string>, wanted: readonly string[]) => uncovered(held, wanted).length === 0
