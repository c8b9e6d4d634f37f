-- The schema as openbook's migrations leave it (src/store/migrations), for reading: what each
-- function, trigger, table, policy and grant is today. Written by `npm run docs` from a migrated
-- PostgreSQL database; a test fails while it differs from what the migrations produce. Never run
-- it: `openbook migrate` builds the schema.
--
-- PostgreSQL database dump
--

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: list_apply(text, text, timestamp with time zone[], text[], jsonb[], integer[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.list_apply(p_org text, p_list text, p_at timestamp with time zone[], p_id text[], p_attrs jsonb[], p_delta integer[]) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public'
    AS $$
DECLARE
  r record;
BEGIN
  -- Each distinct set of filter values is expanded into its lists once.
  INSERT INTO buckets (org_id, list, filters, lo_at, lo_id, n)
  SELECT DISTINCT p_org, p_list, f.filters::text, '-infinity'::timestamptz, '', 0
  FROM (SELECT DISTINCT a.attrs FROM unnest(p_attrs) a(attrs)) d CROSS JOIN LATERAL list_filter_sets(d.attrs) f(filters)
  ON CONFLICT DO NOTHING;
  FOR r IN
    -- The lists' bounds and the changes in one order (a bound before a change of its key): each
    -- change falls in the bucket of the last bound before it.
    WITH s AS MATERIALIZED (
      SELECT d.attrs, f.filters::text AS filters FROM (SELECT DISTINCT a.attrs FROM unnest(p_attrs) a(attrs)) d
      CROSS JOIN LATERAL list_filter_sets(d.attrs) f(filters)),
    x AS (
      SELECT c.filters, c.lo_at AS at, c.lo_id AS id, NULL::integer AS delta FROM buckets c
      WHERE c.org_id = p_org AND c.list = p_list AND c.filters IN (SELECT s.filters FROM s)
      UNION ALL
      SELECT s.filters, e.at, e.id, e.delta
      FROM unnest(p_at, p_id, p_attrs, p_delta) e(at, id, attrs, delta) JOIN s ON s.attrs = e.attrs),
    g AS (
      SELECT x.*, count(*) FILTER (WHERE x.delta IS NULL)
               OVER (PARTITION BY x.filters ORDER BY x.at, x.id, x.delta NULLS FIRST ROWS UNBOUNDED PRECEDING) AS bucket_no
      FROM x),
    a AS (
      SELECT g.filters, min(g.at) FILTER (WHERE g.delta IS NULL) AS lo_at, min(g.id) FILTER (WHERE g.delta IS NULL) AS lo_id,
             sum(g.delta)::int AS n
      FROM g GROUP BY g.filters, g.bucket_no HAVING sum(g.delta) <> 0)
    UPDATE buckets b SET n = b.n + a.n FROM a
    WHERE b.org_id = p_org AND b.list = p_list AND b.filters = a.filters AND b.lo_at = a.lo_at AND b.lo_id = a.lo_id
    RETURNING b.filters, b.lo_at, b.lo_id, b.n, a.n AS change
  LOOP
    IF r.n > 2000 THEN
      PERFORM list_split(p_org, p_list, r.filters, r.lo_at, r.lo_id, r.n);
    ELSIF r.change < 0 AND r.n < 500 THEN
      -- Only a bucket under half its split size is worth a look at its neighbour.
      PERFORM list_merge(p_org, p_list, r.filters, r.lo_at, r.lo_id);
    END IF;
  END LOOP;
END $$;

--
-- Name: list_attrs_sql(text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.list_attrs_sql(p_list text, p_alias text) RETURNS text
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog', 'public'
    AS $$
  SELECT CASE WHEN cardinality(d.filter_columns) = 0 THEN '''{}''::jsonb'
    ELSE 'jsonb_strip_nulls(jsonb_build_object(' || (
      SELECT string_agg(format('%L, %I.%I', c, p_alias, c), ', ') FROM unnest(d.filter_columns) c) || '))'
    END
  FROM list_definitions d WHERE d.list = p_list
$$;

--
-- Name: list_build(text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.list_build(p_org text, p_list text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public'
    SET jit TO 'off'
    SET enable_sort TO 'off'
    SET enable_incremental_sort TO 'off'
    AS $_$
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
    'WITH gone AS (DELETE FROM list_changes c WHERE c.org_id = $1 AND c.list = $2 RETURNING c.written_at),
     built AS (
       INSERT INTO buckets (org_id, list, filters, lo_at, lo_id, n)
       SELECT $1, $2, e.filters, CASE WHEN e.lowest THEN ''-infinity'' ELSE e.at END,
              CASE WHEN e.lowest THEN '''' ELSE e.id END, e.j %% 1000 + 1
       FROM (%s) e)
     INSERT INTO list_folds AS f (org_id, list, changes, latest_written_at)
     SELECT $1, $2, count(*), max(gone.written_at) FROM gone HAVING count(*) > 0
     ON CONFLICT (org_id, list) DO UPDATE
       SET changes = f.changes + excluded.changes, latest_written_at = greatest(f.latest_written_at, excluded.latest_written_at)',
    array_to_string(v_lists, ' UNION ALL '))
  USING p_org, p_list;
END $_$;

--
-- Name: list_changes_of_appointments(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.list_changes_of_appointments() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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
          WHERE EXISTS (SELECT FROM public.buckets b WHERE b.org_id = o AND b.list = 'appointments'));
        PERFORM public.list_fold_entries(o, 'appointments', NULL, NULL, NULL, NULL) FROM unnest(v_orgs) o WHERE o <> ALL (v_built);
        IF TG_OP = 'INSERT' THEN
          PERFORM public.list_fold_entries(e.org_id, 'appointments', array_agg(e.at), array_agg(e.id), array_agg(e.attrs),
            array_agg(1))
          FROM (SELECT r.org_id, 'appointments', r.start_at, r.id, jsonb_strip_nulls(jsonb_build_object('status', r.status, 'staff_id', r.staff_id)) FROM new_rows r WHERE r.is_active AND r.org_id = ANY (v_built)) e(org_id, list, at, id, attrs)
          GROUP BY e.org_id;
        ELSIF TG_OP = 'DELETE' THEN
          PERFORM public.list_fold_entries(e.org_id, 'appointments', array_agg(e.at), array_agg(e.id), array_agg(e.attrs),
            array_agg(-1))
          FROM (SELECT r.org_id, 'appointments', r.start_at, r.id, jsonb_strip_nulls(jsonb_build_object('status', r.status, 'staff_id', r.staff_id)) FROM old_rows r WHERE r.is_active AND r.org_id = ANY (v_built)) e(org_id, list, at, id, attrs)
          GROUP BY e.org_id;
        ELSE
          -- Empty arrays, not NULL, where every entry changed in place: the list is kept as it is.
          PERFORM public.list_fold_entries(e.org_id, 'appointments',
            coalesce(array_agg(e.at) FILTER (WHERE e.delta <> 0), '{}'), coalesce(array_agg(e.id) FILTER (WHERE e.delta <> 0), '{}'),
            coalesce(array_agg(e.attrs) FILTER (WHERE e.delta <> 0), '{}'), coalesce(array_agg(e.delta::int) FILTER (WHERE e.delta <> 0), '{}'))
          FROM (SELECT x.org_id, x.at, x.id, x.attrs, sum(x.delta) AS delta
                FROM (SELECT r.org_id, 'appointments', r.start_at, r.id, jsonb_strip_nulls(jsonb_build_object('status', r.status, 'staff_id', r.staff_id)), -1 FROM old_rows r WHERE r.is_active AND r.org_id = ANY (v_built)
                      UNION ALL
                      SELECT r.org_id, 'appointments', r.start_at, r.id, jsonb_strip_nulls(jsonb_build_object('status', r.status, 'staff_id', r.staff_id)), 1 FROM new_rows r WHERE r.is_active AND r.org_id = ANY (v_built)) x(org_id, list, at, id, attrs, delta)
                GROUP BY 1, 2, 3, 4) e
          GROUP BY e.org_id;
        END IF;
        RETURN NULL;
      END IF;
      -- Each entry written takes one turn; the change holding every 512th is marked to fold.
      IF TG_OP = 'INSERT' THEN
        INSERT INTO public.list_changes (org_id, list, at, id, attrs, delta, fold)
        SELECT r.org_id, 'appointments', r.start_at, r.id, jsonb_strip_nulls(jsonb_build_object('status', r.status, 'staff_id', r.staff_id)), 1, nextval('public.list_turns') % 512 = 0 FROM new_rows r WHERE r.is_active;
      ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO public.list_changes (org_id, list, at, id, attrs, delta, fold)
        SELECT r.org_id, 'appointments', r.start_at, r.id, jsonb_strip_nulls(jsonb_build_object('status', r.status, 'staff_id', r.staff_id)), -1, nextval('public.list_turns') % 512 = 0 FROM old_rows r WHERE r.is_active;
      ELSE
        -- An entry that left one list for another of its organization writes two changes and
        -- takes one turn, on the change that joins.
        INSERT INTO public.list_changes (org_id, list, at, id, attrs, delta, fold)
        SELECT e.org_id, e.list, e.at, e.id, e.attrs, e.delta,
               CASE WHEN e.delta < 0 AND e.changes > 1 THEN false ELSE nextval('public.list_turns') % 512 = 0 END
        FROM (SELECT x.org_id, x.list, x.at, x.id, x.attrs, sum(x.delta) AS delta,
                     count(*) OVER (PARTITION BY x.org_id, x.id) AS changes
              FROM (SELECT r.org_id, 'appointments', r.start_at, r.id, jsonb_strip_nulls(jsonb_build_object('status', r.status, 'staff_id', r.staff_id)), -1 AS delta FROM old_rows r WHERE r.is_active
                    UNION ALL
                    SELECT r.org_id, 'appointments', r.start_at, r.id, jsonb_strip_nulls(jsonb_build_object('status', r.status, 'staff_id', r.staff_id)), 1 FROM new_rows r WHERE r.is_active) x(org_id, list, at, id, attrs, delta)
              GROUP BY x.org_id, x.list, x.at, x.id, x.attrs) e;
      END IF;
      RETURN NULL;
    END $$;

--
-- Name: list_changes_of_customers(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.list_changes_of_customers() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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
          WHERE EXISTS (SELECT FROM public.buckets b WHERE b.org_id = o AND b.list = 'customers'));
        PERFORM public.list_fold_entries(o, 'customers', NULL, NULL, NULL, NULL) FROM unnest(v_orgs) o WHERE o <> ALL (v_built);
        IF TG_OP = 'INSERT' THEN
          PERFORM public.list_fold_entries(e.org_id, 'customers', array_agg(e.at), array_agg(e.id), array_agg(e.attrs),
            array_agg(1))
          FROM (SELECT r.org_id, 'customers', r.created_at, r.id, '{}'::jsonb FROM new_rows r WHERE r.is_active AND r.org_id = ANY (v_built)) e(org_id, list, at, id, attrs)
          GROUP BY e.org_id;
        ELSIF TG_OP = 'DELETE' THEN
          PERFORM public.list_fold_entries(e.org_id, 'customers', array_agg(e.at), array_agg(e.id), array_agg(e.attrs),
            array_agg(-1))
          FROM (SELECT r.org_id, 'customers', r.created_at, r.id, '{}'::jsonb FROM old_rows r WHERE r.is_active AND r.org_id = ANY (v_built)) e(org_id, list, at, id, attrs)
          GROUP BY e.org_id;
        ELSE
          -- Empty arrays, not NULL, where every entry changed in place: the list is kept as it is.
          PERFORM public.list_fold_entries(e.org_id, 'customers',
            coalesce(array_agg(e.at) FILTER (WHERE e.delta <> 0), '{}'), coalesce(array_agg(e.id) FILTER (WHERE e.delta <> 0), '{}'),
            coalesce(array_agg(e.attrs) FILTER (WHERE e.delta <> 0), '{}'), coalesce(array_agg(e.delta::int) FILTER (WHERE e.delta <> 0), '{}'))
          FROM (SELECT x.org_id, x.at, x.id, x.attrs, sum(x.delta) AS delta
                FROM (SELECT r.org_id, 'customers', r.created_at, r.id, '{}'::jsonb, -1 FROM old_rows r WHERE r.is_active AND r.org_id = ANY (v_built)
                      UNION ALL
                      SELECT r.org_id, 'customers', r.created_at, r.id, '{}'::jsonb, 1 FROM new_rows r WHERE r.is_active AND r.org_id = ANY (v_built)) x(org_id, list, at, id, attrs, delta)
                GROUP BY 1, 2, 3, 4) e
          GROUP BY e.org_id;
        END IF;
        RETURN NULL;
      END IF;
      -- Each entry written takes one turn; the change holding every 512th is marked to fold.
      IF TG_OP = 'INSERT' THEN
        INSERT INTO public.list_changes (org_id, list, at, id, attrs, delta, fold)
        SELECT r.org_id, 'customers', r.created_at, r.id, '{}'::jsonb, 1, nextval('public.list_turns') % 512 = 0 FROM new_rows r WHERE r.is_active;
      ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO public.list_changes (org_id, list, at, id, attrs, delta, fold)
        SELECT r.org_id, 'customers', r.created_at, r.id, '{}'::jsonb, -1, nextval('public.list_turns') % 512 = 0 FROM old_rows r WHERE r.is_active;
      ELSE
        -- An entry that left one list for another of its organization writes two changes and
        -- takes one turn, on the change that joins.
        INSERT INTO public.list_changes (org_id, list, at, id, attrs, delta, fold)
        SELECT e.org_id, e.list, e.at, e.id, e.attrs, e.delta,
               CASE WHEN e.delta < 0 AND e.changes > 1 THEN false ELSE nextval('public.list_turns') % 512 = 0 END
        FROM (SELECT x.org_id, x.list, x.at, x.id, x.attrs, sum(x.delta) AS delta,
                     count(*) OVER (PARTITION BY x.org_id, x.id) AS changes
              FROM (SELECT r.org_id, 'customers', r.created_at, r.id, '{}'::jsonb, -1 AS delta FROM old_rows r WHERE r.is_active
                    UNION ALL
                    SELECT r.org_id, 'customers', r.created_at, r.id, '{}'::jsonb, 1 FROM new_rows r WHERE r.is_active) x(org_id, list, at, id, attrs, delta)
              GROUP BY x.org_id, x.list, x.at, x.id, x.attrs) e;
      END IF;
      RETURN NULL;
    END $$;

--
-- Name: list_filter_sets(jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.list_filter_sets(attrs jsonb) RETURNS SETOF jsonb
    LANGUAGE plpgsql IMMUTABLE ROWS 4
    SET search_path TO 'pg_catalog', 'public'
    AS $$
DECLARE
  v_keys text[] := ARRAY(SELECT jsonb_object_keys(attrs));
  v_set jsonb;
BEGIN
  FOR m IN 0 .. (1 << cardinality(v_keys)) - 1 LOOP
    v_set := '{}';
    FOR i IN 1 .. cardinality(v_keys) LOOP
      IF m & (1 << (i - 1)) <> 0 THEN
        v_set := v_set || jsonb_build_object(v_keys[i], attrs -> v_keys[i]);
      END IF;
    END LOOP;
    RETURN NEXT v_set;
  END LOOP;
END $$;

--
-- Name: list_fold(text, text, boolean, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.list_fold(p_org text, p_list text, p_wait boolean DEFAULT false, p_limit integer DEFAULT 5000) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public'
    SET jit TO 'off'
    AS $$
DECLARE
  v_size bigint;
  v_changes bigint;
  v_latest timestamptz;
  v_at timestamptz[];
  v_id text[];
  v_attrs jsonb[];
  v_delta integer[];
  v_last_at timestamptz;
  v_last_id text;
  v_last_seq bigint;
BEGIN
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RETURN false;
  END IF;
  IF p_wait THEN
    PERFORM pg_advisory_xact_lock(hashtext('openbook.list_fold'), hashtext(p_org || '/' || p_list));
  ELSIF NOT pg_try_advisory_xact_lock(hashtext('openbook.list_fold'), hashtext(p_org || '/' || p_list)) THEN
    RETURN false;
  END IF;
  -- A list without buckets, or one whose changes to fold outnumber half its folded entries, is
  -- counted again from its rows: one ordered pass costs less than placing each change.
  SELECT sum(b.n) INTO v_size FROM buckets b WHERE b.org_id = p_org AND b.list = p_list AND b.filters = '{}';
  IF v_size IS NULL OR (p_limit IS NULL AND (SELECT count(*) FROM (SELECT FROM list_changes x
      WHERE x.org_id = p_org AND x.list = p_list LIMIT v_size / 2 + 1) c) > v_size / 2) THEN
    PERFORM list_build(p_org, p_list);
    RETURN true;
  END IF;
  IF p_limit IS NOT NULL THEN
    SELECT x.at, x.id, x.seq INTO v_last_at, v_last_id, v_last_seq FROM list_changes x
    WHERE x.org_id = p_org AND x.list = p_list ORDER BY x.at, x.id, x.seq OFFSET p_limit - 1 LIMIT 1;
  END IF;
  WITH gone AS (
    DELETE FROM list_changes c WHERE c.org_id = p_org AND c.list = p_list
      AND (v_last_seq IS NULL OR (c.at, c.id, c.seq) <= (v_last_at, v_last_id, v_last_seq))
    RETURNING c.at, c.id, c.attrs, c.delta, c.written_at)
  SELECT count(*), max(g.written_at), array_agg(g.at) FILTER (WHERE g.delta <> 0), array_agg(g.id) FILTER (WHERE g.delta <> 0),
         array_agg(g.attrs) FILTER (WHERE g.delta <> 0), array_agg(g.delta::int) FILTER (WHERE g.delta <> 0)
  INTO v_changes, v_latest, v_at, v_id, v_attrs, v_delta
  FROM gone g;
  IF v_changes = 0 THEN
    RETURN true;
  END IF;
  INSERT INTO list_folds AS f (org_id, list, changes, latest_written_at) VALUES (p_org, p_list, v_changes, v_latest)
  ON CONFLICT (org_id, list) DO UPDATE
    SET changes = f.changes + excluded.changes, latest_written_at = greatest(f.latest_written_at, excluded.latest_written_at);
  IF v_delta IS NOT NULL THEN
    PERFORM list_apply(p_org, p_list, v_at, v_id, v_attrs, v_delta);
  END IF;
  RETURN true;
END $$;

--
-- Name: list_fold_all(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.list_fold_all() RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public'
    AS $_$
DECLARE
  v record;
  v_rows boolean;
BEGIN
  FOR v IN SELECT o.id AS org_id, d.list FROM organizations o CROSS JOIN list_definitions d
           WHERE NOT EXISTS (SELECT 1 FROM buckets b WHERE b.org_id = o.id AND b.list = d.list)
           ORDER BY 1, 2
  LOOP
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I r WHERE r.org_id = $1 AND r.is_active)', v.list)
    INTO v_rows USING v.org_id;
    IF v_rows OR EXISTS (SELECT 1 FROM list_changes c WHERE c.org_id = v.org_id AND c.list = v.list) THEN
      PERFORM list_build(v.org_id, v.list);
    END IF;
  END LOOP;
  PERFORM list_fold(p.org_id, p.list, true, NULL)
  FROM (SELECT DISTINCT org_id, list FROM list_changes ORDER BY 1, 2) p;
END $_$;

--
-- Name: list_fold_at_commit(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.list_fold_at_commit() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public'
    AS $$
DECLARE
  v_held jsonb := coalesce(nullif(current_setting('openbook.folds_held', true), ''), '{}');
  v_list text := NEW.org_id || '/' || NEW.list;
  v_count integer := coalesce((v_held ->> v_list)::integer, 0);
BEGIN
  IF v_count < 2 THEN
    BEGIN
      IF list_fold(NEW.org_id, NEW.list, false, CASE v_count WHEN 0 THEN 5000 END) THEN
        PERFORM set_config('openbook.folds_held', jsonb_set(v_held, ARRAY[v_list], to_jsonb(v_count + 1))::text, true);
      END IF;
    EXCEPTION WHEN OTHERS THEN
      RAISE WARNING 'openbook: the fold of % at this commit was given up (%); its changes stay pending until the next fold',
        v_list, SQLERRM;
    END;
  END IF;
  RETURN NULL;
END $$;

--
-- Name: list_fold_entries(text, text, timestamp with time zone[], text[], jsonb[], integer[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.list_fold_entries(p_org text, p_list text, p_at timestamp with time zone[], p_id text[], p_attrs jsonb[], p_delta integer[]) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public'
    SET jit TO 'off'
    AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('openbook.list_fold'), hashtext(p_org || '/' || p_list));
  INSERT INTO list_folds AS f (org_id, list, changes, latest_written_at) VALUES (p_org, p_list, 1, now())
  ON CONFLICT (org_id, list) DO UPDATE
    SET changes = f.changes + 1, latest_written_at = greatest(f.latest_written_at, excluded.latest_written_at);
  IF p_delta IS NULL THEN
    DELETE FROM buckets WHERE org_id = p_org AND list = p_list;
  ELSIF cardinality(p_delta) > 0 AND EXISTS (SELECT 1 FROM buckets b WHERE b.org_id = p_org AND b.list = p_list) THEN
    PERFORM list_apply(p_org, p_list, p_at, p_id, p_attrs, p_delta);
  END IF;
END $$;

--
-- Name: list_fold_pending(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.list_fold_pending(OUT folded integer, OUT most_pending bigint, OUT all_pending bigint, OUT failed integer, OUT failure text) RETURNS record
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public'
    SET jit TO 'off'
    AS $$
DECLARE
  v record;
  -- The number of the last change written (a sequence's last value: no scan).
  v_last bigint := pg_sequence_last_value(pg_get_serial_sequence('public.list_changes', 'seq')::regclass);
BEGIN
  IF current_setting('transaction_read_only') = 'on' THEN
    RAISE EXCEPTION 'list_fold_pending() folds in a read-write transaction only' USING ERRCODE = 'read_only_sql_transaction';
  END IF;
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'list_fold_pending() folds in READ COMMITTED only' USING ERRCODE = 'invalid_transaction_state';
  END IF;
  folded := 0;
  failed := 0;
  IF pg_try_advisory_xact_lock(hashtext('openbook.list_fold_pending'), 0) THEN
    FOR v IN
      WITH p AS MATERIALIZED (
        SELECT c.org_id, c.list, count(*) AS n, min(c.seq) AS oldest FROM list_changes c GROUP BY c.org_id, c.list)
      (SELECT p.org_id, p.list FROM p WHERE p.n >= 256 ORDER BY p.n DESC, p.org_id, p.list LIMIT 8)
      UNION ALL
      (SELECT p.org_id, p.list FROM p WHERE p.n < 256 AND p.oldest <= v_last - 10000 ORDER BY p.oldest LIMIT 32)
    LOOP
      BEGIN
        IF list_fold(v.org_id, v.list, false, 5000) THEN
          folded := folded + 1;
        END IF;
      EXCEPTION WHEN OTHERS THEN
        failed := failed + 1;
        failure := coalesce(failure, format('%s/%s: %s', v.org_id, v.list, SQLERRM));
        RAISE WARNING 'openbook: the fold of %/% was given up (%); its changes stay pending', v.org_id, v.list, SQLERRM;
      END;
    END LOOP;
  END IF;
  SELECT coalesce(max(p.n), 0), coalesce(sum(p.n), 0) INTO most_pending, all_pending
  FROM (SELECT count(*) AS n FROM list_changes c GROUP BY c.org_id, c.list) p;
END $$;

--
-- Name: list_index(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.list_index(p_list text) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public'
    AS $$
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

--
-- Name: list_install(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.list_install(p_list text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public'
    AS $_$
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
      -- Each entry written takes one turn; the change holding every 512th is marked to fold.
      IF TG_OP = 'INSERT' THEN
        INSERT INTO public.list_changes (org_id, list, at, id, attrs, delta, fold)
        SELECT %2$s, 1, nextval('public.list_turns') %% 512 = 0 FROM new_rows r WHERE r.is_active;
      ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO public.list_changes (org_id, list, at, id, attrs, delta, fold)
        SELECT %2$s, -1, nextval('public.list_turns') %% 512 = 0 FROM old_rows r WHERE r.is_active;
      ELSE
        -- An entry that left one list for another of its organization writes two changes and
        -- takes one turn, on the change that joins.
        INSERT INTO public.list_changes (org_id, list, at, id, attrs, delta, fold)
        SELECT e.org_id, e.list, e.at, e.id, e.attrs, e.delta,
               CASE WHEN e.delta < 0 AND e.changes > 1 THEN false ELSE nextval('public.list_turns') %% 512 = 0 END
        FROM (SELECT x.org_id, x.list, x.at, x.id, x.attrs, sum(x.delta) AS delta,
                     count(*) OVER (PARTITION BY x.org_id, x.id) AS changes
              FROM (SELECT %2$s, -1 AS delta FROM old_rows r WHERE r.is_active
                    UNION ALL
                    SELECT %2$s, 1 FROM new_rows r WHERE r.is_active) x(org_id, list, at, id, attrs, delta)
              GROUP BY x.org_id, x.list, x.at, x.id, x.attrs) e;
      END IF;
      RETURN NULL;
    END $body$ $f$, v_function, v_entry, p_list);
END $_$;

--
-- Name: list_key_after(text, text, jsonb, timestamp with time zone, text, integer, timestamp with time zone, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.list_key_after(p_org text, p_list text, p_filters jsonb, p_at timestamp with time zone, p_id text, p_skip integer, p_hi_at timestamp with time zone, p_hi_id text, OUT key_at timestamp with time zone, OUT key_id text, OUT pending integer) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public'
    AS $_$
DECLARE
  d list_definitions;
  v_where text := '';
  v_column text;
  v_pending text;
BEGIN
  SELECT * INTO STRICT d FROM list_definitions WHERE list = p_list;
  FOR v_column IN SELECT jsonb_object_keys(p_filters) LOOP
    IF NOT v_column = ANY (d.filter_columns) THEN
      RAISE EXCEPTION 'list %: % is not a filter column', p_list, v_column;
    END IF;
    v_where := v_where || format(' AND k.%I = $3->>%L', v_column, v_column);
  END LOOP;
  -- A load alone on its store (embedded: one session) has no pending changes to count beside it.
  IF current_setting('openbook.fold_alone', true) = 'on' THEN
    v_pending := '0';
  ELSE
    v_pending := format('(SELECT coalesce(sum(p.delta), 0)::int FROM list_changes p
       WHERE p.org_id = $1 AND p.list = %L AND p.delta <> 0 AND p.attrs @> $3
         AND (p.at, p.id) >= ($4, $5) AND (p.at, p.id) < (x.key_at, x.key_id))', p_list);
  END IF;
  EXECUTE format(
    'SELECT x.key_at, x.key_id, %4$s
     FROM (SELECT k.%1$I AS key_at, k.id AS key_id FROM %2$I k
           WHERE k.org_id = $1 AND k.is_active%3$s AND (k.%1$I, k.id) >= ($4, $5)
             AND ($7::timestamptz IS NULL OR (k.%1$I, k.id) < ($7, $8))
           ORDER BY k.%1$I, k.id OFFSET $6 LIMIT 1) x', d.at_column, p_list, v_where, v_pending)
  INTO key_at, key_id, pending
  USING p_org, p_list, p_filters, p_at, p_id, p_skip, p_hi_at, p_hi_id;
END $_$;

--
-- Name: list_merge(text, text, text, timestamp with time zone, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.list_merge(p_org text, p_list text, p_filters text, p_lo_at timestamp with time zone, p_lo_id text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public'
    AS $$
DECLARE
  v_n integer;
  v_lower record;
BEGIN
  SELECT b.n INTO v_n FROM buckets b
  WHERE b.org_id = p_org AND b.list = p_list AND b.filters = p_filters AND b.lo_at = p_lo_at AND b.lo_id = p_lo_id;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  SELECT b.lo_at, b.lo_id, b.n INTO v_lower FROM buckets b
  WHERE b.org_id = p_org AND b.list = p_list AND b.filters = p_filters AND (b.lo_at, b.lo_id) < (p_lo_at, p_lo_id)
  ORDER BY b.lo_at DESC, b.lo_id DESC LIMIT 1;
  IF NOT FOUND OR v_n + v_lower.n > 1000 THEN
    RETURN;
  END IF;
  DELETE FROM buckets b
  WHERE b.org_id = p_org AND b.list = p_list AND b.filters = p_filters AND b.lo_at = p_lo_at AND b.lo_id = p_lo_id;
  UPDATE buckets b SET n = b.n + v_n
  WHERE b.org_id = p_org AND b.list = p_list AND b.filters = p_filters AND b.lo_at = v_lower.lo_at
    AND b.lo_id = v_lower.lo_id;
END $$;

--
-- Name: list_rebuild(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.list_rebuild(p_list text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public'
    AS $$
BEGIN
  DELETE FROM buckets WHERE list = p_list;
  PERFORM list_fold_all();
END $$;

--
-- Name: list_split(text, text, text, timestamp with time zone, text, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.list_split(p_org text, p_list text, p_filters text, p_lo_at timestamp with time zone, p_lo_id text, p_n integer) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public'
    AS $$
DECLARE
  v_at timestamptz := p_lo_at;
  v_id text := p_lo_id;
  v_rest integer := p_n;
  v_low integer;
  v_hi record;
  v_next record;
BEGIN
  SELECT b.lo_at, b.lo_id INTO v_hi FROM buckets b
  WHERE b.org_id = p_org AND b.list = p_list AND b.filters = p_filters AND (b.lo_at, b.lo_id) > (p_lo_at, p_lo_id)
  ORDER BY b.lo_at, b.lo_id LIMIT 1;
  WHILE v_rest >= 1500 LOOP
    SELECT * INTO v_next FROM list_key_after(p_org, p_list, p_filters::jsonb, v_at, v_id, 1000, v_hi.lo_at, v_hi.lo_id);
    -- Fewer entries than folded: pending removals; the next fold splits what is left.
    EXIT WHEN v_next.key_id IS NULL;
    v_low := 1000 - v_next.pending;
    EXIT WHEN v_low < 0 OR v_low > v_rest;
    UPDATE buckets SET n = v_low
    WHERE org_id = p_org AND list = p_list AND filters = p_filters AND lo_at = v_at AND lo_id = v_id;
    INSERT INTO buckets (org_id, list, filters, lo_at, lo_id, n)
    VALUES (p_org, p_list, p_filters, v_next.key_at, v_next.key_id, v_rest - v_low);
    v_at := v_next.key_at;
    v_id := v_next.key_id;
    v_rest := v_rest - v_low;
  END LOOP;
END $$;

--
-- Name: list_truncate(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.list_truncate() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public'
    AS $$
BEGIN
  DELETE FROM buckets WHERE list = TG_TABLE_NAME;
  INSERT INTO list_folds AS f (org_id, list, changes, latest_written_at)
  SELECT c.org_id, TG_TABLE_NAME, count(*), max(c.written_at) FROM list_changes c WHERE c.list = TG_TABLE_NAME GROUP BY 1
  ON CONFLICT (org_id, list) DO UPDATE
    SET changes = f.changes + excluded.changes, latest_written_at = greatest(f.latest_written_at, excluded.latest_written_at);
  DELETE FROM list_changes WHERE list = TG_TABLE_NAME;
  UPDATE list_folds SET changes = changes + 1, latest_written_at = greatest(latest_written_at, now())
  WHERE list = TG_TABLE_NAME;
  RETURN NULL;
END $$;

--
-- Name: openbook_authenticate(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.openbook_authenticate(p_key_hash text) RETURNS TABLE(key_id text, org_id text, last_used_at timestamp with time zone)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public'
    AS $$
BEGIN
  PERFORM set_config('openbook.key_hash', p_key_hash, true);
  RETURN QUERY
    SELECT k.id, k.org_id, k.last_used_at
    FROM public.api_keys k
    WHERE k.key_hash = p_key_hash
      AND k.revoked_at IS NULL
      AND (k.expires_at IS NULL OR k.expires_at > now());
END
$$;

--
-- Name: openbook_key_lookup(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.openbook_key_lookup(p_key_hash text) RETURNS TABLE(key_id text, org_id text, last_used_at timestamp with time zone, expires_at timestamp with time zone, state text)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'public'
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

--
-- Name: openbook_prepare(text, text, boolean); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.openbook_prepare(name text, statement text, recheck boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql
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

--
-- Name: openbook_schema_version(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.openbook_schema_version(OUT version smallint, OUT compatible_from smallint) RETURNS record
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT 23::smallint, 12::smallint $$;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: api_keys; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.api_keys (
    org_id text NOT NULL,
    id text NOT NULL,
    name text,
    env text NOT NULL,
    key_hash text NOT NULL,
    hint text NOT NULL,
    created_by text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone,
    last_used_at timestamp with time zone,
    CONSTRAINT api_keys_env_check CHECK ((env = ANY (ARRAY['test'::text, 'live'::text]))),
    CONSTRAINT api_keys_key_hash_check CHECK ((key_hash ~ '^[0-9a-f]{64}$'::text))
);

ALTER TABLE ONLY public.api_keys FORCE ROW LEVEL SECURITY;

--
-- Name: appointment_counts_12; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.appointment_counts_12 (
    org_id text NOT NULL,
    n integer NOT NULL,
    CONSTRAINT appointment_counts_n_check CHECK ((n >= 0))
);

ALTER TABLE ONLY public.appointment_counts_12 FORCE ROW LEVEL SECURITY;

--
-- Name: buckets; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.buckets (
    org_id text NOT NULL,
    list text NOT NULL,
    filters text NOT NULL,
    lo_at timestamp with time zone NOT NULL,
    lo_id text NOT NULL,
    n integer NOT NULL,
    CONSTRAINT buckets_n_check CHECK ((n >= 0))
);

ALTER TABLE ONLY public.buckets FORCE ROW LEVEL SECURITY;

--
-- Name: list_changes; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.list_changes (
    seq bigint NOT NULL,
    org_id text NOT NULL,
    list text NOT NULL,
    at timestamp with time zone NOT NULL,
    id text NOT NULL,
    attrs jsonb NOT NULL,
    delta smallint NOT NULL,
    fold boolean DEFAULT false NOT NULL,
    written_at timestamp with time zone DEFAULT now(),
    CONSTRAINT list_changes_delta_check CHECK (((delta >= '-1'::integer) AND (delta <= 1)))
);

ALTER TABLE ONLY public.list_changes FORCE ROW LEVEL SECURITY;

--
-- Name: appointment_counts; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.appointment_counts WITH (security_invoker='true') AS
 SELECT v.org_id,
    (sum(v.n))::integer AS n
   FROM ( SELECT o.org_id,
            o.n
           FROM public.appointment_counts_12 o
        UNION ALL
         SELECT b.org_id,
            b.n
           FROM public.buckets b
          WHERE ((b.list = 'appointments'::text) AND (b.filters = '{}'::text))
        UNION ALL
         SELECT c.org_id,
            c.delta
           FROM public.list_changes c
          WHERE (c.list = 'appointments'::text)) v
  GROUP BY v.org_id;

--
-- Name: appointment_day_counts; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.appointment_day_counts WITH (security_invoker='true') AS
 SELECT NULL::text AS org_id,
    NULL::text AS status,
    NULL::date AS day,
    NULL::integer AS n
  WHERE false;

--
-- Name: appointments; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.appointments (
    org_id text NOT NULL,
    id text NOT NULL,
    customer_id text,
    staff_id text,
    service_id text,
    start_at timestamp with time zone NOT NULL,
    end_at timestamp with time zone NOT NULL,
    status text NOT NULL,
    location_type text,
    resource_id text,
    price_cents integer,
    currency text,
    note text,
    payment_status text,
    amount_paid_cents integer,
    payment_kind text,
    payment_id text,
    invoice_id text,
    requires_payment boolean,
    confirmed_after_payment boolean,
    day_key text,
    is_active boolean NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT appointments_amount_paid_cents_check CHECK ((amount_paid_cents >= 0)),
    CONSTRAINT appointments_check CHECK ((end_at >= start_at)),
    CONSTRAINT appointments_created_at_check CHECK (((created_at >= '0001-01-01 00:00:00+00'::timestamp with time zone) AND (created_at <= '9999-12-31 23:59:59.999999+00'::timestamp with time zone))),
    CONSTRAINT appointments_currency_check CHECK ((currency ~ '^[A-Z]{3}$'::text)),
    CONSTRAINT appointments_customer_id_check CHECK (((length(customer_id) >= 1) AND (length(customer_id) <= 128))),
    CONSTRAINT appointments_day_key_check CHECK ((day_key ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}$'::text)),
    CONSTRAINT appointments_end_at_check CHECK (((end_at >= '0001-01-01 00:00:00+00'::timestamp with time zone) AND (end_at <= '9999-12-31 23:59:59.999999+00'::timestamp with time zone))),
    CONSTRAINT appointments_id_check CHECK (((length(id) >= 1) AND (length(id) <= 128))),
    CONSTRAINT appointments_invoice_id_check CHECK (((length(invoice_id) >= 1) AND (length(invoice_id) <= 128))),
    CONSTRAINT appointments_location_type_check CHECK ((location_type = ANY (ARRAY['in_person'::text, 'online'::text, 'phone'::text, 'customer_address'::text]))),
    CONSTRAINT appointments_note_check CHECK ((length(note) <= 10000)),
    CONSTRAINT appointments_org_id_check CHECK (((length(org_id) >= 1) AND (length(org_id) <= 128))),
    CONSTRAINT appointments_payment_id_check CHECK (((length(payment_id) >= 1) AND (length(payment_id) <= 128))),
    CONSTRAINT appointments_payment_kind_check CHECK ((payment_kind = ANY (ARRAY['card'::text, 'cash'::text, 'online'::text, 'bank_transfer'::text, 'gift_card'::text, 'other'::text]))),
    CONSTRAINT appointments_payment_status_check CHECK ((payment_status = ANY (ARRAY['not_required'::text, 'unpaid'::text, 'pending'::text, 'partially_paid'::text, 'paid'::text, 'refunded'::text, 'failed'::text]))),
    CONSTRAINT appointments_price_cents_check CHECK ((price_cents >= 0)),
    CONSTRAINT appointments_resource_id_check CHECK (((length(resource_id) >= 1) AND (length(resource_id) <= 128))),
    CONSTRAINT appointments_service_id_check CHECK (((length(service_id) >= 1) AND (length(service_id) <= 128))),
    CONSTRAINT appointments_staff_id_check CHECK (((length(staff_id) >= 1) AND (length(staff_id) <= 128))),
    CONSTRAINT appointments_start_at_check CHECK (((start_at >= '0001-01-01 00:00:00+00'::timestamp with time zone) AND (start_at <= '9999-12-31 23:59:59.999999+00'::timestamp with time zone))),
    CONSTRAINT appointments_status_check CHECK ((status = ANY (ARRAY['scheduled'::text, 'confirmed'::text, 'checked_in'::text, 'no_show'::text, 'cancelled'::text, 'completed'::text]))),
    CONSTRAINT appointments_updated_at_check CHECK (((updated_at >= '0001-01-01 00:00:00+00'::timestamp with time zone) AND (updated_at <= '9999-12-31 23:59:59.999999+00'::timestamp with time zone)))
);

ALTER TABLE ONLY public.appointments FORCE ROW LEVEL SECURITY;

--
-- Name: customer_counts_12; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.customer_counts_12 (
    org_id text NOT NULL,
    n integer NOT NULL,
    CONSTRAINT customer_counts_n_check CHECK ((n >= 0))
);

ALTER TABLE ONLY public.customer_counts_12 FORCE ROW LEVEL SECURITY;

--
-- Name: customer_counts; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.customer_counts WITH (security_invoker='true') AS
 SELECT v.org_id,
    (sum(v.n))::integer AS n
   FROM ( SELECT o.org_id,
            o.n
           FROM public.customer_counts_12 o
        UNION ALL
         SELECT b.org_id,
            b.n
           FROM public.buckets b
          WHERE ((b.list = 'customers'::text) AND (b.filters = '{}'::text))
        UNION ALL
         SELECT c.org_id,
            c.delta
           FROM public.list_changes c
          WHERE (c.list = 'customers'::text)) v
  GROUP BY v.org_id;

--
-- Name: customer_day_counts; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.customer_day_counts WITH (security_invoker='true') AS
 SELECT NULL::text AS org_id,
    NULL::date AS day,
    NULL::integer AS n
  WHERE false;

--
-- Name: customers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.customers (
    org_id text NOT NULL,
    id text NOT NULL,
    support_id text,
    first_name text,
    last_name text,
    display_name text,
    email text,
    phone text,
    primary_phone text,
    secondary_phone text,
    preferred_contact_method text,
    date_of_birth date,
    gender text,
    notes text,
    marketing_consent boolean,
    address_line1 text,
    city text,
    region text,
    postal_code text,
    country text,
    preferred_staff_id text,
    is_active boolean NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT customers_address_line1_check CHECK ((length(address_line1) <= 10000)),
    CONSTRAINT customers_city_check CHECK ((length(city) <= 10000)),
    CONSTRAINT customers_country_check CHECK ((country ~ '^[A-Z]{2}$'::text)),
    CONSTRAINT customers_created_at_check CHECK (((created_at >= '0001-01-01 00:00:00+00'::timestamp with time zone) AND (created_at <= '9999-12-31 23:59:59.999999+00'::timestamp with time zone))),
    CONSTRAINT customers_date_of_birth_check CHECK (((date_of_birth >= '0001-01-01'::date) AND (date_of_birth <= '9999-12-31'::date))),
    CONSTRAINT customers_display_name_check CHECK ((length(display_name) <= 10000)),
    CONSTRAINT customers_email_check CHECK ((length(email) <= 10000)),
    CONSTRAINT customers_first_name_check CHECK ((length(first_name) <= 10000)),
    CONSTRAINT customers_gender_check CHECK ((length(gender) <= 10000)),
    CONSTRAINT customers_id_check CHECK (((length(id) >= 1) AND (length(id) <= 128))),
    CONSTRAINT customers_last_name_check CHECK ((length(last_name) <= 10000)),
    CONSTRAINT customers_notes_check CHECK ((length(notes) <= 10000)),
    CONSTRAINT customers_org_id_check CHECK (((length(org_id) >= 1) AND (length(org_id) <= 128))),
    CONSTRAINT customers_phone_check CHECK ((length(phone) <= 10000)),
    CONSTRAINT customers_postal_code_check CHECK ((length(postal_code) <= 10000)),
    CONSTRAINT customers_preferred_contact_method_check CHECK ((preferred_contact_method = ANY (ARRAY['email'::text, 'phone'::text, 'sms'::text, 'whatsapp'::text, 'none'::text]))),
    CONSTRAINT customers_preferred_staff_id_check CHECK (((length(preferred_staff_id) >= 1) AND (length(preferred_staff_id) <= 128))),
    CONSTRAINT customers_primary_phone_check CHECK ((length(primary_phone) <= 10000)),
    CONSTRAINT customers_region_check CHECK ((length(region) <= 10000)),
    CONSTRAINT customers_secondary_phone_check CHECK ((length(secondary_phone) <= 10000)),
    CONSTRAINT customers_support_id_check CHECK ((length(support_id) <= 10000)),
    CONSTRAINT customers_updated_at_check CHECK (((updated_at >= '0001-01-01 00:00:00+00'::timestamp with time zone) AND (updated_at <= '9999-12-31 23:59:59.999999+00'::timestamp with time zone)))
);

ALTER TABLE ONLY public.customers FORCE ROW LEVEL SECURITY;

--
-- Name: list_buckets_12; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.list_buckets_12 (
    org_id text NOT NULL,
    list text NOT NULL,
    lo_at timestamp with time zone NOT NULL,
    lo_id text NOT NULL,
    n integer NOT NULL,
    CONSTRAINT list_buckets_n_check CHECK ((n >= 0))
);

ALTER TABLE ONLY public.list_buckets_12 FORCE ROW LEVEL SECURITY;

--
-- Name: list_buckets; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.list_buckets WITH (security_invoker='true') AS
 SELECT o.org_id,
    o.list,
    o.lo_at,
    o.lo_id,
    o.n
   FROM public.list_buckets_12 o
UNION ALL
 SELECT b.org_id,
    ((b.list || COALESCE((':'::text || ((b.filters)::jsonb ->> 'status'::text)), ''::text)) || COALESCE((':staff:'::text || ((b.filters)::jsonb ->> 'staff_id'::text)), ''::text)) AS list,
    b.lo_at,
    b.lo_id,
    (b.n + (( SELECT COALESCE(sum(p.delta), (0)::bigint) AS "coalesce"
           FROM public.list_changes p
          WHERE ((p.org_id = b.org_id) AND (p.list = b.list) AND (p.delta <> 0) AND (p.attrs @> (b.filters)::jsonb) AND (ROW(p.at, p.id) >= ROW(b.lo_at, b.lo_id)) AND (NOT (EXISTS ( SELECT 1
                   FROM public.buckets x
                  WHERE ((x.org_id = b.org_id) AND (x.list = b.list) AND (x.filters = b.filters) AND (ROW(x.lo_at, x.lo_id) > ROW(b.lo_at, b.lo_id)) AND (ROW(x.lo_at, x.lo_id) <= ROW(p.at, p.id)))))))))::integer) AS n
   FROM public.buckets b
  WHERE ((((b.filters)::jsonb - 'status'::text) - 'staff_id'::text) = '{}'::jsonb)
UNION ALL
 SELECT p.org_id,
    ((p.list || COALESCE((':'::text || (s.filters ->> 'status'::text)), ''::text)) || COALESCE((':staff:'::text || (s.filters ->> 'staff_id'::text)), ''::text)) AS list,
    '-infinity'::timestamp with time zone AS lo_at,
    ''::text AS lo_id,
    (sum(p.delta))::integer AS n
   FROM (public.list_changes p
     CROSS JOIN LATERAL public.list_filter_sets(p.attrs) s(filters))
  WHERE ((p.delta <> 0) AND (((s.filters - 'status'::text) - 'staff_id'::text) = '{}'::jsonb) AND (NOT (EXISTS ( SELECT 1
           FROM public.buckets x
          WHERE ((x.org_id = p.org_id) AND (x.list = p.list) AND (x.filters = (s.filters)::text))))))
  GROUP BY p.org_id, p.list, s.filters;

--
-- Name: list_changes_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.list_changes ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.list_changes_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: list_definitions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.list_definitions (
    list text NOT NULL,
    at_column text NOT NULL,
    filter_columns text[] NOT NULL,
    CONSTRAINT list_definitions_list_check CHECK ((list = ANY (ARRAY['customers'::text, 'appointments'::text])))
);

--
-- Name: list_folds; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.list_folds (
    org_id text NOT NULL,
    list text NOT NULL,
    changes bigint NOT NULL,
    latest_written_at timestamp with time zone
);

ALTER TABLE ONLY public.list_folds FORCE ROW LEVEL SECURITY;

--
-- Name: list_turns; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.list_turns
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: list_versions_12; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.list_versions_12 (
    org_id text NOT NULL,
    list text NOT NULL,
    version bigint NOT NULL,
    CONSTRAINT list_versions_list_check CHECK ((list = ANY (ARRAY['customers'::text, 'appointments'::text])))
);

ALTER TABLE ONLY public.list_versions_12 FORCE ROW LEVEL SECURITY;

--
-- Name: list_versions; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.list_versions WITH (security_invoker='true') AS
 SELECT v.org_id,
    v.list,
    (sum(v.changes))::bigint AS version
   FROM ( SELECT o.org_id,
            o.list,
            o.version AS changes
           FROM public.list_versions_12 o
        UNION ALL
         SELECT f.org_id,
            f.list,
            f.changes
           FROM public.list_folds f
        UNION ALL
         SELECT c.org_id,
            c.list,
            1
           FROM public.list_changes c) v
  GROUP BY v.org_id, v.list;

--
-- Name: memberships; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.memberships (
    org_id text NOT NULL,
    user_id text NOT NULL,
    role text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT memberships_role_check CHECK ((role = ANY (ARRAY['owner'::text, 'admin'::text, 'member'::text])))
);

ALTER TABLE ONLY public.memberships FORCE ROW LEVEL SECURITY;

--
-- Name: openbook_schema_migrations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.openbook_schema_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL,
    compatible_from integer
);

--
-- Name: organizations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.organizations (
    id text NOT NULL,
    name text NOT NULL,
    plan text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT organizations_id_check CHECK (((length(id) >= 1) AND (length(id) <= 128))),
    CONSTRAINT organizations_name_check CHECK (((length(name) >= 1) AND (length(name) <= 200))),
    CONSTRAINT organizations_plan_check CHECK ((plan = ANY (ARRAY['free'::text, 'starter'::text, 'professional'::text, 'enterprise'::text])))
);

ALTER TABLE ONLY public.organizations FORCE ROW LEVEL SECURITY;

--
-- Name: services; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.services (
    org_id text NOT NULL,
    id text NOT NULL,
    name text,
    is_active boolean DEFAULT true NOT NULL,
    CONSTRAINT services_id_check CHECK (((length(id) >= 1) AND (length(id) <= 128)))
);

ALTER TABLE ONLY public.services FORCE ROW LEVEL SECURITY;

--
-- Name: staff; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.staff (
    org_id text NOT NULL,
    id text NOT NULL,
    name text,
    is_active boolean DEFAULT true NOT NULL,
    CONSTRAINT staff_id_check CHECK (((length(id) >= 1) AND (length(id) <= 128)))
);

ALTER TABLE ONLY public.staff FORCE ROW LEVEL SECURITY;

--
-- Name: users; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.users (
    id text NOT NULL,
    email text NOT NULL,
    name text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT users_email_check CHECK ((POSITION(('@'::text) IN (email)) > 1)),
    CONSTRAINT users_id_check CHECK (((length(id) >= 1) AND (length(id) <= 128)))
);

--
-- Name: api_keys api_keys_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (org_id, id);

--
-- Name: appointment_counts_12 appointment_counts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.appointment_counts_12
    ADD CONSTRAINT appointment_counts_pkey PRIMARY KEY (org_id);

--
-- Name: appointments appointments_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.appointments
    ADD CONSTRAINT appointments_pkey PRIMARY KEY (org_id, id);

--
-- Name: buckets buckets_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.buckets
    ADD CONSTRAINT buckets_pkey PRIMARY KEY (org_id, list, filters, lo_at, lo_id) INCLUDE (n);

--
-- Name: customer_counts_12 customer_counts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.customer_counts_12
    ADD CONSTRAINT customer_counts_pkey PRIMARY KEY (org_id);

--
-- Name: customers customers_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.customers
    ADD CONSTRAINT customers_pkey PRIMARY KEY (org_id, id);

--
-- Name: list_buckets_12 list_buckets_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.list_buckets_12
    ADD CONSTRAINT list_buckets_pkey PRIMARY KEY (org_id, list, lo_at, lo_id) INCLUDE (n);

--
-- Name: list_changes list_changes_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.list_changes
    ADD CONSTRAINT list_changes_pkey PRIMARY KEY (org_id, list, at, id, seq) INCLUDE (written_at);

--
-- Name: list_definitions list_definitions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.list_definitions
    ADD CONSTRAINT list_definitions_pkey PRIMARY KEY (list);

--
-- Name: list_folds list_folds_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.list_folds
    ADD CONSTRAINT list_folds_pkey PRIMARY KEY (org_id, list);

--
-- Name: list_versions_12 list_versions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.list_versions_12
    ADD CONSTRAINT list_versions_pkey PRIMARY KEY (org_id, list);

--
-- Name: memberships memberships_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.memberships
    ADD CONSTRAINT memberships_pkey PRIMARY KEY (org_id, user_id);

--
-- Name: openbook_schema_migrations openbook_schema_migrations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.openbook_schema_migrations
    ADD CONSTRAINT openbook_schema_migrations_pkey PRIMARY KEY (version);

--
-- Name: organizations organizations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.organizations
    ADD CONSTRAINT organizations_pkey PRIMARY KEY (id);

--
-- Name: services services_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.services
    ADD CONSTRAINT services_pkey PRIMARY KEY (org_id, id);

--
-- Name: staff staff_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.staff
    ADD CONSTRAINT staff_pkey PRIMARY KEY (org_id, id);

--
-- Name: users users_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_pkey PRIMARY KEY (id);

--
-- Name: api_keys_id_key; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX api_keys_id_key ON public.api_keys USING btree (id);

--
-- Name: api_keys_key_hash_key; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX api_keys_key_hash_key ON public.api_keys USING btree (key_hash);

--
-- Name: appointments_active_count_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX appointments_active_count_idx ON public.appointments USING btree (org_id) WHERE is_active;

--
-- Name: appointments_active_customer_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX appointments_active_customer_idx ON public.appointments USING btree (org_id, customer_id, start_at DESC, id DESC) WHERE is_active;

--
-- Name: appointments_active_list_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX appointments_active_list_idx ON public.appointments USING btree (org_id, start_at DESC, id DESC) WHERE is_active;

--
-- Name: appointments_active_staff_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX appointments_active_staff_idx ON public.appointments USING btree (org_id, staff_id, start_at DESC, id DESC) WHERE is_active;

--
-- Name: appointments_active_staff_status_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX appointments_active_staff_status_idx ON public.appointments USING btree (org_id, staff_id, status, start_at DESC, id DESC) WHERE is_active;

--
-- Name: appointments_active_status_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX appointments_active_status_idx ON public.appointments USING btree (org_id, status, start_at DESC, id DESC) WHERE is_active;

--
-- Name: customers_active_count_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX customers_active_count_idx ON public.customers USING btree (org_id) WHERE is_active;

--
-- Name: customers_active_list_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX customers_active_list_idx ON public.customers USING btree (org_id, created_at DESC, id DESC) WHERE is_active;

--
-- Name: users_email_key; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX users_email_key ON public.users USING btree (lower(email));

--
-- Name: appointments list_changes_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER list_changes_delete AFTER DELETE ON public.appointments REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION public.list_changes_of_appointments();

--
-- Name: customers list_changes_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER list_changes_delete AFTER DELETE ON public.customers REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION public.list_changes_of_customers();

--
-- Name: appointments list_changes_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER list_changes_insert AFTER INSERT ON public.appointments REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.list_changes_of_appointments();

--
-- Name: customers list_changes_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER list_changes_insert AFTER INSERT ON public.customers REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.list_changes_of_customers();

--
-- Name: appointments list_changes_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER list_changes_truncate AFTER TRUNCATE ON public.appointments FOR EACH STATEMENT EXECUTE FUNCTION public.list_truncate();

--
-- Name: customers list_changes_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER list_changes_truncate AFTER TRUNCATE ON public.customers FOR EACH STATEMENT EXECUTE FUNCTION public.list_truncate();

--
-- Name: appointments list_changes_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER list_changes_update AFTER UPDATE ON public.appointments REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.list_changes_of_appointments();

--
-- Name: customers list_changes_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER list_changes_update AFTER UPDATE ON public.customers REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.list_changes_of_customers();

--
-- Name: list_changes list_fold_at_commit; Type: TRIGGER; Schema: public; Owner: -
--

CREATE CONSTRAINT TRIGGER list_fold_at_commit AFTER INSERT ON public.list_changes DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (new.fold) EXECUTE FUNCTION public.list_fold_at_commit();

--
-- Name: api_keys api_keys_created_by_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_created_by_fkey FOREIGN KEY (created_by) REFERENCES public.users(id);

--
-- Name: api_keys api_keys_org_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_org_id_fkey FOREIGN KEY (org_id) REFERENCES public.organizations(id);

--
-- Name: appointments appointments_org_id_customer_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.appointments
    ADD CONSTRAINT appointments_org_id_customer_id_fkey FOREIGN KEY (org_id, customer_id) REFERENCES public.customers(org_id, id);

--
-- Name: appointments appointments_org_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.appointments
    ADD CONSTRAINT appointments_org_id_fkey FOREIGN KEY (org_id) REFERENCES public.organizations(id);

--
-- Name: appointments appointments_org_id_service_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.appointments
    ADD CONSTRAINT appointments_org_id_service_id_fkey FOREIGN KEY (org_id, service_id) REFERENCES public.services(org_id, id);

--
-- Name: appointments appointments_org_id_staff_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.appointments
    ADD CONSTRAINT appointments_org_id_staff_id_fkey FOREIGN KEY (org_id, staff_id) REFERENCES public.staff(org_id, id);

--
-- Name: customers customers_org_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.customers
    ADD CONSTRAINT customers_org_id_fkey FOREIGN KEY (org_id) REFERENCES public.organizations(id);

--
-- Name: customers customers_org_id_preferred_staff_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.customers
    ADD CONSTRAINT customers_org_id_preferred_staff_id_fkey FOREIGN KEY (org_id, preferred_staff_id) REFERENCES public.staff(org_id, id);

--
-- Name: memberships memberships_org_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.memberships
    ADD CONSTRAINT memberships_org_id_fkey FOREIGN KEY (org_id) REFERENCES public.organizations(id);

--
-- Name: memberships memberships_user_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.memberships
    ADD CONSTRAINT memberships_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id);

--
-- Name: services services_org_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.services
    ADD CONSTRAINT services_org_id_fkey FOREIGN KEY (org_id) REFERENCES public.organizations(id);

--
-- Name: staff staff_org_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.staff
    ADD CONSTRAINT staff_org_id_fkey FOREIGN KEY (org_id) REFERENCES public.organizations(id);

--
-- Name: api_keys; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.api_keys ENABLE ROW LEVEL SECURITY;

--
-- Name: appointment_counts_12; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.appointment_counts_12 ENABLE ROW LEVEL SECURITY;

--
-- Name: appointments; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.appointments ENABLE ROW LEVEL SECURITY;

--
-- Name: buckets; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.buckets ENABLE ROW LEVEL SECURITY;

--
-- Name: customer_counts_12; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.customer_counts_12 ENABLE ROW LEVEL SECURITY;

--
-- Name: customers; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.customers ENABLE ROW LEVEL SECURITY;

--
-- Name: api_keys key_lookup; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY key_lookup ON public.api_keys FOR SELECT USING ((key_hash = current_setting('openbook.key_hash'::text, true)));

--
-- Name: list_buckets_12; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.list_buckets_12 ENABLE ROW LEVEL SECURITY;

--
-- Name: list_changes; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.list_changes ENABLE ROW LEVEL SECURITY;

--
-- Name: list_folds; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.list_folds ENABLE ROW LEVEL SECURITY;

--
-- Name: list_versions_12; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.list_versions_12 ENABLE ROW LEVEL SECURITY;

--
-- Name: memberships; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.memberships ENABLE ROW LEVEL SECURITY;

--
-- Name: organizations; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.organizations ENABLE ROW LEVEL SECURITY;

--
-- Name: api_keys owner_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY owner_access ON public.api_keys TO root USING (true) WITH CHECK (true);

--
-- Name: appointment_counts_12 owner_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY owner_access ON public.appointment_counts_12 TO root USING (true) WITH CHECK (true);

--
-- Name: appointments owner_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY owner_access ON public.appointments TO root USING (true) WITH CHECK (true);

--
-- Name: buckets owner_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY owner_access ON public.buckets TO root USING (true) WITH CHECK (true);

--
-- Name: customer_counts_12 owner_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY owner_access ON public.customer_counts_12 TO root USING (true) WITH CHECK (true);

--
-- Name: customers owner_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY owner_access ON public.customers TO root USING (true) WITH CHECK (true);

--
-- Name: list_buckets_12 owner_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY owner_access ON public.list_buckets_12 TO root USING (true) WITH CHECK (true);

--
-- Name: list_changes owner_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY owner_access ON public.list_changes TO root USING (true) WITH CHECK (true);

--
-- Name: list_folds owner_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY owner_access ON public.list_folds TO root USING (true) WITH CHECK (true);

--
-- Name: list_versions_12 owner_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY owner_access ON public.list_versions_12 TO root USING (true) WITH CHECK (true);

--
-- Name: memberships owner_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY owner_access ON public.memberships TO root USING (true) WITH CHECK (true);

--
-- Name: organizations owner_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY owner_access ON public.organizations TO root USING (true) WITH CHECK (true);

--
-- Name: services owner_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY owner_access ON public.services TO root USING (true) WITH CHECK (true);

--
-- Name: staff owner_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY owner_access ON public.staff TO root USING (true) WITH CHECK (true);

--
-- Name: services; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.services ENABLE ROW LEVEL SECURITY;

--
-- Name: staff; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.staff ENABLE ROW LEVEL SECURITY;

--
-- Name: api_keys tenant_isolation; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY tenant_isolation ON public.api_keys USING ((org_id = current_setting('openbook.org_id'::text, true)));

--
-- Name: appointment_counts_12 tenant_isolation; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY tenant_isolation ON public.appointment_counts_12 USING ((org_id = current_setting('openbook.org_id'::text, true)));

--
-- Name: appointments tenant_isolation; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY tenant_isolation ON public.appointments USING ((org_id = current_setting('openbook.org_id'::text, true)));

--
-- Name: buckets tenant_isolation; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY tenant_isolation ON public.buckets USING ((org_id = current_setting('openbook.org_id'::text, true)));

--
-- Name: customer_counts_12 tenant_isolation; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY tenant_isolation ON public.customer_counts_12 USING ((org_id = current_setting('openbook.org_id'::text, true)));

--
-- Name: customers tenant_isolation; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY tenant_isolation ON public.customers USING ((org_id = current_setting('openbook.org_id'::text, true)));

--
-- Name: list_buckets_12 tenant_isolation; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY tenant_isolation ON public.list_buckets_12 USING ((org_id = current_setting('openbook.org_id'::text, true)));

--
-- Name: list_changes tenant_isolation; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY tenant_isolation ON public.list_changes USING ((org_id = current_setting('openbook.org_id'::text, true)));

--
-- Name: list_folds tenant_isolation; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY tenant_isolation ON public.list_folds USING ((org_id = current_setting('openbook.org_id'::text, true)));

--
-- Name: list_versions_12 tenant_isolation; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY tenant_isolation ON public.list_versions_12 USING ((org_id = current_setting('openbook.org_id'::text, true)));

--
-- Name: memberships tenant_isolation; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY tenant_isolation ON public.memberships USING ((org_id = current_setting('openbook.org_id'::text, true)));

--
-- Name: organizations tenant_isolation; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY tenant_isolation ON public.organizations USING ((id = current_setting('openbook.org_id'::text, true)));

--
-- Name: services tenant_isolation; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY tenant_isolation ON public.services USING ((org_id = current_setting('openbook.org_id'::text, true)));

--
-- Name: staff tenant_isolation; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY tenant_isolation ON public.staff USING ((org_id = current_setting('openbook.org_id'::text, true)));

--
-- Name: appointments writer_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY writer_access ON public.appointments TO openbook_writer USING (true) WITH CHECK (true);

--
-- Name: customers writer_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY writer_access ON public.customers TO openbook_writer USING (true) WITH CHECK (true);

--
-- Name: list_changes writer_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY writer_access ON public.list_changes FOR INSERT TO openbook_writer WITH CHECK (true);

--
-- Name: organizations writer_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY writer_access ON public.organizations FOR SELECT TO openbook_writer USING (true);

--
-- Name: services writer_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY writer_access ON public.services TO openbook_writer USING (true) WITH CHECK (true);

--
-- Name: staff writer_access; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY writer_access ON public.staff TO openbook_writer USING (true) WITH CHECK (true);

--
-- Name: SCHEMA public; Type: ACL; Schema: -; Owner: -
--

GRANT USAGE ON SCHEMA public TO openbook_reader;

--
-- Name: FUNCTION list_apply(p_org text, p_list text, p_at timestamp with time zone[], p_id text[], p_attrs jsonb[], p_delta integer[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.list_apply(p_org text, p_list text, p_at timestamp with time zone[], p_id text[], p_attrs jsonb[], p_delta integer[]) FROM PUBLIC;

--
-- Name: FUNCTION list_attrs_sql(p_list text, p_alias text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.list_attrs_sql(p_list text, p_alias text) FROM PUBLIC;

--
-- Name: FUNCTION list_build(p_org text, p_list text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.list_build(p_org text, p_list text) FROM PUBLIC;

--
-- Name: FUNCTION list_changes_of_appointments(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.list_changes_of_appointments() FROM PUBLIC;

--
-- Name: FUNCTION list_changes_of_customers(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.list_changes_of_customers() FROM PUBLIC;

--
-- Name: FUNCTION list_filter_sets(attrs jsonb); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.list_filter_sets(attrs jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION public.list_filter_sets(attrs jsonb) TO openbook_reader;

--
-- Name: FUNCTION list_fold(p_org text, p_list text, p_wait boolean, p_limit integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.list_fold(p_org text, p_list text, p_wait boolean, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION public.list_fold(p_org text, p_list text, p_wait boolean, p_limit integer) TO openbook_writer;

--
-- Name: FUNCTION list_fold_all(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.list_fold_all() FROM PUBLIC;

--
-- Name: FUNCTION list_fold_entries(p_org text, p_list text, p_at timestamp with time zone[], p_id text[], p_attrs jsonb[], p_delta integer[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.list_fold_entries(p_org text, p_list text, p_at timestamp with time zone[], p_id text[], p_attrs jsonb[], p_delta integer[]) FROM PUBLIC;

--
-- Name: FUNCTION list_fold_pending(OUT folded integer, OUT most_pending bigint, OUT all_pending bigint, OUT failed integer, OUT failure text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.list_fold_pending(OUT folded integer, OUT most_pending bigint, OUT all_pending bigint, OUT failed integer, OUT failure text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.list_fold_pending(OUT folded integer, OUT most_pending bigint, OUT all_pending bigint, OUT failed integer, OUT failure text) TO openbook_reader;

--
-- Name: FUNCTION list_index(p_list text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.list_index(p_list text) FROM PUBLIC;

--
-- Name: FUNCTION list_install(p_list text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.list_install(p_list text) FROM PUBLIC;

--
-- Name: FUNCTION list_key_after(p_org text, p_list text, p_filters jsonb, p_at timestamp with time zone, p_id text, p_skip integer, p_hi_at timestamp with time zone, p_hi_id text, OUT key_at timestamp with time zone, OUT key_id text, OUT pending integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.list_key_after(p_org text, p_list text, p_filters jsonb, p_at timestamp with time zone, p_id text, p_skip integer, p_hi_at timestamp with time zone, p_hi_id text, OUT key_at timestamp with time zone, OUT key_id text, OUT pending integer) FROM PUBLIC;

--
-- Name: FUNCTION list_merge(p_org text, p_list text, p_filters text, p_lo_at timestamp with time zone, p_lo_id text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.list_merge(p_org text, p_list text, p_filters text, p_lo_at timestamp with time zone, p_lo_id text) FROM PUBLIC;

--
-- Name: FUNCTION list_rebuild(p_list text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.list_rebuild(p_list text) FROM PUBLIC;

--
-- Name: FUNCTION list_split(p_org text, p_list text, p_filters text, p_lo_at timestamp with time zone, p_lo_id text, p_n integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.list_split(p_org text, p_list text, p_filters text, p_lo_at timestamp with time zone, p_lo_id text, p_n integer) FROM PUBLIC;

--
-- Name: FUNCTION openbook_authenticate(p_key_hash text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.openbook_authenticate(p_key_hash text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.openbook_authenticate(p_key_hash text) TO openbook_reader;

--
-- Name: FUNCTION openbook_key_lookup(p_key_hash text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.openbook_key_lookup(p_key_hash text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.openbook_key_lookup(p_key_hash text) TO openbook_reader;

--
-- Name: FUNCTION openbook_prepare(name text, statement text, recheck boolean); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.openbook_prepare(name text, statement text, recheck boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION public.openbook_prepare(name text, statement text, recheck boolean) TO openbook_reader;

--
-- Name: FUNCTION openbook_schema_version(OUT version smallint, OUT compatible_from smallint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.openbook_schema_version(OUT version smallint, OUT compatible_from smallint) FROM PUBLIC;
GRANT ALL ON FUNCTION public.openbook_schema_version(OUT version smallint, OUT compatible_from smallint) TO openbook_reader;

--
-- Name: TABLE api_keys; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.api_keys TO openbook_reader;

--
-- Name: COLUMN api_keys.last_used_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(last_used_at) ON TABLE public.api_keys TO openbook_reader;

--
-- Name: TABLE appointment_counts_12; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.appointment_counts_12 TO openbook_reader;

--
-- Name: TABLE buckets; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.buckets TO openbook_reader;

--
-- Name: TABLE list_changes; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.list_changes TO openbook_reader;
GRANT INSERT ON TABLE public.list_changes TO openbook_writer;

--
-- Name: TABLE appointment_counts; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.appointment_counts TO openbook_reader;

--
-- Name: TABLE appointment_day_counts; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.appointment_day_counts TO openbook_reader;

--
-- Name: TABLE appointments; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.appointments TO openbook_reader;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.appointments TO openbook_writer;

--
-- Name: TABLE customer_counts_12; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.customer_counts_12 TO openbook_reader;

--
-- Name: TABLE customer_counts; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.customer_counts TO openbook_reader;

--
-- Name: TABLE customer_day_counts; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.customer_day_counts TO openbook_reader;

--
-- Name: TABLE customers; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.customers TO openbook_reader;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.customers TO openbook_writer;

--
-- Name: TABLE list_buckets_12; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.list_buckets_12 TO openbook_reader;

--
-- Name: TABLE list_buckets; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.list_buckets TO openbook_reader;

--
-- Name: TABLE list_folds; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.list_folds TO openbook_reader;

--
-- Name: SEQUENCE list_turns; Type: ACL; Schema: public; Owner: -
--

GRANT USAGE ON SEQUENCE public.list_turns TO openbook_writer;

--
-- Name: TABLE list_versions_12; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.list_versions_12 TO openbook_reader;

--
-- Name: TABLE list_versions; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.list_versions TO openbook_reader;

--
-- Name: TABLE organizations; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.organizations TO openbook_writer;

--
-- Name: TABLE services; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.services TO openbook_writer;

--
-- Name: TABLE staff; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.staff TO openbook_writer;

--
-- PostgreSQL database dump complete
--

--
-- PostgreSQL database dump
--

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Data for Name: list_definitions; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.list_definitions VALUES ('customers', 'created_at', '{}');
INSERT INTO public.list_definitions VALUES ('appointments', 'start_at', '{status,staff_id}');

--
-- PostgreSQL database dump complete
--
