#!/usr/bin/env bash
# A subscription on a view, followed by an exactly-once Python consumer into SQLite, through
# a consumer crash and a kill -9 of Swell; the copy must equal the view at the end.
source "$(dirname "$0")/../lib.sh"

CONSUMER=examples/subscription-consumer/consumer.py
STATE="$WORK/copy.sqlite"
consume() { "$PY" "$CONSUMER" "127.0.0.1:$PG_PORT" "$STATE" "$@"; }

start_swell
say "table, view and subscription"
sql "
CREATE TABLE payments (id INT PRIMARY KEY, account VARCHAR, amount INT);
CREATE MATERIALIZED VIEW balances AS
  SELECT account, sum(amount) AS total, count(*) AS n FROM payments GROUP BY account;
CREATE SUBSCRIPTION balance_changes FROM balances WITH (retention = '1D');
" >/dev/null

say "five epochs of payments"
for i in 1 2 3 4 5; do
  sql "INSERT INTO payments SELECT $i * 100 + g, 'acct' || (g % 4), g * $i
       FROM generate_series(1, 10) g; FLUSH;" >/dev/null
done

say "the consumer crashes after its third FETCH (small batches: epochs span fetches)"
set +e
consume --batch 3 --crash-after 3
rc=$?
set -e
[ "$rc" -eq 3 ] || fail "the consumer should have crashed (exit 3), got $rc"

say "it resumes from the rw_timestamp it stored and catches up"
consume --batch 3

say "updates and deletes, then Swell is killed (kill -9) and restarted"
sql "UPDATE payments SET amount = amount + 1000 WHERE id % 7 = 0; FLUSH;
     DELETE FROM payments WHERE account = 'acct3'; FLUSH;
     INSERT INTO payments VALUES (9001, 'acct9', 5);" >/dev/null
kill -9 "${PIDS[-1]}"
wait "${PIDS[-1]}" 2>/dev/null || true
start_swell   # same data directory, new ports
sql "INSERT INTO payments VALUES (9002, 'acct9', 7); FLUSH;" >/dev/null

say "the consumer catches up again"
consume

view=$(sql "SELECT account, total, n FROM balances ORDER BY account")
copy=$("$PY" "$CONSUMER" --dump "$STATE")
echo "$copy"
[ -n "$view" ] || fail "the view is empty"
[ "$view" = "$copy" ] || fail "the consumer's copy differs from the view:
view:
$view"
echo "$view" | grep -q '^acct9|12|2$' || fail "the rows written around the crash are missing"
say "OK: the copy equals the view (every change applied exactly once)"
