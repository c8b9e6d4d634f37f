import { OperatorError } from '../operator/errors.js'
import {
  FIELDS,
  fieldOf,
  insertSql,
  KEPT_COLUMNS,
  KEY_FIELDS,
  RECORD_TYPES,
  type RecordType,
  TABLES,
  WRITE_ORDER,
} from '../store/bulk.js'
import type { AdminSql, Store } from '../store/types.js'

/**
 * The bulk path shared by `openbook import` and `openbook seed`.
 *
 * Rows arrive in chunks. Each chunk is copied (COPY, text format) into temporary staging
 * tables, checked with one set-based query (references inside one organization, e-mail
 * uniqueness), then merged into the real tables with one INSERT … SELECT … ON CONFLICT per
 * type, parents first. Everything happens in the caller's transaction: all of it or nothing.
 *
 * A first load (at least FIRST_LOAD_MIN_ROWS records in the first chunk, and an empty customers or
 * appointments table) is loaded
 * as pg_restore does: that table's secondary indexes and foreign keys are dropped inside the
 * transaction and rebuilt from their own definitions at the end, which is several times faster
 * than maintaining them row by row. The references were checked already, so the rebuilt
 * foreign keys validate the same rule again. It holds an exclusive lock on that table until
 * the transaction ends, so it is taken only on a store where no reader runs beside an operator
 * transaction anyway (Store.concurrentReads false: the embedded store). On PostgreSQL, other
 * organizations keep reading (fast, correct, empty pages) while one organization's first load runs.
 */

export class ImportError extends OperatorError {}

/** A first chunk at least this large takes the first-load path for the empty tables. */
export const FIRST_LOAD_MIN_ROWS = 10_000
/** Tables large enough for the first-load path to matter. */
const FIRST_LOAD_TABLES: readonly RecordType[] = ['customer', 'appointment']

interface Reference {
  readonly field: string
  readonly column: string
  readonly parent: RecordType
}

/** Every foreign key, as the record field that holds it; tenant parents are matched by org_id too. */
const REFERENCES: Readonly<Partial<Record<RecordType, readonly Reference[]>>> = {
  membership: [
    { field: 'orgId', column: 'org_id', parent: 'organization' },
    { field: 'userId', column: 'user_id', parent: 'user' },
  ],
  staff: [{ field: 'orgId', column: 'org_id', parent: 'organization' }],
  service: [{ field: 'orgId', column: 'org_id', parent: 'organization' }],
  customer: [
    { field: 'orgId', column: 'org_id', parent: 'organization' },
    { field: 'preferredStaffId', column: 'preferred_staff_id', parent: 'staff' },
  ],
  appointment: [
    { field: 'orgId', column: 'org_id', parent: 'organization' },
    { field: 'customerId', column: 'customer_id', parent: 'customer' },
    { field: 'staffId', column: 'staff_id', parent: 'staff' },
    { field: 'serviceId', column: 'service_id', parent: 'service' },
  ],
}

const GLOBAL_PARENTS: readonly RecordType[] = ['organization', 'user']

/** How a message names one record of a type: "refers to a user that …". */
const A_RECORD: Readonly<Record<RecordType, string>> = {
  organization: 'an organization',
  user: 'a user',
  membership: 'a membership',
  staff: 'a staff member',
  service: 'a service',
  customer: 'a customer',
  appointment: 'an appointment',
}

const staging = (type: RecordType) => `import_${TABLES[type].table}`
/** `_line`: where the row's values come from; `_first`: where its key first appeared in the file. */
const stagingColumns = (type: RecordType): readonly string[] => ['_line', '_first', ...TABLES[type].columns]

const ESCAPES: Readonly<Record<string, string>> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' }
const SPECIAL = /[\\\t\n\r]/
const SPECIALS = /[\\\t\n\r]/g

/** One value in COPY's text format. */
export function copyValue(value: unknown): string {
  if (value === null || value === undefined) return '\\N'
  if (typeof value === 'string') {
    return SPECIAL.test(value) ? value.replace(SPECIALS, (c) => ESCAPES[c] ?? c) : value
  }
  if (typeof value === 'boolean') return value ? 't' : 'f'
  return String(value)
}

/** One type's rows of a chunk: COPY lines, their file lines, and where each key sits. */
interface TypeRows {
  readonly text: string[]
  /** The line each row's values come from, and the line where its key first appeared. */
  readonly lines: number[]
  readonly firstLines: number[]
  readonly slotOfKey: Map<string, number>
  /** Each row's values, kept only for types with columns to keep (KEPT_COLUMNS). */
  readonly values: string[][]
}

