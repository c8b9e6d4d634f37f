-- compatible-from: 7
--
-- (Expand only: new bucket lists, an index, and 009's functions replaced with ones that keep the
-- new lists as well; releases up to 7 read no bucket, and 9 to 11 read only the lists 009 kept.)
--
-- A staff member's appointments are many: one of a large salon has ten thousand
-- active appointments and more, so the staff filter is described `many` (src/schemas/filters.ts)
-- and its totals and deep pages come from bucket lists, as the status filter's do. A list is kept
-- for every combination of the `many` filters' values (`bucketListOf` names them the same way):
--
--   appointments                        every active appointment (009)
--   appointments:<status>               of one status (009)
--   appointments:staff:<staff>          of one staff member
--   appointments:<status>:staff:<staff> of one status and one staff member
--
-- An appointment without a staff member is in the first two only. The lists of a status and a
-- staff member together are read along a new index that holds both, in list order.
CREATE INDEX appointments_active_staff_status_idx
  ON appointments (org_id, staff_id, status, start_at DESC, id DESC) WHERE is_active;

-- As 009's, with the staff lists. A status never contains ':' and is never 'staff' (the
-- appointment's status values, src/schemas/descriptions.ts), so the names do not collide.
CREATE OR REPLACE FUNCTION list_buckets_key_after(p_org text, p_list text, p_lo_at timestamptz, p_lo_id text, skip integer,
  OUT key_at timestamptz, OUT key_id text)
LANGUAGE plpgsql SET search_path = pg_catalog, public
  SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off AS $$
DECLARE
  v_status text;
BEGIN
  IF p_list = 'customers' THEN
    SELECT k.created_at, k.id INTO key_at, key_id FROM customers k
    WHERE k.org_id = p_org AND k.is_active AND (k.created_at, k.id) >= (p_lo_at, p_lo_id)
    ORDER BY k.created_at, k.id OFFSET skip LIMIT 1;
  ELSIF p_list = 'appointments' THEN
    SELECT k.start_at, k.id INTO key_at, key_id FROM appointments k
    WHERE k.org_id = p_org AND k.is_active AND (k.start_at, k.id) >= (p_lo_at, p_lo_id)
    ORDER BY k.start_at, k.id OFFSET skip LIMIT 1;
  ELSIF p_list LIKE 'appointments:staff:%' THEN
    SELECT k.start_at, k.id INTO key_at, key_id FROM appointments k
    WHERE k.org_id = p_org AND k.is_active AND k.staff_id = substr(p_list, 20)
      AND (k.start_at, k.id) >= (p_lo_at, p_lo_id)
    ORDER BY k.start_at, k.id OFFSET skip LIMIT 1;
  ELSIF p_list ~ '^appointments:[^:]*:staff:' THEN
    v_status := split_part(p_list, ':', 2);
    SELECT k.start_at, k.id INTO key_at, key_id FROM appointments k
    WHERE k.org_id = p_org AND k.is_active AND k.staff_id = substr(p_list, 21 + length(v_status))
      AND k.status = v_status AND (k.start_at, k.id) >= (p_lo_at, p_lo_id)
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

-- The lists an active appointment is an entry of, by name. A new `many` filter replaces this
-- function (with its own lists: every combination with the others) and list_buckets_key_after;
-- the trigger and the backfill below read the lists from it. (No SET clause: PostgreSQL inlines
-- it into the trigger's statements only without one.)
CREATE FUNCTION list_buckets_appointment_lists(a appointments) RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
  SELECT array_remove(ARRAY['appointments', 'appointments:' || a.status, 'appointments:staff:' || a.staff_id,
    'appointments:' || a.status || ':staff:' || a.staff_id], NULL)
$$;
REVOKE EXECUTE ON FUNCTION list_buckets_appointment_lists(appointments) FROM PUBLIC;

-- As 009's, with an appointment's entries in each of its lists (list_buckets_appointment_lists).
CREATE OR REPLACE FUNCTION list_buckets_change() RETURNS trigger
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
         CROSS JOIN LATERAL unnest(list_buckets_appointment_lists(r)) l(list)
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

-- The appointments already stored: writers wait until this commits (they would add entries to
-- lists not yet counted), readers do not. One bucket per new list, then split.
LOCK TABLE appointments IN SHARE ROW EXCLUSIVE MODE;

-- The lists without a bucket yet: those of staff members.
INSERT INTO list_buckets (org_id, list, lo_at, lo_id, n)
SELECT e.org_id, e.list, timestamptz '-infinity', '', e.n
FROM (SELECT a.org_id, l.list, count(*)::int AS n
      FROM appointments a CROSS JOIN LATERAL unnest(list_buckets_appointment_lists(a)) l(list)
      WHERE a.is_active GROUP BY 1, 2) e
WHERE NOT EXISTS (SELECT 1 FROM list_buckets b WHERE b.org_id = e.org_id AND b.list = e.list);

SELECT count(list_buckets_split(b.org_id, b.list, b.lo_at, b.lo_id, b.n))
FROM (SELECT * FROM list_buckets WHERE n > 2000 ORDER BY org_id, list OFFSET 0) b;
