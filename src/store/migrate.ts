import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { READER_ROLE } from '../queries/sql.js'
import type { Sql, Store } from './types.js'

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url))
const NUMBERED = /^(\d{3})_[a-z0-9_]+\.sql$/
// Any constant serialises concurrent `openbook migrate` runs on one database.
const MIGRATION_LOCK = 7_340_112

interface Migration {
  readonly version: number
  readonly name: string
  readonly sql: string
}

function migrations(): Migration[] {
  return readdirSync(MIGRATIONS_DIR)
    .filter((file) => NUMBERED.test(file))
    .sort()
    .map((file) => ({
      version: Number(file.slice(0, 3)),
      name: file,
      sql: readFileSync(MIGRATIONS_DIR + file, 'utf8'),
    }))
}

export const LATEST_VERSION = Math.max(...migrations().map((m) => m.version))

/**
 * The applied schema version. The owner (in `migrate`) reads the migrations table; anyone else
 * asks openbook_schema_version(), which a member of openbook_reader may call (publishVersion).
 */
async function appliedVersion(sql: Sql, reader: 'owner' | 'anyone' = 'anyone'): Promise<number> {
  const [row] = await sql.query<{ table: boolean; published: boolean }>(
    `SELECT to_regclass('public.openbook_schema_migrations') IS NOT NULL AS table,
            to_regprocedure('public.openbook_schema_version()') IS NOT NULL AS published`,
  )
  if (!row?.table) return 0
  const [current] = await sql.query<{ version: number | null }>(
    row.published && reader === 'anyone'
      ? 'SELECT public.openbook_schema_version() AS version'
      : 'SELECT max(version) AS version FROM openbook_schema_migrations',
  )
  return current?.version ?? 0
}

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
 * Creates openbook_reader when it is missing (which needs CREATEROLE once, or a superuser), and
 * makes the schema owner a member, so that a server given the owner's URL can run its requests
 * as openbook_reader. Both are skipped when already so: an owner without CREATEROLE can migrate
 * once the role exists.
 */
async function ensureReaderRole(sql: Sql, owner: string): Promise<void> {
  const [state] = await sql.query<{ exists: boolean; member: boolean; may_create: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1) AS exists,
            EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1) AND pg_has_role($2, $1, 'MEMBER') AS member,
            (SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user) AS may_create`,
    [READER_ROLE, owner],
  )
  if (!state?.exists) {
    if (!state?.may_create) {
      throw new MigrationError(
        `role ${READER_ROLE} does not exist and ${owner} may not create roles: run \`openbook migrate\` once ` +
          `as a role with CREATEROLE (or a superuser), or create it: CREATE ROLE ${READER_ROLE} NOLOGIN`,
      )
    }
    // Another database of the same cluster (or a concurrent migrate) may make it first.
    await sql.exec(`DO $$ BEGIN
      CREATE ROLE ${READER_ROLE} NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`)
  }
  if (!state?.member && state?.may_create) {
    await sql.exec(`GRANT ${READER_ROLE} TO ${quoteIdent(owner)}`)
  }
}

/**
 * The server checks at start that the schema is current, and may log in as a member of
 * openbook_reader, which reads no table but the request path's. So the version is also published
 * as a function that returns it as a constant: it reads nothing, and runs with the caller's rights.
 */
async function publishVersion(sql: Sql): Promise<void> {
  const version = Math.trunc(await appliedVersion(sql, 'owner'))
  await sql.exec(`CREATE OR REPLACE FUNCTION openbook_schema_version() RETURNS integer
      LANGUAGE sql IMMUTABLE SECURITY INVOKER AS $$ SELECT ${version} $$;
    REVOKE ALL ON FUNCTION openbook_schema_version() FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION openbook_schema_version() TO ${READER_ROLE}`)
}

/** A migration that cannot run as this role; the message says what to do. */
export class MigrationError extends Error {}

export interface MigrateResult {
  readonly applied: readonly string[]
  readonly version: number
}

/** Applies pending migrations and (re)grants the reader role, all in one transaction. */
export async function migrate(store: Store): Promise<MigrateResult> {
  return store.admin(async (sql) => {
    await sql.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK])
    const owner = await schemaOwner(sql)
    await ensureReaderRole(sql, owner)
    const [may] = await sql.query<{ ok: boolean }>(
      "SELECT current_user = $1 OR pg_has_role(current_user, $1, 'MEMBER') AS ok",
      [owner],
    )
    if (!may?.ok) {
      throw new MigrationError(`the schema belongs to ${owner}: run \`openbook migrate\` as ${owner}`)
    }
    await sql.exec(`SET LOCAL ROLE ${quoteIdent(owner)}`)
    await sql.exec(`CREATE TABLE IF NOT EXISTS openbook_schema_migrations (
      version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
    const from = await appliedVersion(sql, 'owner')
    const applied: string[] = []
    for (const migration of migrations().filter((m) => m.version > from)) {
      await sql.exec(migration.sql)
      await sql.query('INSERT INTO openbook_schema_migrations (version, name) VALUES ($1, $2)', [
        migration.version,
        migration.name,
      ])
      applied.push(migration.name)
    }
    await sql.exec(readFileSync(`${MIGRATIONS_DIR}reader-role.sql`, 'utf8'))
    await publishVersion(sql)
    return { applied, version: LATEST_VERSION }
  })
}

export async function schemaVersion(store: Store): Promise<number> {
  return store.admin(appliedVersion)
}

export class SchemaNotCurrentError extends Error {
  constructor(found: number | 'unreadable') {
    super(
      found === 'unreadable'
        ? `the database schema is older than this openbook (its version is not readable by this role): run \`openbook migrate\` as the owner`
        : `database schema is at version ${found}, expected ${LATEST_VERSION}: run \`openbook migrate\``,
    )
  }
}

export async function assertSchemaCurrent(store: Store): Promise<void> {
  let found: number
  try {
    found = await schemaVersion(store)
  } catch (error) {
    // A schema from before openbook_schema_version(): a member of openbook_reader may not read it.
    if ((error as { code?: string }).code === '42501') throw new SchemaNotCurrentError('unreadable')
    throw error
  }
  if (found !== LATEST_VERSION) throw new SchemaNotCurrentError(found)
}

/**
 * Gives the planner fresh statistics after a bulk load. PostgreSQL's autovacuum would get there
 * in time; PGlite has no autovacuum, so without this its plans rest on no statistics at all.
 */
export async function refreshStatistics(store: Store): Promise<void> {
  await store.admin((sql) => sql.exec('ANALYZE'))
}
