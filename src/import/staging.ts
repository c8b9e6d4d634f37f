import type { AdminSql } from '../store/types.js'
import type { Chunk } from './chunk.js'
import { ImportError } from './errors.js'
import { fieldOf, RECORD_TYPES, type RecordType, TABLES } from './tables.js'

/**
 * The import's temporary tables, dropped at commit: one staging table per type that a chunk is
 * copied into (no constraints, no NOT NULL: the checks name the line; defaults apply on merge),
 * and a key log per parent type, every key seen in the file so far with the line where it first
 * appeared.
 */

export const staging = (type: RecordType) => `import_${TABLES[type].table}`
/** `_line`: where the row's values come from; `_first`: where its key first appeared in the file. */
const stagingColumns = (type: RecordType): readonly string[] => ['_line', '_first', ...TABLES[type].columns]

export const keyLog = (type: RecordType) => `import_keys_${TABLES[type].table}`
const PARENT_TYPES: readonly RecordType[] = ['organization', 'user', 'staff', 'service', 'customer']

/** The statements that create the staging tables and the key logs. */
export function createStagingSql(): string[] {
  return [
    ...RECORD_TYPES.map(
      (type) =>
        `CREATE TEMP TABLE ${staging(type)} ON COMMIT DROP AS
             SELECT 0::int AS _line, 0::int AS _first, ${TABLES[type].columns.join(', ')} FROM ${TABLES[type].table} WITH NO DATA`,
    ),
    ...PARENT_TYPES.map((type) => {
      const key = TABLES[type].key.join(', ')
      return `CREATE TEMP TABLE ${keyLog(type)} ON COMMIT DROP AS
                  SELECT ${key}, 0::int AS _first FROM ${TABLES[type].table} WITH NO DATA;
                ALTER TABLE ${keyLog(type)} ADD PRIMARY KEY (${key})`
    }),
  ]
}

/** Line and column of a COPY error ("COPY import_customers, line 3, column date_of_birth: …"). */
function copyErrorAt(error: unknown): { n: number; column?: string } | undefined {
  const where = (error as { where?: string }).where ?? ''
  const match = /COPY \w+, line (\d+)(?:, column (\w+))?/.exec(where)
  return match ? { n: Number(match[1]), column: match[2] } : undefined
}

/** Copies the chunk's rows into the staging tables; a value the database refuses is named by line and field. */
export async function copyToStaging(
  sql: AdminSql,
  chunk: Chunk,
  types: readonly RecordType[],
): Promise<void> {
  for (const type of types) {
    try {
      await sql.copyIn(staging(type), stagingColumns(type), chunk.copyText(type))
    } catch (error) {
      const at = copyErrorAt(error)
      const line = at && chunk.lineOf(type, at.n)
      if (line === undefined) throw error
      const field = at?.column ? `.${fieldOf(type, at.column)}` : ''
      throw new ImportError(`line ${line}: ${type}${field}: ${(error as Error).message}`)
    }
  }
}

/** Adds the staged parents' keys to the key logs; earlier chunks logged theirs first, so a key keeps its first line. */
export async function logParentKeys(sql: AdminSql, types: readonly RecordType[]): Promise<void> {
  const parents = types.filter((type) => PARENT_TYPES.includes(type))
  if (parents.length === 0) return
  await sql.exec(
    parents
      .map((type) => {
        const key = TABLES[type].key.join(', ')
        return `INSERT INTO ${keyLog(type)} (${key}, _first) SELECT ${key}, _first FROM ${staging(type)} ON CONFLICT DO NOTHING`
      })
      .join(';\n'),
  )
}

/** Empties the staging tables for the next chunk. */
export async function clearStaging(sql: AdminSql, types: readonly RecordType[]): Promise<void> {
  await sql.exec(types.map((type) => `TRUNCATE ${staging(type)}`).join('; '))
}
