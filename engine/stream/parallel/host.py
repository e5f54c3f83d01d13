"""WorkerHost: the worker side of parallel execution, independent of the transport.

A worker process (`worker_main`) or a Ray actor owns one `WorkerHost` and feeds it the
coordinator's requests one at a time: `handle(request) -> response` (bytes of
`protocol`). The host keeps the actors the coordinator built on it, each an operator of
one stream node with its own physical state tables, and a scratch RocksDB (under
`config["scratch_dir"]`, else a temporary directory) that holds those tables' committed
rows for the operators' disk tables. The scratch store is not durable state: it is
emptied when the host starts or is reset, and rebuilt from what the coordinator ships.

Commands (header `"cmd"`):

* `build`  actor key, the stream node's JSON (`engine.plan.stream_codec`), the physical
  table id of each of the node's tables, the job's name and timezone; bodies: the
  tables' committed entries (`protocol.kv_body`, in batches) when recovering. The operator is made
  by `engine.stream.build.build_op`, like the coordinator's.
* `step`   per actor: its input chunks for this epoch (and `force`); returns each
  actor's output chunk and the expression errors its rows raised (reported by the
  coordinator into the job's event log). With `"hold"` (a backfill slice of a creating
  view) the actor keeps its output instead (`Actor.held`, consolidated once it grows
  past `HOLD_ROWS`) and says so (`"held"`); the next step without it (the barrier's)
  returns everything held and its own output as one consolidated chunk. An aggregation
  stepped slice after slice rewrites the same groups each time; held, the view gets
  each group's net change once per epoch instead of once per slice.
* `collect` per actor: its tables' `write_dirty` into a recording batch, also applied to
  the scratch store (the tables read committed rows from there); returns per actor an
  SST file of those writes (with `"sst"`, when they have no range delete; `"kinds"`
  says which body is which), which the coordinator's checkpoint ingests whole, or the
  write log it replays into its checkpoint WriteBatch. The file is ingested (moved)
  into the scratch store too, the log applied. The scratch write is deferred
  (`defer`/`finish`): it runs once the response is sent, while the coordinator replays
  the logs, and always before the next request is read.
* `decode`  a piece of a COPY's text or CSV data (the body), its options, column types
  and whether the session's time zone is UTC: the columns as one IPC body
  (`engine.stream.copy_decode.decode_fast`), or `"refused"` when the vectorised path
  does not vouch for the data (the coordinator then decodes it itself). Touches no
  actor, so it leaves an error of the deferred scratch write for the next actor request.
* `drop` (actors), `reset` (everything: recovery), `stats`.

Single-threaded and does no I/O besides its scratch store.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import logging
import os
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from rocksdict import WriteOptions

from engine.catalog.catalog import type_from_json
from engine.chunk import Op, StreamChunk
from engine.errors import EngineError
from engine.expr.core import EvalContext, JobEvalContext
from engine.plan.stream_codec import decode_node
from engine.state.budget import StateBudget
from engine.state.codec import table_prefix
from engine.state.disk_table import DiskTables, HotCache
from engine.state.store import StateStore
from engine.stream.build import PlannedAllocator, build_op
from engine.stream.copy_decode import decode_fast
from engine.stream.operator import Operator
from engine.stream.operators.frames import consolidate
from engine.stream.parallel import protocol

log = logging.getLogger("swell.worker")

HOLD_ROWS = 1 << 19
"""Output rows an actor holds (see `step` above) before consolidating them; still this
many after consolidation, they are returned with the step (bounds the worker's memory
and the barrier step that takes them)."""


SST_MIN_OPS = 8192
"""A collected log of at least this many writes goes back as an SST file (`collect`):
the coordinator then adds it to its store without a Python call per key (about 1 us per
key there otherwise). Smaller ones go as the log: each ingested file is a few ms of fixed
cost (copies, fsyncs) and one more level-0 file for RocksDB to compact, which made a
one-row epoch of a view with two parallel operators cost the coordinator 90 ms of CPU
instead of 25."""


def merge_changes(chunks: list[StreamChunk]) -> StreamChunk | None:
    """Several steps' outputs as one chunk of their net changes (Z-set consolidation by
    full row: a group rewritten three times leaves its first old row's delete and its
    last new row's insert). A single chunk is returned as it is."""
    if len(chunks) < 2:
        return chunks[0] if chunks else None
    joined = StreamChunk.concat(chunks)
    if joined is None:
        return None
    batch, w = consolidate(joined)
    if not len(w):
        return None
    if (abs(w) != 1).any():  # a row net twice or more: repeated that many times
        idx = np.repeat(np.arange(len(w)), np.abs(w))
        batch, w = batch.take(pa.array(idx)), np.sign(w[idx])
    ops = np.where(w > 0, Op.INSERT, Op.DELETE).astype(np.int8)
    return StreamChunk(pa.array(ops), batch)


