import { expect, it } from 'vitest'
import type { RowSink } from '../../src/store/types.js'
import { dataRowValues } from '../helpers/data-rows.js'
import { describeEachStore } from '../helpers/stores.js'

/**
 * The embedded store hands a result's rows on as their DataRow messages' bytes, from its database
 * thread (store/embedded/embedded-worker.ts `queryBytes`): the answer is copied once out of
 * PostgreSQL's memory and its memory then handed to the main thread, not copied again. An answer
 * larger than one of PGlite's output chunks arrives in several, which are put together first.
 */
describeEachStore(
  "a result's rows handed on as bytes (embedded)",
  (testStore) => {
    /** The rows of the result with columns `a, b`, each field as text, and the memory each came in. */
    function sinkOf() {
      const rows: (string | null)[][] = []
      const memory = new Set<ArrayBufferLike>()
      const sink: RowSink = {
        accepts: (fields) => fields.map((field) => field.name).join() === 'a,b',
        row(bytes, offset) {
          memory.add(bytes.buffer)
          rows.push(dataRowValues(bytes, offset))
        },
      }
      return { sink, rows, memory }
    }

    const rowsOf = (count: number, width: number) =>
      `SELECT g::text AS a, CASE WHEN g % 7 = 0 THEN NULL ELSE repeat(chr(65 + g % 26), ${width}) || 'é' END AS b
     FROM generate_series(1, ${count}) g WHERE $1::int > 0`

    const expected = (count: number, width: number) =>
      Array.from({ length: count }, (_, index) => {
        const g = index + 1
        return [String(g), g % 7 === 0 ? null : `${String.fromCharCode(65 + (g % 26)).repeat(width)}é`]
      })

    it('hands on every row of answers small and large (several of PGlite’s chunks), one after another', async () => {
      await testStore.store.read(async (sql) => {
        expect(sql.queryInto, 'the embedded store reads rows as bytes').toBeDefined()
        // 3 MB of rows, then a few, then none: each answer in memory of its own, read whole.
        for (const [count, width] of [
          [20_000, 150],
          [3, 5],
          [0, 5],
          [5_000, 40],
        ] as const) {
          const { sink, rows, memory } = sinkOf()
          await sql.queryInto?.(sink, rowsOf(count, width), [1])
          expect(rows).toEqual(expected(count, width))
          expect(memory.size).toBeLessThanOrEqual(1)
        }
        // The connection goes on as before: a plain query's rows.
        expect(
          await sql.query<{ n: string }>(
            'SELECT count(*)::text AS n FROM generate_series(1, $1::int) g',
            [4],
          ),
        ).toEqual([{ n: '4' }])
      })
    })

    it('refuses a statement that fails, and the next one runs', async () => {
      const { sink } = sinkOf()
      await expect(
        testStore.store.read(
          async (sql) =>
            await sql.queryInto?.(
              sink,
              'SELECT g::text AS a, (10 / (3 - g))::text AS b FROM generate_series(1, $1::int) g',
              [5],
            ),
        ),
      ).rejects.toMatchObject({ code: '22012' })
      const { sink: next, rows } = sinkOf()
      await testStore.store.read(async (sql) => sql.queryInto?.(next, rowsOf(2, 3), [1]))
      expect(rows).toEqual(expected(2, 3))
    })
  },
  { kinds: ['embedded'] },
)
