"""SQL text to statements.

Owns statement splitting and parsing: sqlglot's `risingwave` dialect for everything it
parses into a real tree, and our own small parsers for the statements it turns into an
unparsed `Command` or gets wrong (FLUSH, SHOW, SET/RESET, transaction control, APPEND ONLY,
EXPLAIN). A statement whose tree sqlglot only guessed is never executed: it is refused
with a syntax error instead.

Upstream: sqlglot. Downstream: `engine.session` (dispatch), `engine.plan` (binding).
"""
