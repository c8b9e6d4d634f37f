import { READER_ROLE } from '../reader-settings.js'
import { READER_PRIVILEGES, type ReaderPrivilege } from './reader-privileges.js'

/**
 * Who may do what in openbook's schema, as the migrations up to this release's version leave it:
 * the one list that `openbook migrate` checks at every run and restores where it is missing (a
 * restore under other role names, `pg_restore --no-owner --no-privileges`, loses every grant and
 * the owner's policies; repair.ts), and that test/store/access.test.ts holds a migrated database
 * to exactly. A migration that grants, revokes or adds a policy changes this list in the same
 * commit.
 */

/** The role the salon software's application writes customers and appointments as (migration 013). */
export const WRITER_ROLE = 'openbook_writer'

/** A privilege of one role on one object (`table` covers views; `sequence`; `column` is `table.column`). */
export interface Privilege extends Omit<ReaderPrivilege, 'kind'> {
  readonly kind: ReaderPrivilege['kind'] | 'sequence'
  readonly role: string
}

/**
 * Granted to openbook_reader for the earlier release that still serves this schema (its
 * `compatible-from`), which reads these: the server does not check them, and the migration that
 * no longer serves beside that release revokes them.
 */
export const EARLIER_RELEASE_READER_PRIVILEGES = [
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
 * Granted to openbook_reader for the server's background fold (017), outside the request path:
 * the server does not check it at start or in readiness (an instance without it still serves),
 * and logs its GRANT when a fold is refused (src/domain/list-folder.ts).
 */
export const FOLDER_PRIVILEGES = [
  { kind: 'function', object: 'list_fold_pending()', privilege: 'EXECUTE' },
] as const satisfies readonly ReaderPrivilege[]

/**
 * What the salon software's role may do (013, 016, 017): write the two tables, append and fold
 * their changes, read its organizations, and keep their staff and services.
 */
const WRITER_PRIVILEGES = [
  { kind: 'table', object: 'organizations', privilege: 'SELECT' },
  ...['customers', 'appointments', 'staff', 'services'].flatMap((object) =>
    ['SELECT', 'INSERT', 'UPDATE', 'DELETE'].map(
      (privilege) => ({ kind: 'table', object, privilege }) as const,
    ),
  ),
  { kind: 'table', object: 'list_changes', privilege: 'INSERT' },
  { kind: 'function', object: 'list_fold(text,text,boolean,integer)', privilege: 'EXECUTE' },
  { kind: 'sequence', object: 'list_turns', privilege: 'USAGE' },
] as const

/** Every privilege the migrations grant the two roles. */
export const GRANTED: readonly Privilege[] = [
  ...[...READER_PRIVILEGES, ...EARLIER_RELEASE_READER_PRIVILEGES, ...FOLDER_PRIVILEGES].map((p) => ({
    ...p,
    role: READER_ROLE,
  })),
  ...WRITER_PRIVILEGES.map((p) => ({ ...p, role: WRITER_ROLE })),
]

/**
 * The tables under forced row-level security, each with its tenant policy on this column and the
 * owner's `owner_access` (the owner is held to the policies too: it sees every row through its
 * own).
 */
export const TENANT_TABLES: Readonly<Record<string, 'org_id' | 'id'>> = {
  api_keys: 'org_id',
  appointment_counts_12: 'org_id',
  appointments: 'org_id',
  buckets: 'org_id',
  customer_counts_12: 'org_id',
  customers: 'org_id',
  list_buckets_12: 'org_id',
  list_changes: 'org_id',
  list_folds: 'org_id',
  list_versions_12: 'org_id',
  memberships: 'org_id',
  organizations: 'id',
  services: 'org_id',
  staff: 'org_id',
}

/** A policy: `roles` names `owner` for the schema owner, whatever its name. */
export interface Policy {
  readonly table: string
  readonly name: string
  readonly command: 'ALL' | 'SELECT' | 'INSERT'
  readonly roles: 'public' | 'owner' | typeof WRITER_ROLE
  readonly using?: string
  readonly check?: string
}

/** Every policy of the schema. */
export const POLICIES: readonly Policy[] = [
  ...Object.entries(TENANT_TABLES).flatMap(([table, column]): Policy[] => [
    {
      table,
      name: 'tenant_isolation',
      command: 'ALL',
      roles: 'public',
      using: `${column} = current_setting('openbook.org_id', true)`,
    },
    { table, name: 'owner_access', command: 'ALL', roles: 'owner', using: 'true', check: 'true' },
  ]),
  {
    table: 'api_keys',
    name: 'key_lookup',
    command: 'SELECT',
    roles: 'public',
    using: "key_hash = current_setting('openbook.key_hash', true)",
  },
  {
    table: 'customers',
    name: 'writer_access',
    command: 'ALL',
    roles: WRITER_ROLE,
    using: 'true',
    check: 'true',
  },
  {
    table: 'appointments',
    name: 'writer_access',
    command: 'ALL',
    roles: WRITER_ROLE,
    using: 'true',
    check: 'true',
  },
  { table: 'list_changes', name: 'writer_access', command: 'INSERT', roles: WRITER_ROLE, check: 'true' },
  { table: 'organizations', name: 'writer_access', command: 'SELECT', roles: WRITER_ROLE, using: 'true' },
  ...['staff', 'services'].map(
    (table): Policy => ({
      table,
      name: 'writer_access',
      command: 'ALL',
      roles: WRITER_ROLE,
      using: 'true',
      check: 'true',
    }),
  ),
]

/**
 * The only functions of the schema that PUBLIC may execute (PostgreSQL's default for a new
 * function): two trigger functions, which no one calls directly. Every other one was revoked from
 * PUBLIC by the migration that made it; list_fold, which runs as its owner, above all.
 */
export const PUBLIC_FUNCTIONS: readonly string[] = ['list_fold_at_commit()', 'list_truncate()']

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`

/** The statement that grants a privilege, as the owner would run it. */
export function grantOf({ kind, object, privilege, role }: Privilege): string {
  const to = quoteIdent(role)
  switch (kind) {
    case 'schema':
      return `GRANT ${privilege} ON SCHEMA ${object} TO ${to}`
    case 'table':
      return `GRANT ${privilege} ON ${object} TO ${to}`
    case 'sequence':
      return `GRANT ${privilege} ON SEQUENCE ${object} TO ${to}`
    case 'column': {
      const [table, column] = object.split('.')
      return `GRANT ${privilege} (${column}) ON ${table} TO ${to}`
    }
    case 'function':
      return `GRANT ${privilege} ON FUNCTION ${object} TO ${to}`
  }
}

/** The statement that creates a policy for the schema owner `owner`. */
export function createPolicyOf(policy: Policy, owner: string): string {
  const to = policy.roles === 'owner' ? quoteIdent(owner) : policy.roles
  return (
    `CREATE POLICY ${policy.name} ON ${policy.table} FOR ${policy.command} TO ${to}` +
    `${policy.using ? ` USING (${policy.using})` : ''}${policy.check ? ` WITH CHECK (${policy.check})` : ''}`
  )
}
