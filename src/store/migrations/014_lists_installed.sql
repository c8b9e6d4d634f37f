-- compatible-from: 12
--
-- The lists kept beside writers, second half (013 made their tables and folds): the triggers that
-- append a write's changes, written from the lists' definitions; the buckets counted from the
-- rows; release 12's tables become views that it still reads (docs/design/lists.md). Runs in
-- the same transaction as 013, under its lock.

-- TRUNCATE names no rows: the list starts again, at a new version of every organization.
CREATE FUNCTION list_truncate() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  DELETE FROM buckets WHERE list = TG_TABLE_NAME;
  INSERT INTO list_folds AS f (org_id, list, changes)
  SELECT c.org_id, TG_TABLE_NAME, count(*) FROM list_changes c WHERE c.list = TG_TABLE_NAME GROUP BY 1
  ON CONFLICT (org_id, list) DO UPDATE SET changes = f.changes + excluded.changes;
  DELETE FROM list_changes WHERE list = TG_TABLE_NAME;
  UPDATE list_folds SET changes = changes + 1 WHERE list = TG_TABLE_NAME;
  RETURN NULL;
END $$;

-- Writes the list's change trigger from its definition: static SQL whose plans PostgreSQL keeps.
-- Its names are qualified and it sets nothing, so that a write pays no setting's save and restore
-- (it runs with the writer's rights: nothing to shield). The names list_install creates are
-- qualified too: its own search_path starts with pg_catalog, where CREATE would go.
-- An INSERT adds its active rows, a DELETE removes them, an UPDATE removes the old entries and
-- adds the new ones, netted per entry: one row changed in place is one change of 0.
CREATE FUNCTION list_install(p_list text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
  d list_definitions;
  v_function text := 'list_changes_of_' || p_list;
  v_entry text;
BEGIN
  SELECT * INTO STRICT d FROM list_definitions WHERE list = p_list;
  v_entry := format('r.org_id, %L, r.%I, r.id, %s', p_list, d.at_column, list_attrs_sql(p_list, 'r'));
  EXECUTE format($f$
    CREATE OR REPLACE FUNCTION public.%1$I() RETURNS trigger
    LANGUAGE plpgsql AS $body$
    BEGIN
      IF current_setting('openbook.fold', true) = 'now' THEN
        -- openbook's own bulk loads: the statement's entries go straight into the buckets.
        IF TG_OP = 'INSERT' THEN
          PERFORM public.list_fold_entries(e.org_id, %3$L, array_agg(e.at), array_agg(e.id), array_agg(e.attrs),
            array_agg(1))
          FROM (SELECT %2$s FROM new_rows r WHERE r.is_active) e(org_id, list, at, id, attrs) GROUP BY e.org_id;
        ELSIF TG_OP = 'DELETE' THEN
          PERFORM public.list_fold_entries(e.org_id, %3$L, array_agg(e.at), array_agg(e.id), array_agg(e.attrs),
            array_agg(-1))
          FROM (SELECT %2$s FROM old_rows r WHERE r.is_active) e(org_id, list, at, id, attrs) GROUP BY e.org_id;
        ELSE
          PERFORM public.list_fold_entries(e.org_id, %3$L, array_agg(e.at) FILTER (WHERE e.delta <> 0),
            array_agg(e.id) FILTER (WHERE e.delta <> 0), array_agg(e.attrs) FILTER (WHERE e.delta <> 0),
            array_agg(e.delta::int) FILTER (WHERE e.delta <> 0))
          FROM (SELECT x.org_id, x.at, x.id, x.attrs, sum(x.delta) AS delta
                FROM (SELECT %2$s, -1 FROM old_rows r WHERE r.is_active
                      UNION ALL
                      SELECT %2$s, 1 FROM new_rows r WHERE r.is_active) x(org_id, list, at, id, attrs, delta)
                GROUP BY 1, 2, 3, 4) e
          GROUP BY e.org_id;
        END IF;
        RETURN NULL;
      END IF;
      IF TG_OP = 'INSERT' THEN
        INSERT INTO public.list_changes (org_id, list, at, id, attrs, delta)
        SELECT %2$s, 1 FROM new_rows r WHERE r.is_active;
      ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO public.list_changes (org_id, list, at, id, attrs, delta)
        SELECT %2$s, -1 FROM old_rows r WHERE r.is_active;
      ELSE
        INSERT INTO public.list_changes (org_id, list, at, id, attrs, delta)
        SELECT e.org_id, e.list, e.at, e.id, e.attrs, sum(e.delta)
        FROM (SELECT %2$s, -1 AS delta FROM old_rows r WHERE r.is_active
              UNION ALL
              SELECT %2$s, 1 FROM new_rows r WHERE r.is_active) e(org_id, list, at, id, attrs, delta)
        GROUP BY e.org_id, e.list, e.at, e.id, e.attrs;
      END IF;
      RETURN NULL;
    END $body$ $f$, v_function, v_entry, p_list);
  EXECUTE format('REVOKE ALL ON FUNCTION public.%I() FROM PUBLIC', v_function);
  EXECUTE format('DROP TRIGGER IF EXISTS list_changes_insert ON %1$I;
    CREATE TRIGGER list_changes_insert AFTER INSERT ON %1$I
      REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.%2$I();
    DROP TRIGGER IF EXISTS list_changes_update ON %1$I;
    CREATE TRIGGER list_changes_update AFTER UPDATE ON %1$I
      REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.%2$I();
    DROP TRIGGER IF EXISTS list_changes_delete ON %1$I;
    CREATE TRIGGER list_changes_delete AFTER DELETE ON %1$I
      REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION public.%2$I();
    DROP TRIGGER IF EXISTS list_changes_truncate ON %1$I;
    CREATE TRIGGER list_changes_truncate AFTER TRUNCATE ON %1$I
      FOR EACH STATEMENT EXECUTE FUNCTION public.list_truncate()', p_list, v_function);
END $$;

-- Counts a list's buckets again from its rows, for every organization: after its definition
-- changed (a new filter column), with writers held off by the migration's lock.
CREATE FUNCTION list_rebuild(p_list text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  DELETE FROM buckets WHERE list = p_list;
  PERFORM list_fold_all();
END $$;

REVOKE ALL ON FUNCTION list_filter_sets(jsonb), list_attrs_sql(text, text),
  list_key_after(text, text, jsonb, timestamptz, text, integer, timestamptz, text),
  list_split(text, text, text, timestamptz, text, integer), list_merge(text, text, text, timestamptz, text),
  list_apply(text, text, timestamptz[], text[], jsonb[], integer[]), list_fold(text, text, boolean, integer), list_fold_all(),
  list_fold_entries(text, text, timestamptz[], text[], jsonb[], integer[]),
  list_install(text), list_rebuild(text), list_build(text, text) FROM PUBLIC;

-- The versions so far become the folded changes, so that every page's ETag stays valid.
INSERT INTO list_folds (org_id, list, changes) SELECT org_id, list, version FROM list_versions;

-- Up to 012's triggers and what only they kept.
DO $$
DECLARE t record;
BEGIN
  FOR t IN SELECT tgname, tgrelid::regclass AS rel FROM pg_trigger
           WHERE tgrelid IN ('customers'::regclass, 'appointments'::regclass) AND NOT tgisinternal
             AND tgname ~ '^(customer_counts|customer_day_counts|appointment_counts|appointment_day_counts|list_buckets|list_versions)_'
  LOOP
    EXECUTE format('DROP TRIGGER %I ON %s', t.tgname, t.rel);
  END LOOP;
END $$;
-- Release 12's tables are renamed and emptied, not dropped: a request of release 12 that waited on
-- this migration's locks runs, once it commits, on a snapshot from before it; there the new
-- tables are still empty and these still hold its rows. The views below read both, and each
-- snapshot sees the rows of exactly one. A release that no longer serves beside 12 drops them.
ALTER TABLE list_buckets RENAME TO list_buckets_12;
ALTER TABLE list_versions RENAME TO list_versions_12;
ALTER TABLE customer_counts RENAME TO customer_counts_12;
ALTER TABLE appointment_counts RENAME TO appointment_counts_12;
DELETE FROM list_buckets_12;
DELETE FROM list_versions_12;
DELETE FROM customer_counts_12;
DELETE FROM appointment_counts_12;
DROP FUNCTION list_buckets_change(), list_buckets_clear(), list_buckets_lock(text[]),
  list_buckets_key_after(text, text, timestamptz, text, integer), list_buckets_split(text, text, timestamptz, text, integer),
  list_buckets_merge(text, text, timestamptz, text), list_buckets_appointment_lists(appointments),
  list_versions_change(), list_versions_truncate(), customer_counts_add(), customer_counts_remove(),
  customer_counts_clear(), appointment_counts_add(), appointment_counts_remove(), appointment_counts_clear(),
  customer_day_counts_add(), customer_day_counts_remove(), customer_day_counts_clear(),
  appointment_day_counts_add(), appointment_day_counts_remove(), appointment_day_counts_clear();

SELECT list_install('customers'), list_install('appointments');
SELECT list_fold_all();

-- The day counts (003, 005): no release reads their rows, and nothing keeps them any more. Their
-- tables go; release 12 checks its reader's privilege on each name, so an empty view stands in
-- for each until a release that no longer serves beside 12 drops it.
DROP TABLE customer_day_counts, appointment_day_counts;
CREATE VIEW customer_day_counts WITH (security_invoker = true) AS
  SELECT NULL::text AS org_id, NULL::date AS day, NULL::integer AS n WHERE false;
CREATE VIEW appointment_day_counts WITH (security_invoker = true) AS
  SELECT NULL::text AS org_id, NULL::text AS status, NULL::date AS day, NULL::integer AS n WHERE false;
GRANT SELECT ON customer_day_counts, appointment_day_counts TO openbook_reader;

-- Row-level security on the new tables, with the owner's own policy (forced on the owner too).
DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['buckets', 'list_changes', 'list_folds'] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format('CREATE POLICY tenant_isolation ON %I USING (org_id = current_setting(''openbook.org_id'', true))', t);
    EXECUTE format('CREATE POLICY owner_access ON %I TO %I USING (true) WITH CHECK (true)', t, current_user);
  END LOOP;
END $$;

-- The request path reads the folded counts and the pending changes (READER_PRIVILEGES).
GRANT SELECT ON buckets, list_changes, list_folds TO openbook_reader;

-- What release 12 read, computed from the above with the pending changes added (and from its
-- emptied tables, for a snapshot from before this migration). Security invoker: the reader's
-- row-level security applies to what they read.
CREATE VIEW list_versions WITH (security_invoker = true) AS
SELECT v.org_id, v.list, sum(v.changes)::bigint AS version
FROM (SELECT o.org_id, o.list, o.version AS changes FROM list_versions_12 o
      UNION ALL
      SELECT f.org_id, f.list, f.changes FROM list_folds f
      UNION ALL
      SELECT c.org_id, c.list, 1 FROM list_changes c) v
GROUP BY v.org_id, v.list;

CREATE VIEW customer_counts WITH (security_invoker = true) AS
SELECT v.org_id, sum(v.n)::integer AS n
FROM (SELECT o.org_id, o.n FROM customer_counts_12 o
      UNION ALL
      SELECT b.org_id, b.n FROM buckets b WHERE b.list = 'customers' AND b.filters = '{}'
      UNION ALL
      SELECT c.org_id, c.delta FROM list_changes c WHERE c.list = 'customers') v
GROUP BY v.org_id;

CREATE VIEW appointment_counts WITH (security_invoker = true) AS
SELECT v.org_id, sum(v.n)::integer AS n
FROM (SELECT o.org_id, o.n FROM appointment_counts_12 o
      UNION ALL
      SELECT b.org_id, b.n FROM buckets b WHERE b.list = 'appointments' AND b.filters = '{}'
      UNION ALL
      SELECT c.org_id, c.delta FROM list_changes c WHERE c.list = 'appointments') v
GROUP BY v.org_id;

-- Release 12 named a list 'customers', 'appointments', 'appointments:<status>',
-- 'appointments:staff:<staff>' or 'appointments:<status>:staff:<staff>'; a bucket's count there
-- includes the pending changes in its range, and a list with pending changes only has its lowest
-- bucket.
CREATE VIEW list_buckets WITH (security_invoker = true) AS
SELECT o.org_id, o.list, o.lo_at, o.lo_id, o.n FROM list_buckets_12 o
UNION ALL
SELECT b.org_id,
  b.list || coalesce(':' || (b.filters::jsonb->>'status'), '') || coalesce(':staff:' || (b.filters::jsonb->>'staff_id'), '') AS list,
  b.lo_at, b.lo_id,
  b.n + (SELECT coalesce(sum(p.delta), 0) FROM list_changes p
         WHERE p.org_id = b.org_id AND p.list = b.list AND p.delta <> 0 AND p.attrs @> b.filters::jsonb
           AND (p.at, p.id) >= (b.lo_at, b.lo_id)
           AND NOT EXISTS (SELECT 1 FROM buckets x
                           WHERE x.org_id = b.org_id AND x.list = b.list AND x.filters = b.filters
                             AND (x.lo_at, x.lo_id) > (b.lo_at, b.lo_id) AND (x.lo_at, x.lo_id) <= (p.at, p.id)))::integer AS n
FROM buckets b
UNION ALL
SELECT p.org_id,
  p.list || coalesce(':' || (s.filters->>'status'), '') || coalesce(':staff:' || (s.filters->>'staff_id'), ''),
  '-infinity'::timestamptz, '', sum(p.delta)::integer
FROM list_changes p CROSS JOIN LATERAL list_filter_sets(p.attrs) s(filters)
WHERE p.delta <> 0
  AND NOT EXISTS (SELECT 1 FROM buckets x WHERE x.org_id = p.org_id AND x.list = p.list AND x.filters = s.filters::text)
GROUP BY p.org_id, p.list, s.filters;

GRANT SELECT ON list_versions, customer_counts, appointment_counts, list_buckets TO openbook_reader;
-- The views call list_filter_sets as the reader.
GRANT EXECUTE ON FUNCTION list_filter_sets(jsonb) TO openbook_reader;

-- The salon software's role: writes customers and appointments of any organization, appends
-- their changes through the triggers, folds them through list_fold; reads nothing else.
GRANT SELECT, INSERT, UPDATE, DELETE ON customers, appointments TO openbook_writer;
GRANT INSERT ON list_changes TO openbook_writer;
GRANT EXECUTE ON FUNCTION list_fold(text, text, boolean, integer) TO openbook_writer;
CREATE POLICY writer_access ON customers TO openbook_writer USING (true) WITH CHECK (true);
CREATE POLICY writer_access ON appointments TO openbook_writer USING (true) WITH CHECK (true);
CREATE POLICY writer_access ON list_changes FOR INSERT TO openbook_writer WITH CHECK (true);
