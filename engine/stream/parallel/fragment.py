"""Which stream nodes run as actors, and by which key columns their inputs are split.

Partitionable in this version (each keeps state per key only, so rows with equal keys
meeting in one actor is all its correctness needs):

* `StreamHashAgg` with group keys (not the emit-on-window-close or collecting variants);
* `StreamHashJoin` equi-join (not an interval join): left rows by the left keys, right
  rows by the right keys, when both sides' key columns hash alike (the same kind of type);
* `StreamTopN` with group keys; `StreamOverWindow` with PARTITION BY.

A node whose plan JSON cannot be rebuilt without the SQL (a call looked up by its SQL,
e.g. a user-defined function) stays in the coordinator: a worker builds its operator
from that JSON alone. The chosen nodes are recorded in the job's catalog entry at CREATE
(`PARALLEL_NODES`), so recovery partitions exactly what the state was written by.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from engine.errors import InvalidParameterValue
from engine.plan.stream_codec import decode_node, encode_node
from engine.plan.stream_plan import (
    StreamHashAgg,
    StreamHashJoin,
    StreamNode,
    StreamOverWindow,
    StreamPlan,
    StreamTopN,
)
from engine.types import arrow_schema

PARALLELISM = "parallelism"
"""Catalog entry key (`Relation.extra`): the job's number of actors per parallel node."""
PARALLEL_NODES = "parallel_nodes"
"""Catalog entry key: the indexes of the plan's nodes that run as actors."""


def _kind(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "str"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "bytes"
    return str(t)


def partition_keys(sn: StreamNode) -> list[list[int]] | None:
    """Per input of `sn`, the columns its rows are split by; None: not partitionable."""
    keys: list[list[int]] | None = None
    if type(sn) is StreamHashAgg and sn.group_keys:
        keys = [list(sn.group_keys)]
    elif type(sn) is StreamHashJoin and sn.left_keys and len(sn.left_keys) == len(sn.right_keys):
        ls, rs = (arrow_schema(s) for s in sn.input_schemas)
        for li, ri in zip(sn.left_keys, sn.right_keys, strict=True):
            if _kind(ls.field(li).type) != _kind(rs.field(ri).type):
                return None
        keys = [list(sn.left_keys), list(sn.right_keys)]
    elif type(sn) is StreamTopN and sn.group_keys:
        keys = [list(sn.group_keys)]
    elif type(sn) is StreamOverWindow and sn.partition_by:
        keys = [list(sn.partition_by)]
    if keys is None or not portable(sn):
        return None
    return keys


def portable(sn: StreamNode) -> bool:
    """The node rebuilds from its JSON alone (what a worker gets)."""
    try:
        decode_node(json.loads(json.dumps(encode_node(sn))))
    except Exception:  # noqa: BLE001 - any encode/decode failure: keep it in the coordinator
        return False
    return True


def choose(plan: StreamPlan) -> list[int]:
    """The indexes of the plan's partitionable nodes."""
    return [i for i, sn in enumerate(plan.nodes) if partition_keys(sn) is not None]


def node_json(sn: StreamNode) -> dict[str, Any]:
    return encode_node(sn)


def parse_parallelism(text: str | None) -> int:
    """`streaming_parallelism`: a positive number of actors, or 0 for 'adaptive' (also
    'auto', 'default', '' and 0): the server's --parallelism."""
    t = (text or "").strip().strip("'").lower()
    if t in ("", "adaptive", "auto", "default", "0"):
        return 0
    try:
        n = int(t)
    except ValueError:
        n = -1
    if n < 0:
        raise InvalidParameterValue(
            f'invalid value for parameter "streaming_parallelism": "{text}"',
            hint="Use a positive number of actors or 'adaptive'.",
        )
    return n
