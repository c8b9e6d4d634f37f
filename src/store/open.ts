import type { Config } from '../config.js'
import { createEmbeddedStore } from './embedded/embedded.js'
import type { AutovacuumOptions } from './embedded/embedded-autovacuum-schedule.js'
import type { DataDirOrigin } from './embedded/embedded-protocol.js'
import { isDiskFull } from './open-failure.js'
import { createPostgresStore, type ReplicaEvents } from './postgres/postgres.js'
import { migrate, schemaState } from './schema/migrate.js'
import { MigrateTooOldError, SchemaTooNewError, servability } from './schema/schema-version.js'
import type { Store } from './types.js'

export interface OpenStoreOptions {
  readonly onIdleError?: (error: Error) => void
  /** Told once when prepared statements `on` met a pooler in transaction mode and became `pooler`. */
  readonly onPoolerDetected?: (detail: string) => void
  readonly replicaEvents?: ReplicaEvents
  readonly maxConnections?: number
  /** What this process is, named to a second process that finds the embedded DATA_DIR held. */
  readonly command?: string
  /** Opened briefly, by a command rather than the server (see EmbeddedStoreOptions.shortLived). */
  readonly shortLived?: boolean
  /** Told how the embedded DATA_DIR was opened: as it was, or made from the template or by initdb. */
  readonly onDataDirOpened?: (origin: DataDirOrigin) => void
  /** The embedded store's own autovacuum, told to the server's log (EmbeddedStoreOptions.autovacuum). */
  readonly autovacuum?: AutovacuumOptions
}

/**
 * PostgreSQL when DATABASE_URL is set, otherwise the embedded store in
 * DATA_DIR, created and migrated on first use.
 */
export async function openStore(
  config: Pick<Config, 'databaseUrl' | 'dataDir'> &
    Partial<
      Pick<
        Config,
        | 'databaseReadUrl'
        | 'databaseReadMaxLagMs'
        | 'databasePreparedStatements'
        | 'databasePoolSize'
        | 'databaseIdleTimeoutMs'
        | 'databasePipelineDepth'
        | 'requestDeadlineMs'
        | 'dataDirTemplate'
      >
    >,
  options: OpenStoreOptions = {},
): Promise<Store> {
  if (config.databaseUrl) {
    return createPostgresStore({
      connectionString: config.databaseUrl,
      ...(config.databaseReadUrl ? { readConnectionString: config.databaseReadUrl } : {}),
      ...(config.databaseReadMaxLagMs !== undefined ? { maxReplicaLagMs: config.databaseReadMaxLagMs } : {}),
      ...(config.databasePreparedStatements !== undefined
        ? { preparedStatements: config.databasePreparedStatements }
        : {}),
      ...(options.replicaEvents ? { replicaEvents: options.replicaEvents } : {}),
      ...(options.onIdleError ? { onIdleError: options.onIdleError } : {}),
      ...(options.onPoolerDetected ? { onPoolerDetected: options.onPoolerDetected } : {}),
      ...(config.requestDeadlineMs !== undefined ? { requestDeadlineMs: config.requestDeadlineMs } : {}),
      ...(config.databaseIdleTimeoutMs !== undefined ? { idleTimeoutMs: config.databaseIdleTimeoutMs } : {}),
      ...(config.databasePipelineDepth !== undefined ? { pipelineDepth: config.databasePipelineDepth } : {}),
      ...((options.maxConnections ?? config.databasePoolSize)
        ? { maxConnections: options.maxConnections ?? config.databasePoolSize }
        : {}),
    })
  }
  const store = await createEmbeddedStore(config.dataDir, {
    ...(options.command ? { command: options.command } : {}),
    ...(options.shortLived ? { shortLived: true } : {}),
    ...(config.dataDirTemplate !== undefined ? { template: config.dataDirTemplate } : {}),
    ...(options.onDataDirOpened ? { onOpened: options.onDataDirOpened } : {}),
    ...(options.autovacuum ? { autovacuum: options.autovacuum } : {}),
  })
  try {
    await migrateEmbedded(store, config.dataDir)
  } catch (error) {
    await store.close()
    throw error
  }
  return store
}

/**
 * The embedded store follows the version rules of PostgreSQL's (docs/operators/upgrading.md), with
 * `migrate` run at every open: a DATA_DIR written by a newer release is served as it is when its
 * schema declares that this release serves it, and refused, changed in nothing, otherwise.
 */
