import { READER_ROLE } from '../reader-settings.js'
import type { Sql } from '../types.js'

/**
 * What the request path does as openbook_reader, privilege by privilege: the one list the server
 * checks at start and at every readiness probe, and that the isolation test holds the migrated
 * grants to (exactly these, nothing more). A table or function the pages start to read goes here
 * and into the migration that grants it.
 */
export const READER_PRIVILEGES = [
  { kind: 'schema', object: 'public', privilege: 'USAGE' },
  { kind: 'table', object: 'api_keys', privilege: 'SELECT' },
  { kind: 'table', object: 'appointments', privilege: 'SELECT' },
  { kind: 'table', object: 'buckets', privilege: 'SELECT' },
  { kind: 'table', object: 'customers', privilege: 'SELECT' },
  { kind: 'table', object: 'list_changes', privilege: 'SELECT' },
  { kind: 'table', object: 'list_folds', privilege: 'SELECT' },
  { kind: 'column', object: 'api_keys.last_used_at', privilege: 'UPDATE' },
  { kind: 'function', object: 'openbook_key_lookup(text)', privilege: 'EXECUTE' },
  { kind: 'function', object: 'openbook_prepare(text,text,boolean)', privilege: 'EXECUTE' },
  { kind: 'function', object: 'openbook_schema_version()', privilege: 'EXECUTE' },
] as const satisfies readonly ReaderPrivilege[]

export interface ReaderPrivilege {
  readonly kind: 'schema' | 'table' | 'column' | 'function'
  readonly object: string
  readonly privilege: string
}

/** The statement that grants a privilege, as the owner would run it. */
export function grantStatement({ kind, object, privilege }: ReaderPrivilege): string {
  switch (kind) {
    case 'schema':
      return `GRANT ${privilege} ON SCHEMA ${object} TO ${READER_ROLE}`
    case 'table':
      return `GRANT ${privilege} ON ${object} TO ${READER_ROLE}`
    case 'column': {
      const [table, column] = object.split('.')
      return `GRANT ${privilege} (${column}) ON ${table} TO ${READER_ROLE}`
    }
    case 'function':
      return `GRANT ${privilege} ON FUNCTION ${object} TO ${READER_ROLE}`
  }
}

/** The request path would fail for want of a privilege: the message names it and its grant. */
export class ReaderPrivilegeError extends Error {}

/**
 * The privileges of READER_PRIVILEGES that openbook_reader lacks (a missing object counts as
 * lacking it), read with the privilege functions, which any role may ask about any role.
 */
export async function missingReaderPrivileges(sql: Sql): Promise<ReaderPrivilege[]> {
  const rows = await sql.query<{
    kind: ReaderPrivilege['kind']
    object: string
    privilege: string
    granted: boolean | null
  }>(
    `SELECT w.kind, w.object, w.privilege,
              EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1) AND CASE w.kind
                WHEN 'schema' THEN has_schema_privilege($1, w.object, w.privilege)
                WHEN 'table' THEN to_regclass('public.' || w.object) IS NOT NULL
                  AND has_table_privilege($1, to_regclass('public.' || w.object), w.privilege)
                WHEN 'column' THEN EXISTS (
                  SELECT 1 FROM pg_attribute a
                  WHERE a.attrelid = to_regclass('public.' || split_part(w.object, '.', 1))
                    AND a.attname = split_part(w.object, '.', 2) AND NOT a.attisdropped
                    AND has_column_privilege($1, a.attrelid, a.attnum, w.privilege))
                WHEN 'function' THEN to_regprocedure('public.' || w.object) IS NOT NULL
                  AND has_function_privilege($1, to_regprocedure('public.' || w.object), w.privilege)
              END AS granted
       FROM unnest($2::text[], $3::text[], $4::text[]) AS w(kind, object, privilege)`,
    [
      READER_ROLE,
      READER_PRIVILEGES.map((p) => p.kind),
      READER_PRIVILEGES.map((p) => p.object),
      READER_PRIVILEGES.map((p) => p.privilege),
    ],
  )
  return rows
    .filter((row) => row.granted !== true)
    .map(({ kind, object, privilege }) => ({ kind, object, privilege }))
}

/** Throws, naming the first missing privilege and the statement that grants it. */
export async function assertReaderPrivileges(sql: Sql): Promise<void> {
  const missing = await missingReaderPrivileges(sql)
  const [first] = missing
  if (!first) return
  const more = missing.length > 1 ? ` (and ${missing.length - 1} more)` : ''
  throw new ReaderPrivilegeError(
    `${READER_ROLE} lacks ${first.privilege} on ${first.kind} ${first.object}${more}, which every request needs: ` +
      `as the schema owner, run \`openbook migrate\` (it restores every grant the schema defines) or \`${grantStatement(first)}\``,
  )
}
