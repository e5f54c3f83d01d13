"""A sqllogictest runner for Swell, over psycopg and the simple query protocol.

Swell's end-to-end SQL behaviour is specified as `.slt` files in the sqllogictest format
(as RisingWave and sqllogictest-rs use it), so one file reads as a user session and can be
replayed against any PostgreSQL-compatible server. This module parses a file into records
and runs them on one connection; tests/slt/conftest.py turns each file into a pytest item
against the shared server, and `python tests/slt/runner.py --dsn ... FILE...` runs files
against a server started by hand.

Grammar (records are separated by blank lines; `#` lines between records are comments):

    statement ok                 the SQL must succeed
    statement error [regex]      it must fail; regex (re.search) against the error text
    statement error              ... or, followed by `----` and the exact error text
    statement count N            it must succeed and report N affected rows
    query <types> [rowsort|valuesort|nosort] [retry N backoff <d>]
    <SQL>
    ----
    <expected rows, values separated by single spaces>
    query error [regex]          the query must fail (as for statement error)
    sleep <d>                    d as 100ms, 2s, 1m
    halt                         stop the file here (the rest is not run)
    connect [dbname=D] [user=U]  later records run on a new connection with these (as
                                 psql's \\c; the defaults are the harness's: root, dev)
    connect ... error <regex>    the connection attempt must fail (the previous one stays)
    skipif <engine> / onlyif <engine>   apply to the next record; this engine is `swell`

Values print as the server's text output (the text format of the simple query protocol),
except NULL as `NULL` and the empty string as `(empty)`; booleans are PostgreSQL's `t`/`f`.
Errors print as `ERROR: <primary message> (SQLSTATE <code>)` so a regex can pin the code.
The type string needs one letter per result column (`I` integer, `T` text, `R` real or
numeric, `B` boolean, `?` any); a different column count is a failure. `R` cells compare
numerically with a relative tolerance of 1e-9 when the text differs, so `7.3333333333` and
`7.3333333333333333` agree and an expected `5` matches `5.0000000000`: the number of
fractional digits a numeric prints is the engine's business, not the test's.

A record that fails stops the file (later records usually depend on it). The runner then
still executes the file's remaining `DROP` statements, ignoring their errors, so a failed
file does not leave objects behind on a shared server.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import re
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.postgres import types as pg_types
from psycopg.types.string import TextLoader

ENGINE = "swell"
SORT_MODES = ("nosort", "rowsort", "valuesort")
REL_TOL = 1e-9


class SltParseError(Exception):
    """The .slt file itself is malformed (reported with file:line)."""


class SltFailure(AssertionError):
    """A record did not behave as the file says; the message is the full report."""


@dataclass
class Record:
    line: int  # 1-based line of the record's first line (the directive)
    sql: str = ""


@dataclass
class Statement(Record):
    expect_error: bool = False
    error_regex: str | None = None  # None with expect_error: any error
    error_text: str | None = None  # exact expected error (the `----` form)
    count: int | None = None


@dataclass
class Query(Record):
    types: str = ""
    sort: str = "nosort"
    expected: list[str] = field(default_factory=list)
    expect_error: bool = False
    error_regex: str | None = None
    error_text: str | None = None
    retry: int = 0
    backoff: float = 1.0


@dataclass
class Sleep(Record):
    seconds: float = 0.0


@dataclass
class Halt(Record):
    pass


@dataclass
class Connect(Record):
    params: dict[str, str] = field(default_factory=dict)
    error_regex: str | None = None  # the attempt must fail with this


# -- parsing ----------------------------------------------------------------------------------
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m)$")


def parse_duration(text: str) -> float:
    m = _DURATION.match(text.strip())
    if m is None:
        raise ValueError(f"bad duration {text!r} (use e.g. 100ms, 2s, 1m)")
    value, unit = float(m.group(1)), m.group(2)
    return value / 1000 if unit == "ms" else value * 60 if unit == "m" else value


def parse(text: str, path: str = "<string>") -> list[Record]:
    """Parse a whole .slt file; records skipped by skipif/onlyif are left out."""
    lines = text.splitlines()
    records: list[Record] = []
    i = 0
    skip_next = False

    def fail(lineno: int, msg: str) -> SltParseError:
        return SltParseError(f"{path}:{lineno}: {msg}")

    def take_block(start: int, stop_at_dashes: bool) -> tuple[list[str], int]:
        """Lines from `start` up to a blank line (or `----` if asked); returns end index."""
        out: list[str] = []
        j = start
        while j < len(lines) and lines[j].strip() != "":
            if stop_at_dashes and lines[j].strip() == "----":
                break
            out.append(lines[j])
            j += 1
        return out, j

    while i < len(lines):
        raw = lines[i]
        stripped = raw.strip()
        lineno = i + 1
        if stripped == "" or stripped.startswith("#"):
            i += 1
            continue
        words = stripped.split()
        head = words[0]
        rec: Record | None = None

        if head in ("skipif", "onlyif"):
            if len(words) != 2:
                raise fail(lineno, f"{head} needs exactly one engine name")
            engine = words[1].lower()
            if (head == "skipif") == (engine == ENGINE):
                skip_next = True
            i += 1
            continue
        if head == "halt":
            rec = Halt(lineno)
            i += 1
        elif head == "connect":
            args, _, regex = stripped[len("connect") :].partition(" error ")
            words = args.split()
            params = dict(w.split("=", 1) for w in words if "=" in w)
            if len(params) != len(words) or set(params) - {"dbname", "user"}:
                raise fail(lineno, "connect takes dbname=... and user=... only")
            rec = Connect(lineno, params=params, error_regex=regex.strip() or None)
            i += 1
        elif head == "sleep":
            if len(words) != 2:
                raise fail(lineno, "sleep needs one duration")
            try:
                rec = Sleep(lineno, seconds=parse_duration(words[1]))
            except ValueError as e:
                raise fail(lineno, str(e)) from None
            i += 1
        elif head in ("hash-threshold", "control"):
            i += 1
            continue
        elif head == "statement":
            rec, i = _parse_statement(words, lines, i, take_block, fail)
        elif head == "query":
            rec, i = _parse_query(words, lines, i, take_block, fail)
        else:
            raise fail(lineno, f"unknown record type {head!r}")

        if skip_next:
            skip_next = False
        else:
            records.append(rec)
    return records


def _parse_statement(
    words: list[str], lines: list[str], i: int, take_block: Any, fail: Any
) -> tuple[Statement, int]:
    lineno = i + 1
    if len(words) < 2 or words[1] not in ("ok", "error", "count"):
        raise fail(
            lineno, "expected `statement ok`, `statement error [regex]` or `statement count N`"
        )
    rec = Statement(lineno)
    kind = words[1]
    if kind == "error":
        rec.expect_error = True
        rest = lines[i].strip()[len("statement error") :].strip()
        rec.error_regex = rest or None
    elif kind == "count":
        if len(words) != 3 or not words[2].isdigit():
            raise fail(lineno, "statement count needs a row count")
        rec.count = int(words[2])
    elif len(words) > 2:
        raise fail(lineno, f"unexpected text after `statement ok`: {' '.join(words[2:])!r}")
    sql_lines, j = take_block(i + 1, True)
    if not sql_lines:
        raise fail(lineno, "statement without SQL")
    rec.sql = "\n".join(sql_lines)
    if j < len(lines) and lines[j].strip() == "----":
        if not (rec.expect_error and rec.error_regex is None):
            raise fail(
                j + 1, "`----` after a statement is only allowed with a bare `statement error`"
            )
        body, j = take_block(j + 1, False)
        rec.error_text = "\n".join(body).strip()
    return rec, j


def _parse_query(
    words: list[str], lines: list[str], i: int, take_block: Any, fail: Any
) -> tuple[Query, int]:
    lineno = i + 1
    if len(words) < 2:
        raise fail(lineno, "query needs a type string (e.g. `query IT rowsort`) or `error`")
    rec = Query(lineno)
    if words[1] == "error":
        rec.expect_error = True
        rec.error_regex = lines[i].strip()[len("query error") :].strip() or None
    else:
        rec.types = words[1]
        if not re.fullmatch(r"[ITRB?]+", rec.types):
            raise fail(lineno, f"bad type string {rec.types!r} (letters I, T, R, B, ?)")
        rest = words[2:]
        if rest and rest[0] in SORT_MODES:
            rec.sort = rest.pop(0)
        if rest[:1] == ["retry"]:
            if len(rest) != 4 or not rest[1].isdigit() or rest[2] != "backoff":
                raise fail(lineno, "expected `retry N backoff <duration>`")
            rec.retry = int(rest[1])
            try:
                rec.backoff = parse_duration(rest[3])
            except ValueError as e:
                raise fail(lineno, str(e)) from None
            rest = []
        if rest:
            raise fail(lineno, f"unexpected text after the query header: {' '.join(rest)!r}")
    sql_lines, j = take_block(i + 1, True)
    if not sql_lines:
        raise fail(lineno, "query without SQL")
    rec.sql = "\n".join(sql_lines)
    if j < len(lines) and lines[j].strip() == "----":
        body, j = take_block(j + 1, False)
        if rec.expect_error:
            if rec.error_regex is not None:
                raise fail(j, "`query error <regex>` takes no `----` block")
            rec.error_text = "\n".join(body).strip()
        else:
            rec.expected = body
    elif not rec.expect_error:
        raise fail(lineno, "query without `----` (write `----` and a blank line for no rows)")
    return rec, j


# -- formatting ---------------------------------------------------------------------------------
def format_error(e: BaseException) -> str:
    """`ERROR: <message> (SQLSTATE <code>)`; the form error regexes match against."""
    if isinstance(e, psycopg.Error):
        msg = e.diag.message_primary or str(e).strip()
        code = e.sqlstate or "none"
        return f"ERROR: {msg} (SQLSTATE {code})"
    return f"ERROR: {type(e).__name__}: {e}"


def format_cell(value: Any) -> str:
    if value is None:
        return "NULL"
    text = str(value)
    return "(empty)" if text == "" else text


def normalize(line: str) -> str:
    return " ".join(line.split())


def _numbers_close(actual: str, expected: str) -> bool:
    try:
        a, b = float(actual), float(expected)
    except ValueError:
        return False
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=REL_TOL)


def _row_matches(actual: list[str], expected_line: str, types: str) -> bool:
    if normalize(" ".join(actual)) == normalize(expected_line):
        return True
    if "R" not in types:
        return False
    exp = expected_line.split()
    if len(exp) != len(actual) or any(len(c.split()) != 1 for c in actual):
        return False
    for a, e, t in zip(actual, exp, types):
        if a == e:
            continue
        if t != "R" or not _numbers_close(a, e):
            return False
    return True


def _sort_key(cells: list[str], types: str) -> tuple[tuple[int, float, str], ...]:
    key = []
    for c, t in zip(cells, types):
        if t == "R":
            try:
                key.append((0, float(c), ""))
                continue
            except ValueError:
                pass
        key.append((1, 0.0, c))
    return tuple(key)


def compare(rows: list[list[str]], rec: Query) -> bool:
    """Whether the actual cells match the record's expected lines under its sort mode."""
    expected = [ln for ln in rec.expected]
    if rec.sort == "valuesort":
        got = sorted(c for row in rows for c in row)
        want = sorted(v for ln in expected for v in ln.split())
        return got == want
    if rec.sort == "rowsort":
        rows = sorted(rows, key=lambda r: " ".join(r))
        expected = sorted(expected, key=normalize)
        if len(rows) == len(expected) and not all(
            _row_matches(r, e, rec.types) for r, e in zip(rows, expected)
        ):
            # numerically equal R cells may sort differently as text; retry numerically
            rows = sorted(rows, key=lambda r: _sort_key(r, rec.types))
            expected = sorted(expected, key=lambda e: _sort_key(e.split(), rec.types))
    if len(rows) != len(expected):
        return False
    return all(_row_matches(r, e, rec.types) for r, e in zip(rows, expected))


