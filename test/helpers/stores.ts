import { randomBytes } from 'node:crypto'
import { cpSync, mkdtempSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, describe, inject } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { createEmbeddedStore } from '../../src/store/embedded/embedded.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import type { Store, StoreKind } from '../../src/store/types.js'
import { scratchRoot } from './process.js'
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

/**
 * A fresh PostgreSQL database, dropped by `drop()`: empty, or `migrated` (a copy of the run's
 * template, migrated once by the global set-up, which costs milliseconds instead of a migration),
 * or a copy of the database `from` (which no session may be connected to).
 */
export async function createTestDatabase(
  options: { migrated?: boolean; from?: string } = {},
): Promise<TestDatabase> {
  const name = `openbook_test_${randomBytes(6).toString('hex')}`
  const template = options.from ?? (options.migrated ? inject('postgresTemplate') : null)
  if (options.migrated && !template) throw new Error('PostgreSQL is not available')
  await adminQuery(template ? `CREATE DATABASE ${name} TEMPLATE ${template}` : `CREATE DATABASE ${name}`)
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
 * A login role that is a member of `memberOf` (none: null), with `attributes` (e.g. CREATEROLE);
 * trust authentication here, so no password. Roles are cluster-wide and outlive the test's
 * database: the global teardown fails the run over any role created here and not dropped.
 */
export async function createTestRole(memberOf: string | null, attributes = ''): Promise<TestRole> {
  const name = `${TEST_ROLE_PREFIX}${inject('roleTag')}_${randomBytes(4).toString('hex')}`
  await adminQuery(`CREATE ROLE ${name} LOGIN ${attributes}${memberOf ? ` IN ROLE ${memberOf}` : ''}`)
  return { name, drop: () => dropRole(adminUrl(), name) }
}

/** A new, empty PostgreSQL database owned by `owner`, dropped by `drop()` (before its owner is). */
export async function createOwnedDatabase(owner: string): Promise<TestDatabase> {
  const name = `openbook_test_${randomBytes(6).toString('hex')}`
  await adminQuery(`CREATE DATABASE ${name} OWNER ${owner}`)
  const url = new URL(urlFor(name))
  url.username = owner
  return {
    name,
    url: url.toString(),
    drop: () => adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  }
}

export interface TestStore {
  readonly store: Store
  /** PostgreSQL URL of the store's database (postgres only). */
  readonly url: string | undefined
  close(): Promise<void>
}

/**
 * A new DATA_DIR holding a migrated, empty embedded database, as `openbook migrate` leaves one (a
 * copy of the run's template): a server or command started on it skips PGlite's initdb, seconds of
 * CPU. For the tests of something else than a first start; `remove()` deletes it.
 */
export function migratedDataDir(): { readonly dir: string; remove(): void } {
  const dir = mkdtempSync(join(scratchRoot(), 'openbook-test-'))
  cpSync(inject('embeddedTemplate'), dir, { recursive: true })
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

/**
 * A migrated store of the given kind on a fresh database: a copy of the run's migrated template
 * (global-setup.ts), PGlite in a data directory in memory where there is /dev/shm, or a new
 * PostgreSQL database.
 */
export async function createTestStore(
  kind: StoreKind,
  options: { maxConnections?: number } = {},
): Promise<TestStore> {
  if (kind === 'embedded') {
    const { dir, remove } = migratedDataDir()
    let store: Store
    try {
      store = await createEmbeddedStore(dir, {
        // A test store lives seconds, as the CLI's does: PGlite compiled for a fast start (a second
        // less CPU each) rather than for a server's footprint (src/store/embedded/embedded-settings.ts).
        shortLived: true,
        // A lost lock would end the test process (the server's default): this directory is the test's alone.
        onLockLost: () => {},
      })
    } catch (error) {
      remove()
      throw error
    }
    return {
      store,
      url: undefined,
      close: async () => {
        await store.close()
        remove()
      },
    }
  }
  const database = await createTestDatabase({ migrated: true })
  const store = createPostgresStore({
    connectionString: database.url,
    maxConnections: options.maxConnections ?? 4,
  })
  return {
    store,
    url: database.url,
    close: async () => {
      await store.close()
      await database.drop()
    },
  }
}

/**
 * One describe block per store kind, titled `title` with `%s` replaced by the kind (or `title(kind)`);
 * the PostgreSQL one is skipped when PostgreSQL is not available (global-setup.ts says so, loudly).
 */
export function describeEachStoreKind(
  title: string | ((kind: StoreKind) => string),
  suite: (kind: StoreKind) => void,
  kinds: readonly StoreKind[] = STORE_KINDS,
): void {
  for (const kind of kinds) {
    const name = typeof title === 'function' ? title(kind) : title.replace('%s', kind)
    describe.skipIf(kind === 'postgres' && !postgresAvailable())(name, () => suite(kind))
  }
}

/** The store of a `describeEachStore` block: made before its first hook, closed after its last. */
export interface StoreUnderTest {
  readonly kind: StoreKind
  readonly store: Store
  /** PostgreSQL URL of the store's database (postgres only). */
  readonly url: string | undefined
}

/**
 * `describeEachStoreKind` with a migrated store of that kind for the block: created in a
 * `beforeAll` that runs before the block's own, closed in an `afterAll` that runs after the
 * block's own (vitest runs after-hooks in reverse order).
 */
export function describeEachStore(
  title: string,
  suite: (testStore: StoreUnderTest) => void,
  options: { maxConnections?: number; kinds?: readonly StoreKind[] } = {},
): void {
  describeEachStoreKind(
    title,
    (kind) => {
      let current: TestStore | undefined
      // An embedded store's set-up (a PGlite copied from the template and started) took over a
      // minute at load 5-10 where it takes seconds alone: its limit follows the load.
      beforeAll(async () => {
        current = await createTestStore(kind, options)
      }, patience(60_000))
      afterAll(async () => {
        await current?.close()
      }, patience(60_000))
      suite({
        kind,
        get store() {
          if (!current) throw new Error('the test store exists from the first beforeAll of its block on')
          return current.store
        },
        get url() {
          return current?.url
        },
      })
    },
    options.kinds,
  )
}
