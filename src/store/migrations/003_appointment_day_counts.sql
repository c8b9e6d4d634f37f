-- Exact totals for date and status filters without counting every matching index entry.
-- Active appointments are counted per organization, status and UTC day of their start, in the
-- same transactions that write them: statement-level triggers add up each statement's rows
-- (its transition tables), so a bulk load pays one grouped upsert per statement, not per row.
-- A filtered total is the sum of the days the filter covers whole, plus an index count of the
-- part-days at its ends (queries/appointments.ts). It is exact: the counts are rows of the same
-- snapshot as the appointments.
CREATE TABLE appointment_day_counts (
  org_id  text NOT NULL,
  status  text NOT NULL,
  day     date NOT NULL,
  n       integer NOT NULL CHECK (n >= 0),
  -- The count rides along in the key's index: sums over a range of days are index-only.
  PRIMARY KEY (org_id, status, day) INCLUDE (n)
);

CREATE FUNCTION appointment_day_counts_add() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  INSERT INTO appointment_day_counts AS c (org_id, status, day, n)
  SELECT org_id, status, (start_at AT TIME ZONE 'UTC')::date, count(*)
  FROM new_rows WHERE is_active GROUP BY 1, 2, 3
  ON CONFLICT (org_id, status, day) DO UPDATE SET n = c.n + excluded.n;
  RETURN NULL;
END $$;

CREATE FUNCTION appointment_day_counts_remove() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  UPDATE appointment_day_counts c SET n = c.n - o.n
  FROM (SELECT org_id, status, (start_at AT TIME ZONE 'UTC')::date AS day, count(*)::int AS n
        FROM old_rows WHERE is_active GROUP BY 1, 2, 3) o
  WHERE c.org_id = o.org_id AND c.status = o.status AND c.day = o.day;
  RETURN NULL;
END $$;

CREATE FUNCTION appointment_day_counts_clear() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  DELETE FROM appointment_day_counts;
  RETURN NULL;
END $$;

-- An UPDATE removes its old rows' counts before it adds its new rows' (trigger names sort so).
CREATE TRIGGER appointment_day_counts_1_insert AFTER INSERT ON appointments
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION appointment_day_counts_add();
CREATE TRIGGER appointment_day_counts_2_update_old AFTER UPDATE ON appointments
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION appointment_day_counts_remove();
CREATE TRIGGER appointment_day_counts_3_update_new AFTER UPDATE ON appointments
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION appointment_day_counts_add();
CREATE TRIGGER appointment_day_counts_4_delete AFTER DELETE ON appointments
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION appointment_day_counts_remove();
CREATE TRIGGER appointment_day_counts_5_truncate AFTER TRUNCATE ON appointments
  FOR EACH STATEMENT EXECUTE FUNCTION appointment_day_counts_clear();

-- The appointments already stored; the triggers above hold writers off until this commits.
INSERT INTO appointment_day_counts (org_id, status, day, n)
SELECT org_id, status, (start_at AT TIME ZONE 'UTC')::date, count(*)
FROM appointments WHERE is_active GROUP BY 1, 2, 3;

-- Row-level security last: the owner's own policy comes with reader-role.sql, after this.
ALTER TABLE appointment_day_counts ENABLE ROW LEVEL SECURITY;
ALTER TABLE appointment_day_counts FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON appointment_day_counts
  USING (org_id = current_setting('openbook.org_id', true));
