-- compatible-from: 12
--
-- Folds that do not depend on how the salon software writes, and a writer role a booking
-- application can use as it is (docs/writers.md).
--
-- A writer's commit folds only in READ COMMITTED (013): writers in REPEATABLE READ or SERIALIZABLE
-- leave every change pending, and each page reads its list's pending changes. Here the one
-- function openbook's server calls in the background (src/domain/list-folder.ts), on the primary,
-- in a READ COMMITTED transaction of its own: it folds the lists whose pending changes reached a
-- threshold, and says what it saw.

-- Folds, under one transaction-level lock that several servers only try to take (one of them folds
-- at a time; a pooler in transaction mode keeps no session state):
-- - the lists with at least 256 pending changes, most first, at most 8 of them and 5,000 changes
--   each a call: what a page pays for (about 1 ms per thousand);
-- - then, at most 32, the lists whose oldest pending change is more than 10,000 changes old (of
--   all lists), oldest first: a list that a writer outside READ COMMITTED leaves below 256 would
--   otherwise keep its changes for good, and every call counts all the pending changes. So they
--   stay about 10,000 in all, whatever the number of lists.
-- Each list's fold is list_fold's, which never waits for a writer. Returns the lists folded, then
-- the pending changes of the list with most and of all lists, counted after the folds.
-- It runs as the schema owner and is the one definer function openbook_reader may call (the
-- server logs in as a member of it): it takes no argument, and all it can do is fold, which moves
-- changes from list_changes to the buckets and list_folds without changing any total, page or
-- version. It refuses a read-only transaction (the request path's) and any isolation level but
-- READ COMMITTED, where a fold sees the writers' commits.
CREATE FUNCTION list_fold_pending(OUT folded integer, OUT most_pending bigint, OUT all_pending bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public SET jit = off AS $$
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
  IF pg_try_advisory_xact_lock(hashtext('openbook.list_fold_pending'), 0) THEN
    FOR v IN
      WITH p AS MATERIALIZED (
        SELECT c.org_id, c.list, count(*) AS n, min(c.seq) AS oldest FROM list_changes c GROUP BY c.org_id, c.list)
      (SELECT p.org_id, p.list FROM p WHERE p.n >= 256 ORDER BY p.n DESC, p.org_id, p.list LIMIT 8)
      UNION ALL
      (SELECT p.org_id, p.list FROM p WHERE p.n < 256 AND p.oldest <= v_last - 10000 ORDER BY p.oldest LIMIT 32)
    LOOP
      IF list_fold(v.org_id, v.list, false, 5000) THEN
        folded := folded + 1;
      END IF;
    END LOOP;
  END IF;
  SELECT coalesce(max(p.n), 0), coalesce(sum(p.n), 0) INTO most_pending, all_pending
  FROM (SELECT count(*) AS n FROM list_changes c GROUP BY c.org_id, c.list) p;
END $$;
REVOKE ALL ON FUNCTION list_fold_pending() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION list_fold_pending() TO openbook_reader;

-- The writer role reads what a booking application books against (the organization, its staff and
-- services: both are foreign keys of appointments) and keeps the staff and services. It still reads
-- nothing of the keys, the users, the memberships or openbook's lists.
GRANT SELECT ON organizations TO openbook_writer;
GRANT SELECT, INSERT, UPDATE, DELETE ON staff, services TO openbook_writer;
CREATE POLICY writer_access ON organizations FOR SELECT TO openbook_writer USING (true);
CREATE POLICY writer_access ON staff TO openbook_writer USING (true) WITH CHECK (true);
CREATE POLICY writer_access ON services TO openbook_writer USING (true) WITH CHECK (true);
