import { READER_ROLE } from '../reader-settings.js'
import type { Sql, Store } from '../types.js'
import { WRITER_ROLE } from './access.js'
import { repairAccess } from './repair.js'
import {
  assertServable,
  compatibleFromAt,
  LATEST_VERSION,
  MigrateTooOldError,
  readMigrations,
  readSchemaState,
  readServableState,
  SchemaNotCurrentError,
} from './schema-version.js'

export { LATEST_VERSION, SchemaNotCurrentError, WRITER_ROLE }

// Any constant serialises concurrent `openbook migrate` runs on one database.
const MIGRATION_LOCK = 7_340_112

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`

/**
 * The role that owns openbook's tables: the owner of the migrations table, or the connecting role
 * on a new database. Whoever runs `migrate` (the owner, or a superuser), the schema stays the
 * owner's: new tables are created as it and the operator's policies name it.
 */
async function schemaOwner(sql: Sql): Promise<string> {
  const [row] = await sql.query<{ owner: string }>(
    `SELECT coalesce(
       (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = to_regclass('public.openbook_schema_migrations')),
       current_user) AS owner`,
  )
  return row?.owner ?? ''
}

/**
 * Creates `role` when it is missing (which needs CREATEROLE once, or a superuser). For
 * openbook_reader, also makes the schema owner a member, so that a server given the owner's URL
 * can run its requests as openbook_reader. Each is skipped when already so: an owner without
 * CREATEROLE can migrate once the roles exist. Returns true when it made the owner a member.
 */
async function ensureRole(sql: Sql, owner: string, role: string): Promise<boolean> {
  const [state] = await sql.query<{ exists: boolean; member: boolean; may_create: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1) AS exists,
            EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1) AND pg_has_role($2, $1, 'MEMBER') AS member,
            (SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user) AS may_create`,
    [role, owner],
  )
  if (!state?.exists) {
    if (!state?.may_create) {
      throw new MigrationError(
        `role ${role} does not exist and ${owner} may not create roles: run \`openbook migrate\` once ` +
          `as a role with CREATEROLE (or a superuser), or create it: CREATE ROLE ${role} NOLOGIN`,
      )
    }
    // Another database of the same cluster (or a concurrent migrate) may make it first.
    await sql.exec(`DO $$ BEGIN
      CREATE ROLE ${role} NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`)
  }
  if (role === READER_ROLE && !state?.member && state?.may_create) {
    await sql.exec(`GRANT ${READER_ROLE} TO ${quoteIdent(owner)}`)
    return true
  }
  return false
}

/**
 * The server checks at start that it may serve the schema, and may log in as a member of
 * openbook_reader, which reads no table but the request path's. So the version, and the oldest
 * release that serves it, are also published as a function that returns them as constants: it
 * reads nothing, and runs with the caller's rights. Its result changed from one integer (up to
 * 1.0.0) to this pair: a release from before the version rules then fails its own `migrate`
 * (`CREATE OR REPLACE` may not change a function's result type), and rolls back what it did,
 * instead of rewriting a newer schema's grants.
 */
async function publishVersion(sql: Sql, version: number): Promise<void> {
  const compatibleFrom = compatibleFromAt(version)
  const published = await readSchemaState(sql, 'anyone')
  const form = await sql.query<{ pair: boolean }>(
    `SELECT p.proargnames IS NOT NULL AS pair FROM pg_proc p
     WHERE p.oid = to_regprocedure('public.openbook_schema_version()')`,
  )
  if (published.version === version && published.compatibleFrom === compatibleFrom && form[0]?.pair) return
  await sql.exec(`DROP FUNCTION IF EXISTS openbook_schema_version();
    CREATE FUNCTION openbook_schema_version(OUT version smallint, OUT compatible_from smallint)
      LANGUAGE sql IMMUTABLE SECURITY INVOKER AS $$ SELECT ${Math.trunc(version)}::smallint, ${Math.trunc(compatibleFrom)}::smallint $$;
    REVOKE ALL ON FUNCTION openbook_schema_version() FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION openbook_schema_version() TO ${READER_ROLE}`)
}

