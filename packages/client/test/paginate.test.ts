import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { type PaginationStats, paginate, type RawPage } from '../src/paginate.js'

/**
 * The algorithm against an in-memory list (many thousands of interleavings in a second). Rows
 * are ordered by (micros desc, id desc) while the client only sees the millisecond: ties it
 * cannot order itself, as with the server.
 */
interface Row {
  id: string
  micros: number
  active: boolean
}
const visible = (row: Row) => new Date(Math.floor(row.micros / 1000)).toISOString()

function sorted(rows: readonly Row[]): Row[] {
  return rows
    .filter((row) => row.active)
    .sort((a, b) => b.micros - a.micros || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
}

const change = fc.record({
  kind: fc.constantFrom('deactivate', 'reactivate', 'insert', 'move'),
  target: fc.nat(),
  micros: fc.nat({ max: 5_999 }),
})
const world = fc.record({
  rows: fc.array(fc.record({ micros: fc.nat({ max: 5_999 }), active: fc.boolean() }), { maxLength: 40 }),
  changes: fc.array(fc.array(change, { maxLength: 5 }), { maxLength: 30 }),
  pageSize: fc.integer({ min: 1, max: 6 }),
})

type World = typeof world extends fc.Arbitrary<infer T> ? T : never

async function iterate(input: World) {
  const rows: Row[] = input.rows.map((row, n) => ({ id: `id${(n * 37) % 101}_${n}`, ...row }))
  const touched = new Set(rows.filter((row) => !row.active).map((row) => row.id))
  let request = 0
  const fetchPage = async (offset: number, limit: number): Promise<RawPage<Row & { key: string }>> => {
    for (const c of input.changes[request++] ?? []) {
      if (c.kind === 'insert') {
        const row = { id: `new${rows.length}`, micros: c.micros, active: true }
        rows.push(row)
        touched.add(row.id)
      } else if (rows.length > 0) {
        const row = rows[c.target % rows.length] as Row
        // A move changes the sort key (an appointment given another start): to another millisecond.
        // A move inside its own millisecond reorders it among that millisecond's rows, which the
        // client cannot see (it reads milliseconds); a row of that millisecond may then be missed
        // (stated in the client's README; fast-check seed -1566938431 found it: three rows of one
        // millisecond, pages of 1, the first row yielded moved inside it, the second deactivated).
        if (c.kind === 'move') {
          if (Math.floor(c.micros / 1000) !== Math.floor(row.micros / 1000)) row.micros = c.micros
        } else row.active = c.kind === 'reactivate'
        touched.add(row.id)
      }
    }
    const list = sorted(rows)
    return {
      data: list.slice(offset, offset + limit).map((row) => ({ ...row, key: visible(row) })),
      pagination: { limit, offset, total: list.length, hasMore: offset + limit < list.length },
      requestId: undefined,
    }
  }
  const stats: PaginationStats = { requests: 0, rereads: 0, duplicates: 0, rows: 0, moved: 0 }
  const yielded: string[] = []
  for await (const page of paginate(
    {
      fetchPage,
      sortKey: (row) => row.key,
      id: (row) => row.id,
      pageSize: input.pageSize,
      maxRereads: 1_000,
    },
    stats,
  ))
    yielded.push(...page.data.map((row) => row.id))
  const stayed = sorted(rows)
    .filter((row) => !touched.has(row.id))
    .map((row) => row.id)
  return { yielded, stayed, stats }
}

describe('paginate (in memory)', () => {
  it('yields a row moved behind the cursor after it was yielded only once, and counts it', async () => {
    const rows: Row[] = Array.from({ length: 12 }, (_, n) => ({
      id: `r${n}`,
      micros: (12 - n) * 1000,
      active: true,
    }))
    let request = 0
    const fetchPage = async (offset: number, limit: number) => {
      // After the first page (r0 … r3 yielded), r1 moves to the end of the list.
      if (++request === 2) (rows[1] as Row).micros = 0
      const list = sorted(rows)
      return {
        data: list.slice(offset, offset + limit).map((row) => ({ ...row, key: visible(row) })),
        pagination: { limit, offset, total: list.length, hasMore: offset + limit < list.length },
        requestId: undefined,
      }
    }
    const stats: PaginationStats = { requests: 0, rereads: 0, duplicates: 0, rows: 0, moved: 0 }
    const yielded: string[] = []
    const movedRows: Row[] = []
    for await (const page of paginate(
      { fetchPage, sortKey: (row) => row.key, id: (row) => row.id, pageSize: 4 },
      stats,
    )) {
      yielded.push(...page.data.map((row) => row.id))
      movedRows.push(...page.moved)
    }
    expect(yielded.filter((id) => id === 'r1')).toEqual(['r1'])
    // Met again as it is now, for a copy to update.
    expect(movedRows.map((row) => [row.id, row.micros])).toEqual([['r1', 0]])
    expect(new Set(yielded)).toEqual(new Set(rows.map((row) => row.id)))
    expect(stats.moved).toBe(1)
  })

  it('yields every row active throughout exactly once, in order, and no row twice', async () => {
    await fc.assert(
      fc.asyncProperty(world, async (input) => {
        const { yielded, stayed } = await iterate(input)
        expect(new Set(yielded).size).toBe(yielded.length)
        const keep = new Set(stayed)
        expect(yielded.filter((id) => keep.has(id))).toEqual(stayed)
      }),
      { numRuns: 3_000 },
    )
  })

  it('costs one extra row per request when nothing changes', async () => {
    const { yielded, stats } = await iterate({
      rows: Array.from({ length: 20 }, (_, n) => ({ micros: n * 1000, active: true })),
      changes: [],
      pageSize: 5,
    })
    expect(yielded).toHaveLength(20)
    expect(stats).toEqual({ requests: 4, rereads: 0, duplicates: 3, rows: 20, moved: 0 })
  })

  it('gives up after maxRereads when the list keeps moving', async () => {
    let requests = 0
    // After ten pages, every page past the first starts far after where the last one ended.
    const fetchPage = async (offset: number, limit: number) => {
      const shift = ++requests > 10 && offset > 0 ? 1_000_000 : 0
      const data = Array.from({ length: limit }, (_, n) => ({
        id: `x${offset + n + shift}`,
        key: new Date(2e12 - (offset + n + shift) * 1000).toISOString(),
      }))
      return { data, pagination: { limit, offset, total: 1e7, hasMore: true }, requestId: 'req-1' }
    }
    const stats: PaginationStats = { requests: 0, rereads: 0, duplicates: 0, rows: 0, moved: 0 }
    const pages = paginate(
      { fetchPage, sortKey: (r) => r.key, id: (r) => r.id, pageSize: 10, maxRereads: 2 },
      stats,
    )
    await expect(async () => {
      for await (const _ of pages);
    }).rejects.toThrow(/2 re-reads in a row/)
    expect(stats.rereads).toBe(2)
  })
})
