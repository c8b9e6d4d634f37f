-- compatible-from: 12
--
-- The lists' counts, buckets and versions leave the writer's transaction (docs/design/lists.md).
--
-- Up to 012, every write of a customer or an appointment updated its organization's counts row,
-- its version row and its buckets under an organization-wide lock, in the writing transaction:
-- writers of one organization waited for each other, a one-row write planned dynamic statements,
-- and two ORM transactions could deadlock on the shared rows. From here on a write only appends
-- its entries' changes to `list_changes` (one row per entry that changed, no lock on anything
-- shared); readers add the pending changes to the folded counts, from the same snapshot; and a
-- fold moves the pending changes into the buckets at the commit of about one write in 512, under
-- a lock it only tries to take (`list_fold`).
--
-- Release 12 still serves this schema: the tables it read (list_buckets, list_versions,
-- customer_counts, appointment_counts) become views that compute the same values, pending
-- changes included. The day counts (003, 005), which no request reads, are dropped; empty views
-- keep their names for release 12's privilege check.

LOCK TABLE customers, appointments IN SHARE ROW EXCLUSIVE MODE;

-- What lists exist, and from what: a list is a table's active rows in the order of `at_column`
-- then id, and one list more for every combination of values of `filter_columns` (the `many`
-- filters of src/schemas/filters.ts). A new `many` filter adds its column here and calls
-- list_install and list_rebuild (see src/store/migrations/README.md).
CREATE TABLE list_definitions (
  list            text PRIMARY KEY CHECK (list IN ('customers', 'appointments')),
  at_column       text NOT NULL,
  filter_columns  text[] NOT NULL
);
INSERT INTO list_definitions (list, at_column, filter_columns) VALUES
  ('customers', 'created_at', '{}'),
  ('appointments', 'start_at', '{status,staff_id}');

-- The folded counts: a list of one organization and one set of filter values (`filters`, as
-- {"column": "value", …}; {} for the whole list) cut into buckets by position. A bucket counts
-- the folded entries whose key (at, id) is at or above its bound and below the next bucket's;
-- the lowest bound is ('-infinity', ''). A fold keeps every bucket under 2,000 folded entries.
CREATE TABLE buckets (
  org_id   text NOT NULL,
  list     text NOT NULL,
  filters  jsonb NOT NULL,
  lo_at    timestamptz NOT NULL,
  lo_id    text NOT NULL,
  n        integer NOT NULL CHECK (n >= 0),
  PRIMARY KEY (org_id, list, filters, lo_at, lo_id) INCLUDE (n)
);

-- The changes not folded yet: +1 for an entry that appeared, -1 for one that went, 0 for an
-- entry whose row changed in place (it changes the list's version only). `attrs` holds the
-- entry's values of the filter columns (NULLs left out): the entry is in the list of every
-- subset of them.
CREATE TABLE list_changes (
  seq     bigint GENERATED ALWAYS AS IDENTITY,
  org_id  text NOT NULL,
  list    text NOT NULL,
  at      timestamptz NOT NULL,
  id      text NOT NULL,
  attrs   jsonb NOT NULL,
  delta   smallint NOT NULL CHECK (delta BETWEEN -1 AND 1),
  -- In key order: the readers and the splits sum the changes of a range of keys.
  PRIMARY KEY (org_id, list, at, id, seq)
);

-- The number of changes folded per organization and list. A list's version (the pages' ETag) is
-- this plus the number of its pending changes: every committed write adds at least one, a fold
-- moves them from one term to the other in one transaction.
CREATE TABLE list_folds (
  org_id   text NOT NULL,
  list     text NOT NULL,
  changes  bigint NOT NULL,
  PRIMARY KEY (org_id, list)
);

-- Every subset of an entry's filter values: the lists it is an entry of. (PL/pgSQL, so that the
-- planner takes its ROWS; the folds call it once per distinct set of values, not per change.)
CREATE FUNCTION list_filter_sets(attrs jsonb) RETURNS SETOF jsonb
LANGUAGE plpgsql IMMUTABLE ROWS 4 SET search_path = pg_catalog, public AS $$
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

