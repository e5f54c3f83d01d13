"""Nexmark q0-q5, q7, q8 through the real server, per server CPU-second.

For each query: a fresh `python -m pgwire.cli playground` (bench/_server.py), the sources
`person`, `auction` and `bid` the query reads (`connector = 'nexmark'`, one per table type,
`nexmark.event.num = N`, no pacing, `WATERMARK FOR date_time AS date_time - INTERVAL '4'
SECOND` as RisingWave's Nexmark sources declare it), then the query as RisingWave's
benchmark runs it: `CREATE SINK nexmark_qN AS <query> WITH (connector = 'blackhole', ...)`.
The client then sends FLUSH until the sources report every event number consumed
(rw_catalog.rw_source_lag), each FLUSH being one barrier that generates, processes and
checkpoints the next bounded step of events. The figure is N (all events of the Nexmark
stream, persons + auctions + bids, as Flink's and Feldera's harnesses count them) divided
by the CPU seconds of the server and its worker processes (utime + stime of every thread,
/proc) from CREATE SINK to the last FLUSH: generation, every operator, state and
checkpoints. The server runs with `--parallelism 1` unless told otherwise (`--parallelism`).

    python bench/nexmark.py [--events 1000000] [--queries q0,q4] [--repeat 3] [--profile] [--full]

`--profile` samples the server with py-spy during each query and prints its hot spots.
Published per-core figures of other systems (docs/benchmarks.md keeps them with sources)
are printed beside each result.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import report  # noqa: E402
from _server import BenchServer  # noqa: E402

COLUMNS = {
    "person": "id BIGINT, name VARCHAR, email_address VARCHAR, credit_card VARCHAR, "
    "city VARCHAR, state VARCHAR, date_time TIMESTAMP, extra VARCHAR",
    "auction": "id BIGINT, item_name VARCHAR, description VARCHAR, initial_bid BIGINT, "
    "reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, "
    "extra VARCHAR",
    "bid": "auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, "
    "date_time TIMESTAMP, extra VARCHAR",
}

# the queries as RisingWave's Nexmark benchmark writes them (sinks into blackhole)
QUERIES: dict[str, tuple[list[str], str]] = {
    "q0": (["bid"], "SELECT auction, bidder, price, date_time FROM bid"),
    "q1": (
        ["bid"],
        "SELECT auction, bidder, 0.908 * price AS price, date_time FROM bid",
    ),
    "q2": (
        ["bid"],
        "SELECT auction, price FROM bid WHERE auction = 1007 OR auction = 1020 "
        "OR auction = 2001 OR auction = 2019 OR auction = 2087",
    ),
    "q3": (
        ["auction", "person"],
        "SELECT P.name, P.city, P.state, A.id FROM auction AS A "
        "INNER JOIN person AS P ON A.seller = P.id "
        "WHERE A.category = 10 AND (P.state = 'or' OR P.state = 'id' OR P.state = 'ca')",
    ),
    "q4": (
        ["auction", "bid"],
        "SELECT Q.category, AVG(Q.final) AS avg FROM ("
        " SELECT MAX(B.price) AS final, A.category FROM auction A, bid B"
        " WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires"
        " GROUP BY A.id, A.category) Q GROUP BY Q.category",
    ),
    "q5": (
        ["bid"],
        "SELECT AuctionBids.auction, AuctionBids.num FROM ("
        " SELECT bid.auction, count(*) AS num, window_start AS starttime"
        " FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)"
        " GROUP BY bid.auction, window_start) AS AuctionBids "
        "JOIN ("
        " SELECT max(CountBids.num) AS maxn, CountBids.starttime_c FROM ("
        "  SELECT count(*) AS num, window_start AS starttime_c"
        "  FROM HOP(bid, date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)"
        "  GROUP BY bid.auction, window_start) AS CountBids"
        " GROUP BY CountBids.starttime_c) AS MaxBids "
        "ON AuctionBids.starttime = MaxBids.starttime_c AND AuctionBids.num >= MaxBids.maxn",
    ),
    "q7": (
        ["bid"],
        "SELECT B.auction, B.price, B.bidder, B.date_time FROM bid B "
        "JOIN (SELECT MAX(price) AS maxprice, window_end AS date_time"
        " FROM TUMBLE(bid, date_time, INTERVAL '10' SECOND) GROUP BY window_end) B1"
        " ON B.price = B1.maxprice "
        "WHERE B.date_time BETWEEN B1.date_time - INTERVAL '10' SECOND AND B1.date_time",
    ),
    "q8": (
        ["person", "auction"],
        "SELECT P.id, P.name, P.starttime FROM ("
        " SELECT id, name, window_start AS starttime, window_end AS endtime"
        " FROM TUMBLE(person, date_time, INTERVAL '10' SECOND)"
        " GROUP BY id, name, window_start, window_end) P "
        "JOIN ("
        " SELECT seller, window_start AS starttime, window_end AS endtime"
        " FROM TUMBLE(auction, date_time, INTERVAL '10' SECOND)"
        " GROUP BY seller, window_start, window_end) A "
        "ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime",
    ),
}

TARGETS = {"q0": 1e6, "q1": 1e6, "q2": 1e6, "q3": 3e5, "q8": 3e5, "q4": 2e5, "q5": 2e5, "q7": 2e5}

# published throughput per core (events/s/core); sources and caveats in docs/benchmarks.md
FLINK_PER_CORE = {
    "q0": 155_020,
    "q1": 157_940,
    "q2": 175_210,
    "q3": 152_120,
    "q4": 34_330,
    "q5": 22_140,
    "q7": 12_330,
    "q8": 146_140,
}


def source_ddl(kind: str, events: int) -> str:
    return (
        f"CREATE SOURCE {kind} ({COLUMNS[kind]},"
        " WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND) WITH ("
        f" connector = 'nexmark', nexmark.table.type = '{kind.capitalize()}',"
        f" nexmark.event.num = '{events}', nexmark.split.num = '1',"
        " nexmark.min.event.gap.in.ns = '0')"
    )


def run_query(
    name: str, events: int, profile: bool, parallelism: int = 1
) -> tuple[float, float, int]:
    """(events per CPU-second, wall seconds, FLUSH statements) for one query on a fresh server."""
    kinds, sql = QUERIES[name]
    args = ["--parallelism", str(parallelism)]
    with BenchServer(barrier_ms=60_000, extra_args=args) as srv, srv.connect() as c:
        for k in kinds:
            c.execute(source_ddl(k, events))
        if profile:  # the samples go to the server's temporary directory, removed with it
            srv.profile_start(srv.dir / f"profile-{name}.txt")
        cpu0, t0 = srv.cpu_seconds(), time.perf_counter()
        c.execute(
            f"CREATE SINK nexmark_{name} AS {sql} WITH (connector = 'blackhole',"
            " type = 'append-only', force_append_only = 'true')"
        )
        flushes = 0
        while True:
            c.execute("FLUSH")
            flushes += 1
            rows = c.execute(
                'SELECT source_name, "offset" FROM rw_catalog.rw_source_lag'
            ).fetchall()
            if rows and all(int(r[1]) >= events for r in rows):
                break
        cpu, wall = srv.cpu_seconds() - cpu0, time.perf_counter() - t0
        if profile:
            srv.profile_stop()
        return events / cpu, wall, flushes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000, help="Nexmark events per query")
    ap.add_argument("--full", action="store_true", help="10M events per query")
    ap.add_argument("--queries", default=",".join(QUERIES), help="comma-separated, e.g. q0,q4")
    ap.add_argument("--profile", action="store_true", help="py-spy the server per query")
    ap.add_argument(
        "--repeat", type=int, default=1, help="runs per query; the best is reported (noisy hosts)"
    )
    ap.add_argument(
        "--parallelism",
        type=int,
        default=1,
        help="the server's --parallelism (default 1: every job in the server process; more "
        "adds worker processes, whose CPU seconds count too)",
    )
    a = ap.parse_args()
    events = 10_000_000 if a.full else a.events
    for q in [s.strip() for s in a.queries.split(",") if s.strip()]:
        if q not in QUERIES:
            sys.exit(f"unknown query {q} (known: {', '.join(QUERIES)})")
        try:
            runs = [run_query(q, events, a.profile, a.parallelism) for _ in range(a.repeat)]
            rate, wall, flushes = max(runs)
        except Exception as e:  # a refused query is reported, the others still run
            print(f"{q}: failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
            report("nexmark", q, 0, "events/CPU-s", mode="e2e", target=TARGETS[q], note="failed")
            continue
        note = (
            f"{events:,} events, {flushes} FLUSH, {wall:.1f} s wall;"
            f" Flink {FLINK_PER_CORE[q]:,}/core"
        )
        report("nexmark", q, rate, "events/CPU-s", mode="e2e", target=TARGETS[q], note=note)


if __name__ == "__main__":
    main()
