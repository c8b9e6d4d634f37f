import type { Config } from '../config.js'
import { createEmbeddedStore } from './embedded.js'
import { migrate } from './migrate.js'
import { createPostgresStore } from './postgres.js'
import type { Store } from './types.js'

export interface OpenStoreOptions {
  readonly onIdleError?: (error: Error) => void
  readonly maxConnections?: number
}

/**
 * PostgreSQL when DATABASE_URL is set, otherwise the embedded store in
 * DATA_DIR, created and migrated on first use.
 */
export async function openStore(
  config: Pick<Config, 'databaseUrl' | 'dataDir'>,
  options: OpenStoreOptions = {},
): Promise<Store> {
  if (config.databaseUrl) {
    return createPostgresStore({
      connectionString: config.databaseUrl,
      ...(options.onIdleError ? { onIdleError: options.onIdleError } : {}),
      ...(options.maxConnections ? { maxConnections: options.maxConnections } : {}),
    })
  }
  const store = await createEmbeddedStore(config.dataDir)
  await migrate(store)
  return store
}

/** True when the connecting role can do more than openbook_reader (superuser, owner, or not a member). */
export async function isPrivileged(store: Store): Promise<boolean> {
  const [row] = await store.admin((sql) =>
    sql.query<{ privileged: boolean }>(
      `SELECT r.rolsuper OR r.rolbypassrls
              OR NOT pg_has_role(current_user, 'openbook_reader', 'MEMBER')
              OR EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = 'public' AND tableowner = current_user)
              AS privileged
       FROM pg_roles r WHERE r.rolname = current_user`,
    ),
  )
  return row?.privileged ?? true
}