-- SQL of a row's filter values under `alias`, from the list's definition.
CREATE FUNCTION list_attrs_sql(p_list text, p_alias text) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, public AS $$
  SELECT CASE WHEN cardinality(d.filter_columns) = 0 THEN '''{}''::jsonb'
    ELSE 'jsonb_strip_nulls(jsonb_build_object(' || (
      SELECT string_agg(format('%L, %I.%I', c, p_alias, c), ', ') FROM unnest(d.filter_columns) c) || '))'
    END
  FROM list_definitions d WHERE d.list = p_list
$$;

-- The key `p_skip` entries above (p_at, p_id) in a list (ascending), below the next bucket's
-- bound (p_hi_at, p_hi_id; NULL for none), and the pending changes between the two keys: both read
-- in one statement, from one snapshot.
CREATE FUNCTION list_key_after(p_org text, p_list text, p_filters jsonb, p_at timestamptz, p_id text,
  p_skip integer, p_hi_at timestamptz, p_hi_id text, OUT key_at timestamptz, OUT key_id text, OUT pending integer)
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
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
  -- A load alone on its store (the embedded one: one session) has no pending changes beside it
  -- to count: only the rows it folded, dead to it and many.
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
END $$;

-- Splits the bucket at (p_lo_at, p_lo_id), holding p_n folded entries, into buckets of 1,000 (the
-- last 500 to 1,499). A new bound is the key of an entry; the folded entries below it are the
-- entries stepped over less the pending changes among them.
CREATE FUNCTION list_split(p_org text, p_list text, p_filters jsonb, p_lo_at timestamptz, p_lo_id text, p_n integer)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
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
    SELECT * INTO v_next FROM list_key_after(p_org, p_list, p_filters, v_at, v_id, 1000, v_hi.lo_at, v_hi.lo_id);
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

-- Merges the bucket at (p_lo_at, p_lo_id) into its lower neighbour when both fit in 1,000
-- folded entries; the lowest bucket stays.
CREATE FUNCTION list_merge(p_org text, p_list text, p_filters jsonb, p_lo_at timestamptz, p_lo_id text)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
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

-- Adds entry changes (parallel arrays) to the buckets of every list they are entries of, then
-- splits the buckets that passed 2,000 and merges those that shrank.
CREATE FUNCTION list_apply(p_org text, p_list text, p_at timestamptz[], p_id text[], p_attrs jsonb[],
  p_delta integer[])
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
  r record;
BEGIN
  -- Each distinct set of filter values is expanded into its lists once.
  INSERT INTO buckets (org_id, list, filters, lo_at, lo_id, n)
  SELECT DISTINCT p_org, p_list, f.filters, '-infinity'::timestamptz, '', 0
  FROM (SELECT DISTINCT a.attrs FROM unnest(p_attrs) a(attrs)) d CROSS JOIN LATERAL list_filter_sets(d.attrs) f(filters)
  ON CONFLICT DO NOTHING;
  FOR r IN
    WITH s AS MATERIALIZED (
      SELECT d.attrs, f.filters FROM (SELECT DISTINCT a.attrs FROM unnest(p_attrs) a(attrs)) d
      CROSS JOIN LATERAL list_filter_sets(d.attrs) f(filters))
    UPDATE buckets b SET n = b.n + a.n
    FROM (SELECT s.filters, f.lo_at, f.lo_id, sum(e.delta)::int AS n
          FROM unnest(p_at, p_id, p_attrs, p_delta) e(at, id, attrs, delta)
          JOIN s ON s.attrs = e.attrs
          CROSS JOIN LATERAL (
            SELECT c.lo_at, c.lo_id FROM buckets c
            WHERE c.org_id = p_org AND c.list = p_list AND c.filters = s.filters AND (c.lo_at, c.lo_id) <= (e.at, e.id)
            ORDER BY c.lo_at DESC, c.lo_id DESC LIMIT 1) f
          GROUP BY 1, 2, 3) a
    WHERE b.org_id = p_org AND b.list = p_list AND b.filters = a.filters AND b.lo_at = a.lo_at AND b.lo_id = a.lo_id
      AND a.n <> 0
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

-- Folds one organization's pending changes of a list into its buckets and its version. Only one
-- fold of a list runs at a time. A writer's fold never waits: when another holds the list, it
-- leaves the changes to the next, and it folds at most 5,000 changes. An import's
-- fold (`p_wait`), at its end, waits its turn and folds every change. It runs as the schema owner,
-- for any writer (openbook_writer may only append changes), and only in READ COMMITTED, where
-- each statement sees the folds committed before it.
CREATE FUNCTION list_fold(p_org text, p_list text, p_wait boolean DEFAULT false) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public SET jit = off AS $$
DECLARE
  v_changes bigint;
  v_at timestamptz[];
  v_id text[];
  v_attrs jsonb[];
  v_delta integer[];
  v_last_at timestamptz;
  v_last_id text;
  v_last_seq bigint;
BEGIN
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RETURN;
  END IF;
  IF p_wait THEN
    PERFORM pg_advisory_xact_lock(hashtext('openbook.list_fold'), hashtext(p_org || '/' || p_list));
  ELSIF NOT pg_try_advisory_xact_lock(hashtext('openbook.list_fold'), hashtext(p_org || '/' || p_list)) THEN
    RETURN;
  END IF;
  -- A writer's fold takes the first 5,000 changes in key order: a range of the index.
  IF NOT p_wait THEN
    SELECT x.at, x.id, x.seq INTO v_last_at, v_last_id, v_last_seq FROM list_changes x
    WHERE x.org_id = p_org AND x.list = p_list ORDER BY x.at, x.id, x.seq OFFSET 4999 LIMIT 1;
  END IF;
  WITH gone AS (
    DELETE FROM list_changes c WHERE c.org_id = p_org AND c.list = p_list
      AND (v_last_seq IS NULL OR (c.at, c.id, c.seq) <= (v_last_at, v_last_id, v_last_seq))
    RETURNING c.at, c.id, c.attrs, c.delta)
  SELECT count(*), array_agg(g.at) FILTER (WHERE g.delta <> 0), array_agg(g.id) FILTER (WHERE g.delta <> 0),
         array_agg(g.attrs) FILTER (WHERE g.delta <> 0), array_agg(g.delta::int) FILTER (WHERE g.delta <> 0)
  INTO v_changes, v_at, v_id, v_attrs, v_delta
  FROM gone g;
  IF v_changes = 0 THEN
    RETURN;
  END IF;
  INSERT INTO list_folds AS f (org_id, list, changes) VALUES (p_org, p_list, v_changes)
  ON CONFLICT (org_id, list) DO UPDATE SET changes = f.changes + excluded.changes;
  IF v_delta IS NOT NULL THEN
    PERFORM list_apply(p_org, p_list, v_at, v_id, v_attrs, v_delta);
  END IF;
END $$;

-- Counts one organization's list from its rows, in one ordered pass, into buckets of 1,000: for
-- a list without buckets (one that a load starts), where adding its entries one by one would step
-- along the index for every split. Its pending changes are dropped into the version in the same
-- statement, from the same snapshot, as the rows are counted: a writer's change is either counted
-- in a row here or left pending, never both; the version stays what it was. Holds the list's
-- fold until the transaction ends.
CREATE FUNCTION list_build(p_org text, p_list text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public SET jit = off AS $$
DECLARE
  d list_definitions;
BEGIN
  SELECT * INTO STRICT d FROM list_definitions WHERE list = p_list;
  PERFORM pg_advisory_xact_lock(hashtext('openbook.list_fold'), hashtext(p_org || '/' || p_list));
  DELETE FROM buckets WHERE org_id = p_org AND list = p_list;
  EXECUTE format(
    'WITH gone AS (DELETE FROM list_changes c WHERE c.org_id = $1 AND c.list = $2 RETURNING 1),
     r AS MATERIALIZED (SELECT r.%1$I AS at, r.id, %3$s AS attrs FROM %2$I r WHERE r.org_id = $1 AND r.is_active),
     -- Each distinct set of filter values expanded once; its lists numbered, to sort on.
     s AS MATERIALIZED (SELECT d.attrs, f.filters, dense_rank() OVER (ORDER BY f.filters) AS list_no
                        FROM (SELECT DISTINCT r.attrs FROM r) d CROSS JOIN LATERAL list_filter_sets(d.attrs) f(filters)),
     e AS (SELECT s.filters, r.at, r.id, row_number() OVER w - 1 AS k, count(*) OVER (PARTITION BY s.list_no) AS total
           FROM r JOIN s ON s.attrs = r.attrs
           WINDOW w AS (PARTITION BY s.list_no ORDER BY r.at, r.id)),
     built AS (
       INSERT INTO buckets (org_id, list, filters, lo_at, lo_id, n)
       SELECT $1, $2, e.filters, CASE WHEN e.k = 0 THEN ''-infinity'' ELSE e.at END,
              CASE WHEN e.k = 0 THEN '''' ELSE e.id END, least(1000, e.total - e.k)
       FROM e WHERE e.k %% 1000 = 0)
     INSERT INTO list_folds AS f (org_id, list, changes)
     SELECT $1, $2, count(*) FROM gone HAVING count(*) > 0
     ON CONFLICT (org_id, list) DO UPDATE SET changes = f.changes + excluded.changes',
    d.at_column, p_list, list_attrs_sql(p_list, 'r'))
  USING p_org, p_list;
