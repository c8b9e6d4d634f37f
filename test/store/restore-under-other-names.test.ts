import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { AccessError, assertOperatorAccess } from '../../src/store/open.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import { READER_ROLE } from '../../src/store/reader-settings.js'
import { POLICIES, TENANT_TABLES, WRITER_ROLE } from '../../src/store/schema/access.js'
import { migrate } from '../../src/store/schema/migrate.js'
import type { Store } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { scratchRoot } from '../helpers/process.js'
import {
  createOwnedDatabase,
  createTestDatabase,
  createTestRole,
  describeEachStore,
  postgresAvailable,
  type TestDatabase,
  type TestRole,
} from '../helpers/stores.js'

// A staging copy: production's dump restored under other role names (`pg_restore --no-owner
// --no-privileges` into a database that another role owns) keeps the tables, the rows and the
// tenant policies, and loses every grant, the revocations from PUBLIC and the owner's policies,
// which name production's owner. `openbook migrate` there restores all of it, says what it
// restored, and then has nothing to say; the server then serves the copy.

const execFileAsync = promisify(execFile)

/** Everything a role may do in the schema, and its policies, with the owner's name left out. */
async function accessOf(url: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const { rows } = await client.query<{ line: string }>(
      `WITH owner AS (SELECT pg_get_userbyid(relowner) AS name FROM pg_class WHERE oid = 'public.openbook_schema_migrations'::regclass),
       roles(role) AS (VALUES ($1), ($2))
       SELECT format('%s %s on %s', r.role, p.privilege, c.relname) AS line
       FROM pg_class c CROSS JOIN roles r
       CROSS JOIN unnest(CASE c.relkind WHEN 'S' THEN ARRAY['USAGE', 'SELECT', 'UPDATE']
                         ELSE ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER'] END) p(privilege)
       WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'v', 'S')
         AND CASE c.relkind WHEN 'S' THEN has_sequence_privilege(r.role, c.oid, p.privilege)
             ELSE has_table_privilege(r.role, c.oid, p.privilege) END
       UNION ALL
       SELECT format('%s %s on %s.%s', r.role, p.privilege, c.relname, a.attname)
       FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
       CROSS JOIN roles r CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE']) p(privilege)
       WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
         AND has_column_privilege(r.role, c.oid, a.attnum, p.privilege) AND NOT has_table_privilege(r.role, c.oid, p.privilege)
       UNION ALL
       SELECT format('%s EXECUTE %s', r.role, f.oid::regprocedure) FROM pg_proc f CROSS JOIN roles r
       WHERE f.pronamespace = 'public'::regnamespace AND has_function_privilege(r.role, f.oid, 'EXECUTE')
       UNION ALL
       SELECT format('PUBLIC EXECUTE %s', f.oid::regprocedure) FROM pg_proc f
       WHERE f.pronamespace = 'public'::regnamespace
         AND EXISTS (SELECT 1 FROM aclexplode(coalesce(f.proacl, acldefault('f', f.proowner))) x
                     WHERE x.grantee = 0 AND x.privilege_type = 'EXECUTE')
       UNION ALL
       SELECT format('policy %s.%s %s to %s using %s check %s', p.tablename, p.policyname, p.cmd,
                     replace(p.roles::text, (SELECT name FROM owner), 'OWNER'), p.qual, p.with_check)
       FROM pg_policies p WHERE p.schemaname = 'public'
       UNION ALL
       SELECT format('row security on %s: %s, forced %s', c.relname, c.relrowsecurity, c.relforcerowsecurity)
       FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
       UNION ALL
       SELECT format('owner is a member of %s: %s', $1::text, pg_has_role((SELECT name FROM owner), $1, 'MEMBER'))
       ORDER BY 1`,
      [READER_ROLE, WRITER_ROLE],
    )
    return rows.map((row) => row.line)
  } finally {
    await client.end()
  }
}

