import type { Sql } from '../store/types.js'

const SHA256_HEX = /^[0-9a-f]{64}$/

/** Why a presented key of the right format is refused: no such key, or one no longer active. */
export type KeyRefusal = 'unknown' | 'expired' | 'revoked'

export interface AuthenticatedKey {
  readonly keyId: string
  readonly orgId: string
  readonly lastUsedAt: Date | string | null
  /** When the key stops working; null for a key without an expiry. */
  readonly expiresAt: Date | null
}

/** The key lookup, the hash given as the SQL `hash`. */
const lookupText = (hash: string) =>
  `SELECT set_config('openbook.org_id', CASE a.state WHEN 'active' THEN a.org_id ELSE '' END, true) AS "orgId",
            a.key_id AS "keyId", a.last_used_at AS "lastUsedAt", a.expires_at AS "expiresAt", a.state,
            set_config('openbook.key_hash', '', true) AS cleared
     FROM openbook_key_lookup(${hash}) a`

const LOOKUP_BY_PARAMETER = lookupText('$1::text')

/**
 * Looks up a key by the SHA-256 of its secret and, in the same statement, names its organization
 * in the transaction-local setting that row-level security reads, if the key is active. A key that
 * is not is answered with the reason (`KeyRefusal`) and names no organization (the empty setting
 * admits no row), so the statement that went with it reads nothing.
 *
 * openbook_key_lookup (migration 011) leaves `openbook.key_hash` set for the rest of the
 * transaction (a function's SET clause confines only the variables it names), so the same
 * statement clears it once the key is found.
 *
 * `withNext`: the lookup goes with the next statement on `sql` (`Sql.sendWithNext`), which may
 * then pass `KEY_ORGANIZATION`; the answer comes once that statement is sent (or `sql.flush()`).
 */
export async function authenticateKey(
  sql: Sql,
  keyHash: string,
  options: { readonly withNext?: boolean } = {},
): Promise<AuthenticatedKey | KeyRefusal> {
  // The hash is written into the statement where it goes alone, so that it has no parameters and
  // can travel with the transaction's BEGIN in one round trip (store/postgres/postgres.ts); with the next
  // statement, it is a parameter, and the connection writes it in or prepares the statement.
  // Only a SHA-256 in hex may be written.
  if (!SHA256_HEX.test(keyHash)) throw new Error('a key hash is 64 lowercase hexadecimal characters')
  type Row = {
    orgId: string
    keyId: string
    lastUsedAt: Date | string | null
    expiresAt: unknown
    state: string
  }
  if (options.withNext && !sql.sendWithNext)
    throw new Error('this connection cannot send a statement with the next')
  const [key] = await (options.withNext && sql.sendWithNext
    ? sql.sendWithNext<Row>(LOOKUP_BY_PARAMETER, [keyHash])
    : sql.query<Row>(lookupText(`'${keyHash}'`)))
  if (!key) return 'unknown'
  if (key.state !== 'active') return key.state === 'revoked' ? 'revoked' : 'expired'
  const expiresAt = key.expiresAt === null ? null : new Date(key.expiresAt as Date | string)
  return { keyId: key.keyId, orgId: key.orgId, lastUsedAt: key.lastUsedAt, expiresAt }
}

/** Records use of keys; runs as the reader role, which may update only this column. */
export async function touchKeys(sql: Sql, orgId: string, keyIds: readonly string[]): Promise<void> {
  await sql.query("SELECT set_config('openbook.org_id', $1, true)", [orgId])
  await sql.query('UPDATE api_keys SET last_used_at = now() WHERE org_id = $1 AND id = ANY($2::text[])', [
    orgId,
    keyIds,
  ])
}
