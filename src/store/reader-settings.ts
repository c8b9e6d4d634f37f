/**
 * The request path's transaction: the role it reads as and the settings both stores open every
 * request with, after BEGIN. The page statements (queries/) count on them.
 */

/** The role the request path reads as: SELECT on the tenant tables, under row-level security. */
export const READER_ROLE = 'openbook_reader'

const LOCK_TIMEOUT_MS = 1_000

/**
 * Plan shapes the request path never wants, whatever the planner expects of the rows: a page is
 * an index read in list order with its rows looked up by primary key, a total a counts table or
 * an index read in list order (src/queries/page-statement.ts). Each setting only prices its kind of plan
 * out while another exists, so a statement with no other way still runs. Without them, statistics
 * that misjudge an organization (one that dominates the table, one imported since the last
 * ANALYZE) turn a 1 ms page into a scan of the table, a hash join against it, or a sort of all
 * the organization's rows (test/plans/request-plans.test.ts).
 */
const PLANNER_SETTINGS = [
  'enable_seqscan',
  'enable_bitmapscan',
  'enable_hashjoin',
  'enable_mergejoin',
  'enable_sort',
]

/**
 * Statements that open every request-path transaction, after BEGIN: the settings go in one
 * SELECT of set_config(…, true), the same as SET LOCAL each, which PostgreSQL parses and runs as
 * one statement rather than ten (83 → 35 µs a transaction in pgbench, bench/RESULTS.md).
 */
export function readerPreamble(readOnly: boolean, statementTimeoutMs: number): string {
  const settings: [string, string | number][] = [
    // SET LOCAL ROLE: the role the statements after it run as.
    ['role', READER_ROLE],
    ['statement_timeout', Math.trunc(statementTimeoutMs)],
    // A request never queues behind a table lock (a migration, a maintenance command): after a
    // second it is answered 503 with Retry-After instead of waiting out the statement time-out.
    ['lock_timeout', LOCK_TIMEOUT_MS],
    // JIT compilation pays off for long analytic queries; a page costs 2-3 ms, and compiling one
    // cost 40 ms whenever its estimate crossed jit_above_cost (bench/RESULTS.md, Findings).
    ['jit', 'off'],
    ...PLANNER_SETTINGS.map((setting): [string, string] => [setting, 'off']),
    // A prepared statement keeps one plan for every organization and page, never planned again:
    // the plans above hold for any parameters (the plan test checks them as generic plans).
    ['plan_cache_mode', 'force_generic_plan'],
    // Timestamps and dates as text in one fixed form, whatever the server's or the role's
    // defaults: a page's rows carry them so, and Node writes the ISO form (queries/page-rows.ts).
    ['TimeZone', 'UTC'],
    ['DateStyle', 'ISO, YMD'],
  ]
  // SET TRANSACTION READ ONLY is this setting, made transaction-local the same way.
  if (readOnly) settings.unshift(['transaction_read_only', 'on'])
  // One column for all: a column per setting cost the driver a type parser and a member each,
  // a request (docs/design/techniques.md). concat evaluates every argument.
  return `SELECT concat(${settings.map(([name, value]) => `set_config('${name}', '${value}', true)`).join(', ')})`
}
