import type { Sql } from '../types.js'

/**
 * How many more connections the server behind DATABASE_URL would take from this instance's role,
 * said once at start (docs/operators/production.md#connections): pools that can open more than
 * the server has free wait for connections, or are refused them, under a burst.
 */

/** One limit on the connections this instance may open, and how many it already counts. */
export interface ConnectionLimit {
  /** In words: `max_connections 100 (3 reserved for superusers)`. */
  readonly name: string
  readonly limit: number
  readonly inUse: number
}

/**
 * The limits that hold for the connecting role now: the server's (max_connections less the slots
 * reserved for superusers), the role's and the database's CONNECTION LIMIT. Each counts the
 * client sessions open now, this instance's own among them.
 */
export async function readConnectionLimits(sql: Sql): Promise<ConnectionLimit[]> {
  const [row] = await sql.query<{
    max: number
    reserved: number
    superuser: boolean
    sessions: number
    role: string
    role_limit: number
    role_sessions: number
    database: string
    database_limit: number
    database_sessions: number
  }>(
    `SELECT current_setting('max_connections')::int AS max,
            current_setting('superuser_reserved_connections')::int
              + coalesce(current_setting('reserved_connections', true)::int, 0) AS reserved,
            r.rolsuper AS superuser,
            (SELECT count(*)::int FROM pg_stat_activity WHERE backend_type = 'client backend') AS sessions,
            r.rolname AS role, r.rolconnlimit AS role_limit,
            (SELECT count(*)::int FROM pg_stat_activity
              WHERE backend_type = 'client backend' AND usename = current_user) AS role_sessions,
            d.datname AS database, d.datconnlimit AS database_limit,
            (SELECT count(*)::int FROM pg_stat_activity
              WHERE backend_type = 'client backend' AND datname = current_database()) AS database_sessions
     FROM pg_roles r, pg_database d
     WHERE r.rolname = current_user AND d.datname = current_database()`,
  )
  if (!row) return []
  const limits: ConnectionLimit[] = [
    row.superuser
      ? { name: `max_connections ${row.max}`, limit: row.max, inUse: row.sessions }
      : {
          name: `max_connections ${row.max} (${row.reserved} reserved for superusers)`,
          limit: row.max - row.reserved,
          inUse: row.sessions,
        },
  ]
  // -1: no limit. Superusers are held to neither.
  if (row.role_limit >= 0 && !row.superuser)
    limits.push({
      name: `role ${row.role}'s CONNECTION LIMIT ${row.role_limit}`,
      limit: row.role_limit,
      inUse: row.role_sessions,
    })
  if (row.database_limit >= 0 && !row.superuser)
    limits.push({
      name: `database ${row.database}'s CONNECTION LIMIT ${row.database_limit}`,
      limit: row.database_limit,
      inUse: row.database_sessions,
    })
  return limits
}

/** What this instance may open to DATABASE_URL, and what it holds already (counted in the limits' inUse). */
export interface InstanceConnections {
  readonly poolSize: number
  /** The connections of its own beside the pool: the readiness check's and the background fold's. */
  readonly extra: number
  /** This instance's connections open now. */
  readonly open: number
}

/**
 * The one warning line when this instance alone can open more connections than a limit leaves
 * free; undefined when every limit has room for it. Other instances and clients count only as
 * far as they hold connections now: the rule for all of them is the operator's
 * (docs/operators/production.md#connections).
 */
export function connectionLimitWarning(
  limits: readonly ConnectionLimit[],
  instance: InstanceConnections,
): string | undefined {
  const wanted = instance.poolSize + instance.extra
  for (const { name, limit, inUse } of limits) {
    const free = limit - (inUse - instance.open)
    if (wanted <= free) continue
    return (
      `this instance may open ${wanted} connections to DATABASE_URL (DATABASE_POOL_SIZE ${instance.poolSize} ` +
      `and ${instance.extra} of its own for the readiness check and the background fold), but ${name} leaves ${Math.max(0, free)} free ` +
      `(${inUse - instance.open} in use by other sessions): under load, requests will wait for connections ` +
      'or be refused them; lower DATABASE_POOL_SIZE or raise the limit (docs/operators/production.md#connections)'
    )
  }
  return undefined
}
