#!/bin/bash
# PostgreSQL CPU per transaction of one pgbench script: alone and beside a busy Node process, then
# paced at lower rates (pgbench -R), as openbook's requests arrive, alone and beside Node again.
# Usage: bash bench/pg-coload.sh [DATABASE] (a database of `npm run bench`, 100k scale by default).
# Neighbours (one Node process each, on the other core or the same one as the scheduler likes):
#   busy:  a loop that touches no memory (a core taken, the caches left alone);
#   alloc: what openbook's Node does a request, in a loop: 50 rows built and written as JSON
#          (allocation, garbage collection: the caches churned as well as a core taken).
# The transactions are those pgbench reports; PostgreSQL CPU from /proc (clock ticks of 10 ms).
DB=${1:-openbook_bench_100k}
ORG=$(psql -h 127.0.0.1 -U root -d $DB -Atc "SELECT org_id FROM customers GROUP BY 1 ORDER BY count(*) DESC LIMIT 1")
cat > ${TMPDIR:-/tmp}/openbook-coload.sql <<SQL
SELECT id, created_at FROM customers WHERE org_id = '$ORG' AND is_active ORDER BY created_at DESC, id DESC LIMIT 50;
SQL
BUSY='for(;;){}'
ALLOC='let n=0;for(;;){const rows=[];for(let i=0;i<50;i++)rows.push({id:"cus_"+(n+i),name:"Customer "+i,email:"c"+i+"@example.com",createdAt:new Date(n*1e3+i).toISOString()});n+=JSON.stringify({data:rows}).length%7}'
# Every postgres process's CPU, and that of the backends which ended (the postmaster's children's).
pgcpu() { local t=0; for p in $(pgrep -x postgres); do s=$(awk '{print $14+$15}' /proc/$p/stat 2>/dev/null); t=$((t + ${s:-0})); done; local m=$(pgrep -o -x postgres); c=$(awk '{print $16+$17}' /proc/$m/stat); echo $((t + c)); }
run() {
  local neighbour=$1 rate=$2 pids=()
  case $neighbour in
    busy) node -e "$BUSY" & pids+=($!) ;;
    alloc) node -e "$ALLOC" & pids+=($!) ;;
  esac
  sleep 1
  local a=$(pgcpu)
  local out=$(pgbench -h 127.0.0.1 -U root -n -M prepared -c 4 -j 1 -T 10 ${rate:+-R $rate} -f ${TMPDIR:-/tmp}/openbook-coload.sql $DB 2>&1)
  local b=$(pgcpu)
  for p in "${pids[@]}"; do kill $p; done; wait 2>/dev/null
  local tx=$(echo "$out" | awk '/number of transactions actually processed/ {print $NF}' | cut -d/ -f1)
  echo "neighbour=$neighbour rate=${rate:-max} tx=$tx pg_us_per_tx=$(( (b-a)*10000 / tx ))"
}
RATES=${RATES:-1000}
for round in 1 2; do
  for n in none busy alloc; do run $n; done
  for r in $RATES; do for n in none busy alloc; do run $n $r; done; done
done
