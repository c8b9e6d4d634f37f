import { READER_ROLE } from '../../src/store/reader-settings.js'
import { readMigrations } from '../../src/store/schema/schema-version.js'
import type { Store } from '../../src/store/types.js'

/**
 * Applies the migrations up to `version` only, as the release that stopped there left a new
 * database, so that a test can store rows before `migrate` runs the later ones over them. The
 * reader role must exist for the grants (a superuser's test database makes it here).
 */
export async function migrateTo(store: Store, version: number): Promise<void> {
  await store.admin(async (sql) => {
    await sql.exec(`DO $$ BEGIN CREATE ROLE ${READER_ROLE} NOLOGIN;
      EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`)
    await sql.exec(`CREATE TABLE openbook_schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now(), compatible_from integer)`)
    for (const migration of readMigrations().filter((m) => m.version <= version)) {
      await sql.exec(migration.sql)
      await sql.query(
        'INSERT INTO openbook_schema_migrations (version, name, compatible_from) VALUES ($1, $2, $3)',
        [migration.version, migration.name, migration.compatibleFrom],
      )
    }
  })
}
