"""KeyedJoinSide: one hash-join input's rows in a RocksDB-first table, keyed by join key.

Why: `JoinSide` keeps every row of an input in memory (Arrow segments plus per-row numpy
arrays and an identity dict), so a join's state is bounded by RAM. This side keeps its
rows in a `DiskStateTable` (engine/state/disk_table.py) keyed by the join key, so RocksDB
is the source of truth and memory holds only the table's bounded cache of hot keys, the
epoch's writes and the rows of the keys the current step touches.

Layout: see keyed_join_layout.py (a head per join key holding its first rows, later
rows in fragments by size tier).

Writes are per key, never per row, and proportional to what changed:

* inserts under a key whose rows the step has not decoded (the common case: nobody
  probed it; a fresh key too) never read those rows (`_append`): the new rows are
  joined to the tail's bytes while it stays within `TAIL_BYTES` (a framed blob, see
  row_blob.py), else they become a fragment, and fragments are joined into their older
  neighbour while it holds at most as many rows (a binary counter: O(log rows)
  fragments per key, each row copied O(log rows) times, all at the bytes level). So a
  key gaining rows over many steps
  costs O(new rows) per step, not O(rows under the key);
* a key with deletes, or decoded this step, is rewritten from its decoded rows
  (`_rewrite`): consolidated by full row, the tail refilled up to `TAIL_ROWS` rows, a
  tail that outgrows it spilled into a fragment, and `FANOUT` fragments of one size
  tier merged into one; only the changed fragments are written.

Per step (driven by `HashJoinOp`, which gives every step a fresh `JoinKeyIds`):

1. `prefetch(ids, ujk)`: the heads of the keys of both inputs' deltas, with ONE multi-get
   per side (tails kept as bytes, not decoded), skipping the keys the side's
   `JoinKeyFilter` (join_key_filter.py) knows absent: from a table seen empty, a fresh
   key of an event stream costs no store read at all; rows are decoded, and fragments read
   with one more multi-get, only for keys a probe or a delete needs whole, and for the
   fragments an append joins;
2. the probes, degree reads and writes go through locations `segment << 32 | row` into
   the step's working set (decoded Arrow batches), as on `JoinSide`;
3. `apply` of the side's delta (appended, or the touched keys' changed pieces consolidated by full
   row and rewritten, as above); `flush` writes pieces whose degrees
   changed without a row change and drops the working set. Nothing outlives the step but
   the table.

Lifecycle: constructed by `HashJoinOp` over its allocated disk table; `load` once before
the first step (a table still in `JoinSide`'s segment layout, which the disk table reads
into its overlay, is converted here and rewritten at the next checkpoint).
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import is_not, itemgetter
from typing import Any

import numpy as np
import pyarrow as pa

from engine.errors import InternalError
from engine.state.disk_table import DiskStateTable
from engine.state.table import StateTable
from engine.stream.operators import keyed_join_layout as layout
from engine.stream.operators.frames import net_index
from engine.stream.operators.join_key_filter import JoinKeyFilter, key_hashes
from engine.stream.operators.join_side import JoinKeyIds, JoinSide
from engine.stream.operators.keyed_join_layout import (
    EMPTY,
    TAIL_FID,
    Piece,
    Seg,
    frag_bytes,
    plan_merges,
)
from engine.stream.operators.row_blob import RowBlobs
from engine.stream.operators.segments import SHIFT, by_segment, gather, rows_equal
from engine.types import Field, arrow_schema


class KeyedJoinSide:
    """One join input's rows keyed by join key in a disk table; see the module docstring."""

    def __init__(
        self,
        name: str,
        fields: list[Field],
        keys: list[int],
        ident: list[int],
        table: StateTable,
        with_degree: bool,
        what: str,
    ) -> None:
        self.name = name
        self.fields = list(fields)
        self.keys = keys
        self.ident = ident
        self.table = table
        self.with_degree = with_degree
        self.what = what
        self.schema = arrow_schema(fields)
        self._blobs = RowBlobs(self.schema, 2)
        self._filter = JoinKeyFilter()
        self._reset()

    def _reset(self) -> None:
        self._ids: JoinKeyIds | None = None
        self._values: list[Any] = []
        self.segs: list[Seg] = []
        self._heads = np.zeros(0, bool)  # head read (or known absent) this step
        self.tot = np.zeros(0, np.int64)
        self._pieces: dict[int, list[Piece]] = {}  # key id -> loaded pieces
        self._frags: dict[int, dict[int, int]] = {}  # key id -> fid -> rows (all fragments)
        self._decoded: set[int] = set()  # key ids whose rows are all in `_pieces`
        self._tails: dict[int, bytes] = {}  # key id -> its tail blob (keys not decoded)
        self._raw: dict[tuple[int, int], bytes] = {}  # (key id, fid) -> blob known this step

    def __len__(self) -> int:
        """Stored entries (diagnostics: reads every head of the table)."""
        n = 0
        for key, v in self.table.items():
            if len(key) == max(len(self.keys), 0) and len(v) == 3:
                n += self._blobs.decode([v[2]], (1, 0))[0].num_rows if v[2] else 0
                n += int(np.frombuffer(v[1], np.int64)[1::2].sum())
        return n

    # -- step protocol ------------------------------------------------------------------
    def grow(self, n_keys: int) -> None:
        """Make the per-key arrays cover `n_keys` key ids of the step."""
        n = len(self._heads)
        if n >= n_keys:
            return
        size = max(n_keys, 2 * n)
        heads = np.zeros(size, bool)
        heads[:n] = self._heads
        tot = np.zeros(size, np.int64)
        tot[:n] = self.tot[:n]
        self._heads, self.tot = heads, tot

    def prefetch(self, ids: JoinKeyIds, ujk: np.ndarray) -> None:
        """Read the heads of key ids `ujk` (of this step's `ids`) with one multi-get."""
        if self._ids is not ids:
            self._reset()
            self._ids = ids
        self.grow(len(ids))
        need = ujk[~self._heads[ujk]]
        if not len(need):
            return
        if len(self._values) < len(ids):
            self._values = list(ids.ids)
        if self._filter.complete:  # keys no row was ever written under: nothing to read
            vals = self._values
            absent = self._filter.absent(key_hashes(list(map(vals.__getitem__, need.tolist()))))
            self._heads[need[absent]] = True
            need = need[~absent]
            if not len(need):
                return
        got = self.table.get_many(self._store_keys(need))
        self._heads[need] = True
        present = np.fromiter(map(is_not, got, repeat(None)), bool, len(got))
        if not present.any():
            return
        kids = need[present]
        found: list[Any] = list(compress(got, present.tolist()))
        self.tot[kids] = np.fromiter(map(itemgetter(0), found), np.int64, len(found))
        kl = kids.tolist()
        tails = list(map(itemgetter(2), found))
        self._tails.update(compress(zip(kl, tails), tails))  # keys with a tail
        frags = list(map(itemgetter(1), found))
        all_frags = self._frags
        for k, fb in compress(zip(kl, frags), frags):  # keys with fragments
            fr = np.frombuffer(fb, np.int64)
            all_frags[k] = dict(zip(fr[0::2].tolist(), fr[1::2].tolist(), strict=True))

    def _store_keys(self, kids: np.ndarray | list[int]) -> list[tuple[Any, ...]]:
        vals = self._values
        ks = kids.tolist() if isinstance(kids, np.ndarray) else kids
        if len(self.keys) == 1:
            return list(zip(map(vals.__getitem__, ks)))  # 1-tuples at C speed
        return list(map(vals.__getitem__, ks))

    def _add_pieces(self, kids: list[int], fids: list[int], blobs: list[bytes]) -> None:
        """Decode blobs (piece `fids[i]` of key `kids[i]`) into one working-set batch."""
        batch, sizes, (count, degree) = self._blobs.decode(blobs, (1, 0))
        self._add_seg(kids, fids, sizes, batch, count, degree)

    def _add_seg(
        self,
        kids: list[int],
        fids: list[int],
        sizes: np.ndarray,
        batch: pa.RecordBatch,
        count: np.ndarray,
        degree: np.ndarray,
    ) -> None:
        sid = len(self.segs)
        self.segs.append(Seg(batch, count, degree, np.repeat(np.array(kids, np.int64), sizes)))
        starts = (np.cumsum(sizes) - sizes).tolist()
        pieces = self._pieces
        for kid, fid, st, n in zip(kids, fids, starts, sizes.tolist(), strict=True):
            if n:
                pieces.setdefault(kid, []).append((fid, sid, st, n))

    def _load_all(self, kids: list[int]) -> None:
        """Decode every row of `kids` not decoded yet (tail and fragments), reading the
        fragments not known this step with one multi-get."""
        decoded, tails, raw, frags = self._decoded, self._tails, self._raw, self._frags
        ks: list[int] = []
        fids: list[int] = []
        blobs: list[bytes | None] = []
        miss: list[int] = []
        for kid in kids:
            if kid in decoded:
                continue
            decoded.add(kid)
            t = tails.pop(kid, None)
            if t is not None:
                ks.append(kid)
                fids.append(TAIL_FID)
                blobs.append(t)
            fr = frags.get(kid)
            if fr:
                for f in sorted(fr):
                    b = raw.pop((kid, f), None)
                    if b is None:
                        miss.append(len(ks))
                    ks.append(kid)
                    fids.append(f)
                    blobs.append(b)
        if not ks:
            return
        if miss:
            for i, b in zip(miss, self._fetch([ks[i] for i in miss], [fids[i] for i in miss])):
                blobs[i] = b
        self._add_pieces(ks, fids, blobs)  # type: ignore[arg-type]

    def _fetch(self, kids: list[int], fids: list[int]) -> list[bytes]:
        """The stored blobs of fragments `fids[i]` of keys `kids[i]` (one multi-get)."""
        heads = self._store_keys(kids)
        got = self.table.get_many([(*h, f) for h, f in zip(heads, fids, strict=True)])
        if any(g is None for g in got):
            raise InternalError(
                "join state fragment missing",
                detail=f"A {self.name} key of {self.what} names a fragment the store lacks.",
            )
        return [g[0] for g in got]  # type: ignore[index]

    # -- reads ----------------------------------------------------------------------------
    def probe(self, ujk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Live rows under the key ids `ujk`: (position in `ujk`, location), grouped by key."""
        kl = ujk.tolist()
        self._load_all(kl)
        which, sids, starts, lens = self._piece_arrays(kl)
        return which, self._expand(sids, starts, lens)[1]

    def _piece_arrays(
        self, kids: list[int]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per loaded row of `kids` (in key order): position in `kids`, plus the pieces'
        segments, starts and lengths."""
        pos: list[int] = []
        sids: list[int] = []
        starts: list[int] = []
        lens: list[int] = []
        pieces = self._pieces
        for i, kid in enumerate(kids):
            for _, sid, st, n in pieces.get(kid, ()):
                pos.append(i)
                sids.append(sid)
                starts.append(st)
                lens.append(n)
        c = np.array(lens, np.int64)
        return (
            np.repeat(np.array(pos, np.int64), c),
            np.array(sids, np.int64),
            np.array(starts, np.int64),
            c,
        )

    @staticmethod
    def _expand(
        sids: np.ndarray, starts: np.ndarray, lens: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(piece index per row, location per row) of pieces given as arrays."""
        total = int(lens.sum())
        if not total:
            return EMPTY, EMPTY
        piece = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
        off = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
        return piece, (np.repeat(starts, lens) + off) | (np.repeat(sids, lens) << SHIFT)

    def rows_at(self, locs: np.ndarray) -> pa.RecordBatch:
        if not len(locs):
            return pa.RecordBatch.from_pylist([], schema=self.schema)
        return gather(locs, lambda s: self.segs[s].batch)

    def counts_at(self, locs: np.ndarray) -> np.ndarray:
        return self._read(locs, "count")

    def degrees_at(self, locs: np.ndarray) -> np.ndarray:
        return self._read(locs, "degree")

    def set_degrees(self, locs: np.ndarray, values: np.ndarray) -> None:
        for sid, pos, rows in by_segment(locs):
            seg = self.segs[sid]
            seg.degree[rows] = values if pos is None else values[pos]
            seg.dirty[rows] = True

    def _read(self, locs: np.ndarray, attr: str) -> np.ndarray:
        out = np.empty(len(locs), getattr(self.segs[0], attr).dtype if self.segs else np.int64)
        for sid, pos, rows in by_segment(locs):
            vals = getattr(self.segs[sid], attr)[rows]
            if pos is None:
                return vals  # type: ignore[no-any-return]
            out[pos] = vals
        return out

    # -- writes ---------------------------------------------------------------------------
    def apply(
        self,
        batch: pa.RecordBatch,
        w: np.ndarray,
        jk: np.ndarray,
        deg: np.ndarray | None,
        ujk: np.ndarray | None = None,
    ) -> None:
        """Add the rows of `batch` (no NULL join keys, heads prefetched) with net weights
        `w`; `deg` is each row's degree (with_degree); `ujk`: `jk`'s distinct ids, sorted,
        when the caller has them."""
        if not batch.num_rows:
            return
        d = deg if deg is not None and self.with_degree else np.zeros(len(w), np.int64)
        uk = np.unique(jk) if ujk is None else ujk
        if self._filter.complete:
            vals = self._values
            self._filter.add(key_hashes(list(map(vals.__getitem__, uk.tolist()))))
        # keys none decoded this step that get only inserts (fresh keys too): appended to
        # without reading their rows
        app = np.ones(len(uk), bool)
        if app.any():
            bad = w <= 0
            if bad.any():
                app &= ~np.isin(uk, jk[bad])
            dec = self._decoded
            if dec:
                app &= ~np.isin(uk, np.fromiter(dec, np.int64, len(dec)))
        if app.any():
            sel = np.isin(jk, uk[app])
            mask = pa.array(sel)
            self._append(uk[app], batch.filter(mask), w[sel], d[sel], jk[sel])
            if sel.all():
                return
            rest = pa.array(~sel)
            batch, w, d, jk = batch.filter(rest), w[~sel], d[~sel], jk[~sel]
            uk = uk[~app]
        ukl = uk.tolist()
        dels = w < 0
        whole = np.unique(jk[dels]) if dels.any() else EMPTY
        self._load_all(ukl)  # keys with deletes (the others are absent or decoded)
        # every loaded row of the touched keys, then the delta
        _, sids, starts, lens = self._piece_arrays(ukl)
        pfid = np.array([p[0] for kid in ukl for p in self._pieces.get(kid, ())], np.int64)
        piece, locs = self._expand(sids, starts, lens)
        if len(locs):
            rows = pa.concat_batches([self.rows_at(locs), batch])
            cnt = np.concatenate([self.counts_at(locs), w])
            dg = np.concatenate([self.degrees_at(locs), d])
            kj = np.concatenate([self._read(locs, "jk"), jk])
            fid = np.concatenate([pfid[piece], np.zeros(len(w), np.int64)])
            dirty = np.concatenate([self._read(locs, "dirty"), np.zeros(len(w), bool)])
        else:
            rows, cnt, dg, kj = batch, w, d, jk
            fid, dirty = np.zeros(len(w), np.int64), np.zeros(len(w), bool)
        old_n = len(locs)
        new = cnt.copy()
        if len(whole):
            sub = np.flatnonzero(np.isin(kj, whole))
            idx, net = net_index(rows.take(pa.array(sub)), cnt[sub])
            if (net < 0).any():
                self._negative("was deleted but never inserted")
            new[sub] = 0
            new[sub[idx]] = net
        changed = np.zeros(len(new), bool)
        changed[:old_n] = (new[:old_n] != cnt[:old_n]) | dirty[:old_n]
        tot_add = np.bincount(np.searchsorted(uk, jk), weights=w, minlength=len(uk))
        self._rewrite(uk, tot_add.astype(np.int64), rows, new, dg, kj, fid, changed)

    def _append(
        self, ka: np.ndarray, rows: pa.RecordBatch, cnt: np.ndarray, dg: np.ndarray, kj: np.ndarray
    ) -> None:
        """Insert `rows` under the keys `ka` (sorted; each holds rows, none decoded) in
        O(new rows), without reading or decoding the rows stored under them.

        A key's new rows are encoded as one group. While its tail stays within
        `TAIL_BYTES` they are joined to the tail at the bytes level (`RowBlobs.join`);
        else they become a new fragment, and while the fragment before it (by fid, i.e.
        by age) holds at most as many rows the two are joined into the older one's
        place: fragment sizes form a binary counter, so a key of n rows has O(log n)
        fragments and a row is copied O(log n) times. Written: the head (count, fragment
        list, tail) and at most one fragment per key; the fragments a merge joins that
        this step has not seen are read with one multi-get."""
        order = np.argsort(kj, kind="stable")
        skj = kj[order]
        cut = np.flatnonzero(np.r_[True, skj[1:] != skj[:-1]])
        sub = rows.take(pa.array(order))
        c, g = cnt[order], dg[order]
        counts = None if (c == 1).all() else c
        degrees = g if self.with_degree and g.any() else None
        self.tot[ka] += np.add.reduceat(c, cut)
        blobs = self._blobs.encode(sub, cut.tolist(), [counts, degrees])
        kids = ka.tolist()
        tots = self.tot[ka].tolist()
        heads = self._store_keys(kids)
        raw, frags_of, tails_of = self._raw, self._frags, self._tails
        join = self._blobs.join
        m = len(kids)
        tl = list(map(tails_of.get, kids))
        t_len = np.fromiter(map(len, map(tails_of.get, kids, repeat(b""))), np.int64, m)
        b_len = np.fromiter(map(len, blobs), np.int64, m)
        has_fr = np.fromiter(map(bool, map(frags_of.get, kids)), bool, m)
        # a key without a tail (tails are never empty) takes the new rows as its tail
        # when it has no fragments either (a fresh key, the common case of an event
        # stream): those in bulk
        fit = (t_len + b_len <= layout.TAIL_BYTES) & ((t_len > 0) | ~has_fr)
        fresh = fit & (t_len == 0)
        fits = fit.tolist()
        fl = fresh.tolist()
        keys: list[tuple[Any, ...]] = list(compress(heads, fl))
        fb = list(compress(blobs, fl))
        vals: list[tuple[Any, ...]] = list(zip(compress(tots, fl), repeat(b""), fb))
        tails_of.update(zip(compress(kids, fl), fb))
        # then the new rows that join a key's tail
        if not fresh.all():
            for i in np.flatnonzero(fit & ~fresh).tolist():
                kid, t, b = kids[i], tl[i], blobs[i]
                nt = tails_of[kid] = join([t, b])  # type: ignore[list-item]
                fr = frags_of.get(kid)
                keys.append(heads[i])
                vals.append((tots[i], frag_bytes(fr) if fr else b"", nt))
        if fit.all():
            self.table.put_many(keys, vals)
            return
        sizes = np.diff(np.r_[cut, len(skj)]).tolist()
        plans: list[tuple[int, list[int], int, bytes, tuple[Any, ...], int]] = []
        need_k: list[int] = []
        need_f: list[int] = []
        for kid, n, b, head, tot, ok in zip(kids, sizes, blobs, heads, tots, fits, strict=True):
            if ok:
                continue
            fr = frags_of.get(kid)
            if fr is None:
                fr = frags_of[kid] = {}
            fids = sorted(fr)
            i, size = len(fids), n
            while i and fr[fids[i - 1]] <= size:
                i -= 1
                size += fr[fids[i]]
            members = [*fids[i:], (fids[-1] if fids else 0) + 1]  # joined, oldest first
            for f in members[:-1]:
                if (kid, f) not in raw:
                    need_k.append(kid)
                    need_f.append(f)
            plans.append((kid, members, size, b, head, tot))
        if need_k:
            for k, f, got in zip(need_k, need_f, self._fetch(need_k, need_f), strict=True):
                raw[(k, f)] = got
        gone: list[tuple[Any, ...]] = []
        for kid, members, size, b, head, tot in plans:
            fr = frags_of[kid]
            old = members[:-1]
            parts = [raw.pop((kid, f)) for f in old]
            parts.append(b)
            for f in old:
                del fr[f]
            dst = members[0]
            merged = raw[(kid, dst)] = join(parts)
            fr[dst] = size
            keys.append((*head, dst))
            vals.append((merged,))
            gone.extend((*head, f) for f in old[1:])
            keys.append(head)
            vals.append((tot, frag_bytes(fr), tails_of.get(kid, b"")))
        if gone:
            self.table.delete_many(gone)
        self.table.put_many(keys, vals)

    def _rewrite(
        self,
        uk: np.ndarray,
        tot_add: np.ndarray,
        rows: pa.RecordBatch,
        cnt: np.ndarray,
        dg: np.ndarray,
        kj: np.ndarray,
        fid: np.ndarray,
        changed: np.ndarray,
    ) -> None:
        """Write the touched keys' new heads and changed fragments (see `apply`).

        Keys without fragments whose rows still fit the tail (most keys) are written
        column-wise in one pass; the others go through `_rewrite_pieces`."""
        new_tot = self.tot[uk] + tot_add
        if (new_tot < 0).any():
            self._negative("was deleted too often")
        frags = self._frags
        has_frag = np.fromiter((bool(frags.get(k)) for k in uk.tolist()), bool, len(uk))
        live = cnt > 0
        pos = np.searchsorted(uk, kj)
        live_n = np.bincount(pos[live], minlength=len(uk))
        simple = ~has_frag & (live_n <= layout.TAIL_ROWS)
        if not simple.all():
            hard = ~simple[pos]
            ukh = uk[~simple]
            self._rewrite_pieces(
                ukh,
                tot_add[~simple],
                rows.filter(pa.array(hard)),
                cnt[hard],
                dg[hard],
                kj[hard],
                fid[hard],
                changed[hard],
            )
        if not simple.any():
            return
        uks = uk[simple]
        sel = np.flatnonzero(live & simple[pos])
        sel = sel[np.argsort(kj[sel], kind="stable")]
        self.tot[uks] = new_tot[simple]
        keys = self._store_keys(uks)
        writes: dict[tuple[Any, ...], np.ndarray | None] = {}
        tots: dict[tuple[Any, ...], int] = {}
        sizes = live_n[simple]
        starts = np.cumsum(sizes) - sizes
        for k, kid, a, n in zip(keys, uks.tolist(), starts.tolist(), sizes.tolist(), strict=True):
            if n:
                writes[k] = sel[a : a + n]
                tots[k] = kid
            else:
                writes[k] = None
        self._encode_out(writes, tots, rows, cnt, dg)
        pieces = self._pieces
        for kid in uks.tolist():
            pieces.pop(kid, None)
        if len(sel):
            keep = sizes > 0
            self._add_seg(
                uks[keep].tolist(),
                [TAIL_FID] * int(keep.sum()),
                sizes[keep],
                rows.take(pa.array(sel)),
                cnt[sel],
                dg[sel],
            )

    def _rewrite_pieces(
        self,
        uk: np.ndarray,
        tot_add: np.ndarray,
        rows: pa.RecordBatch,
        cnt: np.ndarray,
        dg: np.ndarray,
        kj: np.ndarray,
        fid: np.ndarray,
        changed: np.ndarray,
    ) -> None:
        """`_rewrite` of keys with fragments or spilling tails, piece by piece."""
        order = np.lexsort((fid, kj))
        skj, sfid = kj[order], fid[order]
        cut = np.flatnonzero(np.r_[True, (skj[1:] != skj[:-1]) | (sfid[1:] != sfid[:-1])])
        ends = np.r_[cut[1:], len(order)].tolist()
        g_kid, g_fid = skj[cut].tolist(), sfid[cut].tolist()
        g_changed = np.logical_or.reduceat(changed[order], cut).tolist() if len(cut) else []
        live = cnt[order] > 0
        groups: dict[int, dict[int, tuple[int, int, bool]]] = {}
        for k, f, a, b, ch in zip(g_kid, g_fid, cut.tolist(), ends, g_changed, strict=True):
            groups.setdefault(k, {})[f] = (a, b, ch)
        # store key -> rows of `rows` to write there (None: delete); the last word wins,
        # so a fid freed and reused in this step, or a rewritten fragment merged away,
        # ends as it should
        writes: dict[tuple[Any, ...], np.ndarray | None] = {}
        tots: dict[tuple[Any, ...], int] = {}  # heads among `writes`: their tot
        final: list[tuple[int, int, np.ndarray]] = []  # (key id, fid, rows in `rows`)
        heads = self._store_keys(uk)
        for kid, head, add in zip(uk.tolist(), heads, tot_add.tolist(), strict=True):
            mine = groups.get(kid, {})
            old = self._frags.get(kid, {})
            frags = dict(old)
            for f, (a, b, ch) in mine.items():
                if f == TAIL_FID or not ch:
                    if f != TAIL_FID:
                        final.append((kid, f, order[a:b]))
                    continue
                keep = order[a:b][live[a:b]]
                if len(keep):
                    writes[(*head, f)] = keep
                    frags[f] = len(keep)
                    final.append((kid, f, keep))
                else:
                    writes[(*head, f)] = None
                    frags.pop(f, None)
            t = mine.get(TAIL_FID)
            tail = order[t[0] : t[1]][live[t[0] : t[1]]] if t is not None else EMPTY
            if len(tail) > layout.TAIL_ROWS:
                spill = max(frags, default=0) + 1
                sizes = dict(frags)
                sizes[spill] = len(tail)
                merges, _ = plan_merges(sizes, spill + 1)
                rows_of = {f: r for k2, f, r in final if k2 == kid}
                rows_of[spill] = tail
                for *srcs, dst in merges:
                    rows_of[dst] = np.concatenate([rows_of.pop(x) for x in srcs])
                    for x in srcs:
                        writes[(*head, x)] = None
                dsts = {m[-1] for m in merges}
                final = [x for x in final if x[0] != kid]
                for f, r in rows_of.items():
                    final.append((kid, f, r))
                    if f not in old or f in dsts or f == spill:
                        writes[(*head, f)] = r
                frags, tail = sizes, EMPTY
            tot = int(self.tot[kid]) + int(add)
            if tot < 0:
                self._negative("was deleted too often")
            self._frags[kid] = frags
            self.tot[kid] = tot
            if tot == 0 and not frags:
                writes[head] = None
                continue
            writes[head] = tail
            tots[head] = kid
            final.append((kid, TAIL_FID, tail))
        self._encode_out(writes, tots, rows, cnt, dg)
        # the touched keys' working set: their final pieces, as one new batch
        for kid in uk.tolist():
            self._pieces.pop(kid, None)
        final = [x for x in final if len(x[2])]
        if final:
            idx = np.concatenate([x[2] for x in final])
            sizes_arr = np.array([len(x[2]) for x in final], np.int64)
            self._add_seg(
                [x[0] for x in final],
                [x[1] for x in final],
                sizes_arr,
                rows.take(pa.array(idx)),
                cnt[idx],
                dg[idx],
            )

    def _encode_out(
        self,
        writes: dict[tuple[Any, ...], np.ndarray | None],
        heads: dict[tuple[Any, ...], int],
        rows: pa.RecordBatch,
        cnt: np.ndarray,
        dg: np.ndarray,
    ) -> None:
        """Put the pieces (`writes[key]`: rows of `rows`; None deletes the key); keys in
        `heads` (-> key id) are heads `(tot, fragments, tail)` with those rows as tail."""
        gone = [k for k, v in writes.items() if v is None]
        if gone:
            self.table.delete_many(gone)
        keys = [k for k, v in writes.items() if v is not None]
        if not keys:
            return
        parts = [p for p in writes.values() if p is not None]
        sizes = [len(i) for i in parts]
        idx: np.ndarray = np.concatenate(parts)
        starts = (np.cumsum(sizes) - sizes).tolist()
        sub = rows.take(pa.array(idx, pa.int64()))
        c, g = cnt[idx], dg[idx]
        counts = None if (c == 1).all() else c
        degrees = g if self.with_degree and g.any() else None
        blobs = self._blobs.encode(sub, starts, [counts, degrees])
        vals: list[tuple[Any, ...]] = []
        tots = self.tot.tolist() if heads else []
        for k, blob, n in zip(keys, blobs, sizes, strict=True):
            kid = heads.get(k)
            if kid is None:
                vals.append((blob,))
                continue
            frags = self._frags.get(kid)
            vals.append((tots[kid], frag_bytes(frags) if frags else b"", blob if n else b""))
        self.table.put_many(keys, vals)

    def flush(self) -> None:
        """Write the pieces whose degrees changed in place; drop the step's working set."""
        writes: dict[tuple[Any, ...], np.ndarray | None] = {}
        heads: dict[tuple[Any, ...], int] = {}
        locs_l: list[np.ndarray] = []
        at = 0
        dirty_segs = {i for i, seg in enumerate(self.segs) if seg.dirty.any()}
        for kid, pieces in self._pieces.items() if dirty_segs else ():
            for f, sid, st, n in pieces:
                if sid not in dirty_segs or not self.segs[sid].dirty[st : st + n].any():
                    continue
                locs_l.append(np.arange(st, st + n, dtype=np.int64) | (sid << SHIFT))
                head = self._store_keys([kid])[0]
                key = head if f == TAIL_FID else (*head, f)
                if f == TAIL_FID:
                    heads[key] = kid
                writes[key] = np.arange(at, at + n, dtype=np.int64)
                at += n
        if locs_l:
            locs = np.concatenate(locs_l)
            rows, cnt, dg = self.rows_at(locs), self.counts_at(locs), self.degrees_at(locs)
            self._encode_out(writes, heads, rows, cnt, dg)
        self._reset()

    # -- other reads ------------------------------------------------------------------------
    def stored(self, batch: pa.RecordBatch) -> np.ndarray:
        """Per row of `batch` (this side's schema): is exactly this row stored? Runs
        between steps, with its own key ids."""
        n = batch.num_rows
        out = np.zeros(n, bool)
        if not n:
            return out
        valid = np.ones(n, bool)
        for k in self.keys:
            col = batch.column(k)
            if col.null_count:
                valid &= col.is_valid().to_numpy(zero_copy_only=False)
        vi = np.flatnonzero(valid)
        if not len(vi):
            return out
        sub = batch if len(vi) == n else batch.take(pa.array(vi))
        ids = JoinKeyIds()
        jk = ids.assign(sub, self.keys)
        ujk, gid = np.unique(jk, return_inverse=True)
        self.prefetch(ids, ujk)
        try:
            which, locs = self.probe(ujk)
            if not len(locs):
                return out
            stored = self.rows_at(locs)
            lens = np.bincount(which, minlength=len(ujk))
            starts = np.cumsum(lens) - lens
            g = gid.reshape(-1)
            c = lens[g]
            r = np.repeat(np.arange(len(vi), dtype=np.int64), c)
            e = np.repeat(starts[g], c) + (
                np.arange(int(c.sum()), dtype=np.int64) - np.repeat(np.cumsum(c) - c, c)
            )
            eq = rows_equal(sub.take(pa.array(r)), stored.take(pa.array(e)), nan_equal=True)
            hit = np.zeros(len(vi), bool)
            hit[r[eq]] = True
            out[vi] = hit
            return out
        finally:
            self._reset()

    # -- persistence ------------------------------------------------------------------------
    def load(self, jkids: JoinKeyIds) -> None:
        """Nothing is read eagerly; a table in `JoinSide`'s older segment layout (which the
        disk table read into its overlay) is converted into this layout. A table found
        empty makes the key filter complete (fresh keys then cost no reads)."""
        t = self.table
        if not isinstance(t, DiskStateTable):
            self._filter.reset(len(t) == 0)
            return
        if not t.converting:
            self._filter.reset(not t.has_overlay and (t.cleared or t.committed_empty()))
            return
        self._filter.reset(False)
        old_rows = dict(t.items())
        legacy = StateTable(t.table_id, t.name)
        legacy.put_many(list(old_rows), list(old_rows.values()))
        old = JoinSide(
            self.name, self.fields, self.keys, self.ident, legacy, self.with_degree, self.what
        )
        old.load(JoinKeyIds())
        t.clear()
        live = [seg for seg in old.segs.values() if seg.live]
        if not live:
            return
        alive = [seg.count > 0 for seg in live]
        rows = pa.concat_batches(
            [s.batch.filter(pa.array(a)) for s, a in zip(live, alive, strict=True)]
        )
        cnt = np.concatenate([s.count[a] for s, a in zip(live, alive, strict=True)])
        dg = np.concatenate(
            [
                np.zeros(int(a.sum()), np.int64) if s.degree is None else s.degree[a]
                for s, a in zip(live, alive, strict=True)
            ]
        )
        ids = JoinKeyIds()
        jk = ids.assign(rows, self.keys)
        self._ids = ids
        self.grow(len(ids))
        self._values = list(ids.ids)
        uk = np.unique(jk)
        self._heads[uk] = True
        zeros = np.zeros(len(cnt), np.int64)
        tot = np.bincount(np.searchsorted(uk, jk), weights=cnt, minlength=len(uk))
        self._rewrite(uk, tot.astype(np.int64), rows, cnt, dg, jk, zeros, zeros.astype(bool))
        self._reset()

    def _negative(self, what: str) -> None:
        raise InternalError(
            "join state row count became negative",
            detail=f"A {self.name} row of {self.what} {what}.",
        )
