/** What a query needs from a connection: parameterised statements, rows back. */
export interface Sql {
  query<Row extends object>(text: string, params?: readonly unknown[]): Promise<Row[]>
  /** Several statements without parameters (migrations, transaction set-up). */
  exec(text: string): Promise<void>
}

export type StoreKind = 'postgres' | 'embedded'

/**
 * One interface over real PostgreSQL and embedded PGlite; the same SQL runs on both.
 *
 * - `read` is the request path: a read-only transaction under `SET LOCAL ROLE openbook_reader`.
 * - `asReader` is the same role, read-write (last-used tracking of API keys).
 * - `admin` is the operator's transaction with the connecting role's own rights (CLI, migrations).
 */
export interface Store {
  readonly kind: StoreKind
  read<T>(work: (sql: Sql) => Promise<T>): Promise<T>
  asReader<T>(work: (sql: Sql) => Promise<T>): Promise<T>
  admin<T>(work: (sql: Sql) => Promise<T>): Promise<T>
  close(): Promise<void>
}

export const READER_ROLE = 'openbook_reader'

/** Statements that open every request-path transaction, after BEGIN. */
export function readerPreamble(readOnly: boolean, statementTimeoutMs: number): string {
  return [
    readOnly ? 'SET TRANSACTION READ ONLY' : '',
    `SET LOCAL ROLE ${READER_ROLE}`,
    `SET LOCAL statement_timeout = ${Math.trunc(statementTimeoutMs)}`,
  ]
    .filter(Boolean)
    .join('; ')
}
