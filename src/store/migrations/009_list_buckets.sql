-- compatible-from: 7
--
-- (Expand only: a new table and triggers that keep it; releases up to 7 read no bucket and write
-- through the triggers as they did.)
--
-- Where a deep page starts, whatever the distribution of createdAt and start: each list cut into
-- buckets by position rather than by day. A bucket of a list holds the `n` active entries whose
-- key (the list's order: created_at or start_at, then id) is at or above its lower bound
-- (lo_at, lo_id) and below the next bucket's; the lowest bucket's bound is ('-infinity', ''), below
-- every key. A bucket that passes 2,000 entries splits itself into buckets of 1,000 at the
-- statement that fills it; one that falls to a size its lower neighbour can take (together at most
-- 1,000) is merged into it. So every bucket holds at most 2,000 entries, whether the rows spread
-- over years, crowd one day or share one instant (a migration import): a page at offset N sums the
-- buckets from the nearer end of the list, starts at the bound of the one its offset falls in and
-- steps over at most 2,000 entries (src/queries/page.ts). Day buckets (003, 005) step over up to a
-- whole day, all of an organization when it was imported with one createdAt.
--
-- Why buckets by position, and not:
-- - a position kept per row: an insert near the top of the list moves every row below it, so a
--   write would rewrite up to the whole organization;
-- - finer time buckets (hours, seconds): rows of one instant still share one;
-- - buckets of a fixed key range: the same, for any range.
-- The cost is a lookup per written entry (its bucket is the one with the greatest bound at or below
-- its key) and, every 1,000 entries a bucket gains, one split that steps over its entries in the
-- list's index.
--
-- The lists: 'customers' (active customers), 'appointments' (active appointments) and
-- 'appointments:<status>' (active appointments of one status). The status lists serve the status
-- filter; a date range is a contiguous part of its list, so the same buckets place its pages and
-- count its total: the buckets between the range's ends, and at each end an index count inside
-- one bucket (src/queries/appointments.ts).
--
-- Exact under concurrent writes: the counts are rows of the same snapshot as the entries, written by
-- statement-level triggers in the writing transaction. A writer first takes a transaction-level
-- advisory lock per organization, so that it sees (in READ COMMITTED, each statement of the trigger
-- with a new snapshot) the buckets and entries of every writer before it, and the bucket it adds an
-- entry to cannot be split under it; a REPEATABLE READ writer that overlaps another gets a
-- serialization failure on the bucket rows they both change, as for the other counts. (Today the
-- per-organization counts of 004 and 006, whose triggers fire first, already make writers of one
-- organization wait for each other on their row; the lock keeps the buckets exact without them.)
-- Readers see committed buckets and entries of one snapshot.
CREATE TABLE list_buckets (
  org_id  text NOT NULL,
  list    text NOT NULL,
  lo_at   timestamptz NOT NULL,
  lo_id   text NOT NULL,
  n       integer NOT NULL CHECK (n >= 0),
  -- The count rides along in the key's index: sums over a run of buckets are index-only.
  PRIMARY KEY (org_id, list, lo_at, lo_id) INCLUDE (n)
);

-- Writers of one organization's buckets take turns (ordered, so that two writers of the same
-- organizations wait rather than deadlock).
CREATE FUNCTION list_buckets_lock(orgs text[]) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('openbook.list_buckets'), hashtext(o.org_id))
  FROM (SELECT DISTINCT u AS org_id FROM unnest(orgs) u WHERE u IS NOT NULL ORDER BY 1) o;
END $$;

-- The key `skip` entries above (lo_at, lo_id) in a list, ascending (NULL past its end). The
-- functions that read a list or the buckets rule out whole-table scans and sorts, as the request
-- path does (queries/sql.ts): right after an import the statistics still describe an empty table,
-- and a split planned from them scanned the table for each bucket (21 against 9 s for 100,000
-- appointments).
CREATE FUNCTION list_buckets_key_after(p_org text, p_list text, p_lo_at timestamptz, p_lo_id text, skip integer,
  OUT key_at timestamptz, OUT key_id text)
LANGUAGE plpgsql SET search_path = pg_catalog, public
  SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off AS $$
BEGIN
  IF p_list = 'customers' THEN
    SELECT k.created_at, k.id INTO key_at, key_id FROM customers k
    WHERE k.org_id = p_org AND k.is_active AND (k.created_at, k.id) >= (p_lo_at, p_lo_id)
    ORDER BY k.created_at, k.id OFFSET skip LIMIT 1;
  ELSIF p_list = 'appointments' THEN
    SELECT k.start_at, k.id INTO key_at, key_id FROM appointments k
    WHERE k.org_id = p_org AND k.is_active AND (k.start_at, k.id) >= (p_lo_at, p_lo_id)
    ORDER BY k.start_at, k.id OFFSET skip LIMIT 1;
  ELSIF p_list LIKE 'appointments:%' THEN
    SELECT k.start_at, k.id INTO key_at, key_id FROM appointments k
    WHERE k.org_id = p_org AND k.is_active AND k.status = substr(p_list, 14)
      AND (k.start_at, k.id) >= (p_lo_at, p_lo_id)
    ORDER BY k.start_at, k.id OFFSET skip LIMIT 1;
  ELSE
    RAISE EXCEPTION 'unknown list %', p_list;
  END IF;
