import { hashSecret } from '../src/domain/api-key-secret.js'
import { authenticateKey } from '../src/queries/api-keys.js'
import {
  APPOINTMENT_FILTERS,
  type AppointmentFilters,
  appointmentsPage,
} from '../src/queries/appointments.js'
import { customersPage } from '../src/queries/customers.js'
import { fetchVersionedPage, type Page } from '../src/queries/page.js'
import { type PageRequest, pageParams, rowsTextFor } from '../src/queries/page-statement.js'
import { readerPreamble } from '../src/store/reader-settings.js'
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

/** The settings of every request's transaction, as the PostgreSQL store makes them. */
export const READER_SETTINGS = readerPreamble(true, 5_000)

/** PostgreSQL's form of the page: rows, each made an item in Node (see StoreAdapter.pageForm). */
export const POSTGRES_PAGES: StoreAdapter = { pageForm: 'rows' }

/** Runs the service's own query functions: the one place the benchmark takes SQL from. */
export async function listPage(sql: Sql, tenant: Tenant, request: ListRequest): Promise<Page> {
  const statement =
    request.resource === 'customers' ? customersPage(tenant) : appointmentsPage(tenant, request.filters)
  const { page } = await fetchVersionedPage(POSTGRES_PAGES, sql, statement, request.page)
  if (!page) throw new Error('an unconditional page statement read no page')
  return page
}

const PREFIX = '/api/public/v1/'

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
  for (const name of APPOINTMENT_FILTERS) {
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
      text: rowsTextFor(statement, request.page),
      params: pageParams(statement, request.page),
    },
    count: { text: statement.countText, params: statement.params },
  }
}
