import { randomUUID } from 'node:crypto'
import { OperatorError } from '../operator-error.js'
import { iso } from '../queries/sql.js'
import type { Sql } from '../store/types.js'
import { generateSecret, type KeyEnv } from './api-key-secret.js'
import { KEY_MANAGER_ROLES, MAX_ACTIVE_KEYS, PLANS, type Plan, type Role } from './plans.js'

/** The furthest a key's expiry may lie ahead: 100 years (of 365.25 days). Further is a typo, or "never". */
export const MAX_KEY_LIFETIME_MS = 36_525 * 86_400_000

export interface CreateKeyInput {
  readonly orgId: string
  readonly actorEmail: string
  readonly env: KeyEnv
  readonly name?: string | undefined
  /** An absolute expiry, or a lifetime counted from the moment the key is written. */
  readonly expiry?: { readonly at: Date } | { readonly inMs: number } | undefined
  readonly brand: string
}

export interface CreatedKey {
  readonly id: string
  readonly key: string
  readonly prefix: string
  readonly env: KeyEnv
  readonly orgId: string
  readonly name: string | null
  readonly createdAt: string
  readonly expiresAt: string | null
}

/**
 * The rule of an active key (not revoked, not expired), as SQL on the api_keys row `alias`. The
 * request path's openbook_key_lookup() (migration 011) is a database function with its own copy.
 */
export function activeKey(alias?: string): string {
  const column = (name: string) => (alias ? `${alias}.${name}` : name)
  return `${column('revoked_at')} IS NULL AND (${column('expires_at')} IS NULL OR ${column('expires_at')} > now())`
}

/** Refuses an acting user who may not create keys of the organization; returns the organization's plan. */
async function keyManagerPlan(sql: Sql, orgId: string, actorEmail: string): Promise<Plan> {
  const [org] = await sql.query<{ plan: Plan }>('SELECT plan FROM organizations WHERE id = $1 FOR UPDATE', [
    orgId,
  ])
  if (!org) throw new OperatorError(`unknown organization: ${orgId}`)
  const [member] = await sql.query<{ role: Role }>(
    `SELECT m.role FROM memberships m JOIN users u ON u.id = m.user_id
     WHERE m.org_id = $1 AND lower(u.email) = lower($2)`,
    [orgId, actorEmail],
  )
  if (!member) throw new OperatorError(`${actorEmail} is not a member of organization ${orgId}`)
  if (!KEY_MANAGER_ROLES.has(member.role)) {
    throw new OperatorError(
      `${actorEmail} is ${member.role} of ${orgId}; only an owner or admin may create keys`,
    )
  }
  return org.plan
}

/** The expiry as a date, refused when it has passed or lies more than 100 years ahead. */
function expiryDate(expiry: CreateKeyInput['expiry']): Date | undefined {
  const expiresAt = expiry && ('at' in expiry ? expiry.at : new Date(Date.now() + expiry.inMs))
  if (expiresAt && expiresAt.getTime() <= Date.now()) {
    throw new OperatorError('the expiry must be in the future')
  }
  // Also when the lifetime is too long for a Date at all (getTime() is NaN then).
  if (expiresAt && !(expiresAt.getTime() <= Date.now() + MAX_KEY_LIFETIME_MS)) {
    throw new OperatorError('the expiry must lie within 100 years')
  }
  return expiresAt
}