async function migrateEmbedded(store: Store, dataDir: string): Promise<void> {
  try {
    // Without the repair of grants and policies (`openbook migrate` runs it): a DATA_DIR is copied
    // whole, under PGlite's one role, so it has lost none; and its catalog reads would add a third
    // to this check at every open of the store, every command's included (0.25 of 0.7 s, loaded).
    await migrate(store, { repair: false })
  } catch (error) {
    if (!(error instanceof MigrateTooOldError)) throw error
    const state = await schemaState(store)
    if (servability(state) !== 'newer-compatible')
      throw new SchemaTooNewError(state, `DATA_DIR ${dataDir} was written by a newer openbook: its schema`)
  }
}

export interface ConnectingRole {
  readonly name: string
  /** May run requests as openbook_reader (a member of it, or a superuser). */
  readonly canActAsReader: boolean
  /** Can do more than openbook_reader: a superuser, BYPASSRLS, or the owner of the tables. */
  readonly privileged: boolean
}

/** What the role in DATABASE_URL is, as far as the request path cares. */
export async function connectingRole(store: Store): Promise<ConnectingRole> {
  const [row] = await store.admin((sql) =>
    sql.query<{ name: string; member: boolean; privileged: boolean }>(
      `SELECT current_user AS name,
              EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'openbook_reader')
                AND pg_has_role(current_user, 'openbook_reader', 'MEMBER') AS member,
              r.rolsuper OR r.rolbypassrls
                OR EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = 'public' AND tableowner = current_user)
                AS privileged
       FROM pg_roles r WHERE r.rolname = current_user`,
    ),
  )
  return {
    name: row?.name ?? '',
    canActAsReader: row?.member ?? false,
    privileged: row?.privileged ?? true,
  }
}

/**
 * Refuses, with what to do, an operator command whose role would see none of openbook's rows:
 * row-level security is forced, and only the schema owner's policy (or a superuser) admits them.
 */
export async function assertOperatorAccess(store: Store): Promise<void> {
  const [row] = await store.admin((sql) =>
    sql.query<{ name: string; owner: string | null; sees: boolean }>(
      `SELECT current_user AS name,
              (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = to_regclass('public.organizations')) AS owner,
              (SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user)
                OR EXISTS (SELECT 1 FROM pg_policies p, unnest(p.roles) AS r(role)
                           WHERE p.schemaname = 'public' AND p.tablename = 'organizations'
                             AND p.policyname = 'owner_access'
                             AND r.role <> 'public' AND pg_has_role(current_user, r.role, 'MEMBER')) AS sees`,
    ),
  )
  // No schema yet: the schema check says to run `openbook migrate`.
  if (row?.owner && !row.sees && row.owner === row.name) {
    // The owner's own policy names another role: a restore under another owner's name.
    throw new AccessError(
      `role ${row.name} owns openbook's tables, but their owner_access policies admit another role ` +
        `(a restore under other role names): run \`openbook migrate\` as ${row.name}, which restores them`,
    )
  }
  if (row?.owner && !row.sees) {
    throw new AccessError(
      `role ${row.name} cannot see openbook's rows (row-level security admits the schema owner ${row.owner ?? '?'}): ` +
        `run this command as ${row.owner ?? 'the owner'}, or make it a member: GRANT ${row.owner ?? 'the owner'} TO ${row.name}`,
    )
  }
}

export class AccessError extends Error {}

/**
 * Why a store could not be opened, in words, for the one-line message at start: the driver's
 * first line (which names the database, the role or the address) and its code.
 */
export function describeStoreError(error: unknown): string {
  const { code, message } = error as { code?: string; message?: string }
  const words = message?.split('\n')[0]?.trim() || 'unknown error'
  const hint = isDiskFull(error) ? STORE_ERROR_HINTS['53100'] : code ? STORE_ERROR_HINTS[code] : undefined
  return [words, hint].filter(Boolean).join('; ') + (code && !words.includes(code) ? ` (${code})` : '')
}

const STORE_ERROR_HINTS: Readonly<Record<string, string>> = {
  '3D000': 'create the database, or fix the name in DATABASE_URL',
  '28000': 'the role may not log in to this database (pg_hba.conf, or a role without LOGIN)',
  '28P01': 'check the user and password in DATABASE_URL',
  '42501': 'the role lacks a privilege openbook needs; see docs/operators/production.md',
  '53100': 'the database is out of disk space: free space on its disk',
  ECONNREFUSED: 'is PostgreSQL running, and on that host and port?',
  ENOTFOUND: 'the host in DATABASE_URL is not known',
}
