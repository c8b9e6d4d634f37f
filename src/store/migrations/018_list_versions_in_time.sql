-- compatible-from: 12
--
-- A list's version never repeats for other content across a copy of the database: a restore, a
-- point-in-time recovery, a promoted replica that lost transactions (docs/design/lists.md,
-- Versions). Its count of changes alone does: a copy taken at T, written once more, reaches the
-- count that the original reached with another write after T. So each pending change keeps when
-- it was written (its transaction's start), a fold keeps the latest of those it folded, and a page's
-- ETag names the latest beside the count: a copy's new writes come at wall-clock times that no
-- write of the original had.
--
-- Release 12 and the releases since read neither column and call these functions by the same
-- names and arguments: they keep serving, with tags that leave the time out.

-- Rows from before this migration keep NULL (no time): the tags of the lists they make stay what
-- they were, and only a list written from now on gets a new one. Set as a default after the
-- column is added, so that the existing rows are not given the migration's time.
ALTER TABLE list_changes ADD COLUMN written_at timestamptz;
ALTER TABLE list_changes ALTER COLUMN written_at SET DEFAULT now();
ALTER TABLE list_folds ADD COLUMN latest_written_at timestamptz;
-- A page reads the latest time in the scan that counts its list's pending changes: in the index,
-- that scan reads no row (without it, a vacuumed list of 5,000 pending changes took 1 ms more a
-- page; bench/RESULTS.md#list-versions-in-time). The table holds the pending changes only: the
-- index is built again in milliseconds, under the lock writers wait on meanwhile.
ALTER TABLE list_changes DROP CONSTRAINT list_changes_pkey,
  ADD CONSTRAINT list_changes_pkey PRIMARY KEY (org_id, list, at, id, seq) INCLUDE (written_at);

-- 013's fold, keeping the latest time of the changes it folds (greatest ignores a NULL).
CREATE OR REPLACE FUNCTION list_fold(p_org text, p_list text, p_wait boolean DEFAULT false, p_limit integer DEFAULT 5000)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public SET jit = off AS $$
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

-- 015's count of a list from its rows, keeping the latest time of the pending changes it drops
-- into the version.
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
END $$;

-- 015's bulk load of entries: its change of the version is written at the load's time.
CREATE OR REPLACE FUNCTION list_fold_entries(p_org text, p_list text, p_at timestamptz[], p_id text[],
  p_attrs jsonb[], p_delta integer[])
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public SET jit = off AS $$
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

-- 014's TRUNCATE: the pending changes folded with their times, and the new version of every
-- organization written at the TRUNCATE's.
CREATE OR REPLACE FUNCTION list_truncate() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
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
