-- case: top_n
CREATE TABLE t (id INT PRIMARY KEY, v INT);
CREATE MATERIALIZED VIEW mv AS SELECT id, v FROM t ORDER BY v DESC LIMIT 3;

-- case: top_n_offset_nulls_first
CREATE TABLE t (id INT PRIMARY KEY, v INT);
CREATE MATERIALIZED VIEW mv AS SELECT id, v FROM t ORDER BY v ASC NULLS FIRST LIMIT 3 OFFSET 2;

-- case: group_top_n
CREATE TABLE t (id INT PRIMARY KEY, uid INT, amount INT);
CREATE MATERIALIZED VIEW mv AS SELECT * FROM (SELECT uid, id, amount, row_number() OVER (PARTITION BY uid ORDER BY amount DESC) AS rn FROM t) WHERE rn <= 2;

-- case: over_window_ranking_and_lag
CREATE TABLE t (id INT PRIMARY KEY, uid INT, amount INT);
CREATE MATERIALIZED VIEW mv AS SELECT id, uid, rank() OVER (PARTITION BY uid ORDER BY amount) AS r, lag(amount) OVER (PARTITION BY uid ORDER BY amount) AS prev FROM t;

-- case: over_window_frames
CREATE TABLE t (id INT PRIMARY KEY, uid INT, amount INT);
CREATE MATERIALIZED VIEW mv AS SELECT id, sum(amount) OVER (PARTITION BY uid ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s3, count(*) OVER (PARTITION BY uid) AS n FROM t;

-- case: top_n_over_aggregate
CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, v INT);
CREATE MATERIALIZED VIEW mv AS SELECT k, sum(v) AS s FROM t GROUP BY k ORDER BY s DESC LIMIT 5;

-- case: append_only_group_top_n
CREATE TABLE t (id INT, uid INT, amount INT) APPEND ONLY;
CREATE MATERIALIZED VIEW mv AS SELECT * FROM (SELECT uid, id, amount, row_number() OVER (PARTITION BY uid ORDER BY amount DESC) AS rn FROM t) WHERE rn <= 2;

-- case: append_only_dedup
CREATE TABLE t (id INT, uid INT, amount INT) APPEND ONLY;
CREATE MATERIALIZED VIEW mv AS SELECT uid, id, amount FROM (SELECT uid, id, amount, row_number() OVER (PARTITION BY uid ORDER BY id) AS rn FROM t) WHERE rn = 1;

-- case: append_only_top_n
CREATE TABLE t (id INT, v INT) APPEND ONLY;
CREATE MATERIALIZED VIEW mv AS SELECT id, v FROM t ORDER BY v DESC LIMIT 3;