class _Errors:
    """The actor's ErrorSink: failures are kept and returned with the step response."""

    def __init__(self) -> None:
        self.items: list[list[Any]] = []

    def report(self, expression: str, error: EngineError, count: int, sample: str) -> None:
        self.items.append([expression, error.sqlstate, error.message, count, sample])


def _release() -> None:
    """Dropped actors were frozen out of the collector (`_cmd_collect`): a full collection
    frees their reference cycles."""
    gc.unfreeze()
    gc.collect()


@dataclasses.dataclass
class Actor:
    key: str
    op: Operator
    tables: list[Any]
    table_ids: list[int]
    errors: _Errors
    clock: EvalContext
    rows_in: int = 0
    rows_out: int = 0
    held: list[StreamChunk] = dataclasses.field(default_factory=list)  # `step` with hold
    held_rows: int = 0

    def keep(self, out: StreamChunk | None, hold: bool) -> StreamChunk | None:
        """`out` of a step with or without `hold`: None while it is held, else the
        output to return (with everything held before it, consolidated)."""
        if out is not None and len(out):
            self.held.append(out)
            self.held_rows += len(out)
        if hold and self.held_rows >= HOLD_ROWS:
            merged = merge_changes(self.held)
            self.held = [merged] if merged is not None else []
            self.held_rows = len(merged) if merged is not None else 0
            hold = self.held_rows < HOLD_ROWS // 2
        if hold:
            return None
        merged = merge_changes(self.held)
        self.held, self.held_rows = [], 0
        return merged


