import type { AdminSql } from '../store/types.js'
import { type RecordType, TABLES } from './tables.js'

/**
 * A first load is loaded as pg_restore does: an empty table's secondary indexes and foreign keys
 * are dropped inside the transaction and rebuilt from their own definitions at the end, several
 * times faster than maintaining them row by row. The references were checked already, so the
 * rebuilt foreign keys validate the same rule again. It holds an exclusive lock on the table
 * until the transaction ends.
 */

/** A first chunk at least this large takes the first-load path for the empty tables. */
export const FIRST_LOAD_MIN_ROWS = 10_000
/** Tables large enough for the first-load path to matter. */
const FIRST_LOAD_TABLES: readonly RecordType[] = ['customer', 'appointment']

/** What the first-load path took off a table, to be rebuilt at the end. */
export interface Dropped {
  readonly table: string
  readonly indexes: readonly string[]
  readonly foreignKeys: readonly { name: string; definition: string }[]
}

/** Locks `table` and drops its secondary indexes and foreign keys; returns their definitions. */
async function dropIndexesAndForeignKeys(sql: AdminSql, table: string): Promise<Dropped> {
  const indexes = await sql.query<{ name: string; definition: string }>(
    `SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS definition
       FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
      WHERE i.indrelid = '${table}'::regclass AND NOT i.indisprimary AND NOT i.indisunique
      ORDER BY c.relname`,
  )
  const foreignKeys = await sql.query<{ name: string; definition: string }>(
    `SELECT conname AS name, pg_get_constraintdef(oid) AS definition
       FROM pg_constraint WHERE conrelid = '${table}'::regclass AND contype = 'f' ORDER BY conname`,
  )
  await sql.exec(
    [
      `LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`,
      ...foreignKeys.map((fk) => `ALTER TABLE ${table} DROP CONSTRAINT ${fk.name}`),
      ...indexes.map((index) => `DROP INDEX ${index.name}`),
    ].join('; '),
  )
  return { table, indexes: indexes.map((i) => i.definition), foreignKeys }
}

/** Takes the first-load path for each first-load table that is empty. */
export async function prepareFirstLoad(sql: AdminSql): Promise<Dropped[]> {
  const dropped: Dropped[] = []
  for (const type of FIRST_LOAD_TABLES) {
    const table = TABLES[type].table
    const [empty] = await sql.query<{ empty: boolean }>(`SELECT NOT EXISTS (SELECT 1 FROM ${table}) AS empty`)
    if (empty?.empty) dropped.push(await dropIndexesAndForeignKeys(sql, table))
  }
  return dropped
}

/** Rebuilds what the first-load path dropped. */
export async function rebuildDropped(sql: AdminSql, dropped: readonly Dropped[]): Promise<void> {
  for (const { table, indexes, foreignKeys } of dropped) {
    for (const definition of indexes) await sql.exec(definition)
    for (const { name, definition } of foreignKeys) {
      await sql.exec(`ALTER TABLE ${table} ADD CONSTRAINT ${name} ${definition}`)
    }
  }
}
