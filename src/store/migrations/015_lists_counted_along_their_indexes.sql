-- compatible-from: 12
--
-- A list counted again from its rows (list_build, 013) reads each of its lists along the index that
-- holds it in order, instead of sorting the rows of all its lists together. At the end of a first
-- load, where every organization's lists are counted, that sort took a tenth of the import; the
-- ordered reads take about half as long (bench/RESULTS.md#import-against-a-release).

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
             WINDOW w AS (PARTITION BY r.org_id%3$s ORDER BY r.%2$I DESC, r.id DESC)) e
       WHERE e.j %% 1000 = 999 OR e.lowest',
      CASE WHEN m = 0 THEN '''{}'''
        ELSE format('jsonb_build_object(%s)::text', (SELECT string_agg(format('%L, e.%I', c, c), ', ') FROM unnest(v_cols) c))
      END,
      d.at_column,
      (SELECT string_agg(format(', r.%I', c), '') FROM unnest(v_cols) c),
      p_list,
      (SELECT string_agg(format(' AND r.%I IS NOT NULL', c), '') FROM unnest(v_cols) c));
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
