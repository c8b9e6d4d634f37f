import { randomBytes } from 'node:crypto'
import pg from 'pg'
import type { TestProject } from 'vitest/node'
import { dropRole, rolesOfRun } from './roles.js'

export const ADMIN_URL = process.env.TEST_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test'

declare module 'vitest' {
  export interface ProvidedContext {
    postgresUrl: string | null
    /** Part of the name of every role this run creates (test/helpers/roles.ts). */
    roleTag: string
  }
}

/**
 * Roles are cluster-wide and outlive the run: every role a test creates must be dropped by its
 * teardown. This fails the run over any role of this run that is left, after dropping it.
 */
async function checkRolesDropped(roleTag: string): Promise<void> {
  const left = await rolesOfRun(ADMIN_URL, roleTag)
  if (left.length === 0) return
  for (const role of left) await dropRole(ADMIN_URL, role).catch(() => {})
  throw new Error(
    `The tests left ${left.length} PostgreSQL role(s) behind: ${left.join(', ')}. ` +
      'They have been dropped now; the test that created them must drop them in its teardown.',
  )
}

/**
 * Finds the PostgreSQL the tests use. Under CI (or REQUIRE_POSTGRES=1) it must
 * be there; elsewhere its absence skips the PostgreSQL cases, loudly. Returns
 * the teardown that checks that no role of this run is left.
 */
export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const roleTag = randomBytes(3).toString('hex')
  project.provide('roleTag', roleTag)
  const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 3_000 })
  try {
    await client.connect()
    await client.query('SELECT 1')
    project.provide('postgresUrl', ADMIN_URL)
    return () => checkRolesDropped(roleTag)
  } catch (error) {
    if (process.env.CI || process.env.REQUIRE_POSTGRES === '1') {
      throw new Error(`PostgreSQL is required but unreachable at ${ADMIN_URL}: ${(error as Error).message}`)
    }
    process.stderr.write(
      `\n${'!'.repeat(78)}\n!! PostgreSQL unreachable at ${ADMIN_URL}: the PostgreSQL cases are SKIPPED.\n` +
        `!! Only the embedded (PGlite) cases run. Start PostgreSQL or set TEST_DATABASE_URL.\n${'!'.repeat(78)}\n\n`,
    )
    project.provide('postgresUrl', null)
    return undefined
  } finally {
    await client.end().catch(() => {})
  }
}
