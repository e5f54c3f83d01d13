"""Connector registry: the engine names connector kinds, connector packages fill them in.

Layers call `pgwire -> engine <- connectors`: the engine must not import `connectors` at
module import, yet `CREATE SINK ... WITH (connector = 'kafka')` has to find the Kafka
writer. So the engine owns this registry and connector modules register into it when they
are imported:

    # connectors/kafka/__init__.py
    from engine.registry import register
    register("sink", "kafka", KafkaSinkWriter)

`lookup(kind, name)` returns the registered factory; on a miss it imports
`connectors.<name>` once (by name, at DDL or recovery time, never at engine import) so the
package can register itself, then looks again. `kind` is a free string: "sink" for sink
writers (`engine.stream.sink.SinkWriter` factories), "source" for source readers, ...
Lifecycle: process-wide, filled lazily, never cleared (tests may register extra factories
under names of their own).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any

_lock = threading.Lock()
_registry: dict[tuple[str, str], Callable[..., Any]] = {}
_tried: set[str] = set()


def register(kind: str, name: str, factory: Callable[..., Any]) -> None:
    """Register `factory` as connector `name` of `kind` (later registrations win)."""
    with _lock:
        _registry[(kind, name.lower())] = factory


def lookup(kind: str, name: str) -> Callable[..., Any] | None:
    """The factory for connector `name` of `kind`, importing `connectors.<name>` on a miss."""
    key = (kind, name.lower())
    f = _registry.get(key)
    if f is not None:
        return f
    mod = name.lower().replace("-", "_")
    if mod.isidentifier() and mod not in _tried:
        _tried.add(mod)
        try:
            importlib.import_module(f"connectors.{mod}")
        except ModuleNotFoundError as e:
            if e.name not in (f"connectors.{mod}", "connectors"):
                raise  # the connector exists but one of its dependencies is missing
    return _registry.get(key)


def names(kind: str) -> list[str]:
    """Registered connector names of `kind` (those imported so far)."""
    return sorted(n for k, n in _registry if k == kind)
