"""Rough throughput of HashJoinOp and TopNOp (rows per CPU-second), operator only.

Workloads (1,000,000 stream events by default, split into epochs of `--epoch` rows):

1. `join-insert`: an insert-only fact stream (id, user_id, amount) joined (inner) to a
   10,000-row dimension loaded in the first epoch;
2. `join-updates`: the same, left outer, where 10% of each epoch's events are updates of
   earlier fact rows and every epoch also updates 1% of the dimension;
3. `top3`: group top-3 (`row_number() OVER (PARTITION BY user_id ORDER BY amount DESC)
   <= 3`, with the rank column) over the insert-only fact stream with 10,000 groups;
4. `top3-changes`: the same where 10% of each epoch's events delete or update earlier
   rows, half of them current top rows (their groups are refilled from stored rows).

With `--store` every epoch also commits the operator's dirty state to a real RocksDB store
through the runtime's `Checkpointer` (unsynced, in a temporary directory), and that CPU
time counts too: the honest per-epoch cost. Without it only the operator is measured.
Usage: .venv/bin/python bench/join_bench.py [--events N] [--epoch N] [--only NAME] [--store]
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's engine

from engine.chunk import Op, StreamChunk  # noqa: E402
from engine.state.checkpoint import Checkpointer  # noqa: E402
from engine.state.store import StateStore  # noqa: E402
from engine.state.wal import Wal  # noqa: E402
from engine.stream.operator import Operator  # noqa: E402
from engine.stream.operators import HashJoinOp, LocalStateAllocator, TopNOp  # noqa: E402
from engine.types import DOUBLE, INT, VARCHAR, Field  # noqa: E402

FACT = [Field("id", INT), Field("user_id", INT), Field("amount", DOUBLE)]
DIM = [Field("user_id", INT), Field("region", VARCHAR)]
N_DIM = 10_000


def fact_batch(ids: np.ndarray, users: np.ndarray, amounts: np.ndarray) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array(ids, pa.int32()), pa.array(users, pa.int32()), pa.array(amounts)],
        names=[f.name for f in FACT],
    )


def dim_batch(users: np.ndarray, tag: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array(users, pa.int32()), pa.array([f"r{(u + tag) % 7}" for u in users.tolist()])],
        names=[f.name for f in DIM],
    )


Commit = Callable[[Operator], None]


def no_store(op: Operator) -> None:
    """Operator-only runs: state stays in memory."""


class Store:
    """Commits an operator's dirty state tables to RocksDB each epoch (as the runtime does)."""

    def __init__(self, root: Path) -> None:
        self.store = StateStore.open(root / "state")
        self.cp = Checkpointer(self.store, Wal(self.store))
        self.epoch = 0
        self.bytes = 0

    def __call__(self, op: Operator) -> None:
        self.epoch += 1
        self.cp.commit(self.epoch, 0, op.state_tables(), {})
        self.bytes += self.cp.last_bytes

    def close(self) -> None:
        self.store.close()


def ops(kinds: list[tuple[Op, int]]) -> pa.Array:
    return pa.array(np.concatenate([np.full(n, o, dtype=np.int8) for o, n in kinds]))


