"""The Nexmark event model, generated a chunk at a time with numpy and Arrow.

Nexmark (the benchmark of Beam, Flink and RisingWave) is an online auction: a stream of
events numbered 0, 1, 2, ...; out of every 50 consecutive numbers 1 is a new person, 3 are
new auctions and 46 are bids (`nexmark.person.proportion` etc. change that). Everything
about an event follows from its number, as in the reference generator:

- its kind (`n % 50` against the proportions) and its time: `base_time + n * delay / 1000`
  ms, `delay` = 10^6 / `nexmark.first.event.rate` us (100 us: 10,000 events per second of
  event time), so `date_time` rises with the number and watermarks make sense;
- ids: person ids count persons from 1000, auction ids count auctions from 1000; a bid
  names a recent auction (one of the last 100 in flight, or a "hot" one: every 100th) and
  a bidder among the last 1000 active persons (or a hot one); an auction's seller is a
  recent or hot person, its category one of 5 from 10, it expires within about twice the
  time 100 auctions take;
- prices `round(10^(6u) * 100)` for uniform `u`; names, cities and states drawn from the
  reference lists (lowercase, as RisingWave's generator writes them); random strings for
  item names, descriptions, emails and urls; `extra` pads each event to the average sizes
  200 (person), 500 (auction) and 100 (bid) bytes, +-20 %.

Randomness is a hash of (event number, field): the same number always gives the same row,
however the numbers are cut into chunks, split among readers or re-generated after a
restart. That is what makes a source's position (the next event number) enough for
exactly-once recovery. The hash is splitmix64 over uint64 arrays; strings are windows of
one fixed pseudo-random letter pool picked by the hash and cut to their lengths, so no
per-event Python runs anywhere. The random values are not bit-identical to the Java or
Rust generator (their PRNGs are per-event Java/SmallRng streams); distributions, ids,
proportions and timestamps follow the model exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InvalidParameterValue
from engine.types import BIGINT, TIMESTAMP, VARCHAR, Field

PERSON, AUCTION, BID = "person", "auction", "bid"
KINDS = (PERSON, AUCTION, BID)
BASE_TIME_MS = 1_436_918_400_000  # 2015-07-15 00:00:00, the generator's fixed base time
HOT_RATIO_2 = 100  # every 100th auction / person is "hot" (Beam's HOT_*_RATIO constants)
CHANNELS = 10_000
HOT_CHANNELS = ["Google", "Facebook", "Baidu", "Apple"]

FIRST_NAMES = [
    "peter",
    "paul",
    "luke",
    "john",
    "saul",
    "vicky",
    "kate",
    "julie",
    "sarah",
    "deiter",
    "walter",
]
LAST_NAMES = [
    "shultz",
    "abrams",
    "spencer",
    "white",
    "bartels",
    "walton",
    "smith",
    "jones",
    "noris",
]
US_STATES = ["az", "ca", "id", "or", "wa", "wy"]
US_CITIES = [
    "phoenix",
    "los angeles",
    "san francisco",
    "boise",
    "portland",
    "bend",
    "redmond",
    "seattle",
    "kent",
    "cheyenne",
]

COLUMNS: dict[str, list[Field]] = {
    PERSON: [
        Field("id", BIGINT),
        Field("name", VARCHAR),
        Field("email_address", VARCHAR),
        Field("credit_card", VARCHAR),
        Field("city", VARCHAR),
        Field("state", VARCHAR),
        Field("date_time", TIMESTAMP),
        Field("extra", VARCHAR),
    ],
    AUCTION: [
        Field("id", BIGINT),
        Field("item_name", VARCHAR),
        Field("description", VARCHAR),
        Field("initial_bid", BIGINT),
        Field("reserve", BIGINT),
        Field("date_time", TIMESTAMP),
        Field("expires", TIMESTAMP),
        Field("seller", BIGINT),
        Field("category", BIGINT),
        Field("extra", VARCHAR),
    ],
    BID: [
        Field("auction", BIGINT),
        Field("bidder", BIGINT),
        Field("price", BIGINT),
        Field("channel", VARCHAR),
        Field("url", VARCHAR),
        Field("date_time", TIMESTAMP),
        Field("extra", VARCHAR),
    ],
}


@dataclass(frozen=True)
class NexmarkConfig:
    """The generator's parameters (`nexmark.<name with dots>` options; defaults of the
    reference generator)."""

    person_proportion: int = 1
    auction_proportion: int = 3
    bid_proportion: int = 46
    first_person_id: int = 1000
    first_auction_id: int = 1000
    first_category_id: int = 10
    num_categories: int = 5
    active_people: int = 1000
    in_flight_auctions: int = 100
    auction_id_lead: int = 10
    person_id_lead: int = 10
    hot_seller_ratio: int = 4
    hot_auction_ratio: int = 2
    hot_bidder_ratio: int = 4
    hot_channel_ratio: int = 2
    avg_person_byte_size: int = 200
    avg_auction_byte_size: int = 500
    avg_bid_byte_size: int = 100
    first_event_id: int = 0
    base_time: int = BASE_TIME_MS
    first_event_rate: int = 10_000
    seed: int = 0

    @property
    def total(self) -> int:
        return self.person_proportion + self.auction_proportion + self.bid_proportion

    @property
    def delay_us(self) -> float:
        return 1_000_000 / self.first_event_rate

    @classmethod
    def from_options(cls, options: dict[str, str]) -> NexmarkConfig:
        """Read `nexmark.active.people = '1000'` style options (unknown ones are ignored
        here; the connector checks the option names)."""
        kw: dict[str, Any] = {}
        aliases = {"events.per.sec": "first_event_rate"}
        names = {f.name for f in fields(cls)}
        for key, raw in options.items():
            if not key.startswith("nexmark."):
                continue
            short = key[len("nexmark.") :]
            name = aliases.get(short, short.replace(".", "_"))
            if name not in names:
                continue
            try:
                kw[name] = int(str(raw).strip())
            except ValueError:
                raise InvalidParameterValue(
                    f'invalid value for option "{key}": "{raw}"', hint="Expected an integer."
                ) from None
            if kw[name] < 0 or (name.endswith(("proportion", "ratio", "rate")) and kw[name] < 1):
                raise InvalidParameterValue(f'option "{key}" is out of range: {raw}')
        return cls(**kw)


# -- randomness ------------------------------------------------------------------------------
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def mix(ids: np.ndarray, slot: int, seed: int = 0) -> np.ndarray:
    """splitmix64 of (event id, field slot): 64 uniform random bits per event."""
    with np.errstate(over="ignore"):
        z = ids.astype(np.uint64) * np.uint64(64) + np.uint64(slot)
        z = (z + np.uint64(seed)) * _GOLDEN
        z ^= z >> np.uint64(30)
        z *= _M1
        z ^= z >> np.uint64(27)
        z *= _M2
        z ^= z >> np.uint64(31)
    return z


def below(r: np.ndarray, n: np.ndarray | int) -> np.ndarray:
    """Uniform integers in [0, n) from random bits (n >= 1, per row or one for all)."""
    return (r % np.asarray(n, dtype=np.uint64)).astype(np.int64)


def unit(r: np.ndarray) -> np.ndarray:
    """Uniform doubles in [0, 1)."""
    return (r >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def _pool() -> np.ndarray:
    rng = np.random.default_rng(0x4E45584D41524B)  # fixed: the pool is part of the model
    letters = rng.integers(ord("a"), ord("z") + 1, size=_POOL_SIZE, dtype=np.uint8)
    letters[rng.random(letters.size) < 1 / 13] = ord(" ")
    return letters


BLOCK = 1 << 16  # event numbers per string block (see `strings`)
_POOL_SIZE = 1 << 23
_POOL_BASES = 1 << 20
_POOL = _pool()
_KIND_SLOTS = {PERSON: 0, AUCTION: 16, BID: 32}  # a (kind, field) pair picks its pool start


def strings(
    cfg: NexmarkConfig,
    kind: str,
    ns: np.ndarray,
    slot: int,
    lens_of: Callable[[np.ndarray], np.ndarray],
) -> pa.Array:
    """Random lowercase strings (with the odd space), one per event of `ns`, of the lengths
    `lens_of(ns)`.

    The strings of one kind and field within a block of `BLOCK` event numbers lie end to
    end in the letter pool from a start picked by a hash of (block, field): an event's
    string depends only on its number (and the lengths of the earlier events of its block,
    recomputed when a chunk starts mid-block), and a chunk's data is one copy of a few pool
    slices instead of a gather per byte.
    """
    lens = lens_of(ns).astype(np.int64)
    n = len(ns)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lens, out=offsets[1:])
    if n == 0 or offsets[-1] == 0:
        return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(b""))
    first_block = int(ns[0]) // BLOCK
    pre = event_numbers(cfg, kind, first_block * BLOCK, int(ns[0]))
    skip = int(lens_of(pre).astype(np.int64).sum()) if len(pre) else 0
    blocks = ns // BLOCK
    cuts = np.flatnonzero(np.diff(blocks)) + 1  # first row of each later block
    bounds = [0, *cuts.tolist(), n]
    bases = below(mix(np.unique(blocks), slot + _KIND_SLOTS[kind], cfg.seed), _POOL_BASES)
    parts = []
    for i in range(len(bounds) - 1):  # one slice per block: a chunk spans a few blocks
        lo, hi = bounds[i], bounds[i + 1]
        a = int(bases[i]) + (skip if i == 0 else 0)
        size = int(offsets[hi] - offsets[lo])
        if a + size <= _POOL_SIZE:
            parts.append(_POOL[a : a + size])
        else:  # very large average sizes: wrap around the pool
            parts.append(np.take(_POOL, np.arange(a, a + size) % _POOL_SIZE))
    data = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))


def next_string_lens(cfg: NexmarkConfig, ns: np.ndarray, slot: int, max_len: int) -> np.ndarray:
    """Lengths of the generator's `nextString(max)`: uniform in [3, max)."""
    return 3 + below(mix(ns + cfg.first_event_id, slot, cfg.seed), max_len - 3)


