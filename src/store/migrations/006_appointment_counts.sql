-- Exact totals of the unfiltered appointments list in one row: active appointments per
-- organization, kept by statement-level triggers in the transactions that write them, as
-- customer_counts is (004). Summing appointment_day_counts gives the same number but reads a row
-- per status and day: about 7,000 for an organization with three years of history, 1.4 ms per
-- request for the largest one (bench/RESULTS.md).
CREATE TABLE appointment_counts (
  org_id  text PRIMARY KEY,
  n       integer NOT NULL CHECK (n >= 0)
);

CREATE FUNCTION appointment_counts_add() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  INSERT INTO appointment_counts AS c (org_id, n)
  SELECT org_id, count(*) FROM new_rows WHERE is_active GROUP BY 1
  ON CONFLICT (org_id) DO UPDATE SET n = c.n + excluded.n;
  RETURN NULL;
END $$;

CREATE FUNCTION appointment_counts_remove() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  UPDATE appointment_counts c SET n = c.n - o.n
  FROM (SELECT org_id, count(*)::int AS n FROM old_rows WHERE is_active GROUP BY 1) o
  WHERE c.org_id = o.org_id;
  RETURN NULL;
END $$;

CREATE FUNCTION appointment_counts_clear() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  DELETE FROM appointment_counts;
  RETURN NULL;
END $$;

-- An UPDATE removes its old rows' counts before it adds its new rows' (trigger names sort so).
CREATE TRIGGER appointment_counts_1_insert AFTER INSERT ON appointments
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION appointment_counts_add();
CREATE TRIGGER appointment_counts_2_update_old AFTER UPDATE ON appointments
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION appointment_counts_remove();
CREATE TRIGGER appointment_counts_3_update_new AFTER UPDATE ON appointments
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION appointment_counts_add();
CREATE TRIGGER appointment_counts_4_delete AFTER DELETE ON appointments
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION appointment_counts_remove();
CREATE TRIGGER appointment_counts_5_truncate AFTER TRUNCATE ON appointments
  FOR EACH STATEMENT EXECUTE FUNCTION appointment_counts_clear();

-- The appointments already stored; the triggers above hold writers off until this commits.
INSERT INTO appointment_counts (org_id, n)
SELECT org_id, count(*) FROM appointments WHERE is_active GROUP BY 1;

-- Row-level security last: the owner's own policy comes with reader-role.sql, after this.
ALTER TABLE appointment_counts ENABLE ROW LEVEL SECURITY;
ALTER TABLE appointment_counts FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON appointment_counts
  USING (org_id = current_setting('openbook.org_id', true));
