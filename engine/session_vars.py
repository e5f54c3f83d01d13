"""The settings a session starts with: names, defaults, display names, and which ones
pgwire reports to the client (ParameterStatus).

A base module: `engine.session` (SET/SHOW), `pg_catalog.pg_settings` and functions such
as `current_setting` read these, the latter two also without a session, and neither may
import the session (it sits above them, see docs/architecture.md, "Layers").
"""

from __future__ import annotations

import os

from engine.setting_units import show_bytes


def physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8 * 1024**3


def default_limit() -> int:
    """A quarter of physical memory, in whole megabytes."""
    mb = max(64, physical_memory() // 4 // 1024**2)
    return mb * 1024**2


# name -> default; SHOW prints these; pgwire reports the `REPORTED` ones as ParameterStatus
DEFAULT_VARS: dict[str, str] = {
    "application_name": "",
    "client_encoding": "UTF8",
    "client_min_messages": "notice",
    "datestyle": "ISO, MDY",
    "default_transaction_isolation": "read committed",
    "default_transaction_read_only": "off",
    "extra_float_digits": "1",
    "integer_datetimes": "on",
    "intervalstyle": "postgres",
    "is_superuser": "on",
    "lock_timeout": "0",
    "search_path": '"$user", public',
    "server_encoding": "UTF8",
    "server_version": "13.14.0",
    "server_version_num": "130014",
    "standard_conforming_strings": "on",
    "statement_timeout": "0",
    # per-query memory of ad-hoc queries (engine/batch/memory.py); 0 = no limit
    "query_memory_limit": show_bytes(default_limit()),
    "timezone": "UTC",
    "transaction_isolation": "read committed",
    "transaction_read_only": "off",
    "rw_implicit_flush": "false",
    "implicit_flush": "false",
    "background_ddl": "false",
    "backfill_rate_limit": "-1",
    "streaming_parallelism": "adaptive",
    "query_mode": "auto",
    "max_split_range_gap": "8",
    "iceberg_engine_connection": "",
    "sink_decouple": "default",
    "dml_wait_persistence": "false",
    "idle_in_transaction_session_timeout": "0",
    "bytea_output": "hex",
    "jit": "off",
    "enable_seqscan": "on",
    # read-only PostgreSQL settings tools ask for (SQLAlchemy, pgjdbc, DBeaver)
    "default_table_access_method": "heap",
    "max_identifier_length": "63",
    "max_index_keys": "32",
    "block_size": "8192",
    "lc_collate": "C.UTF-8",
    "lc_ctype": "C.UTF-8",
    "password_encryption": "scram-sha-256",
}
# display names for SHOW ALL / ParameterStatus
DISPLAY = {
    "datestyle": "DateStyle",
    "timezone": "TimeZone",
    "intervalstyle": "IntervalStyle",
}
REPORTED = [
    "application_name",
    "client_encoding",
    "datestyle",
    "default_transaction_read_only",
    "in_hot_standby",
    "integer_datetimes",
    "intervalstyle",
    "is_superuser",
    "server_encoding",
    "server_version",
    "session_authorization",
    "standard_conforming_strings",
    "timezone",
]
