/** The PostgreSQL target's table: the driver (an optional peer), the table's shape, its refusals. */
import { SyncUsageError } from '../engine/errors.js'

/** The part of `pg`'s Client this target uses (pg is an optional peer dependency, typed here). */
export interface PgClient {
  connect(): Promise<unknown>
  query(
    text: string,
    values?: readonly unknown[],
  ): Promise<{ rows: Record<string, unknown>[]; rowCount?: number | null }>
  end(): Promise<void>
  on(event: 'error', listener: (error: Error) => void): unknown
}
export type PgClientConstructor = new (config: {
  connectionString: string
  application_name?: string
}) => PgClient

/** Raised when the database itself refuses us (authentication, unknown database): a usage error. */
export class PgTargetError extends SyncUsageError {
  override readonly name: string = 'PgTargetError'
  constructor(message: string) {
    super(message, 'pg_refused')
  }
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/

/** `name` or `schema.name`, each part quoted. */
export function quoteTable(table: string): string {
  const parts = table.split('.')
  if (parts.length > 2 || !parts.every((part) => IDENTIFIER.test(part)))
    throw new SyncUsageError(
      '--table must be a name or schema.name of letters, digits and underscores (at most 63 each)',
    )
  return parts.map((part) => `"${part}"`).join('.')
}

export async function loadPg(): Promise<PgClientConstructor> {
  let module: { default?: { Client?: unknown }; Client?: unknown }
  try {
    const name = 'pg'
    module = (await import(name)) as typeof module
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND')
      throw new SyncUsageError(
        '--pg needs the "pg" package, an optional peer dependency of @openbook/client: npm install pg',
      )
    throw error
  }
  const Client = module.default?.Client ?? module.Client
  if (typeof Client !== 'function') throw new SyncUsageError('the installed "pg" package has no Client')
  return Client as PgClientConstructor
}

/** The columns openbook-sync writes, with the types it needs (`information_schema` spelling). */
const COLUMNS: Readonly<Record<string, string>> = {
  org_id: 'text',
  id: 'text',
  data: 'jsonb',
  synced_at: 'timestamp with time zone',
  deleted_at: 'timestamp with time zone',
  left_window_at: 'timestamp with time zone',
  sync_pass: 'integer',
}

/**
 * A table of the wrong shape is refused before anything is written, in one line: one made by an
 * earlier openbook-sync (keyed on `id` alone, with no `org_id`), a column missing or of another
 * type, or no unique key on `(org_id, id)`. Rows of several organizations are its purpose.
 */
export async function checkTable(db: PgClient, table: string, tableName: string): Promise<void> {
  const { rows } = await db.query(
    `select a.attname as name, format_type(a.atttypid, a.atttypmod) as type
     from pg_attribute a where a.attrelid = $1::regclass and a.attnum > 0 and not a.attisdropped`,
    [table],
  )
  const types = new Map(rows.map((row) => [String(row.name), String(row.type)]))
  if (!types.has('org_id'))
    throw new SyncUsageError(
      `table ${tableName} has no org_id column (an earlier openbook-sync keyed it on id alone, for any organization): rename or drop it, or give another --table`,
    )
  const wrong = Object.entries(COLUMNS)
    .filter(([name, type]) => name !== 'left_window_at' && types.get(name) !== type)
    .map(([name, type]) => `${name} ${type}${types.has(name) ? ` (it is ${types.get(name)})` : ''}`)
  const { rows: keys } = await db.query(
    `select 1 from pg_index i where i.indrelid = $1::regclass and i.indisunique and i.indnkeyatts = 2
       and (select array_agg(a.attname::text order by a.attname) from pg_attribute a
            where a.attrelid = i.indrelid and a.attnum = any(i.indkey)) = array['id', 'org_id']`,
    [table],
  )
  if (keys.length === 0) wrong.push('a primary key on (org_id, id)')
  if (wrong.length > 0)
    throw new SyncUsageError(
      `table ${tableName} is not an openbook-sync table: it needs ${wrong.join(', ')}; give another --table, or let openbook-sync create it`,
    )
}

/**
 * SQLSTATE classes that a rerun will not cure: a bad password (28), no such database (3D) or
 * schema (3F), a statement the table refuses (42: no such table or column, a wrong type, no
 * privilege), a constraint of the table's own (23). The rest (a connection lost, a restart, a
 * full disk, a deadlock) a rerun may cure.
 */
export const REFUSALS = /^(28|3D|3F|42|23)/

/** A PostgreSQL failure as openbook-sync reports it: a usage error when a rerun will not cure it. */
export function pgFailure(error: unknown): unknown {
  const code = String((error as { code?: unknown } | undefined)?.code ?? '')
  if (!REFUSALS.test(code) || error instanceof SyncUsageError) return error
  return new PgTargetError(`PostgreSQL refused: ${(error as Error).message} (SQLSTATE ${code})`)
}
