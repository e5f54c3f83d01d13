-- case: sink_from_table
CREATE TABLE t (id INT PRIMARY KEY, v INT);
CREATE SINK s FROM t WITH (connector = 'blackhole');

-- case: sink_as_query
CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, v INT);
CREATE SINK s AS SELECT k, count(*) AS n FROM t GROUP BY k WITH (connector = 'blackhole', type = 'upsert', primary_key = 'k');

-- case: sink_append_only
CREATE TABLE t (id INT, v INT) APPEND ONLY;
CREATE SINK s AS SELECT id, v * 2 AS w FROM t WHERE v > 0 WITH (connector = 'blackhole', type = 'append-only');

-- case: sink_into_table
CREATE TABLE src (id INT PRIMARY KEY, v INT);
CREATE TABLE dst (id INT PRIMARY KEY, v INT);
CREATE SINK s INTO dst AS SELECT id, v + 1 AS v FROM src;
