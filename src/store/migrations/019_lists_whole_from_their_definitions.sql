-- compatible-from: 12
--
-- (Expand only: a new function, and a view replaced by one with the same columns that only
-- release 12 reads.)
--
-- A `many` filter is its description and one migration (docs/design/lists.md): what its lists
-- need is derived from `list_definitions`, so that the recipe cannot leave a part out.
--
-- list_index: every combination of a list's filter columns is read along an index whose leading
-- columns after `org_id` are that combination, then the list's order (a page of the list, its
-- count, list_build's pass). It creates those that are missing, named after their columns, and
-- leaves any index that already serves a combination (012's is (staff_id, status) where the
-- definition says {status, staff_id}). Only the owner runs it, in a migration.
CREATE FUNCTION list_index(p_list text) RETURNS integer
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
  d list_definitions;
  v_n integer;
  v_cols text[];
  v_name text;
  v_created integer := 0;
BEGIN
  SELECT * INTO STRICT d FROM list_definitions WHERE list = p_list;
  v_n := cardinality(d.filter_columns);
  FOR m IN 0 .. (1 << v_n) - 1 LOOP
    v_cols := ARRAY(SELECT d.filter_columns[i] FROM generate_series(1, v_n) i WHERE m & (1 << (i - 1)) <> 0 ORDER BY i);
    CONTINUE WHEN EXISTS (
      SELECT 1 FROM pg_index x
      CROSS JOIN LATERAL (SELECT array_agg(a.attname::text ORDER BY k.n) AS keys
                          FROM unnest(x.indkey::int2[]) WITH ORDINALITY k(attnum, n)
                          JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum) c
      WHERE x.indrelid = format('public.%I', p_list)::regclass
        AND pg_get_expr(x.indpred, x.indrelid) = 'is_active'
        AND cardinality(c.keys) = cardinality(v_cols) + 3
        AND c.keys[1] = 'org_id'
        AND c.keys[2:cardinality(v_cols) + 1] @> v_cols AND v_cols @> c.keys[2:cardinality(v_cols) + 1]
        AND c.keys[cardinality(v_cols) + 2:] = ARRAY[d.at_column::text, 'id']);
    v_name := format('%s_active_%s_idx', p_list, coalesce(nullif(array_to_string(v_cols, '_'), ''), 'list'));
    EXECUTE format('CREATE INDEX %I ON public.%I (org_id, %s%I DESC, id DESC) WHERE is_active', v_name, p_list,
      (SELECT string_agg(format('%I, ', c), '' ORDER BY o) FROM unnest(v_cols) WITH ORDINALITY u(c, o)), d.at_column);
    RAISE NOTICE 'list_index: created % for the list of %', v_name, coalesce(nullif(array_to_string(v_cols, ', '), ''), 'all');
    v_created := v_created + 1;
  END LOOP;
  RETURN v_created;
END $$;
REVOKE EXECUTE ON FUNCTION list_index(text) FROM PUBLIC;

-- Every list of today's definitions has its indexes already (001, 012): nothing is created here.
SELECT list_index(list) FROM list_definitions ORDER BY list;

-- Release 12 reads `list_buckets` (014) under its own names for the lists it kept: unfiltered,
-- by status, by staff member, and by both. The view named every bucket by its status and staff
-- member only, so a list of a `many` filter added since (docs/design/lists.md) counted again in
-- the list of its other values: with a service filter, release 12 read every total twice. Now it
-- reads the lists whose filters are among its own and no other, whatever filters are added later
-- (test/store/compatibility-views.test.ts follows the recipe for one).
CREATE OR REPLACE VIEW list_buckets WITH (security_invoker = true) AS
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
WHERE b.filters::jsonb - 'status' - 'staff_id' = '{}'::jsonb
UNION ALL
SELECT p.org_id,
  p.list || coalesce(':' || (s.filters->>'status'), '') || coalesce(':staff:' || (s.filters->>'staff_id'), ''),
  '-infinity'::timestamptz, '', sum(p.delta)::integer
FROM list_changes p CROSS JOIN LATERAL list_filter_sets(p.attrs) s(filters)
WHERE p.delta <> 0 AND s.filters - 'status' - 'staff_id' = '{}'::jsonb
  AND NOT EXISTS (SELECT 1 FROM buckets x WHERE x.org_id = p.org_id AND x.list = p.list AND x.filters = s.filters::text)
GROUP BY p.org_id, p.list, s.filters;