/**
 * Rows of any types, already in COPY's text format, with their file line numbers. A key seen
 * again in the same chunk replaces the earlier row (the last line wins, as a second import would),
 * so that the merge needs no sort to remove duplicates.
 */
export class Chunk {
  private readonly byType = new Map<RecordType, TypeRows>()
  rows = 0
  lastLine = 0

  /**
   * `row` is named by column (snake_case) or, with `byField`, by the import's field names
   * (camelCase); absent values are NULL.
   */
  add(type: RecordType, line: number, row: Readonly<Record<string, unknown>>, byField = false): void {
    let rows = this.byType.get(type)
    if (!rows) {
      rows = { text: [], lines: [], firstLines: [], slotOfKey: new Map(), values: [] }
      this.byType.set(type, rows)
    }
    const keyNames = byField ? KEY_FIELDS[type] : TABLES[type].key
    const key =
      keyNames.length === 1 ? String(row[keyNames[0] as string]) : keyNames.map((k) => row[k]).join('\u0000')
    const slot = rows.slotOfKey.get(key) ?? rows.text.length
    rows.slotOfKey.set(key, slot)
    const names = byField ? FIELDS[type] : TABLES[type].columns
    // One array joined once: several times cheaper than growing a string value by value.
    const values: string[] = new Array(names.length + 2)
    values[0] = String(line)
    values[1] = String(rows.firstLines[slot] ?? line)
    for (let i = 0; i < names.length; i++) values[i + 2] = copyValue(row[names[i] as string])
    const kept = KEPT_COLUMNS[type]
    if (kept.length) {
      // A later line that leaves a kept column out keeps the earlier line's value, as the merge
      // keeps a stored one.
      const earlier = rows.values[slot]
      if (earlier) for (const i of kept) if (values[i + 2] === '\\N') values[i + 2] = earlier[i + 2] as string
      rows.values[slot] = values
    }
    rows.text[slot] = values.join('\t')
    rows.lines[slot] = line
    rows.firstLines[slot] ??= line
    this.rows++
    this.lastLine = line
  }

  types(): RecordType[] {
    return WRITE_ORDER.filter((type) => this.byType.has(type))
  }

  /** Distinct keys of `type` in this chunk. */
  count(type: RecordType): number {
    return this.byType.get(type)?.text.length ?? 0
  }

  copyText(type: RecordType): string {
    const text = this.byType.get(type)?.text ?? []
    return text.length ? `${text.join('\n')}\n` : ''
  }

  /** The file line of the n-th (1-based) row of `type` in this chunk's COPY text. */
  lineOf(type: RecordType, n: number): number | undefined {
    return this.byType.get(type)?.lines[n - 1]
  }
}

interface Dropped {
  readonly table: string
  readonly indexes: readonly string[]
  readonly foreignKeys: readonly { name: string; definition: string }[]
}

/** The first problem the set-based checks found in a chunk. */
interface Finding {
  readonly line: number
  readonly type: RecordType
  readonly field: string
  readonly problem: string
}

/** Every key of `type` seen in the file so far, with the line where it first appeared. */
const keyLog = (type: RecordType) => `import_keys_${TABLES[type].table}`
const PARENT_TYPES: readonly RecordType[] = ['organization', 'user', 'staff', 'service', 'customer']

/**
 * The first line whose reference points at nothing: not at a key seen on an earlier line of the
 * file (the key log: narrow rows in temporary tables, so asked first), nor at a row stored before
 * this chunk. Rows stored from earlier chunks are in the key log with earlier lines, so the
 * second probe can only succeed for rows that were there before the import.
 */
function referenceCheck(type: RecordType, reference: Reference): string {
  const parent = TABLES[reference.parent].table
  const scoped = !GLOBAL_PARENTS.includes(reference.parent)
  const match = `p.id = r.${reference.column}${scoped ? ' AND p.org_id = r.org_id' : ''}`
  const what = scoped
    ? `refers to ${A_RECORD[reference.parent]} that is not in this organization (earlier in the file or already stored)`
    : `refers to ${A_RECORD[reference.parent]} that does not exist (earlier in the file or already stored)`
  return `SELECT min(r._line) AS line, '${type}' AS type, '${reference.field}' AS field, '${what}' AS problem
    FROM (SELECT * FROM ${staging(type)} r
          WHERE r.${reference.column} IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM ${keyLog(reference.parent)} p WHERE ${match} AND p._first < r._line)
          OFFSET 0) AS r
    WHERE NOT EXISTS (SELECT 1 FROM ${parent} p WHERE ${match})`
}