/**
 * Checked at every run, changing nothing: a reader that bypasses row-level security is the
 * operator's doing, and no repair of openbook's may undo it silently.
 */
async function assertReaderUnprivileged(sql: Sql): Promise<void> {
  const [row] = await sql.query<{ privileged: boolean }>(
    'SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1 AND (rolsuper OR rolbypassrls)) AS privileged',
    [READER_ROLE],
  )
  if (row?.privileged)
    throw new MigrationError(`role ${READER_ROLE} must not be a superuser or bypass row-level security`)
}

/** A migration that cannot run as this role; the message says what to do. */
export class MigrationError extends Error {}

export interface MigrateResult {
  readonly applied: readonly string[]
  readonly version: number
  /** What was missing of the access the schema defines, and was restored (repair.ts): one line each. */
  readonly repaired: readonly string[]
}

/**
 * How long a migration waits for one table lock before it rolls back and starts again. Under
 * the PostgreSQL default deadlock_timeout (1 s): a request of a release still serving that holds
 * a table the migration needs next, while waiting for one the migration holds, is never the one
 * PostgreSQL ends; the migration gives way, and requests wait on it at most this long a try.
 */
const LOCK_WAIT_MS = 500
const LOCK_TRIES = 40
/** lock_not_available, deadlock_detected: the whole transaction rolled back, nothing half-done. */
const GAVE_WAY = new Set(['55P03', '40P01'])

/**
 * Applies pending migrations (which hold the roles' grants), then restores any grant, policy or
 * forced row-level security of access.ts that the schema lacks (unless `repair` is false), all in
 * one transaction. On a schema
 * newer than this release knows it refuses before it writes anything (MigrateTooOldError). Beside
 * serving instances it takes its table locks a try at a time (LOCK_WAIT_MS); after `lockTries`
 * tries it stops with a MigrationError that names the transactions holding its tables.
 */
export async function migrate(
  store: Store,
  { lockTries = LOCK_TRIES, repair = true }: { lockTries?: number; repair?: boolean } = {},
): Promise<MigrateResult> {
  const started = Date.now()
  for (let attempt = 1; ; attempt++) {
    try {
      return await migrateOnce(store, repair)
    } catch (error) {
      const code = (error as { code?: unknown }).code
      if (typeof code !== 'string' || !GAVE_WAY.has(code)) throw error
      if (attempt >= lockTries) throw await lockedOut(store, attempt, Date.now() - started)
      await new Promise((resolve) => setTimeout(resolve, 50 * Math.min(attempt, 10)))
    }
  }
}

/** The other sessions whose open transactions hold a lock on one of openbook's tables, oldest first. */
const HOLDERS = `
  SELECT DISTINCT ON (a.pid) a.pid, l.relation::regclass::text AS "table",
         to_char(a.xact_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS since,
         nullif(concat_ws(' ', a.usename, nullif(a.application_name, '')), '') AS who
  FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
  WHERE l.granted AND l.locktype = 'relation' AND l.pid <> pg_backend_pid()
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND l.relation IN (SELECT c.oid FROM pg_class c JOIN pg_class m ON m.oid = to_regclass('public.openbook_schema_migrations')
                       WHERE c.relnamespace = m.relnamespace AND c.relowner = m.relowner AND c.relkind IN ('r', 'v'))
  ORDER BY a.pid, l.relation
`

/** What to tell the operator when the migration gave way every time: who holds its tables. */
async function lockedOut(store: Store, tries: number, ms: number): Promise<MigrationError> {
  const holders = await store
    .admin((sql) =>
      sql.query<{ pid: number; table: string; since: string | null; who: string | null }>(HOLDERS),
    )
    .catch(() => [])
  const oldest = [...holders].sort((a, b) => (a.since ?? '').localeCompare(b.since ?? '')).slice(0, 3)
  const named = oldest.map(
    (h) =>
      `${h.table} held by pid ${h.pid}${h.who ? ` (${h.who})` : ''}${h.since ? ` in a transaction since ${h.since}` : ''}`,
  )
  return new MigrationError(
    `gave way to other sessions ${tries} times in ${Math.round(ms / 1000)} s and changed nothing` +
      `${named.length > 0 ? `: ${named.join('; ')}` : ''}; run \`openbook migrate\` again once ` +
      `${named.length === 1 ? 'that transaction ends' : 'those transactions end'}`,
  )
}