def extra_lens(
    cfg: NexmarkConfig, ns: np.ndarray, slot: int, current: np.ndarray, avg: int
) -> np.ndarray:
    """Lengths of `extra`: pad `current` bytes to about `avg` (+-20 %), or nothing."""
    want = avg - current.astype(np.int64)
    delta = np.rint(want * 0.2).astype(np.int64)
    span = np.maximum(2 * delta, 1)
    r = mix(ns + cfg.first_event_id, slot, cfg.seed)
    lens = want - delta + np.where(delta > 0, below(r, span), 0)
    return np.where(current > avg, 0, lens)


def prices(r: np.ndarray) -> np.ndarray:
    return np.rint(np.power(10.0, unit(r) * 6.0) * 100.0).astype(np.int64)


def _join(*parts: pa.Array | str) -> pa.Array:
    return pc.binary_join_element_wise(*parts, "")


# -- ids --------------------------------------------------------------------------------------
def last_base0_person(cfg: NexmarkConfig, ev: np.ndarray) -> np.ndarray:
    epoch, off = np.divmod(ev, cfg.total)
    return epoch * cfg.person_proportion + np.minimum(off, cfg.person_proportion - 1)


def last_base0_auction(cfg: NexmarkConfig, ev: np.ndarray) -> np.ndarray:
    epoch, off = np.divmod(ev, cfg.total)
    pp, ap = cfg.person_proportion, cfg.auction_proportion
    before = off < pp
    epoch = np.where(before, epoch - 1, epoch)
    off = np.where(before | (off >= pp + ap), ap - 1, off - pp)
    return epoch * ap + off


