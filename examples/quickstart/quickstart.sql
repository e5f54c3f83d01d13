-- The README's first block: psql -h 127.0.0.1 -p 4566 -U root dev -f examples/quickstart.sql
-- A table, a materialized view kept up to date incrementally, and changes flowing through.

CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, v INT);
INSERT INTO t VALUES (1, 'a', 10), (2, 'a', 5), (3, 'b', 7);

CREATE MATERIALIZED VIEW mv AS
  SELECT k, count(*) AS c, sum(v) AS s, min(v) AS mn, max(v) AS mx, avg(v) AS av
  FROM t GROUP BY k;

-- Reads see the last committed epoch; FLUSH commits now and waits for the views.
FLUSH;
SELECT * FROM mv ORDER BY k;
--  a | 2 | 15 | 5 | 10 | 7.5
--  b | 1 |  7 | 7 |  7 | 7

DELETE FROM t WHERE id = 1;
UPDATE t SET v = 50 WHERE id = 3;
-- an INSERT on an existing primary key overwrites that row
INSERT INTO t VALUES (2, 'a', 6);
FLUSH;
SELECT * FROM mv ORDER BY k;
--  a | 1 |  6 |  6 |  6 | 6
--  b | 1 | 50 | 50 | 50 | 50

DROP MATERIALIZED VIEW mv;
DROP TABLE t;
