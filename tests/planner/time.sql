-- case: tumble_agg
CREATE TABLE t (id INT PRIMARY KEY, amount INT, ts TIMESTAMP);
CREATE MATERIALIZED VIEW mv AS SELECT window_start, count(*) AS n, sum(amount) AS s FROM TUMBLE(t, ts, INTERVAL '5' MINUTE) GROUP BY window_start;

-- case: hop_agg
CREATE TABLE t (id INT PRIMARY KEY, amount INT, ts TIMESTAMP);
CREATE MATERIALIZED VIEW mv AS SELECT window_start, window_end, count(*) AS n FROM HOP(t, ts, INTERVAL '1' MINUTE, INTERVAL '3' MINUTE) GROUP BY window_start, window_end;

-- case: tumble_with_offset_join
CREATE TABLE o (id INT PRIMARY KEY, uid INT, amount INT, ts TIMESTAMP);
CREATE TABLE u (uid INT PRIMARY KEY, region VARCHAR);
CREATE MATERIALIZED VIEW mv AS SELECT window_start, u.region, sum(o.amount) AS total FROM TUMBLE(o, ts, INTERVAL '1' HOUR, INTERVAL '15' MINUTE) AS o JOIN u ON o.uid = u.uid GROUP BY window_start, u.region;

-- case: watermark_eowc_agg
CREATE TABLE t (id INT PRIMARY KEY, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);
CREATE MATERIALIZED VIEW mv AS SELECT window_start, count(*) AS n, max(v) AS hi FROM TUMBLE(t, ts, INTERVAL '1' MINUTE) GROUP BY window_start EMIT ON WINDOW CLOSE;

-- case: watermark_eowc_sort
CREATE TABLE t (id INT PRIMARY KEY, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);
CREATE MATERIALIZED VIEW mv AS SELECT id, v, ts FROM t EMIT ON WINDOW CLOSE;

-- case: refused_eowc_without_watermark
CREATE TABLE t (id INT PRIMARY KEY, v INT, ts TIMESTAMP);
CREATE MATERIALIZED VIEW mv AS SELECT v, count(*) AS n FROM t GROUP BY v EMIT ON WINDOW CLOSE;

-- case: temporal_filter
CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMPTZ);
CREATE MATERIALIZED VIEW mv AS SELECT id, ts FROM t WHERE ts > now() - INTERVAL '1 hour';

-- case: temporal_filter_between
CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMPTZ);
CREATE MATERIALIZED VIEW mv AS SELECT id FROM t WHERE ts BETWEEN now() - INTERVAL '1' HOUR AND now();

-- case: refused_now_in_select
CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMPTZ);
CREATE MATERIALIZED VIEW mv AS SELECT id, now() AS t FROM t;

-- case: dynamic_filter
CREATE TABLE l (id INT PRIMARY KEY, v INT);
CREATE TABLE r (id INT PRIMARY KEY, v INT);
CREATE MATERIALIZED VIEW mv AS SELECT id, v FROM l WHERE v > (SELECT max(v) FROM r) AND id > 1;

-- case: interval_join
CREATE TABLE a (id INT PRIMARY KEY, k INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);
CREATE TABLE b (id INT PRIMARY KEY, k INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);
CREATE MATERIALIZED VIEW mv AS SELECT a.id AS aid, b.id AS bid FROM a JOIN b ON a.k = b.k AND a.ts BETWEEN b.ts - INTERVAL '1' MINUTE AND b.ts;

-- case: watermark_through_project
CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);
CREATE MATERIALIZED VIEW m1 AS SELECT id, date_trunc('minute', ts) AS m FROM t;
CREATE MATERIALIZED VIEW mv AS SELECT m, count(*) AS n FROM m1 GROUP BY m EMIT ON WINDOW CLOSE;

-- case: append_only_interval_join
CREATE TABLE a (id INT, k INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) APPEND ONLY;
CREATE TABLE b (id INT, k INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) APPEND ONLY;
CREATE MATERIALIZED VIEW mv AS SELECT a.id AS aid, b.id AS bid FROM a JOIN b ON a.k = b.k AND a.ts BETWEEN b.ts - INTERVAL '1' MINUTE AND b.ts;
