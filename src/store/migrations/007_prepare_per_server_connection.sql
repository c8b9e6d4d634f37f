-- DATABASE_PREPARED_STATEMENTS=pooler (store/one-trip.ts): behind a pooler in transaction mode a
-- client's transactions run on whichever server connection is free, so the client cannot know
-- which statements that connection has prepared. The request path asks the database instead, in
-- the message that EXECUTEs the page: this prepares `statement` as `name` on the connection
-- running it unless it already is, and the page keeps one plan per server connection, whatever
-- the pooler (PgBouncer tracks no SQL-level PREPARE, of any version).
--
-- The check is a session setting named after the statement (0.1 µs); the catalogue view, which
-- copies every prepared statement's text (about 240 µs with 25 pages' statements), is read only
-- when the setting is missing or `recheck` is asked for. A session setting lives as long as the
-- server connection, as a prepared statement does, and DISCARD ALL (PgBouncer's reset query)
-- clears both. A rolled-back transaction undoes the setting but not the PREPARE: the view then
-- says the statement exists. A pooler that runs DEALLOCATE ALL alone leaves the setting: the
-- client then gets "prepared statement does not exist" and asks again with `recheck`
-- (store/postgres/postgres.ts).
--
-- SECURITY INVOKER: it prepares as the caller, and what it prepares runs with the caller's
-- privileges, as a PREPARE sent directly would.
CREATE FUNCTION openbook_prepare(name text, statement text, recheck boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql SECURITY INVOKER
AS $$
DECLARE
  marker text := 'openbook.' || name;
BEGIN
  IF NOT recheck AND current_setting(marker, true) = 'prepared' THEN
    RETURN;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_prepared_statements p WHERE p.name = openbook_prepare.name) THEN
    EXECUTE format('PREPARE %s AS %s', quote_ident(name), statement);
  END IF;
  PERFORM pg_catalog.set_config(marker, 'prepared', false);
END
$$;