/** Another user (a different id) holds the e-mail already, in the store or earlier in the file. */
const EMAIL_CHECK = `SELECT min(r._line) AS line, 'user' AS type, 'email' AS field,
    'is the e-mail of another user' AS problem
  FROM ${staging('user')} r
  WHERE EXISTS (SELECT 1 FROM users u WHERE lower(u.email) = lower(r.email) AND u.id <> r.id)
     OR EXISTS (SELECT 1 FROM ${staging('user')} u
                WHERE lower(u.email) = lower(r.email) AND u.id <> r.id AND u._first < r._line)`

function checksFor(types: readonly RecordType[]): string | undefined {
  const parts = types.flatMap((type) => (REFERENCES[type] ?? []).map((ref) => referenceCheck(type, ref)))
  if (types.includes('user')) parts.push(EMAIL_CHECK)
  if (parts.length === 0) return undefined
  return `SELECT * FROM (${parts.map((p) => `(${p})`).join(' UNION ALL ')}) AS found
    WHERE line IS NOT NULL ORDER BY line LIMIT 1`
}

/** Line and column of a COPY error ("COPY import_customers, line 3, column date_of_birth: …"). */
function copyErrorAt(error: unknown): { n: number; column?: string } | undefined {
  const where = (error as { where?: string }).where ?? ''
  const match = /COPY \w+, line (\d+)(?:, column (\w+))?/.exec(where)
  return match ? { n: Number(match[1]), column: match[2] } : undefined
}

class BulkLoader {
  private readonly dropped: Dropped[] = []
  private chunks = 0

  private constructor(
    private readonly sql: AdminSql,
    private readonly firstLoadAllowed: boolean,
  ) {}

