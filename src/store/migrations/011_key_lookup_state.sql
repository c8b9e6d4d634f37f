-- compatible-from: 7
--
-- (Expand only: a new function; releases up to 7 keep calling openbook_authenticate.)
--
-- Why a key is refused, in the same lookup that finds it: openbook_authenticate
-- returns active keys only, so an expired or revoked key looked like a wrong one. This function
-- returns the presented key's row whatever its state, with its expiry and one of 'active',
-- 'revoked' (revoked wins over expired: revoking is a deliberate act) or 'expired'. No row: no key
-- has that hash. The request path names the organization only for an active key
-- (src/queries/api-keys.ts), so a refused key still reads nothing; the state is told only to a
-- caller who presented that key's full secret.
--
-- Like openbook_authenticate: not SECURITY DEFINER; it sets openbook.key_hash, which the key_lookup
-- policy on api_keys reads, and the caller clears it in the same statement.

CREATE FUNCTION openbook_key_lookup(p_key_hash text)
RETURNS TABLE (key_id text, org_id text, last_used_at timestamptz, expires_at timestamptz, state text)
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
BEGIN
  PERFORM set_config('openbook.key_hash', p_key_hash, true);
  RETURN QUERY
    SELECT k.id, k.org_id, k.last_used_at, k.expires_at,
           CASE WHEN k.revoked_at IS NOT NULL THEN 'revoked'
                WHEN k.expires_at IS NOT NULL AND k.expires_at <= now() THEN 'expired'
                ELSE 'active' END
    FROM public.api_keys k
    WHERE k.key_hash = p_key_hash;
END
$$;

REVOKE ALL ON FUNCTION openbook_key_lookup(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION openbook_key_lookup(text) TO openbook_reader;
