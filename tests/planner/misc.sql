-- case: cross_join_refused
CREATE TABLE a (id INT PRIMARY KEY);
CREATE TABLE b (id INT PRIMARY KEY);
CREATE MATERIALIZED VIEW mv AS SELECT a.id AS aid, b.id AS bid FROM a CROSS JOIN b;

-- case: unnest_in_select
CREATE TABLE t (id INT PRIMARY KEY, tags VARCHAR[]);
CREATE MATERIALIZED VIEW mv AS SELECT id, unnest(tags) AS tag FROM t;

-- case: values_view
CREATE MATERIALIZED VIEW mv AS SELECT * FROM (VALUES (1), (2)) AS v(x);

-- case: jsonb_access
CREATE TABLE t (id INT PRIMARY KEY, doc JSONB);
CREATE MATERIALIZED VIEW mv AS SELECT id, doc ->> 'name' AS name, (doc -> 'n')::INT AS n FROM t WHERE doc ? 'name';

-- case: coalesce_cast_date_trunc
CREATE TABLE t (id INT PRIMARY KEY, v INT, ts TIMESTAMP);
CREATE MATERIALIZED VIEW mv AS SELECT date_trunc('hour', ts) AS h, sum(coalesce(v, 0)::BIGINT) AS s FROM t GROUP BY date_trunc('hour', ts);

-- case: lateral_unnest_with_ordinality
CREATE TABLE t (id INT PRIMARY KEY, tags VARCHAR[]);
CREATE MATERIALIZED VIEW mv AS SELECT t.id, u.tag, u.n FROM t, LATERAL unnest(t.tags) WITH ORDINALITY AS u(tag, n);

-- case: lateral_generate_series_grouped
CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, n INT);
CREATE MATERIALIZED VIEW mv AS SELECT k, count(*) AS c, sum(g) AS s FROM t CROSS JOIN LATERAL generate_series(1, t.n) AS g GROUP BY k;

-- case: lateral_left_join_refused
CREATE TABLE t (id INT PRIMARY KEY, tags VARCHAR[]);
CREATE MATERIALIZED VIEW mv AS SELECT t.id, u.tag FROM t LEFT JOIN LATERAL unnest(t.tags) AS u(tag) ON true;

-- case: constant_table_function_view
CREATE MATERIALIZED VIEW mv AS SELECT * FROM generate_series(1, 10);

-- case: constant_select_union_table
CREATE TABLE t (id INT PRIMARY KEY);
CREATE MATERIALIZED VIEW mv AS SELECT id FROM t UNION ALL SELECT 0;