async function migrateOnce(store: Store, repair: boolean): Promise<MigrateResult> {
  return store.admin(async (sql) => {
    await sql.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK])
    await sql.exec(`SET LOCAL lock_timeout = '${LOCK_WAIT_MS}ms'`)
    const owner = await schemaOwner(sql)
    const [may] = await sql.query<{ ok: boolean }>(
      "SELECT current_user = $1 OR pg_has_role(current_user, $1, 'MEMBER') AS ok",
      [owner],
    )
    if (!may?.ok) {
      throw new MigrationError(`the schema belongs to ${owner}: run \`openbook migrate\` as ${owner}`)
    }
    const from = (await readSchemaState(sql, 'owner')).version
    if (from > LATEST_VERSION) throw new MigrateTooOldError(from)
    const repaired: string[] = []
    // On a schema that existed, a missing membership was lost (a restore under another owner).
    if ((await ensureRole(sql, owner, READER_ROLE)) && from > 0)
      repaired.push(`${owner} made a member of ${READER_ROLE}`)
    await ensureRole(sql, owner, WRITER_ROLE)
    await sql.exec(`SET LOCAL ROLE ${quoteIdent(owner)}`)
    await sql.exec(`CREATE TABLE IF NOT EXISTS openbook_schema_migrations (
      version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
    ALTER TABLE openbook_schema_migrations ADD COLUMN IF NOT EXISTS compatible_from integer`)
    const applied: string[] = []
    for (const migration of readMigrations().filter((m) => m.version > from)) {
      await sql.exec(migration.sql)
      await sql.query(
        'INSERT INTO openbook_schema_migrations (version, name, compatible_from) VALUES ($1, $2, $3)',
        [migration.version, migration.name, migration.compatibleFrom],
      )
      applied.push(migration.name)
    }
    await assertReaderUnprivileged(sql)
    const version = LATEST_VERSION
    await publishVersion(sql, version)
    // At every run, also with nothing to apply: what a restore under other role names lost.
    if (repair) repaired.push(...(await repairAccess(sql, owner)))
    return { applied, version, repaired }
  })
}

/** The schema's state as this connection's role reads it. */
export async function schemaState(store: Store) {
  return store.admin((sql) => readSchemaState(sql))
}

/**
 * Throws unless this release may serve the schema: SchemaNotCurrentError (run migrate) or
 * SchemaTooNewError (upgrade openbook).
 */
export async function assertSchemaServable(store: Store): Promise<void> {
  await store.admin(async (sql) => assertServable(await readServableState(sql)))
}

/**
 * openbook's own tables: those of the migrations table's schema that its owner owns. A bare
 * ANALYZE would also visit every catalog, which a non-superuser owner may not analyze (a WARNING
 * "skipping pg_…" each in the server's log).
 */
const OWN_TABLES = `
  SELECT format('%I.%I', n.nspname, c.relname) AS name
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_class m ON m.oid = to_regclass('public.openbook_schema_migrations')
  WHERE c.relnamespace = m.relnamespace AND c.relowner = m.relowner AND c.relkind IN ('r', 'p', 'm')
  ORDER BY 1`

/**
 * Gives the planner fresh statistics after a bulk load. PostgreSQL's autovacuum would get there
 * in time; PGlite has no autovacuum, so without this its plans rest on no statistics at all.
 */
export async function refreshStatistics(store: Store): Promise<void> {
  await store.admin(async (sql) => {
    const tables = await sql.query<{ name: string }>(OWN_TABLES)
    if (tables.length > 0) await sql.exec(`ANALYZE ${tables.map((table) => table.name).join(', ')}`)
  })
}
