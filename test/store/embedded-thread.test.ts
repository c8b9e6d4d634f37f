import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createEmbeddedStore } from '../../src/store/embedded/embedded.js'
import { migrate } from '../../src/store/schema/migrate.js'
import type { Sql, Store } from '../../src/store/types.js'
import { createTestStore, type TestStore } from '../helpers/stores.js'

describe('the embedded store runs PGlite on a thread of its own', () => {
  let store: Store

  beforeAll(async () => {
    store = await createEmbeddedStore('memory://')
    await store.admin((sql) => sql.exec('CREATE TABLE t (id int PRIMARY KEY)'))
  })

  afterAll(async () => {
    await store?.close()
  })

  it('leaves the event loop free while a query runs', async () => {
    let turns = 0
    let running = true
    const spin = () => {
      turns++
      if (running) setImmediate(spin)
    }
    setImmediate(spin)
    // Seconds of work for PostgreSQL in WebAssembly; on the main thread no turn would pass meanwhile.
    await store.admin((sql) =>
      sql.query('SELECT count(*) FROM generate_series(1, 3000000) g WHERE g % 7 = 0'),
    )
    running = false
    expect(turns).toBeGreaterThan(20)
  })

  it('passes errors back with PostgreSQL code and fields', async () => {
    const failure = store.admin((sql) => sql.query('INSERT INTO t VALUES (1), (1)'))
    await expect(failure).rejects.toMatchObject({ code: '23505', constraint: 't_pkey' })
    await expect(store.admin((sql) => sql.query('SELECT 1/0'))).rejects.toMatchObject({ code: '22012' })
  })

  it('rolls a failed transaction back and commits a good one', async () => {
    await expect(
      store.admin(async (sql) => {
        await sql.query('INSERT INTO t VALUES (10)')
        throw new Error('changed my mind')
      }),
    ).rejects.toThrow('changed my mind')
    await store.admin((sql) => sql.query('INSERT INTO t VALUES (11)'))
    const rows = await store.admin((sql) => sql.query<{ id: number }>('SELECT id FROM t WHERE id >= 10'))
    expect(rows).toEqual([{ id: 11 }])
  })

  it('runs transactions one after another, in the order asked', async () => {
    const order: string[] = []
    await Promise.all(
      ['a', 'b', 'c'].map((name) =>
        store.admin(async (sql) => {
          order.push(`${name}:begin`)
          await sql.query('SELECT 1')
          order.push(`${name}:end`)
        }),
      ),
    )
    expect(order).toEqual(['a:begin', 'a:end', 'b:begin', 'b:end', 'c:begin', 'c:end'])
  })

  it("refuses a connection's use once its transaction has ended", async () => {
    let kept: Sql | undefined
    await store.admin(async (sql) => {
      kept = sql
    })
    await expect(kept?.query('SELECT 1')).rejects.toThrow('the transaction has ended')
  })

  it('reports a failing transaction preamble as such, then carries on', async () => {
    const bare = await createEmbeddedStore('memory://')
    try {
      // Not migrated: the reader role does not exist, so SET LOCAL ROLE fails.
      const failing = bare.read((sql) => sql.query('SELECT 1 AS one', []))
      await expect(failing).rejects.toThrow(/openbook_reader/)
      expect(await bare.admin((sql) => sql.query('SELECT 1 AS one'))).toEqual([{ one: 1 }])
      await migrate(bare)
      expect(await bare.read((sql) => sql.query('SELECT 1 AS one', []))).toEqual([{ one: 1 }])
    } finally {
      await bare.close()
    }
  })

  describe('the request path (prepared statements)', () => {
    let testStore: TestStore
    let migrated: Store

    beforeAll(async () => {
      testStore = await createTestStore('embedded')
      migrated = testStore.store
    })

    afterAll(async () => {
      await testStore?.close()
    })

    it('runs read-only, as openbook_reader', async () => {
      const [role] = await migrated.read((sql) => sql.query<{ role: string }>('SELECT current_user AS role'))
      expect(role?.role).toBe('openbook_reader')
      await expect(migrated.read((sql) => sql.query('CREATE TABLE x (a int)'))).rejects.toMatchObject({
        code: '25006',
      })
    })

    it('returns the values PGlite returns to the operator: types, NULL, text parameters', async () => {
      const text = `SELECT $1::int AS i, $2::text AS s, true AS b, NULL::text AS n, 2.5::float8 AS f,
        '2025-01-02T03:04:05.678Z'::timestamptz AS t, $3::bigint AS big`
      const params = [7, 'zoë "q"', '9007199254740993']
      for (let run = 0; run < 3; run++) {
        const read = await migrated.read((sql) => sql.query(text, params))
        const admin = await migrated.admin((sql) => sql.query(text, params))
        expect(read).toEqual(admin)
      }
      const [row] = await migrated.read((sql) => sql.query<{ s: string; t: Date }>(text, params))
      expect(row?.s).toBe('zoë "q"')
      expect(row?.t).toEqual(new Date('2025-01-02T03:04:05.678Z'))
    })

    it("ends before an operator's transaction: the operator's write runs with its own rights", async () => {
      await migrated.admin((sql) =>
        sql.exec("INSERT INTO organizations (id, name, plan) VALUES ('org_seen', 'Seen', 'free')"),
      )
      const count = () =>
        migrated.admin((sql) =>
          sql.query<{ n: number }>("SELECT count(*)::int AS n FROM organizations WHERE id LIKE 'org_s%'"),
        )
      expect(await migrated.read((sql) => sql.query('SELECT 1 AS one', []))).toEqual([{ one: 1 }])
      await migrated.admin((sql) =>
        sql.exec("INSERT INTO organizations (id, name, plan) VALUES ('org_seen2', 'Seen', 'free')"),
      )
      expect(await count()).toEqual([{ n: 2 }])
    })

    it("a request given up while it waited (503) leaves the read before it ended: an operator's write runs", async () => {
      // A read that holds the store past the request path's wait, a request queued behind it that
      // is answered busy, then an operator's write. The first read's COMMIT is owed when the given-up
      // request's turn comes: dropping it with that turn's BEGIN left the read open, and the write
      // ran inside it ("cannot execute INSERT in a read-only transaction").
      const slow = migrated.read((sql) => sql.query('SELECT pg_sleep(2.5)', []))
      const givenUp = migrated.read((sql) => sql.query('SELECT 1 AS one', []))
      await expect(givenUp).rejects.toMatchObject({ name: 'StoreBusyError' })
      await slow
      await migrated.admin((sql) =>
        sql.exec("INSERT INTO organizations (id, name, plan) VALUES ('org_after_busy', 'After', 'free')"),
      )
      const [row] = await migrated.admin((sql) =>
        sql.query<{ n: number }>("SELECT count(*)::int AS n FROM organizations WHERE id = 'org_after_busy'"),
      )
      expect(row?.n).toBe(1)
    })

    it('reports a failed statement with its code, and runs the same statement again afterwards', async () => {
      const text = 'SELECT $1::int AS n'
      await expect(migrated.read((sql) => sql.query(text, ['x']))).rejects.toMatchObject({ code: '22P02' })
      await expect(migrated.read((sql) => sql.query(text, ['x']))).rejects.toMatchObject({ code: '22P02' })
      expect(await migrated.read((sql) => sql.query(text, ['5']))).toEqual([{ n: 5 }])
      await expect(migrated.read((sql) => sql.query('SELECT FROM nowhere', []))).rejects.toMatchObject({
        code: '42P01',
      })
      expect(await migrated.read((sql) => sql.query(text, [6]))).toEqual([{ n: 6 }])
    })
  })
})
