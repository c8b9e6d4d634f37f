-- compatible-from: 12
--
-- (Function bodies, and an output column of the one function only this release's server calls.
-- Release 1.1.0 calls neither.)
--
-- A fold is upkeep: until it runs, every page reads the pending changes it would move. So a fold
-- that fails costs only its own work (test/store/fold-faults.test.ts):
--
-- - At a writer's commit, the fold runs in a subtransaction. An error in it rolls back the fold
--   alone, with a WARNING naming the list: the writer's commit goes through, and its changes stay
--   pending for the next fold. Before, the salon software's booking failed with the fold. (A
--   commit runs without the writer's statement time-out, which PostgreSQL lifts before it; a
--   cancel the writer sends still ends it.)
-- - In the server's background fold, each list is folded in a subtransaction: a list whose fold
--   fails is skipped, with a WARNING, and counted (`failed`, the first one's message in
--   `failure`), and the others are folded. Before, one list's failing fold rolled back every
--   list's, at every call, and pages of every organization slowed down. A statement time-out still
--   ends the whole call (the server's own limit).

CREATE OR REPLACE FUNCTION list_fold_at_commit() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
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

DROP FUNCTION list_fold_pending();
CREATE FUNCTION list_fold_pending(OUT folded integer, OUT most_pending bigint, OUT all_pending bigint,
                                  OUT failed integer, OUT failure text)
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
REVOKE ALL ON FUNCTION list_fold_pending() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION list_fold_pending() TO openbook_reader;
