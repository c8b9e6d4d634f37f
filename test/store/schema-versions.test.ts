import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { storeReadiness } from '../../src/ops/readiness.js'
import { createEmbeddedStore } from '../../src/store/embedded/embedded.js'
import { openStore } from '../../src/store/open.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import { LATEST_VERSION, migrate } from '../../src/store/schema/migrate.js'
import { READER_PRIVILEGES } from '../../src/store/schema/reader-privileges.js'
import { MigrateTooOldError, readMigrations, servability } from '../../src/store/schema/schema-version.js'
import { assertCanServe } from '../../src/store/schema/serving.js'
import type { Store } from '../../src/store/types.js'
import { openbook } from '../cli/run.js'
import { ensureBuild } from '../helpers/build.js'
import { cleanEnv, freePort, start } from '../helpers/process.js'
import {
  createTestDatabase,
  createTestStore,
  describeEachStoreKind,
  migratedDataDir,
  postgresAvailable,
  type TestDatabase,
  type TestStore,
} from '../helpers/stores.js'

/**
 * The version rules (docs/operators/upgrading.md): which release serves which schema, and what `migrate`
 * of a release older than the schema does (nothing). A newer release is played by the schema
 * itself: a migration row and a published version above this release's, and a grant that only
 * the newer release's migration made.
 */
async function becomeNewer(store: Store, compatibleFrom: number): Promise<number> {
  const version = LATEST_VERSION + 1
  await store.admin((sql) =>
    sql.exec(`
      INSERT INTO openbook_schema_migrations (version, name, compatible_from)
        VALUES (${version}, '${version}_from_a_newer_release.sql', ${compatibleFrom});
      DROP FUNCTION openbook_schema_version();
      CREATE FUNCTION openbook_schema_version(OUT version smallint, OUT compatible_from smallint)
        LANGUAGE sql IMMUTABLE AS $$ SELECT ${version}::smallint, ${compatibleFrom}::smallint $$;
      REVOKE ALL ON FUNCTION openbook_schema_version() FROM PUBLIC;
      GRANT EXECUTE ON FUNCTION openbook_schema_version() TO openbook_reader;
      CREATE TABLE newer_release_table (org_id text NOT NULL);
      GRANT SELECT ON newer_release_table TO openbook_reader;`),
  )
  return version
}

/** Everything a run of `migrate` could change for the reader: grants, policies, the published version. */
async function readerSnapshot(store: Store): Promise<unknown> {
  return store.admin(async (sql) => ({
    tables: await sql.query(
      `SELECT table_name, privilege_type FROM information_schema.role_table_grants
       WHERE grantee = 'openbook_reader' ORDER BY 1, 2`,
    ),
    columns: await sql.query(
      `SELECT table_name, column_name, privilege_type FROM information_schema.column_privileges
       WHERE grantee = 'openbook_reader' ORDER BY 1, 2, 3`,
    ),
    routines: await sql.query(
      `SELECT p.oid::regprocedure::text AS f, p.proacl::text AS acl FROM pg_proc p
       JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' ORDER BY 1`,
    ),
    policies: await sql.query(
      `SELECT tablename, policyname, roles::text, qual FROM pg_policies WHERE schemaname = 'public' ORDER BY 1, 2`,
    ),
    version: await sql.query('SELECT * FROM openbook_schema_version()'),
    migrations: await sql.query(
      'SELECT version, name, compatible_from FROM openbook_schema_migrations ORDER BY 1',
    ),
  }))
}

