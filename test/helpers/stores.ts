import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { inject } from 'vitest'
import { createEmbeddedStore } from '../../src/store/embedded.js'
import { migrate } from '../../src/store/migrate.js'
import { createPostgresStore } from '../../src/store/postgres.js'
import type { Store, StoreKind } from '../../src/store/types.js'
import { dropRole, TEST_ROLE_PREFIX } from './roles.js'

export const STORE_KINDS: readonly StoreKind[] = ['postgres', 'embedded']

export function postgresAvailable(): boolean {
  return inject('postgresUrl') !== null
}

function adminUrl(): string {
  const url = inject('postgresUrl')
  if (!url) throw new Error('PostgreSQL is not available')
  return url
}

export function urlFor(database: string): string {
  const url = new URL(adminUrl())
  url.pathname = `/${database}`
  return url.toString()
}

async function adminQuery(text: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl() })
  await client.connect()
  try {
    await client.query(text)
  } finally {
    await client.end()
  }
}

export interface TestDatabase {
  readonly name: string
  readonly url: string
  drop(): Promise<void>
}

/** A fresh, empty PostgreSQL database, dropped by `drop()`. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = `openbook_test_${randomBytes(6).toString('hex')}`
  await adminQuery(`CREATE DATABASE ${name}`)
  return {
    name,
    url: urlFor(name),
    drop: () => adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  }
}

export interface TestRole {
  readonly name: string
  /** Drops the role in every database that knows it; call it in the teardown, after the role's last session. */
  drop(): Promise<void>
}

/**
 * A login role that is a member of `memberOf` (trust authentication here, so no password). Roles
 * are cluster-wide and outlive the test's database: the global teardown fails the run over any
 * role created here and not dropped.
 */
export async function createTestRole(memberOf: string): Promise<TestRole> {
  const name = `${TEST_ROLE_PREFIX}${inject('roleTag')}_${randomBytes(4).toString('hex')}`
  await adminQuery(`CREATE ROLE ${name} LOGIN IN ROLE ${memberOf}`)
  return { name, drop: () => dropRole(adminUrl(), name) }
}

export interface TestStore {
  readonly store: Store
  /** PostgreSQL URL of the store's database (postgres only). */
  readonly url: string | undefined
  close(): Promise<void>
}

/** A migrated store of the given kind on a fresh database (PGlite in memory, or a new PostgreSQL database). */
export async function createTestStore(
  kind: StoreKind,
  options: { maxConnections?: number } = {},
): Promise<TestStore> {
  if (kind === 'embedded') {
    const store = await createEmbeddedStore('memory://')
    await migrate(store)
    return { store, url: undefined, close: () => store.close() }
  }
  const database = await createTestDatabase()
  const store = createPostgresStore({
    connectionString: database.url,
    maxConnections: options.maxConnections ?? 4,
  })
  await migrate(store)
  return {
    store,
    url: database.url,
    close: async () => {
      await store.close()
      await database.drop()
    },
  }
}
