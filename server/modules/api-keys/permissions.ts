// Permission names a key can carry. '*' is every permission of the key's tenant.
export const PERMISSIONS = ['projects:read', 'projects:write', 'export'] as const
export type Permission = (typeof PERMISSIONS)[number]
export const ALL = '*'

export const isPermission = (p: string): boolean => p === ALL || (PERMISSIONS as readonly string[]).includes(p)
