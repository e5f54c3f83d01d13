-- case: covering_point
CREATE TABLE t (id INT PRIMARY KEY, k INT, v VARCHAR);
CREATE INDEX t_k ON t (k);
FLUSH;
EXPLAIN SELECT v FROM t WHERE k = 3;

-- case: not_covering_reads_table_by_key
CREATE TABLE t (id INT PRIMARY KEY, k INT, v VARCHAR, w DOUBLE PRECISION);
CREATE INDEX t_k ON t (k) INCLUDE (v);
FLUSH;
EXPLAIN SELECT w FROM t WHERE k BETWEEN 2 AND 5;

-- case: multi_column_prefix_and_range
CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR, c TIMESTAMP, v INT);
CREATE INDEX t_abc ON t (a, b, c);
FLUSH;
EXPLAIN SELECT v FROM t WHERE a = 1 AND b = 'x' AND c > TIMESTAMP '2024-01-01';
EXPLAIN SELECT v FROM t WHERE a IN (1, 2) AND b = 'x';
EXPLAIN SELECT v FROM t WHERE a = 1 AND c > TIMESTAMP '2024-01-01';

-- case: most_columns_wins
CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT, v INT);
CREATE INDEX t_a ON t (a);
CREATE INDEX t_ab ON t (a, b) INCLUDE (id);
FLUSH;
EXPLAIN SELECT v FROM t WHERE a = 1 AND b = 2;
EXPLAIN SELECT v FROM t WHERE a = 1;

-- case: no_primary_key_reads_by_row_id
CREATE TABLE t (k INT, v INT, w INT);
CREATE INDEX t_k ON t (k) INCLUDE (v);
FLUSH;
EXPLAIN SELECT w FROM t WHERE k = 1;