# -- running ----------------------------------------------------------------------------------
def text_connection(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """Make `conn` return every builtin type as the server's text, unparsed."""
    for info in pg_types:
        conn.adapters.register_loader(info.oid, TextLoader)
        if info.array_oid:
            conn.adapters.register_loader(info.array_oid, TextLoader)
    return conn


def _indent(text: str) -> str:
    return "\n".join("    " + ln for ln in text.splitlines()) or "    (nothing)"


class FileRunner:
    """Runs the records of one file on one connection; raises `SltFailure` on the first
    record that does not behave as written."""

    def __init__(self, path: str, connect: Callable[..., psycopg.Connection[Any]]) -> None:
        self.path = path
        self._connect = connect
        self._conn: psycopg.Connection[Any] | None = None
        self._params: dict[str, str] = {}  # the last `connect` record's

    def conn(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = text_connection(self._connect(**self._params))
            self._conn.autocommit = True
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def failure(self, rec: Record, what: str, detail: str = "") -> SltFailure:
        msg = f"{self.path}:{rec.line}: {what}\nSQL:\n{_indent(rec.sql)}"
        if detail:
            msg += "\n" + detail
        return SltFailure(msg)

    def run(self, records: Iterable[Record]) -> int:
        """Run records in order; returns how many ran. On failure, best-effort DROPs."""
        records = list(records)
        done = 0
        try:
            for idx, rec in enumerate(records):
                if isinstance(rec, Halt):
                    break
                try:
                    self.run_record(rec)
                except SltFailure:
                    self._cleanup(records[idx + 1 :])
                    raise
                done += 1
        finally:
            self.close()
        return done

    def _cleanup(self, rest: list[Record]) -> None:
        for rec in rest:
            if isinstance(rec, Statement) and rec.sql.lstrip().upper().startswith("DROP "):
                with contextlib.suppress(Exception):
                    self.conn().execute(rec.sql)

    def run_record(self, rec: Record) -> None:
        if isinstance(rec, Sleep):
            time.sleep(rec.seconds)
        elif isinstance(rec, Connect):
            self._connect_record(rec)
        elif isinstance(rec, Statement):
            self._run_statement(rec)
        elif isinstance(rec, Query):
            self._run_query(rec)

    def _connect_record(self, rec: Connect) -> None:
        rec.sql = "connect " + " ".join(f"{k}={v}" for k, v in rec.params.items())
        try:
            conn = text_connection(self._connect(**rec.params))
        except psycopg.Error as e:
            got = format_error(e)
            if e.sqlstate is None:  # refused at startup: the server's text is in the message
                got += " " + " ".join(str(e).split())
            if rec.error_regex is None:
                raise self.failure(rec, "connect failed", f"error: {got}") from None
            if re.search(rec.error_regex, got) is None:
                raise self.failure(
                    rec, "wrong error", f"expected (regex): {rec.error_regex}\nactual: {got}"
                ) from None
            return
        if rec.error_regex is not None:
            conn.close()
            raise self.failure(rec, "expected the connection to be refused, but it succeeded")
        conn.autocommit = True
        self.close()
        self._conn, self._params = conn, dict(rec.params)

    def _execute(self, sql: str) -> psycopg.Cursor[Any]:
        # No parameters: psycopg sends a simple Query message, like psql does.
        return self.conn().execute(sql)

    def _check_error(self, rec: Statement | Query, err: BaseException | None) -> None:
        if err is None:
            raise self.failure(
                rec,
                "expected an error, but the statement succeeded",
                f"expected error: {rec.error_regex or rec.error_text or '(any)'}",
            )
        got = format_error(err)
        if rec.error_text is not None and normalize(got) != normalize(rec.error_text):
            raise self.failure(
                rec, "wrong error", f"expected:\n{_indent(rec.error_text)}\nactual:\n{_indent(got)}"
            )
        if rec.error_regex is not None and re.search(rec.error_regex, got) is None:
            raise self.failure(
                rec, "wrong error", f"expected (regex): {rec.error_regex}\nactual: {got}"
            )

    def _run_statement(self, rec: Statement) -> None:
        try:
            cur = self._execute(rec.sql)
        except psycopg.Error as e:
            if rec.expect_error:
                self._check_error(rec, e)
                return
            raise self.failure(rec, "statement failed", f"error: {format_error(e)}") from None
        if rec.expect_error:
            self._check_error(rec, None)
        if rec.count is not None and cur.rowcount != rec.count:
            raise self.failure(
                rec, "wrong affected row count", f"expected: {rec.count}\nactual: {cur.rowcount}"
            )

    def _fetch(self, rec: Query) -> list[list[str]]:
        cur = self._execute(rec.sql)
        if cur.description is None:
            raise self.failure(rec, "query returned no result set (is it a statement?)")
        ncols = len(cur.description)
        if ncols != len(rec.types):
            names = ", ".join(d.name for d in cur.description)
            raise self.failure(
                rec,
                f"query returned {ncols} columns ({names}), but the type string "
                f"{rec.types!r} declares {len(rec.types)}",
            )
        return [[format_cell(v) for v in row] for row in cur.fetchall()]

    def _run_query(self, rec: Query) -> None:
        if rec.expect_error:
            try:
                self._execute(rec.sql)
            except psycopg.Error as e:
                self._check_error(rec, e)
                return
            self._check_error(rec, None)
            return
        attempts = rec.retry + 1
        for attempt in range(attempts):
            try:
                rows = self._fetch(rec)
            except psycopg.Error as e:
                raise self.failure(rec, "query failed", f"error: {format_error(e)}") from None
            if compare(rows, rec):
                return
            if attempt + 1 < attempts:
                time.sleep(rec.backoff)
        actual = [" ".join(r) for r in rows]
        if rec.sort == "rowsort":
            actual.sort()
        elif rec.sort == "valuesort":
            actual = sorted(c for r in rows for c in r)
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        raise self.failure(
            rec,
            f"query result mismatch{tries} ({rec.sort})",
            f"expected:\n{_indent(chr(10).join(rec.expected))}\n"
            f"actual:\n{_indent(chr(10).join(actual))}",
        )


def run_file(
    path: Path | str,
    connect: Callable[..., psycopg.Connection[Any]],
    *,
    display_path: str | None = None,
) -> int:
    """Parse and run one .slt file; returns the number of records run."""
    shown = display_path or str(path)
    records = parse(Path(path).read_text(), shown)
    return FileRunner(shown, connect).run(records)


def header_problems(text: str) -> list[str]:
    """Missing `# name:` / `# description:` headers (every file starts with them)."""
    head = [ln.strip() for ln in text.splitlines()[:10]]
    return [
        f"missing `# {h}:` header"
        for h in ("name", "description")
        if not any(ln.startswith(f"# {h}:") for ln in head)
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run .slt files against a running Swell server.")
    ap.add_argument("--dsn", default="postgresql://root@127.0.0.1:4566/dev")
    ap.add_argument("files", nargs="+", type=Path)
    args = ap.parse_args(argv)
    passed = failed = 0
    for f in args.files:
        try:
            n = run_file(f, lambda **kw: psycopg.connect(args.dsn, autocommit=True, **kw))
        except (SltFailure, SltParseError, psycopg.OperationalError) as e:
            failed += 1
            print(f"FAIL {f}\n{e}\n")
        else:
            passed += 1
            print(f"ok   {f} ({n} records)")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