END $$;

-- Splits the bucket at (p_lo_at, p_lo_id), holding p_n entries, into buckets of 1,000 (the last
-- 500 to 1,499).
CREATE FUNCTION list_buckets_split(p_org text, p_list text, p_lo_at timestamptz, p_lo_id text, p_n integer)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
  v_at timestamptz := p_lo_at;
  v_id text := p_lo_id;
  v_rest integer := p_n;
  v_next record;
BEGIN
  WHILE v_rest >= 1500 LOOP
    SELECT * INTO v_next FROM list_buckets_key_after(p_org, p_list, v_at, v_id, 1000);
    IF v_next.key_id IS NULL THEN
      RAISE EXCEPTION 'list_buckets: % of % holds fewer entries than counted', p_list, p_org;
    END IF;
    UPDATE list_buckets SET n = 1000
    WHERE org_id = p_org AND list = p_list AND lo_at = v_at AND lo_id = v_id;
    INSERT INTO list_buckets (org_id, list, lo_at, lo_id, n)
    VALUES (p_org, p_list, v_next.key_at, v_next.key_id, v_rest - 1000);
    v_at := v_next.key_at;
    v_id := v_next.key_id;
    v_rest := v_rest - 1000;
  END LOOP;
END $$;

-- Merges the bucket at (p_lo_at, p_lo_id) into its lower neighbour when both fit in 1,000
-- entries (an empty bucket always); the lowest bucket stays.
CREATE FUNCTION list_buckets_merge(p_org text, p_list text, p_lo_at timestamptz, p_lo_id text)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public
  SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off AS $$
DECLARE
  v_n integer;
  v_lower record;
BEGIN
  SELECT b.n INTO v_n FROM list_buckets b
  WHERE b.org_id = p_org AND b.list = p_list AND b.lo_at = p_lo_at AND b.lo_id = p_lo_id;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  SELECT b.lo_at, b.lo_id, b.n INTO v_lower FROM list_buckets b
  WHERE b.org_id = p_org AND b.list = p_list AND (b.lo_at, b.lo_id) < (p_lo_at, p_lo_id)
  ORDER BY b.lo_at DESC, b.lo_id DESC LIMIT 1;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  IF v_n + v_lower.n > 1000 THEN
    RETURN;
  END IF;
  DELETE FROM list_buckets b
  WHERE b.org_id = p_org AND b.list = p_list AND b.lo_at = p_lo_at AND b.lo_id = p_lo_id;
  UPDATE list_buckets b SET n = b.n + v_n
  WHERE b.org_id = p_org AND b.list = p_list AND b.lo_at = v_lower.lo_at AND b.lo_id = v_lower.lo_id;
END $$;

-- The trigger of both tables: TG_ARGV[0] is 'add' (new_rows) or 'remove' (old_rows). Each active
-- row is an entry of its table's lists; the entries are counted into the bucket their key falls in,
-- then the buckets that grew past 2,000 split and those that shrank merge.
CREATE FUNCTION list_buckets_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public
  SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off AS $$
DECLARE
  adding boolean := TG_ARGV[0] = 'add';
  rows_name text := CASE WHEN TG_ARGV[0] = 'add' THEN 'new_rows' ELSE 'old_rows' END;
  entries text;
  r record;
