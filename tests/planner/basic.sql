-- case: filter_project
CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, v INT);
CREATE MATERIALIZED VIEW mv AS SELECT id, v * 2 AS v2, upper(k) AS k FROM t WHERE v > 10 AND k <> 'x';

-- case: table_without_pk
CREATE TABLE t (k VARCHAR, v INT);
CREATE MATERIALIZED VIEW mv AS SELECT k, v + 1 AS w FROM t WHERE v IS NOT NULL;

-- case: case_in_like
CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, v INT);
CREATE MATERIALIZED VIEW mv AS SELECT id, CASE WHEN v > 0 THEN 'pos' ELSE 'neg' END AS sign, k IN ('a', 'b') AS ab, k LIKE 'a%' AS a FROM t;

-- case: view_on_view
CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, v INT);
CREATE MATERIALIZED VIEW m1 AS SELECT id, v FROM t WHERE v > 0;
CREATE MATERIALIZED VIEW m2 AS SELECT id, v FROM m1 WHERE v < 100;

-- case: order_by_without_limit
CREATE TABLE t (id INT PRIMARY KEY, v INT);
CREATE MATERIALIZED VIEW mv AS SELECT id, v FROM t ORDER BY v;

-- case: refused_no_stream_key_function
CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMP);
CREATE MATERIALIZED VIEW mv AS SELECT id, now() AS t FROM t;
