"""The versions Swell reports: the PostgreSQL version it speaks as, and its own.

A base module (no engine imports) so functions such as `version()` read them without
importing the database object that also reports them at startup.
"""

SERVER_VERSION = "13.14.0"
SWELL_VERSION = "0.1.0"