/** Refuses a key beyond the plan's number of active keys. */
async function assertUnderKeyLimit(sql: Sql, orgId: string, plan: Plan, limit: number): Promise<void> {
  const [active] = await sql.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM api_keys WHERE org_id = $1 AND ${activeKey()}`,
    [orgId],
  )
  if ((active?.n ?? 0) >= limit) {
    throw new OperatorError(`the ${plan} plan allows ${limit} active API keys and ${orgId} has ${active?.n}`)
  }
}

/**
 * Creates a key under the plan and role rules. Runs in the caller's
 * transaction; the organization row is locked so that two concurrent
 * creations cannot both pass the plan's limit.
 */
export async function createApiKey(sql: Sql, input: CreateKeyInput): Promise<CreatedKey> {
  const plan = await keyManagerPlan(sql, input.orgId, input.actorEmail)
  const limit = MAX_ACTIVE_KEYS[plan]
  if (limit === 0) throw new OperatorError(`the ${plan} plan of ${input.orgId} has no API access`)
  const expiresAt = expiryDate(input.expiry)
  await assertUnderKeyLimit(sql, input.orgId, plan, limit)
  const [user] = await sql.query<{ id: string }>('SELECT id FROM users WHERE lower(email) = lower($1)', [
    input.actorEmail,
  ])
  const secret = generateSecret(input.brand, input.env)
  const id = `key_${randomUUID().replaceAll('-', '')}`
  const [row] = await sql.query<{ createdAt: string; expiresAt: string | null }>(
    `INSERT INTO api_keys (org_id, id, name, env, key_hash, hint, created_by, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     RETURNING ${iso('created_at')} AS "createdAt", ${iso('expires_at')} AS "expiresAt"`,
    [
      input.orgId,
      id,
      input.name ?? null,
      input.env,
      secret.hash,
      secret.hint,
      user?.id ?? null,
      expiresAt?.toISOString() ?? null,
    ],
  )
  return {
    id,
    key: secret.secret,
    prefix: secret.prefix,
    env: input.env,
    orgId: input.orgId,
    name: input.name ?? null,
    createdAt: row?.createdAt ?? new Date().toISOString(),
    expiresAt: row?.expiresAt ?? null,
  }
}

export interface KeyListing {
  readonly id: string
  readonly name: string | null
  readonly env: KeyEnv
  readonly hint: string
  readonly createdAt: string
  readonly lastUsedAt: string | null
  readonly expiresAt: string | null
  readonly revokedAt: string | null
  readonly status: 'active' | 'revoked' | 'expired'
}

export async function listApiKeys(sql: Sql, orgId: string): Promise<KeyListing[]> {
  const [org] = await sql.query('SELECT 1 FROM organizations WHERE id = $1', [orgId])
  if (!org) throw new OperatorError(`unknown organization: ${orgId}`)
  return sql.query<KeyListing>(
    `SELECT id, name, env, hint, ${iso('created_at')} AS "createdAt", ${iso('last_used_at')} AS "lastUsedAt",
            ${iso('expires_at')} AS "expiresAt", ${iso('revoked_at')} AS "revokedAt",
            CASE WHEN ${activeKey()} THEN 'active'
                 WHEN revoked_at IS NOT NULL THEN 'revoked'
                 ELSE 'expired' END AS status
     FROM api_keys WHERE org_id = $1 ORDER BY created_at, id`,
    [orgId],
  )
}

export async function revokeApiKey(
  sql: Sql,
  keyId: string,
): Promise<{ id: string; orgId: string; revokedAt: string }> {
  const [row] = await sql.query<{ id: string; orgId: string; revokedAt: string }>(
    `UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1
     RETURNING id, org_id AS "orgId", ${iso('revoked_at')} AS "revokedAt"`,
    [keyId],
  )
  if (!row) throw new OperatorError(`unknown API key: ${keyId}`)
  return row
}

/** Keys revoked because their organization's plan no longer grants API access. */
export interface PlanRevocation {
  readonly orgId: string
  readonly plan: Plan
  /** How many active keys were revoked. */
  readonly keys: number
}

/** The plans without API access (no key allowed), as a SQL list of literals. */
const NO_ACCESS_PLANS = PLANS.filter((plan) => MAX_ACTIVE_KEYS[plan] === 0)
  .map((plan) => `'${plan}'`)
  .join(', ')

/**
 * Revokes, in the caller's transaction, every active key of the organizations that `orgIds` (a SQL
 * query of organization ids) names and whose plan now has no API access: a downgrade takes API
 * access away in the same transaction that writes it. The request path never checks the plan (the
 * contract), so the keys themselves must go. Returns what was revoked, by organization.
 */
export async function revokeKeysWithoutApiAccess(sql: Sql, orgIds: string): Promise<PlanRevocation[]> {
  const rows = await sql.query<{ orgId: string; plan: Plan; keys: number }>(
    `WITH revoked AS (
       UPDATE api_keys k SET revoked_at = now()
       FROM organizations o
       WHERE o.id = k.org_id AND o.plan IN (${NO_ACCESS_PLANS})
         AND k.org_id IN (${orgIds}) AND ${activeKey('k')}
       RETURNING k.org_id, o.plan)
     SELECT org_id AS "orgId", plan, count(*)::int AS keys FROM revoked GROUP BY org_id, plan ORDER BY org_id`,
  )
  return rows.map((row) => ({ orgId: row.orgId, plan: row.plan, keys: Number(row.keys) }))
}
