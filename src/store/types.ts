/**
 * Stands, as a statement's parameter, for the organization that the transaction's key lookup
 * named (the transaction-local setting `openbook.org_id`): the database binds it, so that the
 * statement can travel with the lookup before its answer is back (`Sql.sendWithNext`).
 */
export const KEY_ORGANIZATION: unique symbol = Symbol('the organization of the key looked up')

/** An organization as a statement's parameter: its id, or the one the key lookup named. */
export type Tenant = string | typeof KEY_ORGANIZATION

/** What a query needs from a connection: parameterised statements, rows back. */
export interface Sql {
  query<Row extends object>(text: string, params?: readonly unknown[]): Promise<Row[]>
  /** Several statements without parameters (migrations, transaction set-up). */
  exec(text: string): Promise<void>
  /**
   * Where a connection can put several statements in one round trip (the PostgreSQL store's
   * request path, with prepared statements): `text` with `params` is sent with the next `query`,
   * which may then pass `KEY_ORGANIZATION`, or by `flush`. Its rows come back with that answer.
   */
  readonly sendWithNext?: <Row extends object>(text: string, params?: readonly unknown[]) => Promise<Row[]>
  /** Sends what `sendWithNext` holds, if anything, on its own. */
  readonly flush?: () => Promise<void>
  /**
   * Where the connection can hand a result's rows on as the bytes PostgreSQL sent (the PostgreSQL
   * store): `query`, with the rows of the result `sink` accepts given to it instead of returned.
   */
  readonly queryInto?: (sink: RowSink, text: string, params?: readonly unknown[]) => Promise<void>
}

/** Takes one result's rows as the DataRow messages PostgreSQL sent (`Sql.queryInto`). */
export interface RowSink {
  /** Whether the result of these columns is the one to take; its rows then go to `row`. */
  accepts(fields: readonly { readonly name: string; readonly dataTypeID: number }[]): boolean
  /**
   * One DataRow message of `length` bytes, its field count at `offset` of `bytes`, valid only
   * during the call (the connection's buffer). It must not throw: it runs inside the connection's
   * parser, so it keeps what went wrong for its caller.
   */
  row(bytes: Buffer, offset: number, length: number): void
}

/** The operator's connection: a `Sql` that can also bulk-load. */
export interface AdminSql extends Sql {
  /**
   * Loads rows in COPY's text format (one line per row, tab-separated, `\\N` for NULL) into
   * `table`: PostgreSQL streams them with COPY FROM STDIN, PGlite reads them with COPY FROM '/dev/blob'.
   */
  copyIn(table: string, columns: readonly string[], text: string): Promise<void>
}

export type StoreKind = 'postgres' | 'embedded'

/**
 * How a page's result is read best. `rows`: one row per item, written as JSON by Node (from the
 * rows' bytes where the connection hands them on: `Sql.queryInto`). `json`: one row whose items
 * the database wrote as JSON text, for a store whose rows cost more to read than the database's
 * JSON functions; both stores read rows (docs/design/techniques.md, Items as JSON), and the tests
 * hold the two forms to the same bytes.
 */
export type PageForm = 'rows' | 'json'

/**
 * What sets one store apart, declared once by the store and asked of it by the query layer
 * (kysely's dialect adapter is the model): no connection carries a flag, no wrapper forwards one.
 */
export interface StoreAdapter {
  readonly pageForm: PageForm
}

/** What one call of the background fold saw (migration 017, `list_fold_pending`). */
export interface FoldReport {
  /** Lists whose pending changes were folded by this call. */
  readonly folded: number
  /** Pending changes of the list with the most, after the call: what its pages step over. */
  readonly mostPending: number
  /** Pending changes of all lists, after the call. */
  readonly allPending: number
  /** Lists whose fold failed in the database (the others were folded), and the first one's error. */
  readonly failed: number
  readonly failure?: string
}

/** A connection pool's state, for the metrics; `database` names it (`primary`, `embedded`). */
export interface PoolStats {
  readonly database: string
  readonly total: number
  readonly idle: number
  readonly waiting: number
}

/** How a request-path read goes (`Store.read`). */
export interface ReadOptions {
  /**
   * The work sends all it reads in one message with the key lookup (`sendWithNext` and
   * `KEY_ORGANIZATION`): nothing of it relies on a transaction across messages, so on PostgreSQL
   * the message may share a connection with other requests' (store/postgres/pipeline.ts).
   */
  readonly oneMessage?: boolean
}

/**
 * One interface over real PostgreSQL and embedded PGlite; the same SQL runs on both.
 *
 * - `read` is the request path: a read-only transaction under `SET LOCAL ROLE openbook_reader`.
 * - `asReader` is the same role, read-write (last-used tracking of API keys).
 * - `admin` is the operator's transaction with the connecting role's own rights (CLI, migrations).
 */
export interface Store {
  readonly kind: StoreKind
  readonly adapter: StoreAdapter
  /**
   * Requests read while an operator transaction writes (PostgreSQL). False where transactions
   * run one at a time (PGlite): there a bulk load may lock a table whole, as nobody reads beside it.
   */
  readonly concurrentReads: boolean
  read<T>(work: (sql: Sql) => Promise<T>, options?: ReadOptions): Promise<T>
  asReader<T>(work: (sql: Sql) => Promise<T>): Promise<T>
  admin<T>(work: (sql: AdminSql) => Promise<T>): Promise<T>
  /**
   * Runs a statement that cannot run inside a transaction (VACUUM, CHECKPOINT), on the primary,
   * with the connecting role's rights.
   */
  maintain(statement: string): Promise<void>
  /**
   * The readiness check's transaction, with the connecting role's rights, on a connection of its
   * own where the store has several (PostgreSQL): never queued behind requests for a pool slot,
   * and bounded in time. Without it, the check runs as `admin`.
   */
  readonly probe?: <T>(work: (sql: Sql) => Promise<T>) => Promise<T>
  /**
   * Where transactions run one at a time (PGlite): the operator transaction that holds the store
   * now, and since when, for an import waiting its turn to say so.
   */
  readonly holder?: () => { readonly what: string; readonly since: Date } | undefined
  /**
   * Folds the lists whose pending changes reached the threshold, on the primary, in a READ
   * COMMITTED transaction on a connection of its own (never a request's slot), as the reader role.
   * Where the salon software writes beside openbook (PostgreSQL); absent where only openbook
   * writes (embedded: its imports fold their own changes at their end).
   */
  readonly foldLists?: () => Promise<FoldReport>
  /** The state of the store's connection pools, read at each metrics scrape. */
  pools(): readonly PoolStats[]
  /** With a read replica: how far it is behind, in seconds (undefined while it is unreachable). */
  readonly replicaLagSeconds?: () => number | undefined
  close(): Promise<void>
}
