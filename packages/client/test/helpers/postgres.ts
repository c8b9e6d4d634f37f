import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { inject } from 'vitest'

declare module 'vitest' {
  export interface ProvidedContext {
    /** Set by the root's test/helpers/global-setup.ts: null when PostgreSQL is unreachable. */
    postgresUrl: string | null
  }
}

/**
 * The PostgreSQL the tests use. The root's global set-up finds it; when it is unreachable (and
 * neither CI nor REQUIRE_POSTGRES asks for it, which fails the run there) `hasPostgres` is false
 * and the PostgreSQL cases are skipped.
 */
export const ADMIN_URL =
  inject('postgresUrl') ?? process.env.TEST_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test'
export const hasPostgres = inject('postgresUrl') !== null

/** The admin URL with another database. */
export function urlOf(database: string): string {
  const url = new URL(ADMIN_URL)
  url.pathname = `/${database}`
  return url.toString()
}

/** Runs `work` on a connection of the admin URL, then closes it. */
export async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: ADMIN_URL })
  await client.connect()
  try {
    return await work(client)
  } finally {
    await client.end()
  }
}

export interface TestDatabase {
  readonly name: string
  readonly url: string
  /** Drops it, also with sessions still open. */
  drop(): Promise<void>
}

/** A new, empty database named `<prefix>_<random>`, for one test file. */
export async function createDatabase(prefix: string): Promise<TestDatabase> {
  const name = `${prefix}_${randomBytes(4).toString('hex')}`
  await admin((client) => client.query(`create database ${name}`))
  return {
    name,
    url: urlOf(name),
    drop: () =>
      admin((client) => client.query(`drop database if exists ${name} with (force)`)).then(() => {}),
  }
}