def next_base0_person(cfg: NexmarkConfig, ev: np.ndarray, r: np.ndarray) -> np.ndarray:
    people = last_base0_person(cfg, ev) + 1
    active: np.ndarray = np.minimum(people, cfg.active_people)
    out: np.ndarray = people - active + below(r, active + cfg.person_id_lead)
    return out


def next_base0_auction(cfg: NexmarkConfig, ev: np.ndarray, r: np.ndarray) -> np.ndarray:
    last = last_base0_auction(cfg, ev)
    lo: np.ndarray = np.maximum(last - cfg.in_flight_auctions, 0)
    out: np.ndarray = lo + below(r, last - lo + 1 + cfg.auction_id_lead)
    return out


def timestamps_ms(cfg: NexmarkConfig, numbers: np.ndarray) -> np.ndarray:
    return cfg.base_time + np.floor(numbers * cfg.delay_us / 1000.0).astype(np.int64)


# -- the three event kinds --------------------------------------------------------------------
def event_numbers(cfg: NexmarkConfig, kind: str | None, start: int, stop: int) -> np.ndarray:
    """The numbers in [start, stop) of events of `kind` (every event for None)."""
    ns = np.arange(start, stop, dtype=np.int64)
    if kind is None:
        return ns
    rem = (ns + cfg.first_event_id) % cfg.total
    pp, ap = cfg.person_proportion, cfg.auction_proportion
    if kind == PERSON:
        keep = rem < pp
    elif kind == AUCTION:
        keep = (rem >= pp) & (rem < pp + ap)
    else:
        keep = rem >= pp + ap
    return ns[keep]