END $$;

-- A bulk load's entry changes of one organization (`openbook.fold` = 'now', set by openbook's
-- import for its transaction), applied to the buckets at once instead of appended: the load
-- waits its turn for the list's fold, and holds it until it commits. One change of the version a
-- statement. Only the owner may call it: a writer that sets the setting is refused.
CREATE FUNCTION list_fold_entries(p_org text, p_list text, p_at timestamptz[], p_id text[], p_attrs jsonb[],
  p_delta integer[])
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public SET jit = off AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('openbook.list_fold'), hashtext(p_org || '/' || p_list));
  INSERT INTO list_folds AS f (org_id, list, changes) VALUES (p_org, p_list, 1)
  ON CONFLICT (org_id, list) DO UPDATE SET changes = f.changes + 1;
  -- A list without buckets is left to list_build, which list_fold_all calls before the load commits.
  IF p_delta IS NOT NULL AND EXISTS (SELECT 1 FROM buckets b WHERE b.org_id = p_org AND b.list = p_list) THEN
    PERFORM list_apply(p_org, p_list, p_at, p_id, p_attrs, p_delta);
  END IF;
END $$;

-- Every organization's lists brought up to date: each list without buckets that has rows or
-- changes is built (list_build), then the pending changes of every list are folded. What an
-- import runs at its end (a load's lists are built here), and the embedded server in its idle time.
CREATE FUNCTION list_fold_all() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
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
  PERFORM list_fold(p.org_id, p.list, true)
  FROM (SELECT DISTINCT org_id, list FROM list_changes ORDER BY 1, 2) p;
END $$;

-- At the commit of about one write in 512 (by the change's number), the change's list is folded:
-- the more changes a fold takes, the more of them share a bucket row.
-- Deferred, so that the fold's lock is held only while the transaction commits, after the
-- writer's last statement: it never waits on a writer, and no writer waits on it.
CREATE FUNCTION list_fold_at_commit() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  PERFORM list_fold(NEW.org_id, NEW.list);
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER list_fold_at_commit AFTER INSERT ON list_changes
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.seq % 512 = 0)
  EXECUTE FUNCTION list_fold_at_commit();

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
  list_split(text, text, jsonb, timestamptz, text, integer), list_merge(text, text, jsonb, timestamptz, text),
  list_apply(text, text, timestamptz[], text[], jsonb[], integer[]), list_fold(text, text, boolean), list_fold_all(),
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
  b.list || coalesce(':' || (b.filters->>'status'), '') || coalesce(':staff:' || (b.filters->>'staff_id'), '') AS list,
  b.lo_at, b.lo_id,
  b.n + (SELECT coalesce(sum(p.delta), 0) FROM list_changes p
         WHERE p.org_id = b.org_id AND p.list = b.list AND p.delta <> 0 AND p.attrs @> b.filters
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
  AND NOT EXISTS (SELECT 1 FROM buckets x WHERE x.org_id = p.org_id AND x.list = p.list AND x.filters = s.filters)
GROUP BY p.org_id, p.list, s.filters;

GRANT SELECT ON list_versions, customer_counts, appointment_counts, list_buckets TO openbook_reader;
-- The views call list_filter_sets as the reader.
GRANT EXECUTE ON FUNCTION list_filter_sets(jsonb) TO openbook_reader;

-- The salon software's role: writes customers and appointments of any organization, appends
-- their changes through the triggers, folds them through list_fold; reads nothing else.
GRANT SELECT, INSERT, UPDATE, DELETE ON customers, appointments TO openbook_writer;
GRANT INSERT ON list_changes TO openbook_writer;
GRANT EXECUTE ON FUNCTION list_fold(text, text, boolean) TO openbook_writer;
CREATE POLICY writer_access ON customers TO openbook_writer USING (true) WITH CHECK (true);
CREATE POLICY writer_access ON appointments TO openbook_writer USING (true) WITH CHECK (true);
CREATE POLICY writer_access ON list_changes FOR INSERT TO openbook_writer WITH CHECK (true);
