import pg from 'pg'

/**
 * Roles are cluster-wide: a role a test creates outlives the test's database and every later run.
 * Each run names its roles with a tag of its own, so that the global teardown can tell the ones it
 * left behind from those of a run going on beside it (test/helpers/global-setup.ts).
 */
export const TEST_ROLE_PREFIX = 'openbook_api_'

const SAFE_NAME = /^[a-z_][a-z0-9_]*$/

function checkedName(role: string): string {
  if (!SAFE_NAME.test(role)) throw new Error(`not a test role name: ${role}`)
  return role
}

function urlOf(adminUrl: string, database: string): string {
  const url = new URL(adminUrl)
  url.pathname = `/${encodeURIComponent(database)}`
  return url.toString()
}

async function withClient<T>(url: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await use(client)
  } finally {
    await client.end()
  }
}

/**
 * Drops a role everywhere it is known. DROP ROLE refuses while the role owns objects or holds
 * privileges in any database of the cluster, and DROP OWNED (which also revokes its privileges)
 * works in one database at a time: it runs first in each database that pg_shdepend names.
 */
export async function dropRole(adminUrl: string, role: string): Promise<void> {
  const name = checkedName(role)
  const databases = await withClient(adminUrl, async (client) => {
    const result = await client.query<{ datname: string }>(
      `SELECT DISTINCT d.datname FROM pg_shdepend s JOIN pg_database d ON d.oid = s.dbid
       WHERE s.refclassid = 'pg_authid'::regclass AND s.refobjid = (SELECT oid FROM pg_roles WHERE rolname = $1)`,
      [name],
    )
    return result.rows.map((row) => row.datname)
  })
  for (const database of databases) {
    await withClient(urlOf(adminUrl, database), (client) => client.query(`DROP OWNED BY ${name}`)).catch(
      (error: { code?: string }) => {
        if (error.code !== '3D000') throw error // invalid_catalog_name: the database is gone already
      },
    )
  }
  await withClient(adminUrl, (client) => client.query(`DROP ROLE IF EXISTS ${name}`))
}

/** The roles of a run's tag that exist now. */
export async function rolesOfRun(adminUrl: string, runTag: string): Promise<string[]> {
  return withClient(adminUrl, async (client) => {
    const result = await client.query<{ rolname: string }>(
      `SELECT rolname FROM pg_roles WHERE starts_with(rolname, $1) ORDER BY rolname`,
      [checkedName(`${TEST_ROLE_PREFIX}${runTag}_`)],
    )
    return result.rows.map((row) => row.rolname)
  })
}