  /** Creates the staging tables (dropped at commit) in the caller's transaction. */
  static async begin(sql: AdminSql, firstLoadAllowed: boolean): Promise<BulkLoader> {
    const statements = [
      // The checks' hash joins and the first load's index builds stay in memory.
      "SET LOCAL work_mem = '64MB'",
      "SET LOCAL maintenance_work_mem = '256MB'",
      // No constraints and no NOT NULL: the checks below name the line; defaults apply on merge.
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
    await sql.exec(statements.join(';\n'))
    return new BulkLoader(sql, firstLoadAllowed)
  }

  /** Copies, checks and merges one chunk. */
  async load(chunk: Chunk): Promise<void> {
    const types = chunk.types()
    if (types.length === 0) return
    // A large first chunk means a large load: empty tables take the first-load path.
    if (this.chunks++ === 0 && this.firstLoadAllowed && chunk.rows >= FIRST_LOAD_MIN_ROWS)
      await this.prepareFirstLoad()
    for (const type of types) {
      try {
        await this.sql.copyIn(staging(type), stagingColumns(type), chunk.copyText(type))
      } catch (error) {
        const at = copyErrorAt(error)
        const line = at && chunk.lineOf(type, at.n)
        if (line === undefined) throw error
        const field = at?.column ? `.${fieldOf(at.column)}` : ''
        throw new ImportError(`line ${line}: ${type}${field}: ${(error as Error).message}`)
      }
    }
    const parents = types.filter((type) => PARENT_TYPES.includes(type))
    if (parents.length) {
      // Earlier chunks logged their keys first, so a key keeps the line where it first appeared.
      await this.sql.exec(
        parents
          .map((type) => {
            const key = TABLES[type].key.join(', ')
            return `INSERT INTO ${keyLog(type)} (${key}, _first) SELECT ${key}, _first FROM ${staging(type)} ON CONFLICT DO NOTHING`
          })
          .join(';\n'),
      )
    }
    const checks = checksFor(types)
    if (checks) {
      const [found] = await this.sql.query<Finding>(checks)
      if (found) throw new ImportError(`line ${found.line}: ${found.type}.${found.field}: ${found.problem}`)
    }
    for (const type of types) {
      try {
        await this.merge(type)
      } catch (error) {
        const { constraint, code } = error as { constraint?: string; code?: string }
        throw new ImportError(
          `lines up to ${chunk.lastLine}: ${type} rejected by the database (${constraint ?? code ?? 'constraint'})`,
        )
      }
    }
    await this.sql.exec(types.map((type) => `TRUNCATE ${staging(type)}`).join('; '))
  }

  /**
   * Into a table of the first-load path a key is almost always new: a plain INSERT, about a third
   * cheaper than the upsert, is tried first and, should a key repeat one of an earlier chunk,
   * undone in favour of the upsert.
   */
  private async merge(type: RecordType): Promise<void> {
    if (!this.dropped.some((d) => d.table === TABLES[type].table)) {
      await this.sql.exec(insertSql(type, staging(type), true))
      return
    }
    await this.sql.exec('SAVEPOINT import_merge')
    try {
      await this.sql.exec(insertSql(type, staging(type), false))
      await this.sql.exec('RELEASE SAVEPOINT import_merge')
    } catch (error) {
      if ((error as { code?: string }).code !== '23505') throw error
      await this.sql.exec('ROLLBACK TO SAVEPOINT import_merge')
      await this.sql.exec(insertSql(type, staging(type), true))
    }
  }

  /** Rebuilds what the first-load path dropped and names those tables. Call once, after the last chunk. */
  async finish(): Promise<{ firstLoad: string[] }> {
    const rebuilt = this.dropped.splice(0)
    for (const { table, indexes, foreignKeys } of rebuilt) {
      for (const definition of indexes) await this.sql.exec(definition)
      for (const { name, definition } of foreignKeys) {
        await this.sql.exec(`ALTER TABLE ${table} ADD CONSTRAINT ${name} ${definition}`)
      }
    }
    return { firstLoad: rebuilt.map((d) => d.table) }
  }

  private async prepareFirstLoad(): Promise<void> {
    for (const type of FIRST_LOAD_TABLES) {
      const table = TABLES[type].table
      const [empty] = await this.sql.query<{ empty: boolean }>(
        `SELECT NOT EXISTS (SELECT 1 FROM ${table}) AS empty`,
      )
      if (!empty?.empty) continue
      const indexes = await this.sql.query<{ name: string; definition: string }>(
        `SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS definition
           FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
          WHERE i.indrelid = '${table}'::regclass AND NOT i.indisprimary AND NOT i.indisunique
          ORDER BY c.relname`,
      )
      const foreignKeys = await this.sql.query<{ name: string; definition: string }>(
        `SELECT conname AS name, pg_get_constraintdef(oid) AS definition
           FROM pg_constraint WHERE conrelid = '${table}'::regclass AND contype = 'f' ORDER BY conname`,
      )
      await this.sql.exec(
        [
          `LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`,
          ...foreignKeys.map((fk) => `ALTER TABLE ${table} DROP CONSTRAINT ${fk.name}`),
          ...indexes.map((index) => `DROP INDEX ${index.name}`),
        ].join('; '),
      )
      this.dropped.push({ table, indexes: indexes.map((i) => i.definition), foreignKeys })
    }
  }
}

/** Adds one row to the load; resolves at once unless a full chunk has to wait for the database. */
export type AddRow = (
  type: RecordType,
  line: number,
  row: Readonly<Record<string, unknown>>,
  byField?: boolean,
) => Promise<void>

/**
 * One bulk load in one operator transaction: `produce` adds rows in order, and every
 * `chunkRows` rows the chunk goes to the loader while `produce` goes on with the next one (the
 * database and Node work at the same time; at most two chunks are held in memory). Chunks are
 * loaded one after the other, in order, and a failed chunk is reported before any later error
 * of `produce`.
 */
export async function bulkLoad(
  store: Store,
  { chunkRows, onChunk = () => {} }: { chunkRows: number; onChunk?: (chunk: Chunk) => void },
  produce: (add: AddRow) => Promise<void>,
): Promise<{ firstLoad: string[] }> {
  return store.admin(async (sql) => {
    // A table-wide exclusive lock would stall every organization's reads where they run beside us.
    const loader = await BulkLoader.begin(sql, !store.concurrentReads)
    let inFlight: Promise<void> = Promise.resolve()
    let chunk = new Chunk()
    const send = async () => {
      await inFlight
      const full = chunk
      chunk = new Chunk()
      inFlight = loader.load(full).then(() => onChunk(full))
      // Awaited at the next send, at the end, or before the producer's own error is reported.
      inFlight.catch(() => {})
    }
    const add: AddRow = async (type, line, row, byField) => {
      chunk.add(type, line, row, byField)
      if (chunk.rows >= chunkRows) await send()
    }
    try {
      await produce(add)
      await send()
    } catch (error) {
      await inFlight
      throw error
    }
    await inFlight
    return loader.finish()
  })
}
