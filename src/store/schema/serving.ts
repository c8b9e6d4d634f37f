import type { Sql, Store } from '../types.js'
import { assertReaderPrivileges } from './reader-privileges.js'
import { assertServable, readServableState } from './schema-version.js'

/**
 * Whether this release can serve requests from this store: the schema is one it serves
 * (schema-version.ts) and openbook_reader holds every privilege the request path uses
 * (reader-privileges.ts). Checked at start, and every second by the readiness check in the
 * background (ops/readiness.ts), in one transaction; throws the one line that names the fix.
 */
export async function assertCanServe(store: Store): Promise<void> {
  await store.admin(assertServing)
}

/** `assertCanServe` inside a transaction of the caller's (the readiness check's own connection). */
export async function assertServing(sql: Sql): Promise<void> {
  assertServable(await readServableState(sql))
  await assertReaderPrivileges(sql)
}