describeEachStoreKind('the version rules on %s', (kind) => {
  let current: TestStore | undefined
  const fresh = async () => {
    current = await createTestStore(kind)
    return current.store
  }
  afterEach(async () => {
    await current?.close()
    current = undefined
  })

  it('migrate of a release older than the schema refuses in one line and changes nothing, grants included', async () => {
    const store = await fresh()
    const version = await becomeNewer(store, LATEST_VERSION)
    const before = await readerSnapshot(store)
    const refused = await migrate(store).then(
      () => undefined,
      (error: unknown) => error,
    )
    expect(refused).toBeInstanceOf(MigrateTooOldError)
    expect((refused as Error).message).toBe(
      `the schema is at version ${version}; this openbook knows up to ${LATEST_VERSION}: upgrade openbook`,
    )
    expect(await readerSnapshot(store)).toEqual(before)
  })

  it('migrate on a current schema changes no grant, policy or version', async () => {
    const store = await fresh()
    const before = await readerSnapshot(store)
    expect((await migrate(store)).applied).toEqual([])
    expect(await readerSnapshot(store)).toEqual(before)
  })

  it('serves its own schema and a newer one that declares it still serves; refuses one that does not, saying upgrade', async () => {
    const store = await fresh()
    await expect(assertCanServe(store)).resolves.toBeUndefined()
    const version = await becomeNewer(store, LATEST_VERSION)
    await expect(assertCanServe(store)).resolves.toBeUndefined()
    await store.admin((sql) =>
      sql.exec(`DROP FUNCTION openbook_schema_version();
        CREATE FUNCTION openbook_schema_version(OUT version smallint, OUT compatible_from smallint)
          LANGUAGE sql IMMUTABLE AS $$ SELECT ${version}::smallint, ${version}::smallint $$;
        GRANT EXECUTE ON FUNCTION openbook_schema_version() TO openbook_reader;`),
    )
    await expect(assertCanServe(store)).rejects.toThrow(
      `the schema is at version ${version}, which releases from version ${version} serve; this openbook knows up to ${LATEST_VERSION}: upgrade openbook`,
    )
    const readiness = await storeReadiness(store, 10_000).refresh()
    expect(readiness.statusCode).toBe(503)
    expect(readiness.body.reason).toMatch(/upgrade openbook$/)
  })

  it('an older schema is refused with `run openbook migrate`', async () => {
    const store = await fresh()
    await store.admin((sql) =>
      sql.exec(`DROP FUNCTION openbook_schema_version();
        CREATE FUNCTION openbook_schema_version(OUT version smallint, OUT compatible_from smallint)
          LANGUAGE sql IMMUTABLE AS $$ SELECT ${LATEST_VERSION - 1}::smallint, ${LATEST_VERSION - 1}::smallint $$;
        GRANT EXECUTE ON FUNCTION openbook_schema_version() TO openbook_reader;`),
    )
    await expect(assertCanServe(store)).rejects.toThrow(
      `the database schema is at version ${LATEST_VERSION - 1}; this openbook needs ${LATEST_VERSION}: run \`openbook migrate\``,
    )
  })

  describe('every privilege of the request path', () => {
    // One store for the cases: each takes a privilege away and gives it back.
    let shared: TestStore
    beforeAll(async () => {
      shared = await createTestStore(kind)
    })
    afterAll(async () => {
      await shared?.close()
    })

    it.each(READER_PRIVILEGES.filter((p) => p.kind !== 'schema'))(
      'a reader without $privilege on $object: readiness 503 naming it, 200 once granted again',
      async (privilege) => {
        const store = shared.store
        const readiness = storeReadiness(store, 10_000)
        expect((await readiness.refresh()).statusCode).toBe(200)
        const [table, column] = privilege.object.split('.')
        const on =
          privilege.kind === 'function'
            ? `FUNCTION ${privilege.object}`
            : privilege.kind === 'column'
              ? `${table}`
              : privilege.object
        const what = privilege.kind === 'column' ? `${privilege.privilege} (${column})` : privilege.privilege
        // Functions are executable by PUBLIC unless revoked: the reader must lose it both ways.
        const from = privilege.kind === 'function' ? 'openbook_reader, PUBLIC' : 'openbook_reader'
        await store.admin((sql) => sql.exec(`REVOKE ${what} ON ${on} FROM ${from}`))
        const report = await readiness.refresh()
        expect(report.statusCode).toBe(503)
        expect(report.body.reason).toContain(
          `openbook_reader lacks ${privilege.privilege} on ${privilege.kind} ${privilege.object}`,
        )
        await store.admin((sql) => sql.exec(`GRANT ${what} ON ${on} TO openbook_reader`))
        expect((await readiness.refresh()).statusCode).toBe(200)
      },
    )
  })

  it('a release from before the version rules cannot rewrite the published version (its migrate rolls back)', async () => {
    const store = await fresh()
    // What cda75ce's `migrate` runs last, after re-granting its own list: it fails on the pair's
    // result type, so its whole transaction, grants included, rolls back.
    await expect(
      store.admin((sql) =>
        sql.exec(`CREATE OR REPLACE FUNCTION openbook_schema_version() RETURNS integer
          LANGUAGE sql IMMUTABLE SECURITY INVOKER AS $$ SELECT 7 $$`),
      ),
    ).rejects.toMatchObject({ code: '42P13' })
  })
})

