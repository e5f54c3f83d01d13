-- case: inner_join
CREATE TABLE a (id INT PRIMARY KEY, k INT, x VARCHAR);
CREATE TABLE b (id INT PRIMARY KEY, k INT, y VARCHAR);
CREATE MATERIALIZED VIEW mv AS SELECT a.id AS aid, b.id AS bid, a.x, b.y FROM a JOIN b ON a.k = b.k;

-- case: left_join_with_condition
CREATE TABLE a (id INT PRIMARY KEY, k INT, x INT);
CREATE TABLE b (id INT PRIMARY KEY, k INT, y INT);
CREATE MATERIALIZED VIEW mv AS SELECT a.id, b.y FROM a LEFT JOIN b ON a.k = b.k AND b.y > a.x;

-- case: right_join
CREATE TABLE a (id INT PRIMARY KEY, k INT);
CREATE TABLE b (id INT PRIMARY KEY, k INT);
CREATE MATERIALIZED VIEW mv AS SELECT a.id AS aid, b.id AS bid FROM a RIGHT JOIN b ON a.k = b.k;

-- case: full_join
CREATE TABLE a (id INT PRIMARY KEY, k INT);
CREATE TABLE b (id INT PRIMARY KEY, k INT);
CREATE MATERIALIZED VIEW mv AS SELECT a.id AS aid, b.id AS bid FROM a FULL JOIN b ON a.k = b.k;

-- case: three_way_join_with_agg
CREATE TABLE o (id INT PRIMARY KEY, uid INT, pid INT, amount INT);
CREATE TABLE u (uid INT PRIMARY KEY, region VARCHAR);
CREATE TABLE p (pid INT PRIMARY KEY, cat VARCHAR);
CREATE MATERIALIZED VIEW mv AS SELECT u.region, p.cat, sum(o.amount) AS total FROM o JOIN u ON o.uid = u.uid JOIN p ON o.pid = p.pid GROUP BY u.region, p.cat;

-- case: join_on_expression_keys
CREATE TABLE a (id INT PRIMARY KEY, k INT);
CREATE TABLE b (id INT PRIMARY KEY, k INT);
CREATE MATERIALIZED VIEW mv AS SELECT a.id AS aid, b.id AS bid FROM a JOIN b ON a.k + 1 = b.k;

-- case: refused_non_equi_join
CREATE TABLE a (id INT PRIMARY KEY, k INT);
CREATE TABLE b (id INT PRIMARY KEY, k INT);
CREATE MATERIALIZED VIEW mv AS SELECT a.id AS aid, b.id AS bid FROM a JOIN b ON a.k < b.k;

-- case: semi_join_in
CREATE TABLE o (id INT PRIMARY KEY, uid INT, amount INT);
CREATE TABLE u (uid INT PRIMARY KEY, vip BOOLEAN);
CREATE MATERIALIZED VIEW mv AS SELECT id, amount FROM o WHERE uid IN (SELECT uid FROM u WHERE vip);

-- case: anti_join_not_exists
CREATE TABLE o (id INT PRIMARY KEY, uid INT);
CREATE TABLE u (uid INT PRIMARY KEY);
CREATE MATERIALIZED VIEW mv AS SELECT id FROM o WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.uid = o.uid);

-- case: correlated_scalar_subquery
CREATE TABLE o (id INT PRIMARY KEY, uid INT, amount INT);
CREATE TABLE u (uid INT PRIMARY KEY);
CREATE MATERIALIZED VIEW mv AS SELECT uid, (SELECT count(*) FROM o WHERE o.uid = u.uid) AS n FROM u;

-- case: refused_not_in_subquery
CREATE TABLE o (id INT PRIMARY KEY, uid INT);
CREATE TABLE u (uid INT PRIMARY KEY);
CREATE MATERIALIZED VIEW mv AS SELECT id FROM o WHERE uid NOT IN (SELECT uid FROM u);

-- case: join_state_keeps_only_read_columns
CREATE TABLE a (id INT PRIMARY KEY, k INT, x VARCHAR, pad VARCHAR);
CREATE TABLE b (id INT PRIMARY KEY, k INT, y VARCHAR, pad VARCHAR);
CREATE MATERIALIZED VIEW mv AS SELECT a.x, b.y, count(*) AS n FROM a, b WHERE a.k = b.k GROUP BY a.x, b.y;

-- case: join_state_prunes_beside_window_subquery
CREATE TABLE bids (auction INT, price INT, ts TIMESTAMP, url VARCHAR, extra VARCHAR) APPEND ONLY;
CREATE MATERIALIZED VIEW mv AS SELECT b.auction, b.price, b.ts FROM bids b JOIN (SELECT max(price) AS maxprice, window_end FROM TUMBLE(bids, ts, INTERVAL '10' SECOND) GROUP BY window_end) m ON b.price = m.maxprice;

-- case: append_only_join
CREATE TABLE a (id INT, k INT, x VARCHAR) APPEND ONLY;
CREATE TABLE b (id INT, k INT, y INT) APPEND ONLY;
CREATE MATERIALIZED VIEW mv AS SELECT a.k, max(b.y) AS hi, count(*) AS n FROM a JOIN b ON a.k = b.k GROUP BY a.k;

-- case: append_only_join_not_outer
CREATE TABLE a (id INT, k INT, x VARCHAR) APPEND ONLY;
CREATE TABLE b (id INT, k INT, y INT) APPEND ONLY;
CREATE MATERIALIZED VIEW mv AS SELECT a.id, b.y FROM a LEFT JOIN b ON a.k = b.k;
