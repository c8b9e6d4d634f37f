import { hashSecret } from '../src/domain/api-key-secret.js'
import { authenticateKey } from '../src/queries/api-keys.js'
import { type AppointmentFilters, appointmentsPage, listAppointments } from '../src/queries/appointments.js'
import { customersPage, listCustomers } from '../src/queries/customers.js'
import { type Page, type PageRequest, pageParams } from '../src/queries/page.js'
import { readerPreamble } from '../src/queries/sql.js'
import type { Sql, StoreAdapter, Tenant } from '../src/store/types.js'

export type Resource = 'customers' | 'appointments'

/** One list request, as the query layer sees it after validation. */
export interface ListRequest {
  readonly resource: Resource
  readonly page: PageRequest
  readonly filters: AppointmentFilters
}

export interface Statement {
  readonly text: string
  readonly params: readonly unknown[]
}

/** The statement that opens every request's transaction, as the PostgreSQL store sends it. */
export const OPEN_TRANSACTION = `BEGIN; ${readerPreamble(true, 5_000)}`

/** PostgreSQL's form of the page: rows, each made an item in Node (see StoreAdapter.pageForm). */
export const POSTGRES_PAGES: StoreAdapter = { pageForm: 'rows' }

/** Runs the service's own query functions: the one place the benchmark takes SQL from. */
export function listPage(sql: Sql, tenant: Tenant, request: ListRequest): Promise<Page> {
  return request.resource === 'customers'
    ? listCustomers(POSTGRES_PAGES, sql, tenant, request.page)
    : listAppointments(POSTGRES_PAGES, sql, tenant, request.page, request.filters)
}

const PREFIX = '/api/public/v1/'
const FILTERS = ['status', 'customerId', 'staffId', 'startDate', 'endDate'] as const

/**
 * A list request from its URL with the essential checks only (the minimal handlers': no framework,
 * no validation beyond a page's bounds); undefined for any other path or a page out of bounds.
 */
export function parseListRequest(url: string): ListRequest | undefined {
  const at = url.indexOf('?')
  const path = at < 0 ? url : url.slice(0, at)
  const resource = path.slice(PREFIX.length)
  if (!path.startsWith(PREFIX) || (resource !== 'customers' && resource !== 'appointments')) return undefined
  const query = new URLSearchParams(at < 0 ? '' : url.slice(at + 1))
  const limit = Number(query.get('limit') ?? 50)
  const offset = Number(query.get('offset') ?? 0)
  if (!Number.isInteger(limit) || limit < 1 || limit > 100 || !Number.isInteger(offset) || offset < 0) {
    return undefined
  }
  const filters: Record<string, string> = {}
  for (const name of FILTERS) {
    const value = query.get(name)
    if (value !== null) filters[name] = value
  }
  return { resource: resource as Resource, page: { limit, offset }, filters: filters as AppointmentFilters }
}

/** A connection that records statements instead of running them; every query returns no rows. */
function recorder(): { sql: Sql; statements: Statement[] } {
  const statements: Statement[] = []
  const sql: Sql = {
    async query<Row extends object>(text: string, params: readonly unknown[] = []): Promise<Row[]> {
      statements.push({ text, params })
      return []
    },
    async exec(text: string) {
      statements.push({ text, params: [] })
    },
  }
  return { sql, statements }
}

export interface RequestStatements {
  readonly authenticate: Statement
  /** The page with its total in one statement. */
  readonly page: Statement
  /** The total alone, as the page statement counts it. */
  readonly count: Statement
}

/** The statements the service sends to PostgreSQL for one request with `secret`, from src/queries. */
export async function captureStatements(
  secret: string,
  orgId: string,
  request: ListRequest,
): Promise<RequestStatements> {
  const auth = recorder()
  await authenticateKey(auth.sql, hashSecret(secret))
  const [authenticate] = auth.statements
  if (!authenticate) throw new Error('the key lookup sent no statement')
  const statement =
    request.resource === 'customers' ? customersPage(orgId) : appointmentsPage(orgId, request.filters)
  return {
    authenticate,
    // PostgreSQL's form of the page (rows, not JSON): see StoreAdapter.pageForm.
    page: {
      text: statement.rowsText,
      params: pageParams(statement, request.page),
    },
    count: { text: statement.countText, params: statement.params },
  }
}

function literal(value: unknown): string {
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value)
  if (typeof value === 'string') return `'${value.replaceAll("'", "''")}'`
  throw new Error(`no literal for ${typeof value}`)
}

/** The statement with its parameters written in as literals (for pgbench in simple-protocol mode). */
export function inline(statement: Statement): string {
  return statement.text.replace(/\$(\d+)/g, (_, n: string) => literal(statement.params[Number(n) - 1]))
}

/**
 * A pgbench script of one request's transaction: the same statements in openbook's round trips
 * (BEGIN and its settings travel with the key lookup, then the page, then COMMIT, which pgbench
 * waits for where openbook does not).
 */
export function pgbenchScript(statements: RequestStatements): string {
  const open = OPEN_TRANSACTION.split(/;\s*/).join(' \\; ')
  return [
    `${open} \\; ${inline(statements.authenticate)};`,
    `${inline(statements.page)};`,
    'COMMIT;',
    '',
  ].join('\n')
}
