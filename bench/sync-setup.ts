/**
 * What the sync benchmarks start from: one organization seeded with the real CLI into a fresh
 * PostgreSQL database, on the enterprise plan, and an owner's test key of it in a file.
 */
import { writeFileSync } from 'node:fs'
import pg from 'pg'
import { runOk } from './proc.js'

/** Runs `work` on a connection to `url`, closed after it. */
export async function withDatabase<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await work(client)
  } finally {
    await client.end()
  }
}

export interface SeededOrganization {
  /** The PostgreSQL server, `postgres://…` without a database. */
  readonly server: string
  /** The database to (re)create, a plain lowercase identifier. */
  readonly db: string
  readonly customers: number
  readonly appointments: number
  /** Where the key is written (mode 600). */
  readonly keyFile: string
}

/** Creates the database anew, migrates and seeds it, and writes a key; returns the organization's id. */
export async function seedOrganization(options: SeededOrganization): Promise<string> {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(options.db))
    throw new Error('the database must be a plain lowercase identifier')
  const env = { ...process.env, DATABASE_URL: `${options.server}/${options.db}` }
  const cli = async <T>(args: readonly string[]): Promise<T> =>
    // A seed of 150,000 rows on a busy machine takes minutes.
    JSON.parse(
      (await runOk(process.execPath, ['bin/openbook.js', ...args, '--json'], { env, timeoutMs: 1_800_000 }))
        .stdout,
    ) as T
  await withDatabase(`${options.server}/postgres`, async (client) => {
    await client.query(`DROP DATABASE IF EXISTS ${options.db} WITH (FORCE)`)
    await client.query(`CREATE DATABASE ${options.db}`)
  })
  await cli(['migrate'])
  const seeded = await cli<{ orgIds: string[] }>([
    'seed',
    '--orgs',
    '1',
    '--customers',
    String(options.customers),
    '--appointments',
    String(options.appointments),
    '--seed',
    '1',
  ])
  const orgId = String(seeded.orgIds[0])
  const owner = await withDatabase(env.DATABASE_URL, async (client) => {
    await client.query("UPDATE organizations SET plan = 'enterprise' WHERE id = $1", [orgId])
    const { rows } = await client.query<{ email: string }>(
      `SELECT u.email FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.org_id = $1 AND m.role = 'owner' LIMIT 1`,
      [orgId],
    )
    return String(rows[0]?.email)
  })
  const key = await cli<{ key: string }>(['keys', 'create', '--org', orgId, '--as', owner, '--env', 'test'])
  writeFileSync(options.keyFile, key.key, { mode: 0o600 })
  return orgId
}
