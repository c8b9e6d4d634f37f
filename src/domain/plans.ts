export const PLANS = ['free', 'starter', 'professional', 'enterprise'] as const
export type Plan = (typeof PLANS)[number]

export const ROLES = ['owner', 'admin', 'member'] as const
export type Role = (typeof ROLES)[number]

/** API access per plan: the most active keys an organization may hold (Infinity: no limit). */
export const MAX_ACTIVE_KEYS: Readonly<Record<Plan, number>> = {
  free: 0,
  starter: 0,
  professional: 5,
  enterprise: Number.POSITIVE_INFINITY,
}

export const KEY_MANAGER_ROLES: ReadonlySet<Role> = new Set(['owner', 'admin'])
