"""End-to-end tests through real PostgreSQL clients (psql, psycopg, asyncpg, pgjdbc) against
the shared Swell server. A missing client binary or jar skips its tests with a reason that
names the Debian package; CI (.ci/run) installs them."""
