import { READER_PRIVILEGES, type ReaderPrivilege } from '../../src/store/schema/reader-privileges.js'

/**
 * Granted to openbook_reader for the earlier release that still serves this schema (its
 * `compatible-from`), which reads these: the server does not check them, and the migration
 * that no longer serves beside that release revokes them.
 */
const EARLIER_RELEASE_PRIVILEGES = [
  { kind: 'table', object: 'appointment_counts', privilege: 'SELECT' },
  { kind: 'table', object: 'appointment_counts_12', privilege: 'SELECT' },
  { kind: 'table', object: 'appointment_day_counts', privilege: 'SELECT' },
  { kind: 'table', object: 'customer_counts', privilege: 'SELECT' },
  { kind: 'table', object: 'customer_counts_12', privilege: 'SELECT' },
  { kind: 'table', object: 'customer_day_counts', privilege: 'SELECT' },
  { kind: 'table', object: 'list_buckets', privilege: 'SELECT' },
  { kind: 'table', object: 'list_buckets_12', privilege: 'SELECT' },
  { kind: 'table', object: 'list_versions', privilege: 'SELECT' },
  { kind: 'table', object: 'list_versions_12', privilege: 'SELECT' },
  { kind: 'function', object: 'list_filter_sets(jsonb)', privilege: 'EXECUTE' },
  { kind: 'function', object: 'openbook_authenticate(text)', privilege: 'EXECUTE' },
] as const satisfies readonly ReaderPrivilege[]

/**
 * Granted to openbook_reader for the server's background fold (migration 017), outside the request
 * path: the server does not check it at start or in readiness (an instance without it still
 * serves), and logs its GRANT when a fold is refused (src/domain/list-folder.ts).
 */
export const FOLDER_PRIVILEGES = [
  { kind: 'function', object: 'list_fold_pending()', privilege: 'EXECUTE' },
] as const satisfies readonly ReaderPrivilege[]

/** Every privilege the migrations grant openbook_reader, sorted by kind and object. */
export const MIGRATED_READER_PRIVILEGES: readonly ReaderPrivilege[] = [
  ...READER_PRIVILEGES,
  ...EARLIER_RELEASE_PRIVILEGES,
  ...FOLDER_PRIVILEGES,
].sort((x, y) => (x.kind === y.kind ? (x.object < y.object ? -1 : 1) : x.kind < y.kind ? -1 : 1))