describe('the embedded store follows the same rules', () => {
  it(
    'a DATA_DIR written by a newer release that does not serve this one is refused, unchanged; one that does is served',
    async () => {
      const data = migratedDataDir()
      try {
        let store = await openStore({ dataDir: data.dir, databaseUrl: undefined }, { shortLived: true })
        const version = await becomeNewer(store, LATEST_VERSION + 1)
        const before = await readerSnapshot(store)
        await store.close()
        await expect(
          openStore({ dataDir: data.dir, databaseUrl: undefined }, { shortLived: true }),
        ).rejects.toThrow(
          `DATA_DIR ${data.dir} was written by a newer openbook: its schema is at version ${version}, which releases from version ${version} serve; this openbook knows up to ${LATEST_VERSION}: upgrade openbook`,
        )
        const cli = await openbook(['orgs', 'list'], { DATA_DIR: data.dir })
        expect(cli.code).toBe(1)
        expect(cli.stderr).toMatch(/was written by a newer openbook.*upgrade openbook\n$/)
        // Declared compatible: served as it is, never migrated.
        store = await createEmbeddedStore(data.dir, { shortLived: true, onLockLost: () => {} })
        expect(await readerSnapshot(store)).toEqual(before)
        await store.admin((sql) =>
          sql.exec(`UPDATE openbook_schema_migrations SET compatible_from = ${LATEST_VERSION} WHERE version = ${version};
          DROP FUNCTION openbook_schema_version();
          CREATE FUNCTION openbook_schema_version(OUT version smallint, OUT compatible_from smallint)
            LANGUAGE sql IMMUTABLE AS $$ SELECT ${version}::smallint, ${LATEST_VERSION}::smallint $$;
          GRANT EXECUTE ON FUNCTION openbook_schema_version() TO openbook_reader;`),
        )
        await store.close()
        store = await openStore({ dataDir: data.dir, databaseUrl: undefined }, { shortLived: true })
        await expect(assertCanServe(store)).resolves.toBeUndefined()
        await store.close()
        const migrateCli = await openbook(['migrate'], { DATA_DIR: data.dir })
        expect(migrateCli.code).toBe(1)
        expect(migrateCli.stderr).toBe(
          `openbook: the schema is at version ${version}; this openbook knows up to ${LATEST_VERSION}: upgrade openbook\n`,
        )
      } finally {
        data.remove()
      }
    },
    patience(180_000),
  )
})

describe('migration headers', () => {
  it('every migration after 007 declares the oldest release that serves it, below its own version', () => {
    const declared = readMigrations().filter((m) => m.version > 7)
    for (const migration of declared) {
      expect(migration.sql, migration.name).toMatch(/^-- compatible-from: \d+$/m)
      expect(migration.compatibleFrom, migration.name).toBeLessThan(migration.version)
    }
  })

  it('tells current, newer-compatible, needs-migrate and needs-upgrade apart', () => {
    expect(servability({ version: 7, compatibleFrom: 7 }, 7)).toBe('current')
    expect(servability({ version: 9, compatibleFrom: 7 }, 7)).toBe('newer-compatible')
    expect(servability({ version: 9, compatibleFrom: 8 }, 7)).toBe('needs-upgrade')
    expect(servability({ version: 6, compatibleFrom: 6 }, 7)).toBe('needs-migrate')
  })
})

describe.skipIf(!postgresAvailable())('the server on a store it cannot serve', () => {
  let database: TestDatabase | undefined
  afterEach(async () => {
    await database?.drop()
  })

  const serverOn = async (url: string) => {
    await ensureBuild()
    const server = start(
      'node',
      ['dist/server.js'],
      cleanEnv({ DATABASE_URL: url, PORT: String(await freePort()) }),
    )
    return { code: await server.exited(), output: server.output() }
  }

  it('refuses to start in one line naming the missing grant', async () => {
    database = await createTestDatabase({ migrated: true })
    const store = createPostgresStore({ connectionString: database.url })
    await store.admin((sql) => sql.exec('REVOKE SELECT ON customers FROM openbook_reader'))
    await store.close()
    const { code, output } = await serverOn(database.url)
    expect(code).toBe(1)
    expect(output).toMatch(
      /^openbook: openbook_reader lacks SELECT on table customers, which every request needs: .*GRANT SELECT ON customers TO openbook_reader`$/m,
    )
  })

  it('refuses to start on a newer schema that it does not serve, saying upgrade, not migrate', async () => {
    database = await createTestDatabase({ migrated: true })
    const store = createPostgresStore({ connectionString: database.url })
    const version = await becomeNewer(store, LATEST_VERSION + 1)
    await store.close()
    const { code, output } = await serverOn(database.url)
    expect(code).toBe(1)
    expect(output).toContain(
      `openbook: the schema is at version ${version}, which releases from version ${version} serve; this openbook knows up to ${LATEST_VERSION}: upgrade openbook\n`,
    )
    expect(output).not.toContain('run `openbook migrate`')
  })
})
