import pg from 'pg'
import type { TestProject } from 'vitest/node'

export const ADMIN_URL = process.env.TEST_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test'

declare module 'vitest' {
  export interface ProvidedContext {
    postgresUrl: string | null
  }
}

/**
 * Finds the PostgreSQL the tests use. Under CI (or REQUIRE_POSTGRES=1) it must
 * be there; elsewhere its absence skips the PostgreSQL cases, loudly.
 */
export default async function setup(project: TestProject): Promise<void> {
  const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 3_000 })
  try {
    await client.connect()
    await client.query('SELECT 1')
    project.provide('postgresUrl', ADMIN_URL)
  } catch (error) {
    if (process.env.CI || process.env.REQUIRE_POSTGRES === '1') {
      throw new Error(`PostgreSQL is required but unreachable at ${ADMIN_URL}: ${(error as Error).message}`)
    }
    process.stderr.write(
      `\n${'!'.repeat(78)}\n!! PostgreSQL unreachable at ${ADMIN_URL}: the PostgreSQL cases are SKIPPED.\n` +
        `!! Only the embedded (PGlite) cases run. Start PostgreSQL or set TEST_DATABASE_URL.\n${'!'.repeat(78)}\n\n`,
    )
    project.provide('postgresUrl', null)
  } finally {
    await client.end().catch(() => {})
  }
}
