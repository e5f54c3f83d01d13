"""Streaming operators: the nodes of Swell's dataflow, one module per operator family.

Owns: `ProjectOp` (project.py), `FilterOp` (filter.py), `HashAggOp` with `AggCall`
(hash_agg.py, aggregate kinds in agg_calls.py), `MaterializeOp` (materialize.py) and
`UnionOp` (union.py); the `StateAllocator` protocol through which operators obtain their
`StateTable`s and the scalar `Expr` protocol they evaluate (base.py); Arrow <-> polars
helpers for vectorised per-epoch consolidation (frames.py).

Upstream: `engine.chunk` (StreamChunk), `engine.stream.operator` (the Operator protocol
and the epoch model), `engine.state.table` (StateTable), `engine.types`, `engine.errors`;
scalar expressions from `engine.expr` are used only through the `Expr` protocol.
Downstream: the stream plan builder, which instantiates operators from plan nodes, and
the runtime, which steps them once per epoch and commits their state tables.
"""

from __future__ import annotations

from engine.stream.operators.agg_calls import AggCall
from engine.stream.operators.base import EvalContextLike, Expr, LocalStateAllocator, StateAllocator
from engine.stream.operators.columnar_materialize import ColumnarMaterializeOp
from engine.stream.operators.filter import FilterOp
from engine.stream.operators.hash_agg import HashAggOp
from engine.stream.operators.hash_join import HashJoinOp
from engine.stream.operators.materialize import MaterializeOp
from engine.stream.operators.project import ProjectOp
from engine.stream.operators.top_n import TopNOp
from engine.stream.operators.union import UnionOp

__all__ = [
    "AggCall",
    "ColumnarMaterializeOp",
    "EvalContextLike",
    "Expr",
    "FilterOp",
    "HashAggOp",
    "HashJoinOp",
    "LocalStateAllocator",
    "MaterializeOp",
    "ProjectOp",
    "StateAllocator",
    "TopNOp",
    "UnionOp",
]
