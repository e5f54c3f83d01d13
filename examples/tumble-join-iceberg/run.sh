#!/usr/bin/env bash
# Orders from Kafka, 5-minute tumbling windows joined with a users table (region), kept in
# an Iceberg table on S3 and read back, also as of an earlier snapshot (time travel).
# The shape of a StarRocks/Paimon lakehouse quick start, in Swell SQL.
source "$(dirname "$0")/../lib.sh"

start_kafka
start_s3 lake
start_swell
create_topic order-details 1

orders() {  # orders FIRST_ID MINUTE...: one order per minute given, user (id % 8) + 1
  local id=$1; shift
  for m in "$@"; do
    printf '{"order_id": %d, "user_id": %d, "order_amount": %d.50, "order_time": "2024-07-24 15:%02d:00.000"}\n' \
      "$id" $((id % 8 + 1)) $((id * 10)) "$m"
    id=$((id + 1))
  done | "$PY" examples/kafka.py produce "$KAFKA" order-details
}

say "dimension table, Kafka source with a watermark, windowed join, Iceberg table"
sql "
CREATE TABLE users (user_id BIGINT PRIMARY KEY, region VARCHAR);
INSERT INTO users VALUES
 (1,'BeiJing'),(2,'TianJin'),(3,'XiAn'),(4,'ShenZhen'),
 (5,'BeiJing'),(6,'BeiJing'),(7,'ShenZhen'),(8,'ShenZhen');

CREATE SOURCE orders_kafka (
  order_id BIGINT,
  user_id BIGINT,
  order_amount DECIMAL(10, 2),
  order_time TIMESTAMP,
  WATERMARK FOR order_time AS order_time - INTERVAL '5' SECOND
) WITH (
  connector = 'kafka',
  topic = 'order-details',
  properties.bootstrap.server = '$KAFKA',
  scan.startup.mode = 'earliest'
) FORMAT PLAIN ENCODE JSON;

CREATE MATERIALIZED VIEW regional_sales_5m AS
  SELECT window_start AS event_time, u.region,
         CAST(sum(o.order_amount) AS DECIMAL(10, 2)) AS total_sales, count(*) AS orders
  FROM TUMBLE(orders_kafka, order_time, INTERVAL '5' MINUTE) AS o
  JOIN users AS u ON o.user_id = u.user_id
  GROUP BY window_start, u.region;

CREATE CONNECTION lake WITH (type = 'iceberg', catalog.type = 'storage',
  warehouse.path = 's3://$BUCKET/warehouse', s3.endpoint = '$S3', s3.region = 'us-east-1',
  s3.access.key = 'ak', s3.secret.key = 'sk');
SET iceberg_engine_connection = 'public.lake';
CREATE TABLE hourly_regional_sales (
  event_time TIMESTAMP, region VARCHAR, total_sales DECIMAL(10, 2), orders BIGINT,
  PRIMARY KEY (event_time, region)
) WITH (commit_checkpoint_interval = 1) ENGINE = iceberg;
CREATE SINK to_lake INTO hourly_regional_sales AS SELECT * FROM regional_sales_5m;
" >/dev/null

wait_rows() {  # wait_rows N: until the Iceberg table holds N rows
  local n=""
  for _ in $(seq 1 150); do
    n=$(sql "FLUSH; SELECT count(*) FROM hourly_regional_sales")
    [ "$n" = "$1" ] && return 0
    sleep 0.2
  done
  fail "hourly_regional_sales has $n rows, expected $1"
}

say "first batch: 6 orders in 15:00-15:05"
orders 1 0 1 1 2 3 4
wait_rows 4
first=$(sql "SELECT event_time, region, total_sales, orders FROM hourly_regional_sales ORDER BY 1, 2")
echo "$first"
snap=$(sql "SELECT snapshot_id FROM rw_iceberg_sinks WHERE sink_name = 'to_lake'")
say "committed as Iceberg snapshot $snap"

say "second batch: 4 orders in 15:05-15:15, and one more in the first window"
orders 7 6 7 11 12
orders 11 4
wait_rows 8
now=$(sql "SELECT event_time, region, total_sales, orders FROM hourly_regional_sales ORDER BY 1, 2")
echo "$now"
echo "$now" | grep -q '^2024-07-24 15:10:00|' || fail "the 15:10 window is missing"

say "time travel: the table as of snapshot $snap"
then=$(sql "SELECT event_time, region, total_sales, orders
            FROM hourly_regional_sales FOR SYSTEM_VERSION AS OF $snap ORDER BY 1, 2")
[ "$then" = "$first" ] || fail "the table as of snapshot $snap differs from what was read then"
total=$(sql "SELECT sum(orders) FROM hourly_regional_sales")
[ "$total" = 11 ] || fail "expected 11 orders in the lake table, got $total"
say "OK: windows joined with the dimension table, kept in Iceberg, read back as of a snapshot"
