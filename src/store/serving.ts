import { assertReaderPrivileges } from './reader-privileges.js'
import { assertServable, readServableState } from './schema-version.js'
import type { Store } from './types.js'

/**
 * Whether this release can serve requests from this store: the schema is one it serves
 * (schema-version.ts) and openbook_reader holds every privilege the request path uses
 * (reader-privileges.ts). Checked at start and by every readiness probe, in one transaction;
 * throws the one line that names the fix.
 */
export async function assertCanServe(store: Store): Promise<void> {
  await store.admin(async (sql) => {
    assertServable(await readServableState(sql))
    await assertReaderPrivileges(sql)
  })
}
