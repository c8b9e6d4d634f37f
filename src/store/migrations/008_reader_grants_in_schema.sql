-- compatible-from: 7
--
-- The reader's grants become part of the versioned schema. Up to 007 `migrate` re-ran a script
-- after every migration, every time, that revoked everything from openbook_reader and granted its
-- own list: run by an older release on a newer schema, it took away what the newer migrations had
-- granted (README, Upgrading). From here on the grants are set once, here, and each later
-- migration grants what it adds and revokes what it takes away, so no run of `migrate` undoes
-- another release's schema. (Releases up to 7 still serve this schema: it grants what they read.)
--
-- Also new: the functions the reader calls are no longer executable by PUBLIC (PostgreSQL's
-- default for a new function), so that the reader's grant is the one that counts.

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'openbook_reader' AND (rolsuper OR rolbypassrls)) THEN
    RAISE EXCEPTION 'role openbook_reader must not be a superuser or bypass row-level security';
  END IF;
END $$;

REVOKE ALL ON ALL TABLES IN SCHEMA public FROM openbook_reader;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM openbook_reader;
GRANT USAGE ON SCHEMA public TO openbook_reader;
GRANT SELECT ON customers, customer_counts, customer_day_counts, appointments, appointment_counts,
  appointment_day_counts, api_keys TO openbook_reader;
GRANT UPDATE (last_used_at) ON api_keys TO openbook_reader;
REVOKE ALL ON FUNCTION openbook_authenticate(text), openbook_prepare(text, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION openbook_authenticate(text) TO openbook_reader;
-- DATABASE_PREPARED_STATEMENTS=pooler: prepares a page's statement on the server connection (007).
GRANT EXECUTE ON FUNCTION openbook_prepare(text, text, boolean) TO openbook_reader;

-- Row-level security is forced on the owner too; the owner (the role that owns the schema and
-- runs the operator commands: `migrate` runs migrations as it) keeps full access through its own
-- policy. A later migration that adds a table with an org_id adds this policy in the same file.
DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['organizations', 'memberships', 'api_keys', 'staff', 'services', 'customers', 'appointments',
                      'appointment_counts', 'appointment_day_counts', 'customer_counts',
                      'customer_day_counts'] LOOP
    EXECUTE format('DROP POLICY IF EXISTS owner_access ON %I', t);
    EXECUTE format('CREATE POLICY owner_access ON %I TO %I USING (true) WITH CHECK (true)', t, current_user);
  END LOOP;
END $$;
