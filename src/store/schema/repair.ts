import type { Sql } from '../types.js'
import {
  createPolicyOf,
  GRANTED,
  grantOf,
  POLICIES,
  type Privilege,
  PUBLIC_FUNCTIONS,
  TENANT_TABLES,
} from './access.js'

// What `openbook migrate` restores at every run, once the schema is at this release's version:
// the grants, policies and forced row-level security that access.ts lists. A restore under other
// role names (`pg_restore --no-owner --no-privileges` into a database another role owns) keeps the
// tables and the tenant policies, and loses the rest: the roles' grants, the revocations from
// PUBLIC, and the owner's policies, which name the old owner. Each check reads pg_catalog; each
// repair is one statement that is a no-op on a schema already so, and is told in one line.

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`

/** The privileges of `GRANTED` that their role lacks (a missing object counts as lacking it). */
async function missingPrivileges(sql: Sql): Promise<Privilege[]> {
  const rows = await sql.query<{ missing: boolean }>(
    `SELECT NOT (EXISTS (SELECT 1 FROM pg_roles WHERE rolname = w.role) AND coalesce(CASE w.kind
                WHEN 'schema' THEN has_schema_privilege(w.role, w.object, w.privilege)
                WHEN 'table' THEN to_regclass('public.' || w.object) IS NOT NULL
                  AND has_table_privilege(w.role, to_regclass('public.' || w.object), w.privilege)
                WHEN 'sequence' THEN to_regclass('public.' || w.object) IS NOT NULL
                  AND has_sequence_privilege(w.role, to_regclass('public.' || w.object), w.privilege)
                WHEN 'column' THEN EXISTS (
                  SELECT 1 FROM pg_attribute a
                  WHERE a.attrelid = to_regclass('public.' || split_part(w.object, '.', 1))
                    AND a.attname = split_part(w.object, '.', 2) AND NOT a.attisdropped
                    AND has_column_privilege(w.role, a.attrelid, a.attnum, w.privilege))
                WHEN 'function' THEN to_regprocedure('public.' || w.object) IS NOT NULL
                  AND has_function_privilege(w.role, to_regprocedure('public.' || w.object), w.privilege)
              END, false)) AS missing
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS w(kind, object, privilege, role, n)
       ORDER BY w.n`,
    [
      GRANTED.map((p) => p.kind),
      GRANTED.map((p) => p.object),
      GRANTED.map((p) => p.privilege),
      GRANTED.map((p) => p.role),
    ],
  )
  return GRANTED.filter((_, i) => rows[i]?.missing)
}

/** Every table of TENANT_TABLES without row-level security enabled, or not forced. */
async function unforcedTables(sql: Sql) {
  return sql.query<{ table: string; enabled: boolean; forced: boolean }>(
    `SELECT c.relname AS table, c.relrowsecurity AS enabled, c.relforcerowsecurity AS forced
     FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
       AND c.relname = ANY ($1::text[]) AND NOT (c.relrowsecurity AND c.relforcerowsecurity)
     ORDER BY 1`,
    [Object.keys(TENANT_TABLES)],
  )
}

/** The policies as they are: table, name and roles (`public` for none named). */
async function presentPolicies(sql: Sql) {
  return sql.query<{ table: string; name: string; roles: string[] }>(
    `SELECT tablename AS table, policyname AS name, roles::text[] AS roles
     FROM pg_policies WHERE schemaname = 'public'`,
  )
}

/** Functions of the schema that PUBLIC may execute, other than PUBLIC_FUNCTIONS. */
async function publicFunctions(sql: Sql) {
  return sql.query<{ fn: string }>(
    `SELECT p.oid::regprocedure::text AS fn FROM pg_proc p
     WHERE p.pronamespace = 'public'::regnamespace
       AND EXISTS (SELECT 1 FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                   WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
       AND NOT p.oid = ANY (SELECT to_regprocedure('public.' || f) FROM unnest($1::text[]) f)
     ORDER BY 1`,
    [PUBLIC_FUNCTIONS],
  )
}

/**
 * Restores, as the schema owner `owner` (the transaction's role), what access.ts lists and the
 * schema lacks; returns one line per repair, none when all was in place.
 */
export async function repairAccess(sql: Sql, owner: string): Promise<string[]> {
  const repaired: string[] = []
  for (const { table, enabled, forced } of await unforcedTables(sql)) {
    if (!enabled) await sql.exec(`ALTER TABLE ${quoteIdent(table)} ENABLE ROW LEVEL SECURITY`)
    if (!forced) await sql.exec(`ALTER TABLE ${quoteIdent(table)} FORCE ROW LEVEL SECURITY`)
    repaired.push(`row-level security ${enabled ? '' : 'enabled and '}forced on ${table}`)
  }
  const present = new Map((await presentPolicies(sql)).map((p) => [`${p.table}.${p.name}`, p.roles]))
  for (const policy of POLICIES) {
    const roles = present.get(`${policy.table}.${policy.name}`)
    const role = policy.roles === 'owner' ? owner : policy.roles
    if (roles === undefined) {
      await sql.exec(createPolicyOf(policy, owner))
      repaired.push(
        `policy ${policy.name} on ${policy.table} created${policy.roles === 'public' ? '' : ` for ${role}`}`,
      )
    } else if (roles.length !== 1 || roles[0] !== role) {
      await sql.exec(
        `ALTER POLICY ${policy.name} ON ${quoteIdent(policy.table)} TO ${role === 'public' ? role : quoteIdent(role)}`,
      )
      repaired.push(
        `policy ${policy.name} on ${policy.table} now applies to ${role} (it named ${roles.join(', ')})`,
      )
    }
  }
  // PUBLIC's EXECUTE first: while a function is PUBLIC's, every role may execute it, and its own
  // grant would look present.
  for (const { fn } of await publicFunctions(sql)) {
    await sql.exec(`REVOKE EXECUTE ON FUNCTION ${fn} FROM PUBLIC`)
    repaired.push(`revoked EXECUTE on function ${fn} from PUBLIC`)
  }
  for (const privilege of await missingPrivileges(sql)) {
    await sql.exec(grantOf(privilege))
    repaired.push(
      `granted ${privilege.privilege} on ${privilege.kind} ${privilege.object} to ${privilege.role}`,
    )
  }
  return repaired
}
