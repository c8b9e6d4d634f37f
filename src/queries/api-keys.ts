import type { Sql } from '../store/types.js'

const SHA256_HEX = /^[0-9a-f]{64}$/

export interface AuthenticatedKey {
  readonly keyId: string
  readonly orgId: string
  readonly lastUsedAt: Date | string | null
}

/** The key lookup, the hash given as the SQL `hash`. */
const lookupText = (hash: string) =>
  `SELECT set_config('openbook.org_id', a.org_id, true) AS "orgId", a.key_id AS "keyId",
            a.last_used_at AS "lastUsedAt", set_config('openbook.key_hash', '', true) AS cleared
     FROM openbook_authenticate(${hash}) a`

const LOOKUP_BY_PARAMETER = lookupText('$1::text')

/**
 * Looks up an active key by the SHA-256 of its secret and, in the same
 * statement, names its organization in the transaction-local setting that
 * row-level security reads. No row: unknown, revoked or expired.
 *
 * openbook_authenticate leaves `openbook.key_hash` set for the rest of the
 * transaction (a function's SET clause confines only the variables it names),
 * so the same statement clears it once the key is found.
 *
 * `withNext`: the lookup goes with the next statement on `sql` (`Sql.sendWithNext`), which may
 * then pass `KEY_ORGANIZATION`; the answer comes once that statement is sent (or `sql.flush()`).
 */
export async function authenticateKey(
  sql: Sql,
  keyHash: string,
  options: { readonly withNext?: boolean } = {},
): Promise<AuthenticatedKey | undefined> {
  // The hash is written into the statement where it goes alone, so that it has no parameters and
  // can travel with the transaction's BEGIN in one round trip (store/postgres.ts); with the next
  // statement, it is a parameter, and the connection writes it in or prepares the statement.
  // Only a SHA-256 in hex may be written.
  if (!SHA256_HEX.test(keyHash)) throw new Error('a key hash is 64 lowercase hexadecimal characters')
  type Row = AuthenticatedKey & { cleared: string }
  if (options.withNext && !sql.sendWithNext)
    throw new Error('this connection cannot send a statement with the next')
  const [key] = await (options.withNext && sql.sendWithNext
    ? sql.sendWithNext<Row>(LOOKUP_BY_PARAMETER, [keyHash])
    : sql.query<Row>(lookupText(`'${keyHash}'`)))
  if (!key) return undefined
  return { keyId: key.keyId, orgId: key.orgId, lastUsedAt: key.lastUsedAt }
}

/** Records use of keys; runs as the reader role, which may update only this column. */
export async function touchKeys(sql: Sql, orgId: string, keyIds: readonly string[]): Promise<void> {
  await sql.query("SELECT set_config('openbook.org_id', $1, true)", [orgId])
  await sql.query('UPDATE api_keys SET last_used_at = now() WHERE org_id = $1 AND id = ANY($2::text[])', [
    orgId,
    keyIds,
  ])
}
