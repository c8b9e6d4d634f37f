-- Exact customer totals without counting index entries: active customers per organization,
-- kept by statement-level triggers in the transactions that write them, as for appointments
-- (003_appointment_day_counts.sql).
CREATE TABLE customer_counts (
  org_id  text PRIMARY KEY,
  n       integer NOT NULL CHECK (n >= 0)
);

CREATE FUNCTION customer_counts_add() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  INSERT INTO customer_counts AS c (org_id, n)
  SELECT org_id, count(*) FROM new_rows WHERE is_active GROUP BY 1
  ON CONFLICT (org_id) DO UPDATE SET n = c.n + excluded.n;
  RETURN NULL;
END $$;

CREATE FUNCTION customer_counts_remove() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  UPDATE customer_counts c SET n = c.n - o.n
  FROM (SELECT org_id, count(*)::int AS n FROM old_rows WHERE is_active GROUP BY 1) o
  WHERE c.org_id = o.org_id;
  RETURN NULL;
END $$;

CREATE FUNCTION customer_counts_clear() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
  DELETE FROM customer_counts;
  RETURN NULL;
END $$;

CREATE TRIGGER customer_counts_1_insert AFTER INSERT ON customers
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION customer_counts_add();
CREATE TRIGGER customer_counts_2_update_old AFTER UPDATE ON customers
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION customer_counts_remove();
CREATE TRIGGER customer_counts_3_update_new AFTER UPDATE ON customers
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION customer_counts_add();
CREATE TRIGGER customer_counts_4_delete AFTER DELETE ON customers
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION customer_counts_remove();
CREATE TRIGGER customer_counts_5_truncate AFTER TRUNCATE ON customers
  FOR EACH STATEMENT EXECUTE FUNCTION customer_counts_clear();

INSERT INTO customer_counts (org_id, n)
SELECT org_id, count(*) FROM customers WHERE is_active GROUP BY 1;

-- Row-level security last: the owner's own policy comes with reader-role.sql, after this.
ALTER TABLE customer_counts ENABLE ROW LEVEL SECURITY;
ALTER TABLE customer_counts FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON customer_counts
  USING (org_id = current_setting('openbook.org_id', true));
