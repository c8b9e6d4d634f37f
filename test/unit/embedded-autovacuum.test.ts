import { describe, expect, it } from 'vitest'
import {
  AUTOVACUUM_DEFAULTS,
  dueStatement,
  maintenancePass,
  type TableCounters,
} from '../../src/store/embedded/embedded-autovacuum.js'

const table = (counters: Partial<TableCounters>): TableCounters => ({
  table: 'public.customers',
  rows: 10_000,
  pages: 100,
  visiblePages: 100,
  deadRows: 0,
  insertedSinceVacuum: 0,
  changedSinceAnalyze: 0,
  ...counters,
})

describe("the embedded store's autovacuum rule (PostgreSQL's default thresholds)", () => {
  it('vacuums past 50 + 20% dead rows, not at them', () => {
    expect(dueStatement(table({ deadRows: 2_050 }))).toBeUndefined()
    expect(dueStatement(table({ deadRows: 2_051 }))).toBe('VACUUM (ANALYZE)')
  })

  it('vacuums past 1,000 + 20% inserts since the last vacuum (the visibility map of a load)', () => {
    expect(dueStatement(table({ insertedSinceVacuum: 3_000 }))).toBeUndefined()
    expect(dueStatement(table({ insertedSinceVacuum: 3_001 }))).toBe('VACUUM (ANALYZE)')
  })

  it('analyzes past 50 + 10% changes since the last analyze', () => {
    expect(dueStatement(table({ changedSinceAnalyze: 1_050 }))).toBeUndefined()
    expect(dueStatement(table({ changedSinceAnalyze: 1_051 }))).toBe('ANALYZE')
  })

  it('vacuums a table whose visibility map covers less than half its pages, whatever its counters', () => {
    // PGlite's counters start at zero in each process: a load's dead rows are found this way.
    expect(dueStatement(table({ rows: 0, pages: 22_245, visiblePages: 0 }))).toBe('VACUUM (ANALYZE)')
    expect(dueStatement(table({ pages: 100, visiblePages: 50 }))).toBeUndefined()
    expect(dueStatement(table({ pages: 15, visiblePages: 0 }))).toBeUndefined()
  })

  it('a never analyzed table (reltuples -1) counts as empty', () => {
    expect(dueStatement(table({ rows: -1, deadRows: 51, pages: 1 }))).toBe('VACUUM (ANALYZE)')
  })

  it('takes other thresholds', () => {
    expect(
      dueStatement(table({ deadRows: 11 }), { ...AUTOVACUUM_DEFAULTS, vacuumBase: 10, vacuumScale: 0 }),
    ).toBe('VACUUM (ANALYZE)')
  })

  it('a pass flushes the counters, then runs one statement per due table, each in its own call', async () => {
    const calls: string[] = []
    const runs = await maintenancePass({
      maintain: async (statement) => {
        calls.push(statement)
      },
      counters: async () => {
        calls.push('counters')
        return [
          table({ table: 'public.list_changes', rows: 0, pages: 500, visiblePages: 0 }),
          table({ table: 'public.customers' }),
          table({ table: 'public.appointments', changedSinceAnalyze: 5_000 }),
        ]
      },
    })
    expect(calls).toEqual([
      'SELECT pg_stat_force_next_flush()',
      'counters',
      'VACUUM (ANALYZE) public.list_changes',
      'ANALYZE public.appointments',
    ])
    expect(runs.map((run) => [run.table, run.statement])).toEqual([
      ['public.list_changes', 'VACUUM (ANALYZE)'],
      ['public.appointments', 'ANALYZE'],
    ])
  })
})
