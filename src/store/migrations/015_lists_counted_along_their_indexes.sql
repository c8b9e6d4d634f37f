-- compatible-from: 12
--
-- What a bulk load pays for the lists (013, 014), made smaller:
-- - list_build, which counts a list again from its rows (every new organization's lists at the end
--   of a first load), reads each of its lists along the index that holds it in order instead of
--   sorting the rows of all its lists together;
-- - a load's statement leaves to list_build the organizations whose lists it will count anyway
--   (they have no buckets yet) instead of gathering their entries for nothing.
-- Figures: bench/RESULTS.md#import-against-a-release.

-- Counts one organization's list from its rows into buckets of 1,000 (for list_fold). Each list,
-- the whole one and one per subset of the filter columns, is numbered from its highest key down
-- in one ordered read of its index: every 1,000th entry is a bucket's bound, and the lowest bucket,
-- from ('-infinity', ''), holds the rest. A subset's columns are partitioned in the order of the
-- index that holds them after org_id, where one does; without one, the list is sorted (sorts are
-- priced off only so that the planner prefers the index to sorting the rows it reads from it).
-- Its pending changes are dropped into the version in the same statement, from the same snapshot,
-- as the rows are counted: a writer's change is either counted in a row here or left pending,
-- never both; the version stays what it was. Holds the list's fold until the transaction ends.
CREATE OR REPLACE FUNCTION list_build(p_org text, p_list text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public SET jit = off SET enable_sort = off AS $$
DECLARE
  d list_definitions;
  v_cols text[];
  v_lists text[] := '{}';
BEGIN
  SELECT * INTO STRICT d FROM list_definitions WHERE list = p_list;
  PERFORM pg_advisory_xact_lock(hashtext('openbook.list_fold'), hashtext(p_org || '/' || p_list));
  DELETE FROM buckets WHERE org_id = p_org AND list = p_list;
  FOR m IN 0 .. (1 << cardinality(d.filter_columns)) - 1 LOOP
    v_cols := ARRAY(SELECT c FROM unnest(d.filter_columns) WITH ORDINALITY u(c, i) WHERE m & (1 << (i::int - 1)) <> 0);
    v_cols := coalesce((
      SELECT array_agg(a.attname::text ORDER BY k.n)
      FROM pg_index x CROSS JOIN LATERAL unnest(x.indkey::int2[]) WITH ORDINALITY k(attnum, n)
      JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum
      WHERE x.indrelid = p_list::regclass AND k.n BETWEEN 2 AND cardinality(v_cols) + 1
      GROUP BY x.indexrelid
      HAVING array_agg(a.attname::text) @> v_cols AND array_agg(a.attname::text) <@ v_cols
      LIMIT 1), v_cols);
    v_lists := v_lists || format(
      'SELECT %1$s AS filters, e.at, e.id, e.j, e.lowest
       FROM (SELECT r.%2$I AS at, r.id%3$s, row_number() OVER w - 1 AS j, lead(r.id) OVER w IS NULL AS lowest
             FROM %4$I r WHERE r.org_id = $1 AND r.is_active%5$s
             WINDOW w AS (%6$s ORDER BY r.%2$I DESC, r.id DESC ROWS UNBOUNDED PRECEDING)) e
       WHERE e.j %% 1000 = 999 OR e.lowest',
      CASE WHEN m = 0 THEN '''{}'''
        ELSE format('jsonb_build_object(%s)::text', (SELECT string_agg(format('%L, e.%I', c, c), ', ') FROM unnest(v_cols) c))
      END,
      d.at_column,
      (SELECT string_agg(format(', r.%I', c), '') FROM unnest(v_cols) c),
      p_list,
      (SELECT string_agg(format(' AND r.%I IS NOT NULL', c), '') FROM unnest(v_cols) c),
      (SELECT 'PARTITION BY ' || string_agg(format('r.%I', c), ', ') FROM unnest(v_cols) c));
  END LOOP;
  EXECUTE format(
    'WITH gone AS (DELETE FROM list_changes c WHERE c.org_id = $1 AND c.list = $2 RETURNING 1),
     built AS (
       INSERT INTO buckets (org_id, list, filters, lo_at, lo_id, n)
       SELECT $1, $2, e.filters, CASE WHEN e.lowest THEN ''-infinity'' ELSE e.at END,
              CASE WHEN e.lowest THEN '''' ELSE e.id END, e.j %% 1000 + 1
       FROM (%s) e)
     INSERT INTO list_folds AS f (org_id, list, changes)
     SELECT $1, $2, count(*) FROM gone HAVING count(*) > 0
     ON CONFLICT (org_id, list) DO UPDATE SET changes = f.changes + excluded.changes',
    array_to_string(v_lists, ' UNION ALL '))
  USING p_org, p_list;
END $$;

-- A bulk load's entry changes of one organization (`openbook.fold` = 'now', set by openbook's
-- import for its transaction), applied to the buckets at once instead of appended: the load
-- waits its turn for the list's fold, and holds it until it commits. One change of the version a
-- statement. NULL arrays: the list had no buckets when the statement's trigger looked, and is
-- counted from its rows at the load's end (list_fold_all calls list_build before the load
-- commits); buckets a writer's fold made since, from rows that exclude the load's, are dropped
-- for that count. Only the owner may call it: a writer that sets the setting is refused.
CREATE OR REPLACE FUNCTION list_fold_entries(p_org text, p_list text, p_at timestamptz[], p_id text[],
  p_attrs jsonb[], p_delta integer[])
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public SET jit = off AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('openbook.list_fold'), hashtext(p_org || '/' || p_list));
  INSERT INTO list_folds AS f (org_id, list, changes) VALUES (p_org, p_list, 1)
  ON CONFLICT (org_id, list) DO UPDATE SET changes = f.changes + 1;
  IF p_delta IS NULL THEN
    DELETE FROM buckets WHERE org_id = p_org AND list = p_list;
  ELSIF cardinality(p_delta) > 0 AND EXISTS (SELECT 1 FROM buckets b WHERE b.org_id = p_org AND b.list = p_list) THEN
    PERFORM list_apply(p_org, p_list, p_at, p_id, p_attrs, p_delta);
  END IF;
END $$;

-- Writes the list's change trigger function as 014's did (its triggers, made there, call it by
-- name), but in a bulk load an organization whose list has no buckets yet (a first load's) is only
-- given its version and its lock: list_build counts its rows at the load's end, so its entries are
-- not gathered.
CREATE OR REPLACE FUNCTION list_install(p_list text) RETURNS void
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
    DECLARE
      v_orgs text[];
      v_built text[];
    BEGIN
      IF current_setting('openbook.fold', true) = 'now' THEN
        -- openbook's own bulk loads: the statement's entries go straight into the buckets of the
        -- organizations whose list has them (v_built); the others' lists are counted at the end.
        IF TG_OP = 'INSERT' THEN
          v_orgs := ARRAY(SELECT DISTINCT r.org_id FROM new_rows r WHERE r.is_active);
        ELSIF TG_OP = 'DELETE' THEN
          v_orgs := ARRAY(SELECT DISTINCT r.org_id FROM old_rows r WHERE r.is_active);
        ELSE
          v_orgs := ARRAY(SELECT r.org_id FROM old_rows r WHERE r.is_active UNION SELECT r.org_id FROM new_rows r WHERE r.is_active);
        END IF;
        v_built := ARRAY(SELECT o FROM unnest(v_orgs) o
          WHERE EXISTS (SELECT FROM public.buckets b WHERE b.org_id = o AND b.list = %3$L));
        PERFORM public.list_fold_entries(o, %3$L, NULL, NULL, NULL, NULL) FROM unnest(v_orgs) o WHERE o <> ALL (v_built);
        IF TG_OP = 'INSERT' THEN
          PERFORM public.list_fold_entries(e.org_id, %3$L, array_agg(e.at), array_agg(e.id), array_agg(e.attrs),
            array_agg(1))
          FROM (SELECT %2$s FROM new_rows r WHERE r.is_active AND r.org_id = ANY (v_built)) e(org_id, list, at, id, attrs)
          GROUP BY e.org_id;
        ELSIF TG_OP = 'DELETE' THEN
          PERFORM public.list_fold_entries(e.org_id, %3$L, array_agg(e.at), array_agg(e.id), array_agg(e.attrs),
            array_agg(-1))
          FROM (SELECT %2$s FROM old_rows r WHERE r.is_active AND r.org_id = ANY (v_built)) e(org_id, list, at, id, attrs)
          GROUP BY e.org_id;
        ELSE
          -- Empty arrays, not NULL, where every entry changed in place: the list is kept as it is.
          PERFORM public.list_fold_entries(e.org_id, %3$L,
            coalesce(array_agg(e.at) FILTER (WHERE e.delta <> 0), '{}'), coalesce(array_agg(e.id) FILTER (WHERE e.delta <> 0), '{}'),
            coalesce(array_agg(e.attrs) FILTER (WHERE e.delta <> 0), '{}'), coalesce(array_agg(e.delta::int) FILTER (WHERE e.delta <> 0), '{}'))
          FROM (SELECT x.org_id, x.at, x.id, x.attrs, sum(x.delta) AS delta
                FROM (SELECT %2$s, -1 FROM old_rows r WHERE r.is_active AND r.org_id = ANY (v_built)
                      UNION ALL
                      SELECT %2$s, 1 FROM new_rows r WHERE r.is_active AND r.org_id = ANY (v_built)) x(org_id, list, at, id, attrs, delta)
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
END $$;

SELECT list_install(list) FROM list_definitions ORDER BY list;
