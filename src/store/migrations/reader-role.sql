-- Run by `openbook migrate` after the numbered migrations, every time, as the schema owner
-- (migrate.ts creates openbook_reader first when it is missing): maintains the privileges that
-- bound every query on the request path.
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
-- Deep pages' buckets (009). 009 grants this itself, as new tables' grants now do (they are moving
-- into the numbered migrations); named here too so that the REVOKE above does not take it back.
GRANT SELECT ON list_buckets TO openbook_reader;
GRANT UPDATE (last_used_at) ON api_keys TO openbook_reader;
GRANT EXECUTE ON FUNCTION openbook_authenticate(text) TO openbook_reader;
-- DATABASE_PREPARED_STATEMENTS=pooler: prepares a page's statement on the server connection (007).
GRANT EXECUTE ON FUNCTION openbook_prepare(text, text, boolean) TO openbook_reader;

-- Row-level security is forced on the owner too; the owner (the role that owns the schema and
-- runs the operator commands; current_user here, whoever logged in) keeps full access through
-- its own policy.
DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['organizations', 'memberships', 'api_keys', 'staff', 'services', 'customers', 'appointments',
                      'appointment_counts', 'appointment_day_counts', 'customer_counts',
                      'customer_day_counts', 'list_buckets'] LOOP
    EXECUTE format('DROP POLICY IF EXISTS owner_access ON %I', t);
    EXECUTE format('CREATE POLICY owner_access ON %I TO %I USING (true) WITH CHECK (true)', t, current_user);
  END LOOP;
END $$;
