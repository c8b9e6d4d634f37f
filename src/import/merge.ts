import type { AdminSql } from '../store/types.js'
import { ImportError } from './errors.js'
import { staging } from './staging.js'
import { insertSql, type RecordType, TABLES } from './tables.js'

/**
 * Merges one staged type into its table. Into a table of the first-load path a key is almost
 * always new: a plain INSERT, about a third cheaper than the upsert, is tried first and, should a
 * key repeat one of an earlier chunk, undone in favour of the upsert.
 */
async function mergeType(sql: AdminSql, type: RecordType, firstLoad: boolean): Promise<void> {
  if (!firstLoad) {
    await sql.exec(insertSql(type, staging(type), true))
    return
  }
  await sql.exec('SAVEPOINT import_merge')
  try {
    await sql.exec(insertSql(type, staging(type), false))
    await sql.exec('RELEASE SAVEPOINT import_merge')
  } catch (error) {
    if ((error as { code?: string }).code !== '23505') throw error
    await sql.exec('ROLLBACK TO SAVEPOINT import_merge')
    await sql.exec(insertSql(type, staging(type), true))
  }
}

/**
 * Merges the staged types into the real tables, parents first, with one INSERT … SELECT … ON
 * CONFLICT each; `firstLoadTables` are the tables on the first-load path.
 */
export async function mergeStaged(
  sql: AdminSql,
  types: readonly RecordType[],
  lastLine: number,
  firstLoadTables: ReadonlySet<string>,
): Promise<void> {
  for (const type of types) {
    try {
      await mergeType(sql, type, firstLoadTables.has(TABLES[type].table))
    } catch (error) {
      const { constraint, code } = error as { constraint?: string; code?: string }
      // Only the data can be rejected (data exceptions, constraints): a full disk, a lost
      // connection or a cancel is the database's condition, said in its own words (failureReason).
      if (!code?.startsWith('22') && !code?.startsWith('23')) throw error
      throw new ImportError(
        `lines up to ${lastLine}: ${type} rejected by the database (${constraint ?? code ?? 'constraint'})`,
      )
    }
  }
}
