-- compatible-from: 12
--
-- The lists' counts, buckets and versions leave the writer's transaction (docs/design/lists.md).
--
-- Up to 012, every write updated its organization's counts, version and buckets under an
-- organization-wide lock: writers of one organization waited for each other, and two ORM
-- transactions could deadlock on the shared rows. From here on a write only appends its entries'
-- changes to `list_changes` (no lock on anything shared); readers add the pending changes to the
-- folded counts, from the same snapshot; and a fold moves them into the buckets at the commit of
-- about one write in 512, under a lock it only tries to take (`list_fold`).
--
-- Here the lists' tables and their folds; 014, in the same transaction, installs the writers'
-- triggers, counts the buckets, and turns the tables release 12 read into views that compute the
-- same values, so that release 12 still serves the schema.

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

-- The folded counts: a list of one organization and one set of filter values (`filters`, a jsonb
-- {"column": "value", …} as text; {} for the whole list) cut into buckets by position. A bucket
-- counts the folded entries whose key (at, id) is at or above its bound and below the next one's;
-- the lowest bound is ('-infinity', ''). A fold keeps every bucket under 2,000 folded entries.
-- Text, because its equality is leakproof: under row-level security a reader's index seek may use
-- it, where jsonb's would be checked on every bucket of the organization.
CREATE TABLE buckets (
  org_id   text NOT NULL,
  list     text NOT NULL,
  filters  text NOT NULL,
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

-- Every subset of an entry's filter values: the lists it is an entry of (PL/pgSQL, so that the
-- planner takes its ROWS; called once per distinct set of values, not per change).
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
END $$;

-- Splits the bucket at (p_lo_at, p_lo_id), holding p_n folded entries, into buckets of 1,000 (the
-- last 500 to 1,499). A new bound is the key of an entry; the folded entries below it are the
-- entries stepped over less the pending changes among them.
CREATE FUNCTION list_split(p_org text, p_list text, p_filters text, p_lo_at timestamptz, p_lo_id text, p_n integer)
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

-- Merges the bucket at (p_lo_at, p_lo_id) into its lower neighbour when both fit in 1,000 entries.
CREATE FUNCTION list_merge(p_org text, p_list text, p_filters text, p_lo_at timestamptz, p_lo_id text)
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

-- Adds entry changes (parallel arrays) to the buckets of every list they are entries of, found in
-- one sorted pass beside the buckets' bounds; splits those past 2,000, merges those that shrank.
CREATE FUNCTION list_apply(p_org text, p_list text, p_at timestamptz[], p_id text[], p_attrs jsonb[],
  p_delta integer[])
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
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

-- Folds one organization's pending changes of a list into its buckets and its version: at most
-- `p_limit` of them (the first in key order: a range of the index), or all of them (NULL). One
-- fold of a list runs at a time: a writer's fold never waits, and when another holds the list it
-- leaves the changes to the next (false); an import's (`p_wait`) waits its turn. It runs as the
-- schema owner, for any writer (openbook_writer may only append changes), and only in READ
-- COMMITTED, where each statement sees the folds committed before it. True when it folded.
CREATE FUNCTION list_fold(p_org text, p_list text, p_wait boolean DEFAULT false, p_limit integer DEFAULT 5000)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public SET jit = off AS $$
DECLARE
  v_size bigint;
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
    RETURNING c.at, c.id, c.attrs, c.delta)
  SELECT count(*), array_agg(g.at) FILTER (WHERE g.delta <> 0), array_agg(g.id) FILTER (WHERE g.delta <> 0),
         array_agg(g.attrs) FILTER (WHERE g.delta <> 0), array_agg(g.delta::int) FILTER (WHERE g.delta <> 0)
  INTO v_changes, v_at, v_id, v_attrs, v_delta
  FROM gone g;
  IF v_changes = 0 THEN
    RETURN true;
  END IF;
  INSERT INTO list_folds AS f (org_id, list, changes) VALUES (p_org, p_list, v_changes)
  ON CONFLICT (org_id, list) DO UPDATE SET changes = f.changes + excluded.changes;
  IF v_delta IS NOT NULL THEN
    PERFORM list_apply(p_org, p_list, v_at, v_id, v_attrs, v_delta);
  END IF;
  RETURN true;
END $$;

-- Counts one organization's list from its rows, in one ordered pass, into buckets of 1,000 (for
-- list_fold). Its pending changes are dropped into the version in the same statement, from the
-- same snapshot, as the rows are counted: a writer's change is either counted in a row here or
-- left pending, never both; the version stays what it was. Holds the list's fold until the
-- transaction ends.
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
       SELECT $1, $2, e.filters::text, CASE WHEN e.k = 0 THEN ''-infinity'' ELSE e.at END,
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

-- Every organization's lists brought up to date: each list without buckets that has rows is
-- built, and every list's pending changes are folded. What an import runs at its end (a load's
-- lists are built here), and the embedded server in its idle time.
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
  PERFORM list_fold(p.org_id, p.list, true, NULL)
  FROM (SELECT DISTINCT org_id, list FROM list_changes ORDER BY 1, 2) p;
END $$;

-- At the commit of about one write in 512 (by the change's number), the change's list is folded
-- (deferred: the fold's lock is held only while the transaction commits; no writer waits on it). A
-- transaction folds a list at most twice (counted in a setting local to it): up to 5,000 changes,
-- then, having written hundreds or more, all of them. A third fold would step over the index
-- entries of the changes already folded, which stay until it ends (600,000 rows: 5.5 min).
CREATE FUNCTION list_fold_at_commit() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
  v_held jsonb := coalesce(nullif(current_setting('openbook.folds_held', true), ''), '{}');
  v_list text := NEW.org_id || '/' || NEW.list;
  v_count integer := coalesce((v_held ->> v_list)::integer, 0);
BEGIN
  IF v_count < 2 THEN
    IF list_fold(NEW.org_id, NEW.list, false, CASE v_count WHEN 0 THEN 5000 END) THEN
      PERFORM set_config('openbook.folds_held', jsonb_set(v_held, ARRAY[v_list], to_jsonb(v_count + 1))::text, true);
    END IF;
  END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER list_fold_at_commit AFTER INSERT ON list_changes
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.seq % 512 = 0)
  EXECUTE FUNCTION list_fold_at_commit();
