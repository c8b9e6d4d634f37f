import { fetchVersionedPage, type Page } from '../../src/queries/page.js'
import type { PageRequest, PageStatement } from '../../src/queries/page-statement.js'
import type { Sql, StoreAdapter } from '../../src/store/types.js'

/** A page statement's page, unconditionally (no version held): what the tests of the SQL read. */
export async function fetchPage(
  store: StoreAdapter,
  sql: Sql,
  statement: PageStatement,
  page: PageRequest,
): Promise<Page> {
  const answer = await fetchVersionedPage(store, sql, statement, page)
  if (!answer.page) throw new Error('an unconditional page statement read no page')
  return answer.page
}
