-- case: hash_agg
CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, v INT);
CREATE MATERIALIZED VIEW mv AS SELECT k, count(*) AS n, sum(v) AS s, avg(v) AS a FROM t GROUP BY k;

-- case: simple_agg
CREATE TABLE t (id INT PRIMARY KEY, v INT);
CREATE MATERIALIZED VIEW mv AS SELECT count(*) AS n, max(v) AS hi FROM t;

-- case: min_max_share_a_table
CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, v INT, w INT);
CREATE MATERIALIZED VIEW mv AS SELECT k, min(v) AS lo, max(v) AS hi, max(w) AS hw FROM t GROUP BY k;

-- case: distinct_and_filter
CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, v INT);
CREATE MATERIALIZED VIEW mv AS SELECT k, count(DISTINCT v) AS d, sum(v) FILTER (WHERE v > 0) AS sp, count(*) FILTER (WHERE v < 0) AS nn FROM t GROUP BY k;

-- case: having_and_expression_keys
CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, v INT);
CREATE MATERIALIZED VIEW mv AS SELECT v % 10 AS bucket, count(*) AS n FROM t GROUP BY v % 10 HAVING count(*) > 1;

-- case: select_distinct
CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, v INT);
CREATE MATERIALIZED VIEW mv AS SELECT DISTINCT k FROM t;

-- case: bool_aggs
CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, b BOOLEAN);
CREATE MATERIALIZED VIEW mv AS SELECT k, bool_and(b) AS all_b, bool_or(b) AS any_b FROM t GROUP BY k;

-- case: grouping_sets
CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR, b VARCHAR, v INT);
CREATE MATERIALIZED VIEW mv AS SELECT a, b, sum(v) AS s FROM t GROUP BY ROLLUP (a, b);

-- case: collect_aggs
CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, name VARCHAR);
CREATE MATERIALIZED VIEW mv AS SELECT k, string_agg(name, ', ' ORDER BY name) AS names, array_agg(id ORDER BY id) AS ids, jsonb_agg(name) AS j FROM t GROUP BY k;