describe.skipIf(!postgresAvailable())('a restore under other role names, repaired by migrate', () => {
  let production: TestDatabase
  let staging: TestDatabase | undefined
  let stageOwner: TestRole | undefined
  let store: Store | undefined
  let key: string
  let dumpDir: string
  let dump: string

  beforeAll(async () => {
    production = await createTestDatabase({ migrated: true })
    const source = createPostgresStore({ connectionString: production.url, maxConnections: 2 })
    try {
      const org = await createOrg(source, 'org_stage')
      key = (await createKey(source, org)).key
      await addCustomers(source, org.id, [
        { id: 'cus_1', createdAt: '2025-01-01T00:00:00.000Z' },
        { id: 'cus_2', createdAt: '2025-01-02T00:00:00.000Z' },
      ])
    } finally {
      await source.close()
    }
    dumpDir = mkdtempSync(join(scratchRoot(), 'openbook-dump-'))
    dump = join(dumpDir, 'production.dump')
    await execFileAsync('pg_dump', ['-Fc', '-f', dump, '-d', production.url])
    // The staging owner: a role of its own, with CREATEROLE as production.md asks of an owner.
    stageOwner = await createTestRole(null, 'CREATEROLE')
    staging = await createOwnedDatabase(stageOwner.name)
    // pg_restore reports the statements it could not run (exit 1); what it restored is what matters.
    await execFileAsync('pg_restore', ['--no-owner', '--no-privileges', '-d', staging.url, dump]).catch(
      () => undefined,
    )
    store = createPostgresStore({ connectionString: staging.url, maxConnections: 2 })
  }, patience(120_000))

  afterAll(async () => {
    await store?.close()
    await staging?.drop()
    await stageOwner?.drop()
    await production?.drop()
    if (dumpDir) rmSync(dumpDir, { recursive: true, force: true })
  }, patience(60_000))

  const staged = () => {
    if (!store) throw new Error('no staging store')
    return store
  }

  it('before migrate, an operator command says to run migrate, not to grant the owner to itself', async () => {
    const refusal = await assertOperatorAccess(staged()).catch((error: unknown) => error)
    expect(refusal).toBeInstanceOf(AccessError)
    const message = (refusal as Error).message
    expect(message).not.toMatch(new RegExp(`GRANT ${stageOwner?.name} TO ${stageOwner?.name}`))
    expect(message).toContain(`run \`openbook migrate\` as ${stageOwner?.name}`)
  })

  it('migrate restores every grant, policy and membership the schema defines, one line each', async () => {
    const result = await migrate(staged())
    expect(result.applied).toEqual([])
    const owner = String(stageOwner?.name)
    expect(result.repaired).toContain(`${owner} made a member of ${READER_ROLE}`)
    expect(result.repaired).toContain(
      `policy owner_access on customers now applies to ${owner} (it named root)`,
    )
    expect(result.repaired).toContain(`granted SELECT on table customers to ${READER_ROLE}`)
    expect(result.repaired).toContain(`granted INSERT on table list_changes to ${WRITER_ROLE}`)
    expect(result.repaired).toContain(
      'revoked EXECUTE on function list_fold(text,text,boolean,integer) from PUBLIC',
    )
    expect(new Set(result.repaired).size).toBe(result.repaired.length)
    // What a role may do, and every policy, as in the database it was dumped from.
    expect(await accessOf(String(staging?.url))).toEqual(await accessOf(production.url))
  })

  it('a second run has nothing to repair', async () => {
    expect((await migrate(staged())).repaired).toEqual([])
  })

  it('the server then serves the copy, and operator commands run as its owner', async () => {
    await assertOperatorAccess(staged())
    const { app } = await buildTestApp(staged(), { logLevel: 'silent' })
    try {
      const response = await app.inject({
        method: 'GET',
        url: '/api/public/v1/customers',
        headers: bearer(key),
      })
      expect(response.statusCode).toBe(200)
      expect((JSON.parse(response.body) as { data: { id: string }[] }).data.map((c) => c.id)).toEqual([
        'cus_2',
        'cus_1',
      ])
    } finally {
      await app.close()
    }
  })

  it('a restore under the same role names has nothing to repair', async () => {
    const same = await createTestDatabase()
    const restored = createPostgresStore({ connectionString: same.url, maxConnections: 1 })
    try {
      await execFileAsync('pg_restore', ['--exit-on-error', '-d', same.url, dump])
      expect(await migrate(restored)).toMatchObject({ applied: [], repaired: [] })
    } finally {
      await restored.close()
      await same.drop()
    }
  })

  it('pg_dump as the owner needs --enable-row-security, and then dumps every row', async () => {
    const url = String(staging?.url)
    const refused = await execFileAsync('pg_dump', [
      '-Fc',
      '-f',
      join(dumpDir, 'refused.dump'),
      '-d',
      url,
    ]).catch((error: { stderr?: string }) => error)
    expect(String((refused as { stderr?: string }).stderr)).toMatch(/row-level security/)
    const { stdout } = await execFileAsync('pg_dump', [
      '--enable-row-security',
      '--data-only',
      '-t',
      'customers',
      '-d',
      url,
    ])
    expect(stdout).toMatch(/org_stage\tcus_1\t/)
    expect(stdout).toMatch(/org_stage\tcus_2\t/)
  })
})

describeEachStore('migrate on a schema as the migrations left it on %s', (testStore) => {
  it('repairs nothing', async () => {
    expect((await migrate(testStore.store)).repaired).toEqual([])
  })
})

describe.skipIf(!postgresAvailable())('access.ts', () => {
  let database: TestDatabase
  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true })
  })
  afterAll(async () => {
    await database?.drop()
  })

  it('lists every policy and every table under forced row-level security that the migrations make', async () => {
    const client = new pg.Client({ connectionString: database.url })
    await client.connect()
    try {
      const policies = await client.query<{ policy: string }>(
        `SELECT tablename || '.' || policyname AS policy FROM pg_policies WHERE schemaname = 'public' ORDER BY 1`,
      )
      expect(policies.rows.map((row) => row.policy)).toEqual(
        POLICIES.map((p) => `${p.table}.${p.name}`).sort(),
      )
      const forced = await client.query<{ table: string }>(
        `SELECT relname AS table FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'
           AND relrowsecurity AND relforcerowsecurity ORDER BY 1`,
      )
      expect(forced.rows.map((row) => row.table)).toEqual(Object.keys(TENANT_TABLES).sort())
    } finally {
      await client.end()
    }
  })
})