def kind_counts(cfg: NexmarkConfig, start: int, stop: int) -> dict[str, int]:
    ns = event_numbers(cfg, None, start, stop)
    return {k: len(event_numbers(cfg, k, start, stop)) for k in KINDS} | {"all": len(ns)}


def _ts(ms: np.ndarray) -> pa.Array:
    return pa.array(ms * 1000, type=pa.timestamp("us"))


def _lens(values: list[str]) -> np.ndarray:
    return np.array([len(v.encode()) for v in values], dtype=np.int64)


_FIRST_LENS, _LAST_LENS = _lens(FIRST_NAMES), _lens(LAST_NAMES)
_CITY_LENS, _STATE_LENS = _lens(US_CITIES), _lens(US_STATES)


def _person_picks(cfg: NexmarkConfig, ns: np.ndarray) -> dict[str, np.ndarray]:
    ev, s = ns + cfg.first_event_id, cfg.seed
    return {
        "first": below(mix(ev, 1, s), len(FIRST_NAMES)),
        "last": below(mix(ev, 2, s), len(LAST_NAMES)),
        "city": below(mix(ev, 8, s), len(US_CITIES)),
        "state": below(mix(ev, 9, s), len(US_STATES)),
        "user": next_string_lens(cfg, ns, 4, 7),
        "host": next_string_lens(cfg, ns, 6, 5),
    }


def _person_extra_lens(cfg: NexmarkConfig, ns: np.ndarray) -> np.ndarray:
    p = _person_picks(cfg, ns)
    size = (
        8
        + _FIRST_LENS[p["first"]]
        + 1
        + _LAST_LENS[p["last"]]
        + p["user"]
        + p["host"]
        + 5  # "@" and ".com"
        + 19  # the credit card number
        + _CITY_LENS[p["city"]]
        + _STATE_LENS[p["state"]]
    )
    return extra_lens(cfg, ns, 11, size, cfg.avg_person_byte_size)