BEGIN
  IF TG_TABLE_NAME = 'customers' THEN
    entries := format(
      'SELECT r.org_id, ''customers''::text AS list, r.created_at AS at, r.id FROM %I r WHERE r.is_active',
      rows_name);
  ELSE
    entries := format(
      'SELECT r.org_id, l.list, r.start_at AS at, r.id FROM %I r
         CROSS JOIN LATERAL (VALUES (''appointments''::text), (''appointments:'' || r.status)) l(list)
       WHERE r.is_active', rows_name);
  END IF;
  EXECUTE format('SELECT list_buckets_lock(array_agg(DISTINCT e.org_id)) FROM (%s) e', entries);
  -- A new statement: its snapshot holds every writer that held the locks before.
  IF adding THEN
    EXECUTE format(
      'INSERT INTO list_buckets (org_id, list, lo_at, lo_id, n)
       SELECT DISTINCT e.org_id, e.list, ''-infinity''::timestamptz, '''', 0 FROM (%s) e
       ON CONFLICT DO NOTHING', entries);
  END IF;
  FOR r IN EXECUTE format(
    'UPDATE list_buckets b SET n = b.n %s a.n
     FROM (SELECT e.org_id, e.list, f.lo_at, f.lo_id, count(*)::int AS n
           FROM (%s) e CROSS JOIN LATERAL (
             SELECT c.lo_at, c.lo_id FROM list_buckets c
             WHERE c.org_id = e.org_id AND c.list = e.list AND (c.lo_at, c.lo_id) <= (e.at, e.id)
             ORDER BY c.lo_at DESC, c.lo_id DESC LIMIT 1) f
           GROUP BY 1, 2, 3, 4) a
     WHERE b.org_id = a.org_id AND b.list = a.list AND b.lo_at = a.lo_at AND b.lo_id = a.lo_id
     RETURNING b.org_id, b.list, b.lo_at, b.lo_id, b.n',
    CASE WHEN adding THEN '+' ELSE '-' END, entries)
  LOOP
    IF adding AND r.n > 2000 THEN
      PERFORM list_buckets_split(r.org_id, r.list, r.lo_at, r.lo_id, r.n);
    ELSIF NOT adding THEN
      PERFORM list_buckets_merge(r.org_id, r.list, r.lo_at, r.lo_id);
    END IF;
  END LOOP;
  RETURN NULL;
END $$;

CREATE FUNCTION list_buckets_clear() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  IF TG_TABLE_NAME = 'customers' THEN
    DELETE FROM list_buckets WHERE list = 'customers';
  ELSE
    DELETE FROM list_buckets WHERE list = 'appointments' OR list LIKE 'appointments:%';
  END IF;
  RETURN NULL;
END $$;

-- The helpers are the triggers' alone (they run as the writer, the owner): nobody else may call them.
REVOKE EXECUTE ON FUNCTION list_buckets_lock(text[]),
  list_buckets_key_after(text, text, timestamptz, text, integer),
  list_buckets_split(text, text, timestamptz, text, integer),
  list_buckets_merge(text, text, timestamptz, text) FROM PUBLIC;

-- An UPDATE removes its old rows' entries before it adds its new rows' (trigger names sort so).
CREATE TRIGGER list_buckets_1_insert AFTER INSERT ON customers
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION list_buckets_change('add');
CREATE TRIGGER list_buckets_2_update_old AFTER UPDATE ON customers
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION list_buckets_change('remove');
CREATE TRIGGER list_buckets_3_update_new AFTER UPDATE ON customers
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION list_buckets_change('add');
CREATE TRIGGER list_buckets_4_delete AFTER DELETE ON customers
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION list_buckets_change('remove');
CREATE TRIGGER list_buckets_5_truncate AFTER TRUNCATE ON customers
  FOR EACH STATEMENT EXECUTE FUNCTION list_buckets_clear();

CREATE TRIGGER list_buckets_1_insert AFTER INSERT ON appointments
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION list_buckets_change('add');
CREATE TRIGGER list_buckets_2_update_old AFTER UPDATE ON appointments
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION list_buckets_change('remove');
CREATE TRIGGER list_buckets_3_update_new AFTER UPDATE ON appointments
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION list_buckets_change('add');
CREATE TRIGGER list_buckets_4_delete AFTER DELETE ON appointments
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION list_buckets_change('remove');
CREATE TRIGGER list_buckets_5_truncate AFTER TRUNCATE ON appointments
  FOR EACH STATEMENT EXECUTE FUNCTION list_buckets_clear();

-- The rows already stored, one bucket per list, then split; the triggers above hold writers off
-- until this commits.
INSERT INTO list_buckets (org_id, list, lo_at, lo_id, n)
SELECT org_id, 'customers', timestamptz '-infinity', '', count(*)::int FROM customers WHERE is_active GROUP BY 1
UNION ALL
SELECT org_id, 'appointments', timestamptz '-infinity', '', count(*)::int FROM appointments WHERE is_active GROUP BY 1
UNION ALL
SELECT org_id, 'appointments:' || status, timestamptz '-infinity', '', count(*)::int FROM appointments WHERE is_active GROUP BY 1, 2;

SELECT count(list_buckets_split(b.org_id, b.list, b.lo_at, b.lo_id, b.n))
FROM (SELECT * FROM list_buckets WHERE n > 2000 ORDER BY org_id, list OFFSET 0) b;

-- Row-level security last, with the owner's own policy (forced on the owner too: the triggers
-- write as the writer, the owner), as 008 made it for the other tables.
ALTER TABLE list_buckets ENABLE ROW LEVEL SECURITY;
ALTER TABLE list_buckets FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON list_buckets
  USING (org_id = current_setting('openbook.org_id', true));
DO $$ BEGIN
  EXECUTE format('CREATE POLICY owner_access ON list_buckets TO %I USING (true) WITH CHECK (true)', current_user);
END $$;

-- The request path reads the buckets (READER_PRIVILEGES).
GRANT SELECT ON list_buckets TO openbook_reader;
