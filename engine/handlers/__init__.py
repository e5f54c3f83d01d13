"""Statement handlers, one module per statement family: queries (SELECT, EXPLAIN), DML
(INSERT/UPDATE/DELETE), DDL (CREATE/DROP) and SHOW/DESCRIBE. Called by `engine.session`;
they plan with `engine.plan`, run with `engine.batch` or change the dataflow through
`engine.stream.runtime`."""
