import { join } from 'node:path'
import pg from 'pg'
import { runOk } from './proc.js'

/**
 * The largest organization of a seeded database and a fresh test key for it, made with the real
 * command line (for `bench:compression` and `bench:sync`, which measure one organization).
 */
export interface LargestOrg {
  readonly id: string
  readonly customers: number
  readonly key: string
  readonly keyId: string
  /** Revokes the key (plans limit an organization's active keys). */
  revoke(): Promise<void>
}

export const REPOSITORY = new URL('../', import.meta.url).pathname

export async function cli<T>(databaseUrl: string, args: readonly string[]): Promise<T> {
  const result = await runOk(process.execPath, [join(REPOSITORY, 'bin/openbook.js'), ...args, '--json'], {
    env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' },
    timeoutMs: 5 * 60_000,
  })
  return JSON.parse(result.stdout) as T
}

export async function largestOrgWithKey(databaseUrl: string): Promise<LargestOrg> {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    const { rows } = await client.query<{ id: string; customers: number; email: string }>(
      `SELECT o.id, (SELECT count(*)::int FROM customers c WHERE c.org_id = o.id AND c.is_active) AS customers,
              (SELECT u.email FROM memberships m JOIN users u ON u.id = m.user_id
               WHERE m.org_id = o.id AND m.role IN ('owner', 'admin') ORDER BY m.role DESC LIMIT 1) AS email
       FROM organizations o ORDER BY customers DESC LIMIT 1`,
    )
    const org = rows[0]
    if (!org?.email) throw new Error(`no organization with an owner or admin in ${databaseUrl}`)
    const created = await cli<{ key: string; id: string }>(databaseUrl, [
      'keys',
      'create',
      '--org',
      org.id,
      '--as',
      org.email,
      '--env',
      'test',
      '--name',
      'bench-wire',
      '--expires-in',
      '1d',
    ])
    return {
      id: org.id,
      customers: org.customers,
      key: created.key,
      keyId: created.id,
      revoke: () => cli(databaseUrl, ['keys', 'revoke', created.id]),
    }
  } finally {
    await client.end()
  }
}
