import { execFile } from 'node:child_process'
import { cpSync, mkdtempSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import type { FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { patience } from '../../packages/client/test/helpers/patience.js'
import { createEmbeddedStore } from '../../src/store/embedded/embedded.js'
import { createPostgresStore } from '../../src/store/postgres/postgres.js'
import type { Store, StoreKind } from '../../src/store/types.js'
import { bearer, buildTestApp } from '../helpers/app.js'
import { addCustomers, createKey, createOrg } from '../helpers/fixtures.js'
import { scratchRoot } from '../helpers/process.js'
import {
  createTestDatabase,
  describeEachStoreKind,
  migratedDataDir,
  type TestDatabase,
} from '../helpers/stores.js'

// A list's version must not repeat for other content across a copy of the database: a restore, a
// point-in-time recovery, a promoted replica that lost transactions. Each is the state at some
// moment T, which then takes writes of its own while the original (or what clients saw of it) went
// on from T with others. Here the copy is made at T (CREATE DATABASE … TEMPLATE, pg_dump and
// pg_restore, a DATA_DIR copied), the original writes c3 and the copy c4: the same number of
// changes, other content. A client that holds the original's tag must get c4 from the copy.

const execFileAsync = promisify(execFile)

/** One place holding a database, opened as a store as often as needed. */
interface Place {
  open(): Promise<Store>
  /** A copy of it as it stands now (no store open on it). */
  copy(how: 'template' | 'dump'): Promise<Place>
  remove(): Promise<void>
}

function postgresPlace(database: TestDatabase): Place {
  return {
    open: async () => createPostgresStore({ connectionString: database.url, maxConnections: 2 }),
    async copy(how) {
      if (how === 'template') {
        const copy = await createTestDatabase({ from: database.name })
        return postgresPlace(copy)
      }
      const copy = await createTestDatabase()
      const dump = join(mkdtempSync(join(scratchRoot(), 'openbook-dump-')), 'db.dump')
      try {
        await execFileAsync('pg_dump', ['-Fc', '-f', dump, '-d', database.url])
        await execFileAsync('pg_restore', ['--exit-on-error', '-d', copy.url, dump])
      } finally {
        rmSync(dump, { force: true })
      }
      return postgresPlace(copy)
    },
    remove: () => database.drop(),
  }
}

function embeddedPlace(dir: string, remove: () => void): Place {
  return {
    open: () => createEmbeddedStore(dir, { shortLived: true, onLockLost: () => {} }),
    async copy() {
      const copy = mkdtempSync(join(scratchRoot(), 'openbook-copy-'))
      cpSync(dir, copy, { recursive: true })
      return embeddedPlace(copy, () => rmSync(copy, { recursive: true, force: true }))
    },
    remove: async () => remove(),
  }
}

async function newPlace(kind: StoreKind): Promise<Place> {
  if (kind === 'postgres') return postgresPlace(await createTestDatabase({ migrated: true }))
  const { dir, remove } = migratedDataDir()
  return embeddedPlace(dir, remove)
}

/** A store and the app serving it. */
interface Served {
  readonly store: Store
  readonly app: FastifyInstance
}

async function serve(place: Place): Promise<Served> {
  const store = await place.open()
  const { app } = await buildTestApp(store, { logLevel: 'silent' })
  return { store, app }
}

const ORG = 'org_copy'
const copies = (kind: StoreKind) =>
  kind === 'postgres' ? (['template', 'dump'] as const) : (['template'] as const)

describeEachStoreKind('list versions across a copy of the database on %s', (kind) => {
  for (const how of copies(kind)) {
    describe(
      kind === 'postgres'
        ? `copied by ${how === 'template' ? 'CREATE DATABASE … TEMPLATE' : 'pg_dump and pg_restore'}`
        : 'DATA_DIR copied',
      () => {
        let original: Place
        let copy: Place
        let key: string
        const served: Served[] = []
        let atOriginal: Served
        let atCopy: Served

        beforeAll(async () => {
          original = await newPlace(kind)
          const store = await original.open()
          try {
            const org = await createOrg(store, ORG)
            key = (await createKey(store, org)).key
            await addCustomers(store, ORG, [{ id: 'cus_1', createdAt: '2025-01-01T00:00:00.000Z' }])
            await addCustomers(store, ORG, [{ id: 'cus_2', createdAt: '2025-01-02T00:00:00.000Z' }])
          } finally {
            await store.close()
          }
          copy = await original.copy(how)
          atOriginal = await serve(original)
          served.push(atOriginal)
          atCopy = await serve(copy)
          served.push(atCopy)
        }, patience(120_000))

        afterAll(async () => {
          for (const { app, store } of served) {
            await app.close()
            await store.close()
          }
          await copy?.remove()
          await original?.remove()
        }, patience(60_000))

        const get = (at: Served, headers: Record<string, string> = {}) =>
          at.app.inject({
            method: 'GET',
            url: '/api/public/v1/customers',
            headers: { ...bearer(key), ...headers },
          })
        const tagOf = async (at: Served) => {
          const response = await get(at)
          expect(response.statusCode).toBe(200)
          return String(response.headers.etag)
        }
        const ids = (body: string) =>
          (JSON.parse(body) as { data: { id: string }[] }).data.map((item) => item.id)

        it('keeps the tag of the same content: a copy costs no client a re-read', async () => {
          expect(await tagOf(atCopy)).toBe(await tagOf(atOriginal))
        })

        it('gives the same number of changes with another history another tag, and no 304 for it', async () => {
          await addCustomers(atOriginal.store, ORG, [{ id: 'cus_3', createdAt: '2025-01-03T00:00:00.000Z' }])
          await addCustomers(atCopy.store, ORG, [{ id: 'cus_4', createdAt: '2025-01-04T00:00:00.000Z' }])
          const originals = await tagOf(atOriginal)
          const copys = await tagOf(atCopy)
          // The same count of changes: the versions in clear are equal, the tags are not.
          expect(copys.split('-')[0]).toBe(originals.split('-')[0])
          expect(copys).not.toBe(originals)
          const conditional = await get(atCopy, { 'if-none-match': originals })
          expect(conditional.statusCode).toBe(200)
          expect(ids(conditional.body)).toEqual(['cus_4', 'cus_2', 'cus_1'])
        })

        it('keeps each tag through a fold of the pending changes', async () => {
          const before = [await tagOf(atOriginal), await tagOf(atCopy)]
          for (const { store } of served) await store.admin((sql) => sql.exec('SELECT list_fold_all()'))
          const after = [await tagOf(atOriginal), await tagOf(atCopy)]
          expect(after).toEqual(before)
          expect(after[0]).not.toBe(after[1])
          expect((await get(atCopy, { 'if-none-match': String(after[0]) })).statusCode).toBe(200)
        })
      },
    )
  }
})
