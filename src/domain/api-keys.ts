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

/**
 * The database's clock (its transaction's now(), as milliseconds): the one the request path
 * compares an expiry with (openbook_key_lookup), so the one an expiry is computed and checked on.
 * The command line's own clock may be hours off.
 */
async function databaseNow(sql: Sql): Promise<number> {
  const [row] = await sql.query<{ ms: number | string }>(
    'SELECT (extract(epoch FROM now()) * 1000)::float8 AS ms',
  )
  return Number(row?.ms)
}

/** The expiry as a date on the database's clock (`now`), refused when it has passed or lies more than 100 years ahead. */
function expiryDate(expiry: CreateKeyInput['expiry'], now: number): Date | undefined {
  const expiresAt = expiry && ('at' in expiry ? expiry.at : new Date(now + expiry.inMs))
  if (expiresAt && expiresAt.getTime() <= now) {
    throw new OperatorError(
      `the expiry must be in the future (${expiresAt.toISOString()} has passed by the database's clock, ${new Date(now).toISOString()})`,
    )
  }
  // Also when the lifetime is too long for a Date at all (getTime() is NaN then).
  if (expiresAt && !(expiresAt.getTime() <= now + MAX_KEY_LIFETIME_MS)) {
    throw new OperatorError('the expiry is too far: an expiry must lie within 100 years')
  }
  return expiresAt
}

/** Refuses `adding` keys beyond the plan's number of active keys. */
async function assertUnderKeyLimit(
  sql: Sql,
  orgId: string,
  plan: Plan,
  limit: number,
  adding: number,
): Promise<void> {
  const [active] = await sql.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM api_keys WHERE org_id = $1 AND ${activeKey()}`,
    [orgId],
  )
  const n = active?.n ?? 0
  if (n + adding > limit) {
    throw new OperatorError(
      `the ${plan} plan allows ${limit} active API keys and ${orgId} has ${n}` +
        (adding > 1 ? `: ${adding} more would make ${n + adding}` : ''),
    )
  }
}

/** The most keys one `keys create --count` makes, in one transaction. */
export const MAX_KEYS_PER_CALL = 10_000

/**
 * Creates a key under the plan and role rules. Runs in the caller's
 * transaction; the organization row is locked so that two concurrent
 * creations cannot both pass the plan's limit.
 */
export async function createApiKey(sql: Sql, input: CreateKeyInput): Promise<CreatedKey> {
  const [key] = await createApiKeys(sql, input, 1)
  if (!key) throw new Error('no key was created')
  return key
}

/**
 * Creates `count` keys alike (organization, environment, name, expiry) in the caller's
 * transaction: the rules are checked once, for all of them; all are written, or none.
 */
export async function createApiKeys(sql: Sql, input: CreateKeyInput, count: number): Promise<CreatedKey[]> {
  if (!Number.isInteger(count) || count < 1 || count > MAX_KEYS_PER_CALL) {
    throw new OperatorError(`the count must be a whole number from 1 to ${MAX_KEYS_PER_CALL}`)
  }
  const plan = await keyManagerPlan(sql, input.orgId, input.actorEmail)
  const limit = MAX_ACTIVE_KEYS[plan]
  if (limit === 0) throw new OperatorError(`the ${plan} plan of ${input.orgId} has no API access`)
  const expiresAt = expiryDate(input.expiry, await databaseNow(sql))
  await assertUnderKeyLimit(sql, input.orgId, plan, limit, count)
  const [user] = await sql.query<{ id: string }>('SELECT id FROM users WHERE lower(email) = lower($1)', [
    input.actorEmail,
  ])
  const keys = Array.from({ length: count }, () => ({
    secret: generateSecret(input.brand, input.env),
    id: `key_${randomUUID().replaceAll('-', '')}`,
  }))
  const rows = await sql.query<{ id: string; createdAt: string; expiresAt: string | null }>(
    `INSERT INTO api_keys (org_id, id, name, env, key_hash, hint, created_by, expires_at)
     SELECT $1, k.id, $2, $3, k.hash, k.hint, $4, $5
     FROM unnest($6::text[], $7::text[], $8::text[]) AS k(id, hash, hint)
     RETURNING id, ${iso('created_at')} AS "createdAt", ${iso('expires_at')} AS "expiresAt"`,
    [
      input.orgId,
      input.name ?? null,
      input.env,
      user?.id ?? null,
      expiresAt?.toISOString() ?? null,
      keys.map((k) => k.id),
      keys.map((k) => k.secret.hash),
      keys.map((k) => k.secret.hint),
    ],
  )
  const written = new Map(rows.map((row) => [row.id, row]))
  return keys.map(({ id, secret }) => ({
    id,
    key: secret.secret,
    prefix: secret.prefix,
    env: input.env,
    orgId: input.orgId,
    name: input.name ?? null,
    createdAt: written.get(id)?.createdAt ?? new Date().toISOString(),
    expiresAt: written.get(id)?.expiresAt ?? null,
  }))
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

/**
 * Which of an organization's active keys a batch revocation takes: all of them, or those with a
 * name, or those created before an instant or longer ago than an age (both on the database's
 * clock); the conditions given all hold.
 */
export interface KeySelection {
  readonly orgId: string
  readonly name?: string | undefined
  readonly createdBefore?: Date | undefined
  readonly olderThanMs?: number | undefined
}

export interface BatchRevocation {
  readonly orgId: string
  /** The keys this call revoked (keys already revoked or expired are left as they are). */
  readonly revoked: readonly { readonly id: string; readonly revokedAt: string }[]
}

/** Revokes every active key of the selection in one statement of the caller's transaction: all, or none. */
export async function revokeApiKeys(sql: Sql, selection: KeySelection): Promise<BatchRevocation> {
  const [org] = await sql.query('SELECT 1 FROM organizations WHERE id = $1', [selection.orgId])
  if (!org) throw new OperatorError(`unknown organization: ${selection.orgId}`)
  const revoked = await sql.query<{ id: string; revokedAt: string }>(
    `UPDATE api_keys SET revoked_at = now()
     WHERE org_id = $1 AND ${activeKey()}
       AND ($2::text IS NULL OR name = $2)
       AND ($3::timestamptz IS NULL OR created_at < $3)
       AND ($4::float8 IS NULL OR created_at < now() - $4 * interval '1 millisecond')
     RETURNING id, ${iso('revoked_at')} AS "revokedAt"`,
    [
      selection.orgId,
      selection.name ?? null,
      selection.createdBefore?.toISOString() ?? null,
      selection.olderThanMs ?? null,
    ],
  )
  return { orgId: selection.orgId, revoked: revoked.sort((a, b) => a.id.localeCompare(b.id)) }
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
