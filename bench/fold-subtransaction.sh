#!/bin/bash
# A writer's commit that folds, with the fold in a subtransaction (migration 022) and without it
# (021's function), in rounds that take turns: a transaction of one 512-row INSERT of appointments,
# whose entries take one turn that is a multiple of 512, so that its commit folds once.
# Usage: bash bench/fold-subtransaction.sh [ROUNDS (6)] [TRANSACTIONS A ROUND (40)]
# Makes and drops its own database (openbook migrate and seed, 2 organizations, 20,000 appointments).
set -e
cd "$(dirname "$0")/.."
ROUNDS=${1:-6}
COUNT=${2:-40}
DB=openbook_bench_fold_subtransaction
P="psql -q -h 127.0.0.1 -U root"
$P -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
trap '$P -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)"' EXIT
export DATABASE_URL=postgres://root@127.0.0.1:5432/$DB
node bin/openbook.js migrate >/dev/null
node bin/openbook.js seed --orgs 2 --customers 2000 --appointments 20000 --seed 1 >/dev/null
$P -d $DB -c "VACUUM ANALYZE"
ORG=$(psql -h 127.0.0.1 -U root -d $DB -Atc "SELECT id FROM organizations ORDER BY id LIMIT 1")
WITH=$(psql -h 127.0.0.1 -U root -d $DB -Atc "SELECT pg_get_functiondef('list_fold_at_commit'::regproc)")
WITHOUT=$(cat <<'SQL'
CREATE OR REPLACE FUNCTION public.list_fold_at_commit() RETURNS trigger LANGUAGE plpgsql
SET search_path TO 'pg_catalog', 'public' AS $$
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
SQL
)
SCRIPT=${TMPDIR:-/tmp}/openbook-fold-subtransaction.sql
cat > $SCRIPT <<SQL
\set n random(1, 1000000000)
BEGIN;
INSERT INTO appointments (org_id, id, start_at, end_at, status, is_active, created_at, updated_at)
SELECT '$ORG', 'apt_b' || :n || '_' || g, now() + g * interval '1 minute',
       now() + g * interval '1 minute' + interval '1 hour', 'confirmed', true, now(), now()
FROM generate_series(1, 512) g;
COMMIT;
SQL
latency() { pgbench -h 127.0.0.1 -U root -n -f $SCRIPT -t $COUNT -c 1 $DB 2>&1 | awk '/latency average/ {print $4}'; }
for i in $(seq 1 $ROUNDS); do
  $P -d $DB -c "$WITHOUT" >/dev/null
  without=$(latency)
  $P -d $DB -c "$WITH" >/dev/null
  with=$(latency)
  echo "round $i: ms a transaction, fold without a subtransaction $without, with $with"
done