def run_join(events: int, epoch: int, updates: bool, commit: Commit) -> tuple[int, float]:
    rng = np.random.default_rng(1)
    kind = "left" if updates else "inner"
    op = HashJoinOp(FACT, DIM, kind, [1], [0], None, None, LocalStateAllocator(), [0], [0])
    dim_users = np.arange(N_DIM, dtype=np.int64)
    cur_region_tag = np.zeros(N_DIM, dtype=np.int64)
    users_of: np.ndarray = np.empty(0, dtype=np.int64)
    amounts_of: np.ndarray = np.empty(0)
    out_rows = 0
    cpu = 0.0
    next_id = 0
    first = True
    done = 0
    while done < events:
        n = min(epoch, events - done)
        n_upd = n // 10 if updates and next_id > n else 0
        n_ins = n - n_upd
        ids = np.arange(next_id, next_id + n_ins)
        users = rng.integers(0, N_DIM, n_ins)
        amounts = rng.random(n_ins) * 100
        left = fact_batch(ids, users, amounts)
        lops = ops([(Op.INSERT, n_ins)])
        users_of = np.concatenate([users_of, users])
        amounts_of = np.concatenate([amounts_of, amounts])
        if n_upd:
            uid = rng.choice(next_id, n_upd, replace=False)
            new_users = rng.integers(0, N_DIM, n_upd)
            old = fact_batch(uid, users_of[uid], amounts_of[uid])
            new = fact_batch(uid, new_users, amounts_of[uid] + 1)
            users_of[uid] = new_users
            amounts_of[uid] += 1
            pairs = pa.Table.from_batches([old, new]).combine_chunks().to_batches()[0]
            order = np.stack([np.arange(n_upd), np.arange(n_upd) + n_upd], axis=1).ravel()
            left = pa.Table.from_batches([left, pairs.take(pa.array(order))]).combine_chunks()
            left = left.to_batches()[0]
            upd_ops = np.tile(np.array([Op.UPDATE_DELETE, Op.UPDATE_INSERT], np.int8), n_upd)
            lops = pa.concat_arrays([lops, pa.array(upd_ops)])
        right = None
        if first:
            right = StreamChunk.inserts(dim_batch(dim_users, 0))
            first = False
        elif updates:
            du = rng.choice(N_DIM, N_DIM // 100, replace=False)
            old_r = dim_batch(du, 0)
            old_r = pa.RecordBatch.from_arrays(
                [
                    old_r.column(0),
                    pa.array(
                        [
                            f"r{(u + t) % 7}"
                            for u, t in zip(du.tolist(), cur_region_tag[du].tolist())
                        ]
                    ),
                ],
                schema=old_r.schema,
            )
            cur_region_tag[du] += 1
            new_r = pa.RecordBatch.from_arrays(
                [
                    old_r.column(0),
                    pa.array(
                        [
                            f"r{(u + t) % 7}"
                            for u, t in zip(du.tolist(), cur_region_tag[du].tolist())
                        ]
                    ),
                ],
                schema=old_r.schema,
            )
            both = pa.Table.from_batches([old_r, new_r]).combine_chunks().to_batches()[0]
            right = StreamChunk(ops([(Op.DELETE, len(du)), (Op.INSERT, len(du))]), both)
        chunk = StreamChunk(lops, left)
        t0 = time.process_time()
        out = op.step([chunk, right])
        commit(op)
        gc.freeze()  # as the runtime does after every barrier
        cpu += time.process_time() - t0
        out_rows += 0 if out is None else len(out)
        next_id += n_ins
        done += n
    return out_rows, cpu


def run_top3(events: int, epoch: int, changes: bool, commit: Commit) -> tuple[int, float]:
    """Group top-3; with `changes`, 10% of each epoch's events delete (half) or update
    (half: a new amount) earlier rows, half of them chosen among rows with amount > 97
    (mostly current top-3 rows, so windows must be refilled from the stored rows)."""
    rng = np.random.default_rng(2)
    op = TopNOp(
        FACT, [(2, True, False)], 3, 0, [1], LocalStateAllocator(), [0], with_rank_column=True
    )
    users_of = np.empty(0, dtype=np.int64)
    amounts_of = np.empty(0)
    alive = np.empty(0, dtype=bool)
    out_rows = 0
    cpu = 0.0
    next_id = 0
    done = 0
    while done < events:
        n = min(epoch, events - done)
        n_chg = n // 10 if changes and next_id > n else 0
        n_ins = n - n_chg
        users = rng.integers(0, N_DIM, n_ins)
        amounts = rng.random(n_ins) * 100
        b = fact_batch(np.arange(next_id, next_id + n_ins), users, amounts)
        chunk = StreamChunk.inserts(b)
        if changes:
            users_of = np.concatenate([users_of, users])
            amounts_of = np.concatenate([amounts_of, amounts])
            alive = np.concatenate([alive, np.ones(n_ins, bool)])
        if n_chg:
            live = np.flatnonzero(alive[:next_id])
            high = live[amounts_of[live] > 97]
            top = rng.choice(high, min(n_chg // 2, len(high)), replace=False)
            other = np.setdiff1d(live, top)
            pick = rng.permutation(
                np.concatenate([top, rng.choice(other, n_chg - len(top), replace=False)])
            )
            dels, upds = pick[: n_chg // 2], pick[n_chg // 2 :]
            old = fact_batch(upds, users_of[upds], amounts_of[upds])
            amounts_of[upds] = rng.random(len(upds)) * 100
            new = fact_batch(upds, users_of[upds], amounts_of[upds])
            order = np.stack([np.arange(len(upds)), np.arange(len(upds)) + len(upds)], 1)
            pairs = pa.Table.from_batches([old, new]).take(pa.array(order.ravel()))
            gone = fact_batch(dels, users_of[dels], amounts_of[dels])
            alive[dels] = False
            both = pa.Table.from_batches([b, gone, *pairs.to_batches()]).combine_chunks()
            upd_ops = np.tile(np.array([Op.UPDATE_DELETE, Op.UPDATE_INSERT], np.int8), len(upds))
            kinds = ops([(Op.INSERT, n_ins), (Op.DELETE, len(dels))])
            chunk = StreamChunk(pa.concat_arrays([kinds, pa.array(upd_ops)]), both.to_batches()[0])
        t0 = time.process_time()
        out = op.step([chunk])
        commit(op)
        gc.freeze()  # as the runtime does after every barrier
        cpu += time.process_time() - t0
        out_rows += 0 if out is None else len(out)
        next_id += n_ins
        done += n
    return out_rows, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--epoch", type=int, default=20_000)
    ap.add_argument("--only", default="")
    ap.add_argument("--store", action="store_true", help="commit state to RocksDB each epoch")
    a = ap.parse_args()
    runs: dict[str, Callable[[Commit], tuple[int, float]]] = {
        "join-insert": lambda c: run_join(a.events, a.epoch, False, c),
        "join-updates": lambda c: run_join(a.events, a.epoch, True, c),
        "top3": lambda c: run_top3(a.events, a.epoch, False, c),
        "top3-changes": lambda c: run_top3(a.events, a.epoch, True, c),
    }
    for name, fn in runs.items():
        if a.only and name != a.only:
            continue
        store = ""
        with tempfile.TemporaryDirectory() as tmp:
            commit: Commit = no_store
            if a.store:
                commit = Store(Path(tmp))
            try:
                out_rows, cpu = fn(commit)
            finally:
                if isinstance(commit, Store):
                    store = f" store={commit.bytes / 1e6:,.0f}MB"
                    commit.close()
        print(
            f"{name:13s} events={a.events:>9,} epoch={a.epoch:>6,} cpu={cpu:7.2f}s "
            f"events/cpu-s={a.events / cpu:>10,.0f} output_rows={out_rows:,}{store}"
        )


if __name__ == "__main__":
    main()
