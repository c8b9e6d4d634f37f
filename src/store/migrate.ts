import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
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

async function appliedVersion(sql: Sql): Promise<number> {
  const [row] = await sql.query<{ exists: boolean }>(
    "SELECT to_regclass('public.openbook_schema_migrations') IS NOT NULL AS exists",
  )
  if (!row?.exists) return 0
  const [current] = await sql.query<{ version: number | null }>(
    'SELECT max(version) AS version FROM openbook_schema_migrations',
  )
  return current?.version ?? 0
}

export interface MigrateResult {
  readonly applied: readonly string[]
  readonly version: number
}

/** Applies pending migrations and (re)grants the reader role, all in one transaction. */
export async function migrate(store: Store): Promise<MigrateResult> {
  return store.admin(async (sql) => {
    await sql.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK])
    await sql.exec(`CREATE TABLE IF NOT EXISTS openbook_schema_migrations (
      version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
    const from = await appliedVersion(sql)
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
    return { applied, version: LATEST_VERSION }
  })
}

export async function schemaVersion(store: Store): Promise<number> {
  return store.admin(appliedVersion)
}

export class SchemaNotCurrentError extends Error {
  constructor(found: number) {
    super(`database schema is at version ${found}, expected ${LATEST_VERSION}: run \`openbook migrate\``)
  }
}

export async function assertSchemaCurrent(store: Store): Promise<void> {
  const found = await schemaVersion(store)
  if (found !== LATEST_VERSION) throw new SchemaNotCurrentError(found)
}

/**
 * Gives the planner fresh statistics after a bulk load. PostgreSQL's autovacuum would get there
 * in time; PGlite has no autovacuum, so without this its plans rest on no statistics at all.
 */
export async function refreshStatistics(store: Store): Promise<void> {
  await store.admin((sql) => sql.exec('ANALYZE'))
}