class WorkerHost:
    """See the module docstring. `config`: worker_id, scratch_dir, cache_mb (operator
    caches), state_mb (the scratch store's RocksDB budget, `engine.state.budget`)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = dict(config)
        self.worker_id = int(config.get("worker_id", 0))
        self.actors: dict[str, Actor] = {}
        self._store: StateStore | None = None
        self._disk: DiskTables | None = None
        self._dir: Path | None = None
        self.requests = 0
        self._files = 0  # SST files written (`_sst_path`)
        # work a response does not wait for (`defer`): run by `finish` once the response
        # is on its way, at the latest before the next request
        self._deferred: list[Callable[[], None]] = []
        self._deferred_error: BaseException | None = None
        self._no_wal = WriteOptions()
        self._no_wal.disable_wal = True  # type: ignore[method-assign,assignment]  # a property; the stub says method

    # -- scratch store -------------------------------------------------------------------
    def _scratch(self) -> StateStore:
        if self._store is None:
            base = self.config.get("scratch_dir")
            if base:
                d = Path(str(base)) / f"worker-{self.worker_id}"
                shutil.rmtree(d, ignore_errors=True)
            else:
                d = Path(tempfile.mkdtemp(prefix="swell-worker-"))
            self._dir = d
            shutil.rmtree(self._sst_dir(), ignore_errors=True)
            self._sst_dir().mkdir(parents=True)
            mb = self.config.get("state_mb")
            self._store = StateStore.open(d, StateBudget.from_mb(int(mb)) if mb else None)
            cache = int(self.config.get("cache_mb", 64)) << 20
            self._disk = DiskTables(self._store, HotCache(cache))
        return self._store

    def _write(self, batch: Any) -> None:
        """Apply `batch` to the scratch store without RocksDB's write-ahead log: the
        store is rebuilt from what the coordinator ships after any failure, so logging
        its writes (the actors' whole dirty state every checkpoint) would be wasted."""
        self._scratch().db.write(batch, self._no_wal)

    def defer(self, fn: Callable[[], None]) -> None:
        """Run `fn` after the current response is sent (`finish`), before the next request."""
        self._deferred.append(fn)

    def finish(self) -> None:
        """The deferred work of the last request (the transport calls this once it has
        sent the response; `handle` calls it too, so a transport that does not is only
        slower). An error is kept and answers the next request, which rolls the epoch back:
        the scratch store may lack the writes of the last collect."""
        work, self._deferred = self._deferred, []
        for fn in work:
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - answered with the next request
                log.error("worker %s: deferred work failed", self.worker_id, exc_info=e)
                self._deferred_error = self._deferred_error or e

    def close(self) -> None:
        self._deferred = []
        self._deferred_error = None
        self.actors = {}
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            shutil.rmtree(self._sst_dir(), ignore_errors=True)
            self._dir = None

    # -- dispatch ------------------------------------------------------------------------
    def handle(self, request: bytes) -> bytes:
        """Run one request; errors become an error response (never raised)."""
        self.requests += 1
        t0 = time.perf_counter()
        try:
            self.finish()
            header, bodies = protocol.decode(request)
            cmd = header.get("cmd")
            if self._deferred_error is not None and cmd not in ("reset", "decode"):
                err, self._deferred_error = self._deferred_error, None
                raise EngineError(f"the worker's scratch store write failed: {err}") from err
            fn = getattr(self, f"_cmd_{cmd}", None)
            if fn is None:
                raise ValueError(f"unknown command {cmd!r}")
            out: bytes = fn(header, bodies)
        except Exception as e:  # noqa: BLE001 - reported to the coordinator, which rolls back
            tb = traceback.format_exc()
            if not isinstance(e, EngineError):
                log.error("worker %s: request failed", self.worker_id, exc_info=e)
            out = protocol.error_response(e, tb)
        # every response says how busy the worker is (per-worker metrics, alignment wait)
        return protocol.with_timing(out, time.process_time(), time.perf_counter() - t0)

    def _cmd_ping(self, header: dict[str, Any], bodies: list[memoryview]) -> bytes:
        return protocol.encode({"ok": True, "pid": os.getpid()})

    def _cmd_stats(self, header: dict[str, Any], bodies: list[memoryview]) -> bytes:
        actors = {k: {"rows_in": a.rows_in, "rows_out": a.rows_out} for k, a in self.actors.items()}
        return protocol.encode(
            {"ok": True, "pid": os.getpid(), "requests": self.requests, "actors": actors}
        )

    def _cmd_reset(self, header: dict[str, Any], bodies: list[memoryview]) -> bytes:
        self.close()
        _release()
        return protocol.encode({"ok": True})

    def _clear(self, ids: list[int]) -> None:
        store = self._scratch()
        batch = store.new_batch()
        for tid in ids:
            batch.delete_range(table_prefix(tid), table_prefix(tid + 1))
        self._write(batch)

    def _cmd_build(self, header: dict[str, Any], bodies: list[memoryview]) -> bytes:
        key = str(header["actor"])
        phys: dict[str, int] = {str(k): int(v) for k, v in header["tables"].items()}
        store = self._scratch()
        old = self.actors.pop(key, None)
        self._clear(sorted(set(phys.values()) | set(old.table_ids if old else [])))
        for body in bodies:  # the tables' committed entries, in batches
            batch = store.new_batch()
            ks, vs = protocol.kv_from(body)
            for k, v in zip(ks, vs, strict=True):
                batch.put(k, v)
            self._write(batch)
        node = decode_node(header["node"])
        node.tables = [dataclasses.replace(t, id=phys[t.name]) for t in node.tables]
        clock = EvalContext(timezone=str(header.get("timezone", "UTC")))
        errors = _Errors()
        ctx = JobEvalContext(timezone=clock.timezone, errors=errors, parent=clock)
        alloc = PlannedAllocator(node, str(header.get("owner", "")), store, self._disk)
        op = build_op(node, alloc, ctx)
        alloc.check_used(node)
        tables = list(alloc.made.values())
        self.actors[key] = Actor(key, op, tables, sorted(phys.values()), errors, clock)
        return protocol.encode({"ok": True})

    def _cmd_step(self, header: dict[str, Any], bodies: list[memoryview]) -> bytes:
        now = header.get("now")
        hold = bool(header.get("hold"))
        out_bodies: list[bytes] = []
        outs: list[dict[str, Any]] = []
        for s in header["steps"]:
            a = self.actors[str(s["actor"])]
            a.clock.now = datetime.fromisoformat(now) if now else None
            ins = [protocol.chunk_from(bodies[i]) if i >= 0 else None for i in s["inputs"]]
            a.rows_in += sum(len(c) for c in ins if c is not None)
            a.errors.items = []
            stepped = a.op.step(ins) if s.get("run", True) else None
            out = a.keep(stepped, hold)
            step: dict[str, Any] = {"out": -1, "errors": a.errors.items, "held": bool(a.held)}
            if out is not None and len(out):
                a.rows_out += len(out)
                step["out"] = len(out_bodies)
                out_bodies.append(protocol.chunk_body(out))
            outs.append(step)
        return protocol.encode({"ok": True, "steps": outs}, out_bodies)

    def _cmd_collect(self, header: dict[str, Any], bodies: list[memoryview]) -> bytes:
        store = self._scratch()
        logs: list[bytes] = []
        kinds: list[str] = []
        keys = 0
        for key in header["actors"]:
            a = self.actors[str(key)]
            rec = protocol.RecordingBatch()
            for t in a.tables:
                keys += t.write_dirty(rec)
            rec.sort()
            if not len(rec):
                continue
            path = self._sst_path()
            if header.get("sst") and len(rec) >= SST_MIN_OPS and protocol.write_sst(rec, path):
                # an SST file: the coordinator and this scratch store ingest it whole
                logs.append(Path(path).read_bytes())
                kinds.append("sst")
                self.defer(functools.partial(store.ingest, [path], move=True))
            else:
                logs.append(rec.body())
                kinds.append("log")
                self.defer(functools.partial(self._apply, store, rec))
        # the actors' state lives in long-lived Python objects (caches, operator state):
        # moved out of the collector's generations at each checkpoint, as the runtime does
        # in the server, so GC passes stay proportional to new garbage, not to the state
        self.defer(gc.freeze)
        return protocol.encode({"ok": True, "keys": keys, "kinds": kinds}, logs)

    def _sst_dir(self) -> Path:
        """Beside the scratch store: its SST files until they are ingested (moved) into it."""
        assert self._dir is not None
        return Path(f"{self._dir}-sst")

    def _sst_path(self) -> str:
        self._files += 1
        return str(self._sst_dir() / f"{self._files}.sst")

    def _apply(self, store: StateStore, rec: protocol.RecordingBatch) -> None:
        """A collected write log into the scratch store: deferred until the log is sent,
        so the worker writes while the coordinator replays the log into its checkpoint."""
        batch = store.new_batch()
        rec.apply(batch)
        self._write(batch)

    def _cmd_decode(self, header: dict[str, Any], bodies: list[memoryview]) -> bytes:
        types = [type_from_json(t) for t in header["types"]]
        cols = decode_fast(bytes(bodies[0]), dict(header["opts"]), types, bool(header.get("utc")))
        if cols is None:
            return protocol.encode({"ok": True, "refused": True})
        return protocol.encode({"ok": True}, [protocol.columns_body(cols)])

    def _cmd_drop(self, header: dict[str, Any], bodies: list[memoryview]) -> bytes:
        ids: list[int] = []
        for key in header["actors"]:
            a = self.actors.pop(str(key), None)
            if a is not None:
                ids.extend(a.table_ids)
        if ids:
            self._clear(ids)
            _release()
        return protocol.encode({"ok": True})
