-- Where a deep page of customers starts, without stepping over every entry before it: active
-- customers per organization and UTC day of creation, kept by statement-level triggers in the
-- transactions that write them, as appointment_day_counts is (003). A page at offset N starts at
-- the end of the day its N-th customer falls in, found by summing days newest first, and steps over
-- the rest of that day only (src/queries/page.ts). customer_counts (004) still answers the total in
-- one row.
CREATE TABLE customer_day_counts (
  org_id  text NOT NULL,
  day     date NOT NULL,
  n       integer NOT NULL CHECK (n >= 0),
  PRIMARY KEY (org_id, day) INCLUDE (n)
);

CREATE FUNCTION customer_day_counts_add() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  INSERT INTO customer_day_counts AS c (org_id, day, n)
  SELECT org_id, (created_at AT TIME ZONE 'UTC')::date, count(*)
  FROM new_rows WHERE is_active GROUP BY 1, 2
  ON CONFLICT (org_id, day) DO UPDATE SET n = c.n + excluded.n;
  RETURN NULL;
END $$;

CREATE FUNCTION customer_day_counts_remove() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  UPDATE customer_day_counts c SET n = c.n - o.n
  FROM (SELECT org_id, (created_at AT TIME ZONE 'UTC')::date AS day, count(*)::int AS n
        FROM old_rows WHERE is_active GROUP BY 1, 2) o
  WHERE c.org_id = o.org_id AND c.day = o.day;
  RETURN NULL;
END $$;

CREATE FUNCTION customer_day_counts_clear() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  DELETE FROM customer_day_counts;
  RETURN NULL;
END $$;

-- An UPDATE removes its old rows' counts before it adds its new rows' (trigger names sort so).
CREATE TRIGGER customer_day_counts_1_insert AFTER INSERT ON customers
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION customer_day_counts_add();
CREATE TRIGGER customer_day_counts_2_update_old AFTER UPDATE ON customers
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION customer_day_counts_remove();
CREATE TRIGGER customer_day_counts_3_update_new AFTER UPDATE ON customers
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION customer_day_counts_add();
CREATE TRIGGER customer_day_counts_4_delete AFTER DELETE ON customers
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION customer_day_counts_remove();
CREATE TRIGGER customer_day_counts_5_truncate AFTER TRUNCATE ON customers
  FOR EACH STATEMENT EXECUTE FUNCTION customer_day_counts_clear();

-- The customers already stored; the triggers above hold writers off until this commits.
INSERT INTO customer_day_counts (org_id, day, n)
SELECT org_id, (created_at AT TIME ZONE 'UTC')::date, count(*)
FROM customers WHERE is_active GROUP BY 1, 2;

-- Row-level security last: the owner's own policy comes with reader-role.sql, after this.
ALTER TABLE customer_day_counts ENABLE ROW LEVEL SECURITY;
ALTER TABLE customer_day_counts FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON customer_day_counts
  USING (org_id = current_setting('openbook.org_id', true));