def persons(cfg: NexmarkConfig, ns: np.ndarray) -> list[pa.Array]:
    ev, s = ns + cfg.first_event_id, cfg.seed
    p = _person_picks(cfg, ns)
    pid = last_base0_person(cfg, ev) + cfg.first_person_id
    first = pa.array(FIRST_NAMES).take(pa.array(p["first"]))
    last = pa.array(LAST_NAMES).take(pa.array(p["last"]))
    name = pc.binary_join_element_wise(first, last, " ")
    email = _join(
        strings(cfg, PERSON, ns, 3, lambda x: next_string_lens(cfg, x, 4, 7)),
        "@",
        strings(cfg, PERSON, ns, 5, lambda x: next_string_lens(cfg, x, 6, 5)),
        ".com",
    )
    digits = below(mix(ev, 7, s), 10**16)
    cc = np.full((len(ev), 19), ord(" "), dtype=np.uint8)
    for i in range(16):  # 16 digit columns, not rows
        cc[:, i + i // 4] = ord("0") + (digits // 10 ** (15 - i)) % 10
    credit = pa.StringArray.from_buffers(
        len(ev),
        pa.py_buffer(np.arange(len(ev) + 1, dtype=np.int32) * 19),
        pa.py_buffer(cc.reshape(-1)),
    )
    city = pa.array(US_CITIES).take(pa.array(p["city"]))
    state = pa.array(US_STATES).take(pa.array(p["state"]))
    extra = strings(cfg, PERSON, ns, 10, lambda x: _person_extra_lens(cfg, x))
    return [pa.array(pid), name, email, credit, city, state, _ts(timestamps_ms(cfg, ns)), extra]


def _auction_extra_lens(cfg: NexmarkConfig, ns: np.ndarray) -> np.ndarray:
    size = 8 + next_string_lens(cfg, ns, 6, 20) + next_string_lens(cfg, ns, 8, 100) + 40
    return extra_lens(cfg, ns, 12, size, cfg.avg_auction_byte_size)


def auctions(cfg: NexmarkConfig, ns: np.ndarray) -> list[pa.Array]:
    ev, s = ns + cfg.first_event_id, cfg.seed
    aid = last_base0_auction(cfg, ev) + cfg.first_auction_id
    hot = below(mix(ev, 1, s), cfg.hot_seller_ratio) > 0
    seller = np.where(
        hot,
        (last_base0_person(cfg, ev) // HOT_RATIO_2) * HOT_RATIO_2,
        next_base0_person(cfg, ev, mix(ev, 2, s)),
    )
    seller += cfg.first_person_id
    category = cfg.first_category_id + below(mix(ev, 3, s), cfg.num_categories)
    initial = prices(mix(ev, 4, s))
    ts = timestamps_ms(cfg, ns)
    lead = (cfg.in_flight_auctions * cfg.total) // cfg.auction_proportion
    horizon = timestamps_ms(cfg, ns + lead) - ts
    expires = ts + 1 + below(mix(ev, 5, s), np.maximum(horizon * 2, 1))
    item = strings(cfg, AUCTION, ns, 7, lambda x: next_string_lens(cfg, x, 6, 20))
    desc = strings(cfg, AUCTION, ns, 9, lambda x: next_string_lens(cfg, x, 8, 100))
    reserve = initial + prices(mix(ev, 10, s))
    extra = strings(cfg, AUCTION, ns, 11, lambda x: _auction_extra_lens(cfg, x))
    return [
        pa.array(aid),
        item,
        desc,
        pa.array(initial),
        pa.array(reserve),
        _ts(ts),
        _ts(expires),
        pa.array(seller),
        pa.array(category),
        extra,
    ]


def _channel_tables(seed: int) -> tuple[pa.Array, pa.Array]:
    """Channel names and urls: the 4 hot channels, then `channel-0` ... `channel-9999`, each
    with its url (a random base url; `&channel_id=` the bit-reversed number for the others)."""
    n = len(HOT_CHANNELS) + CHANNELS
    r = mix(np.arange(n, dtype=np.int64), 60, seed)
    letters = _POOL[below(r, _POOL_SIZE - 16)[:, None] + np.arange(15)[None, :]]
    letters[letters == ord(" ")] = ord("_")
    parts = [
        pa.StringArray.from_buffers(
            n,
            pa.py_buffer(np.arange(n + 1, dtype=np.int32) * 5),
            pa.py_buffer(np.ascontiguousarray(letters[:, 5 * i : 5 * i + 5]).reshape(-1)),
        )
        for i in range(3)
    ]
    base = _join(
        "https://www.nexmark.com/", parts[0], "/", parts[1], "/", parts[2], "/item.htm?query=1"
    )
    num = np.arange(CHANNELS, dtype=np.uint32)
    rev = np.zeros(CHANNELS, dtype=np.uint64)
    for b in range(32):  # bit reversal of a 32-bit int, 32 vector steps
        rev |= ((num >> np.uint32(b)) & np.uint32(1)).astype(np.uint64) << np.uint64(31 - b)
    rev_abs = np.where(rev >= 1 << 31, (1 << 32) - rev.astype(np.int64), rev.astype(np.int64))
    numbered = pa.array(["channel-"] * CHANNELS)
    names = pa.concat_arrays(
        [pa.array(HOT_CHANNELS), _join(numbered, pc.cast(pa.array(num), pa.string()))]
    )
    suffix = pa.concat_arrays(
        [
            pa.array([""] * len(HOT_CHANNELS)),
            _join(pa.array(["&channel_id="] * CHANNELS), pc.cast(pa.array(rev_abs), pa.string())),
        ]
    )
    return names, _join(base, suffix)


_CHANNELS: dict[int, tuple[pa.Array, pa.Array]] = {}


def _bid_extra_lens(cfg: NexmarkConfig, ns: np.ndarray) -> np.ndarray:
    return extra_lens(cfg, ns, 10, np.full(len(ns), 32), cfg.avg_bid_byte_size)


def bids(cfg: NexmarkConfig, ns: np.ndarray) -> list[pa.Array]:
    ev = ns + cfg.first_event_id
    s = cfg.seed
    hot_a = below(mix(ev, 1, s), cfg.hot_auction_ratio) > 0
    auction = np.where(
        hot_a,
        (last_base0_auction(cfg, ev) // HOT_RATIO_2) * HOT_RATIO_2,
        next_base0_auction(cfg, ev, mix(ev, 2, s)),
    )
    auction += cfg.first_auction_id
    hot_b = below(mix(ev, 3, s), cfg.hot_bidder_ratio) > 0
    bidder = np.where(
        hot_b,
        (last_base0_person(cfg, ev) // HOT_RATIO_2) * HOT_RATIO_2 + 1,
        next_base0_person(cfg, ev, mix(ev, 4, s)),
    )
    bidder += cfg.first_person_id
    price = prices(mix(ev, 5, s))
    hot_c = below(mix(ev, 6, s), cfg.hot_channel_ratio) > 0
    pick = np.where(
        hot_c,
        below(mix(ev, 7, s), len(HOT_CHANNELS)),
        len(HOT_CHANNELS) + below(mix(ev, 8, s), CHANNELS),
    )
    if s not in _CHANNELS:
        _CHANNELS[s] = _channel_tables(s)
    names, urls = _CHANNELS[s]
    take = pa.array(pick)
    extra = strings(cfg, BID, ns, 9, lambda x: _bid_extra_lens(cfg, x))
    return [
        pa.array(auction),
        pa.array(bidder),
        pa.array(price),
        names.take(take),
        urls.take(take),
        _ts(timestamps_ms(cfg, ns)),
        extra,
    ]


_MAKERS = {PERSON: persons, AUCTION: auctions, BID: bids}


def generate(cfg: NexmarkConfig, kind: str, start: int, stop: int) -> pa.RecordBatch:
    """The events of `kind` among the numbers [start, stop), with their event numbers as
    the last column (`_rw_nexmark_offset`)."""
    ns = event_numbers(cfg, kind, start, stop)
    cols = _MAKERS[kind](cfg, ns)
    names = [f.name for f in COLUMNS[kind]] + ["_rw_nexmark_offset"]
    return pa.RecordBatch.from_arrays([*cols, pa.array(ns)], names=names)
