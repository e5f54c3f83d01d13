#!/usr/bin/env bash
# Webhook -> JSONB table -> typed materialized view -> Iceberg upsert sink, read back with
# pyiceberg (what Trino or any Iceberg engine would read). The statements are the ones of a
# RisingWave streaming-lakehouse walkthrough, with the catalog pointed at a local one.
source "$(dirname "$0")/../lib.sh"

start_s3 lakehouse
start_swell
CATALOG_DB="$WORK/catalog.db"

say "webhook table, typed view, Iceberg upsert sink"
sql "
CREATE TABLE wbhtable1 (
      data JSONB
    ) WITH (
      connector = 'webhook'
    ) VALIDATE AS secure_compare(
      headers->>'authorization',
      'TEST_WEBHOOK'
    );

CREATE MATERIALIZED VIEW product_view_events AS
    SELECT
      (data->>'event_id')::VARCHAR AS event_id,
      (data->>'user_id')::VARCHAR AS user_id,
      (data->>'event_name')::VARCHAR AS event_name,
      (data->'properties'->>'product_id')::VARCHAR AS product_id,
      (data->'properties'->>'category')::VARCHAR AS category,
      (data->'properties'->>'price')::DOUBLE PRECISION AS price,
      (data->>'timestamp')::TIMESTAMP WITH TIME ZONE AS event_timestamp,
      data::VARCHAR AS raw_data
    FROM wbhtable1;

CREATE SINK rest_sink FROM product_view_events
    WITH (
        connector = 'iceberg',
        type = 'upsert',
        primary_key = 'event_id',
        catalog.type = 'sql',
        catalog.uri = 'sqlite:///$CATALOG_DB',
        warehouse.path = 's3://$BUCKET/warehouse',
        database.name = 'trino_namespace',
        table.name = 'product_view_events',
        create_table_if_not_exists = 'true',
        commit_checkpoint_interval = '1',
        s3.endpoint = '$S3',
        s3.path.style.access = 'true',
        s3.access.key = 'minio-root-user',
        s3.secret.key = 'minio-root-password',
        s3.region = 'dummy'
    );
" >/dev/null

say "posting 20 events with curl (10 at a time), then 5 of them again (retried deliveries)"
export WEBHOOK_URL="http://127.0.0.1:$WEBHOOK_PORT/webhook/dev/public/wbhtable1"
seq 1 20 | xargs -I {} -P 10 bash -c '
  EVENT_ID=$(uuidgen)
  echo "$EVENT_ID" >> '"$WORK"'/ids
  USER_ID="usr_$(uuidgen | head -c 8)"
  PRODUCT_ID="prod_$(uuidgen | head -c 8)"
  TIMESTAMP=$(date -u +"%Y-%m-%dT%H:%M:%SZ")
  curl -s -f -o /dev/null -X POST "$WEBHOOK_URL" \
    -H "Content-Type: application/json" \
    -H "Authorization: TEST_WEBHOOK" \
    -d "{
          \"event_id\": \"$EVENT_ID\",
          \"user_id\": \"$USER_ID\",
          \"event_name\": \"product_viewed\",
          \"properties\": {
            \"product_id\": \"$PRODUCT_ID\",
            \"category\": \"electronics\",
            \"price\": 9199.99
          },
          \"timestamp\": \"$TIMESTAMP\"
        }"
'
for id in $(head -n 5 "$WORK/ids"); do
  curl -s -f -o /dev/null -X POST "$WEBHOOK_URL" -H "Authorization: TEST_WEBHOOK" \
    -d "{\"event_id\": \"$id\", \"event_name\": \"product_viewed\", \"properties\": {\"price\": 1.5}}"
done
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$WEBHOOK_URL" -H "Authorization: wrong" -d '{}')
[ "$code" = 401 ] || fail "a wrong Authorization header answered $code, not 401"

sql "FLUSH" >/dev/null
n=$(sql "SELECT count(*) FROM product_view_events")
say "the view has $n rows (20 events + 5 retried)"
[ "$n" = 25 ] || fail "expected 25 rows in the view, got $n"

say "reading the Iceberg table back with pyiceberg"
for _ in $(seq 1 100); do
  got=$("$PY" - "$CATALOG_DB" "$S3" <<'PYEOF'
import sys
from pyiceberg.catalog.sql import SqlCatalog

db, s3 = sys.argv[1], sys.argv[2]
cat = SqlCatalog("swell", uri=f"sqlite:///{db}", **{
    "s3.endpoint": s3, "s3.access-key-id": "x", "s3.secret-access-key": "x",
    "s3.region": "us-east-1", "s3.force-virtual-addressing": "false"})
try:
    t = cat.load_table(("trino_namespace", "product_view_events")).scan().to_arrow()
except Exception:
    print("0 0 0")
    sys.exit()
ids = t.column("event_id").to_pylist()
print(t.num_rows, len(set(ids)), sum(1 for p in t.column("price").to_pylist() if p == 1.5))
PYEOF
)
  [ "$got" = "20 20 5" ] && break
  sql "FLUSH" >/dev/null
  sleep 0.2
done
say "Iceberg rows, distinct event ids, rows updated by a retry: $got"
[ "$got" = "20 20 5" ] || fail "expected 20 rows (upserted by event_id), 5 of them updated"
sql "SELECT sink_name, commits > 0, last_error FROM rw_iceberg_sinks"
say "OK: webhook events landed in Iceberg, upserted by event_id"
