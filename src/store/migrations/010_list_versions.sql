-- compatible-from: 7
--
-- (Expand only: a new table and the triggers that keep it; releases up to 7 read no
-- version and write through the triggers as they did.)
--
-- The validators of the list pages (ETag, If-None-Match, 304): a version per organization and
-- list ('customers', 'appointments') that changes in every transaction that writes a row of that
-- organization's table, whatever the row, the column or the statement (INSERT, the import's
-- upsert, UPDATE, DELETE, COPY, TRUNCATE). A page and its total are a function of the rows of
-- one organization's table (src/queries/page.ts: nothing else is joined in; the counts and
-- buckets are kept from the same rows in the same transactions), so the same version means the
-- same page for the same query. The request path reads the version in the page's own statement,
-- from the same snapshot (src/queries/page.ts).
--
-- Each change adds one, so a version is one organization's own count of its changes: nothing of
-- another tenant's activity shows in it. A version is never reused for other content: the row is
-- never deleted (no foreign key: an organization deleted and made again under its id goes on
-- counting), TRUNCATE counts as a change of every organization that has a row, and a transaction
-- that rolls back takes its change with it, as it takes its rows (no page was ever served at it).
-- An organization without a row has had no row in that table since this migration (those with
-- rows before it start at 1 below): its list is empty, which version 0 stands for. A request
-- compares versions only within its key's organization and list, and the ETag binds both
-- (src/routes/public/v1/etag.ts).
--
-- Exact under concurrent writes: the version row is written by a statement-level trigger in the
-- writing transaction, so a snapshot sees a writer's rows and its version together or neither.
-- Writers of one organization already wait for each other on its counts row (004, 006) and its
-- buckets' lock (009); the version row adds one more row they take in turn, at the end of each
-- statement.
CREATE TABLE list_versions (
  org_id   text NOT NULL,
  list     text NOT NULL CHECK (list IN ('customers', 'appointments')),
  version  bigint NOT NULL,
  PRIMARY KEY (org_id, list)
);

-- One function for both tables and every operation: the list is the table's name, the
-- organizations those of the statement's old and new rows (a row that changed organization
-- changes both).
CREATE FUNCTION list_versions_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
  orgs text[];
BEGIN
  IF TG_OP = 'INSERT' THEN
    orgs := ARRAY(SELECT DISTINCT org_id FROM new_rows);
  ELSIF TG_OP = 'DELETE' THEN
    orgs := ARRAY(SELECT DISTINCT org_id FROM old_rows);
  ELSE
    orgs := ARRAY(SELECT org_id FROM old_rows UNION SELECT org_id FROM new_rows);
  END IF;
  INSERT INTO list_versions AS v (org_id, list, version)
  SELECT o.org_id, TG_TABLE_NAME, 1 FROM unnest(orgs) AS o(org_id)
  ON CONFLICT (org_id, list) DO UPDATE SET version = v.version + 1;
  RETURN NULL;
END $$;

-- TRUNCATE names no rows: every organization that has a version of the list gets a new one (one
-- without had no rows to lose).
CREATE FUNCTION list_versions_truncate() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  UPDATE list_versions SET version = version + 1 WHERE list = TG_TABLE_NAME;
  RETURN NULL;
END $$;

-- Named to fire after the counts' and buckets' triggers of the same event (names sort so).
DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['customers', 'appointments'] LOOP
    EXECUTE format('CREATE TRIGGER list_versions_1_insert AFTER INSERT ON %I REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION list_versions_change()', t);
    EXECUTE format('CREATE TRIGGER list_versions_2_update AFTER UPDATE ON %I REFERENCING OLD TABLE AS old_rows
      NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION list_versions_change()', t);
    EXECUTE format('CREATE TRIGGER list_versions_3_delete AFTER DELETE ON %I REFERENCING OLD TABLE AS old_rows
      FOR EACH STATEMENT EXECUTE FUNCTION list_versions_change()', t);
    EXECUTE format('CREATE TRIGGER list_versions_4_truncate AFTER TRUNCATE ON %I
      FOR EACH STATEMENT EXECUTE FUNCTION list_versions_truncate()', t);
  END LOOP;
END $$;

-- The organizations with rows already stored; the triggers above hold writers off until this
-- commits.
INSERT INTO list_versions (org_id, list, version)
SELECT o.org_id, o.list, 1
FROM (SELECT DISTINCT org_id, 'customers' AS list FROM customers
      UNION ALL
      SELECT DISTINCT org_id, 'appointments' FROM appointments) o;

-- Row-level security last, with the owner's own policy (forced on the owner too: the triggers
-- write as the writer, the owner), as 008 made it for the other tables.
ALTER TABLE list_versions ENABLE ROW LEVEL SECURITY;
ALTER TABLE list_versions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON list_versions
  USING (org_id = current_setting('openbook.org_id', true));
DO $$ BEGIN
  EXECUTE format('CREATE POLICY owner_access ON list_versions TO %I USING (true) WITH CHECK (true)', current_user);
END $$;

-- The request path reads the versions (READER_PRIVILEGES).
GRANT SELECT ON list_versions TO openbook_reader;
