"""librdkafka's own log lines, routed to Python logging and rate-limited; the CREATE probe.

librdkafka writes to stderr by default (`%3|1796155768.336|FAIL|rdkafka#consumer-1| ...`),
and while a broker is unreachable it repeats the same line every reconnect attempt (about
20 a second). Every client Swell creates gets `client_logging()` in its config instead:

- the lines go to the `swell.kafka.librdkafka` logger, so they share Swell's format and
  `--log-level`;
- `RateLimit` lets one line through per key (client, facility, message with its digits
  blanked) every `INTERVAL_S` seconds; the next line that passes says how many similar
  ones were dropped meanwhile.

`probe(conf, topic, ...)`: the check at CREATE SOURCE / CREATE TABLE (RisingWave checks the
connection at CREATE as well): a TCP connect to each bootstrap address (fast refusal for a
wrong host or port), then a metadata request through librdkafka. An unreachable broker
raises `ConnectorError`; a topic that does not exist yet is fine (a source may be declared
before its topic).
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from typing import Any

from confluent_kafka.admin import AdminClient

from engine.errors import ConnectorError

RDKAFKA_LOGGER = "swell.kafka.librdkafka"
INTERVAL_S = 30.0
PROBE_TIMEOUT_S = 5.0

_DIGITS = re.compile(r"\d+")


class RateLimit(logging.Filter):
    """At most one record per key every `interval` seconds; counts what it drops."""

    def __init__(self, interval: float = INTERVAL_S) -> None:
        super().__init__()
        self.interval = interval
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._dropped: dict[str, int] = {}

    @staticmethod
    def key(record: logging.LogRecord) -> str:
        # confluent-kafka logs ("%s [%s] %s", facility, client name, text)
        args = record.args if isinstance(record.args, tuple) else ()
        text = " ".join(str(a) for a in args) if args else str(record.msg)
        return _DIGITS.sub("#", text)

    def filter(self, record: logging.LogRecord) -> bool:
        k = self.key(record)
        now = time.monotonic()
        with self._lock:
            last = self._last.get(k)
            if last is not None and now - last < self.interval:
                self._dropped[k] = self._dropped.get(k, 0) + 1
                return False
            self._last[k] = now
            dropped = self._dropped.pop(k, 0)
            if len(self._last) > 1000:  # many distinct keys: forget the old ones
                cutoff = now - self.interval
                self._last = {q: t for q, t in self._last.items() if t >= cutoff}
        if dropped:
            note = f"{dropped} similar lines in the last {self.interval:.0f} s not shown"
            record.msg = f"{record.msg} ({note})"
        return True


_logger = logging.getLogger(RDKAFKA_LOGGER)
_logger.addFilter(RateLimit())


def client_logging() -> dict[str, Any]:
    """librdkafka config entries that send its log lines to the rate-limited logger."""
    return {"logger": _logger}


def _addresses(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for part in bootstrap.split(","):
        part = part.strip()
        if "://" in part:
            part = part.split("://", 1)[1]
        host, _, port = part.rpartition(":")
        if host and port.isdigit():
            out.append((host.strip("[]"), int(port)))
    return out


def _tcp_reachable(addrs: list[tuple[str, int]], timeout: float) -> str | None:
    """None when one address accepts a TCP connection, else the last error text."""
    error = "no bootstrap address"
    for host, port in addrs:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return None
        except OSError as e:
            error = f"{host}:{port}: {e.strerror or e}"
    return error


def probe(conf: dict[str, Any], topic: str, *, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Check that the brokers in `conf` answer; True when `topic` exists.

    Raises `ConnectorError` when no bootstrap address accepts a connection or the brokers
    do not answer a metadata request within `timeout` seconds.
    """
    bootstrap = str(conf.get("bootstrap.servers", ""))
    hint = "Check properties.bootstrap.server and that the broker is running."
    addrs = _addresses(bootstrap)
    if addrs:
        why = _tcp_reachable(addrs, min(timeout, 2.0))
        if why is not None:
            raise ConnectorError(f"could not reach kafka at {bootstrap}: {why}", hint=hint)
    setup = conf.get("socket.connection.setup.timeout.ms")
    if setup is not None and str(setup).isdigit():
        timeout = min(timeout, int(setup) / 1000 + 1)
    admin_conf = {
        k: v
        for k, v in conf.items()
        if k == "bootstrap.servers" or k.startswith(("security.", "sasl.", "ssl.", "client."))
    }
    admin = AdminClient({**admin_conf, **client_logging()})
    try:
        # all topics: asking for the one topic makes some brokers (Tansu, Kafka with
        # auto.create.topics.enable) create it as a side effect of the probe
        md = admin.list_topics(timeout=timeout)
    except Exception as e:
        raise ConnectorError(f"could not reach kafka at {bootstrap}: {e}", hint=hint) from None
    t = md.topics.get(topic)
    return t is not None and t.error is None and bool(t.partitions)
