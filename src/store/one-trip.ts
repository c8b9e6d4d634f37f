import pg from 'pg'
import { KEY_ORGANIZATION } from './types.js'

/**
 * The request path in one round trip on PostgreSQL: BEGIN and its settings, the key lookup and the
 * page go in one simple-protocol message, the page as `EXECUTE` of a statement prepared once per
 * connection: by `PREPARE` in the first such message, or behind a pooler in transaction mode by
 * `openbook_prepare` in every message, which prepares it on the server connection it lands on
 * unless it is already there. The extended protocol would take a round
 * trip per statement here: node-postgres waits for each answer before it sends the next statement.
 *
 * `EXECUTE` takes its parameters as SQL expressions: the key's organization is read from the
 * setting the lookup made, so the page need not wait for the lookup's answer, and every other
 * value is written as a literal (a finite number as it is, a string quoted by node-postgres's
 * escapeLiteral). A parameter of any other kind is refused, never guessed at.
 */

/** The organization the key lookup named; NULL when it found no key (then no rows match). */
const KEY_ORGANIZATION_SQL = "current_setting('openbook.org_id', true)"

function literal(value: unknown): string {
  if (value === KEY_ORGANIZATION) return KEY_ORGANIZATION_SQL
  if (value === null || value === undefined) return 'NULL'
  if (typeof value === 'number' && Number.isFinite(value)) return String(value)
  if (typeof value === 'string') {
    // The message is a C string on the server: a NUL would end it (validation refuses control
    // characters before a value gets here).
    if (value.includes('\0')) throw new Error('a statement parameter holds a NUL character')
    return pg.escapeLiteral(value)
  }
  throw new Error(`a statement parameter of type ${typeof value} cannot be written as SQL`)
}

/** `EXECUTE` of the prepared statement `name` with `params` written as SQL. */
export function executeText(name: string, params: readonly unknown[]): string {
  return params.length === 0 ? `EXECUTE ${name}` : `EXECUTE ${name}(${params.map(literal).join(', ')})`
}

/**
 * `text` with its parameters `$1`, `$2`… written in as SQL (as `EXECUTE` takes them): for a
 * statement that goes as it is, unprepared. Only for the service's own statements, which name a
 * parameter nowhere but where it stands.
 */
export function inlineText(text: string, params: readonly unknown[]): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => {
    const index = Number(n) - 1
    if (index >= params.length) throw new Error(`a statement names $${n} of ${params.length} parameters`)
    return literal(params[index])
  })
}

/** `PREPARE` of `text` as `name`, its parameters' types inferred by PostgreSQL as the extended protocol does. */
export function prepareText(name: string, text: string): string {
  return `PREPARE ${name} AS ${text}`
}

/** Per statement name, `text` as a quoted literal: a page's SQL is 2-5 KB, quoted once per process. */
const quotedStatements = new Map<string, string>()

/**
 * The `PREPARE` of `text` as `name` on whichever server connection runs it, unless it is prepared
 * there already, which the database checks (`openbook_prepare`, migration 007): behind a pooler in
 * transaction mode the client cannot know. `recheck`: not by the session setting that marks it, but
 * in pg_prepared_statements.
 */
export function prepareOnServerText(name: string, text: string, recheck: boolean): string {
  let quoted = quotedStatements.get(name)
  if (quoted === undefined) {
    quoted = pg.escapeLiteral(text)
    quotedStatements.set(name, quoted)
  }
  return `SELECT openbook_prepare('${name}', ${quoted}${recheck ? ', true' : ''})`
}

/** SQLSTATE 26000: `EXECUTE` of a statement the connection has not prepared. */
export const isPreparedStatementMissing = (error: unknown) =>
  error instanceof Error && (error as { code?: unknown }).code === '26000'

/**
 * What prepared statements `on` meets behind a pooler in transaction mode, which hands a client's
 * transactions to any server connection: 42P05 (`PREPARE` where another client prepared it
 * already) or 26000 (`EXECUTE` where nobody has). Same name, same text: never a wrong answer.
 */
export const isPoolerSymptom = (error: unknown) =>
  error instanceof Error && ['42P05', '26000'].includes(String((error as { code?: unknown }).code))

/** Whether a statement's parameters need the one-trip form: the key's organization stands among them. */
export const namesKeyOrganization = (params: readonly unknown[]) => params.includes(KEY_ORGANIZATION)
