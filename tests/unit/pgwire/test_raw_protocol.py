"""pgwire at the byte level: messages no driver lets us send in a controlled order."""

from __future__ import annotations

import socket
import struct

from unit.pgwire.fake_engine import FakeDatabase, RunningServer


def _cstr(s: str) -> bytes:
    return s.encode() + b"\x00"


class Raw:
    """A minimal blocking protocol client that records every backend message."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""
        self.pid = 0
        self.key = 0

    def send_startup(self, code: int, payload: bytes = b"") -> None:
        body = struct.pack(">i", code) + payload
        self.sock.sendall(struct.pack(">i", len(body) + 4) + body)

    def startup(self, version: int = 196608, **params: str) -> list[tuple[bytes, bytes]]:
        params = {"user": "root", "database": "dev", **params}
        payload = b"".join(_cstr(k) + _cstr(v) for k, v in params.items()) + b"\x00"
        self.send_startup(version, payload)
        msgs = self.until(b"Z")
        for kind, body in msgs:
            if kind == b"K":
                self.pid, self.key = struct.unpack(">ii", body)
        return msgs

    def send(self, kind: bytes, body: bytes = b"") -> None:
        self.sock.sendall(kind + struct.pack(">i", len(body) + 4) + body)

    def _fill(self, n: int) -> None:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buf += chunk

    def read(self) -> tuple[bytes, bytes]:
        self._fill(5)
        kind = self.buf[:1]
        (length,) = struct.unpack(">i", self.buf[1:5])
        self._fill(1 + length)
        body = self.buf[5 : 1 + length]
        self.buf = self.buf[1 + length :]
        return kind, body

    def until(self, kind: bytes) -> list[tuple[bytes, bytes]]:
        out = []
        while True:
            m = self.read()
            out.append(m)
            if m[0] == kind:
                return out

    def closed_by_server(self) -> bool:
        try:
            while True:
                self.read()
        except (EOFError, ConnectionResetError):
            return True

    # -- extended protocol messages -----------------------------------------------------------
    def parse(self, name: str, sql: str, oids: tuple[int, ...] = ()) -> None:
        body = _cstr(name) + _cstr(sql) + struct.pack(">h", len(oids))
        self.send(b"P", body + b"".join(struct.pack(">i", o) for o in oids))

    def bind(
        self,
        portal: str,
        stmt: str,
        values: tuple[bytes | None, ...] = (),
        pformats: tuple[int, ...] = (),
        rformats: tuple[int, ...] = (),
    ) -> None:
        body = _cstr(portal) + _cstr(stmt)
        body += struct.pack(">h", len(pformats)) + b"".join(struct.pack(">h", f) for f in pformats)
        body += struct.pack(">h", len(values))
        for v in values:
            body += struct.pack(">i", -1) if v is None else struct.pack(">i", len(v)) + v
        body += struct.pack(">h", len(rformats)) + b"".join(struct.pack(">h", f) for f in rformats)
        self.send(b"B", body)

    def describe(self, what: bytes, name: str) -> None:
        self.send(b"D", what + _cstr(name))

    def execute(self, portal: str, max_rows: int = 0) -> None:
        self.send(b"E", _cstr(portal) + struct.pack(">i", max_rows))

    def close(self) -> None:
        self.sock.close()


def kinds(msgs: list[tuple[bytes, bytes]]) -> bytes:
    return b"".join(k for k, _ in msgs)


def fields(body: bytes) -> dict[str, str]:
    out = {}
    for part in body.split(b"\x00"):
        if part:
            out[chr(part[0])] = part[1:].decode()
    return out


def test_startup_after_ssl_and_gss_probes(pg) -> None:
    c = Raw(pg.port)
    c.send_startup(80877103)
    assert c.sock.recv(1) == b"N"
    c.send_startup(80877104)
    assert c.sock.recv(1) == b"N"
    msgs = c.startup()
    assert kinds(msgs)[0:1] == b"R" and kinds(msgs)[-2:] == b"KZ"
    assert msgs[-1][1] == b"I"
    status = dict(tuple(b.split(b"\x00")[:2]) for k, b in msgs if k == b"S")
    assert status[b"TimeZone"] == b"UTC" and status[b"in_hot_standby"] == b"off"
    c.close()


def test_negotiate_protocol_version_for_minor_and_pq_options(pg) -> None:
    c = Raw(pg.port)
    msgs = c.startup(version=(3 << 16) | 2, **{"_pq_.magic": "1"})
    assert msgs[0][0] == b"v"
    newest, n = struct.unpack(">ii", msgs[0][1][:8])
    assert (newest, n) == (0, 1) and msgs[0][1][8:] == b"_pq_.magic\x00"
    c.send(b"Q", _cstr("select 1"))
    assert kinds(c.until(b"Z")) == b"TDCZ"
    c.close()


def test_execute_row_limit_suspends_and_resumes(pg) -> None:
    c = Raw(pg.port)
    c.startup()
    c.parse("", "series 5")
    c.bind("p", "", rformats=(1,))
    c.describe(b"P", "p")
    c.execute("p", 2)
    c.execute("p", 2)
    c.execute("p", 2)
    c.send(b"S")
    msgs = c.until(b"Z")
    assert kinds(msgs) == b"12TDDsDDsDCZ"
    rowdesc = msgs[2][1]
    assert rowdesc.endswith(struct.pack(">h", 1))  # binary format announced
    values = [struct.unpack(">i", b[-4:])[0] for k, b in msgs if k == b"D"]
    assert values == [0, 1, 2, 3, 4]
    assert msgs[-2][1] == b"SELECT 1\x00"
    c.close()


def test_flush_sends_without_sync(pg) -> None:
    c = Raw(pg.port)
    c.startup()
    c.parse("s1", "echo $1::int8")
    c.describe(b"S", "s1")
    c.send(b"H")
    msgs = [c.read(), c.read(), c.read()]
    assert kinds(msgs) == b"1tT"
    assert msgs[1][1] == struct.pack(">hi", 1, 20)
    c.bind("", "s1", (struct.pack(">q", -7),), pformats=(1,))
    c.execute("")
    c.send(b"S")
    msgs = c.until(b"Z")
    assert kinds(msgs) == b"2DCZ"
    assert msgs[1][1] == struct.pack(">hi", 1, 2) + b"-7"
    c.close()


def test_error_discards_until_sync(pg) -> None:
    c = Raw(pg.port)
    c.startup()
    c.parse("", "fail")
    c.bind("", "")
    c.execute("")
    c.parse("", "select 1")
    c.send(b"S")
    msgs = c.until(b"Z")
    assert kinds(msgs) == b"EZ"
    assert fields(msgs[0][1])["C"] == "42601"
    # after Sync the connection is back to normal, pipelined
    for i in range(3):
        c.parse("", "echo $1::int4")
        c.bind("", "", (str(i).encode(),))
        c.execute("")
    c.send(b"S")
    msgs = c.until(b"Z")
    assert kinds(msgs) == b"12DC" * 3 + b"Z"
    assert [b[-1:] for k, b in msgs if k == b"D"] == [b"0", b"1", b"2"]
    c.close()


def test_statement_and_portal_errors(pg) -> None:
    c = Raw(pg.port)
    c.startup()
    c.bind("", "missing")
    c.send(b"S")
    msgs = c.until(b"Z")
    assert fields(msgs[0][1])["C"] == "26000"
    c.parse("dup", "select 1")
    c.parse("dup", "select 1")
    c.send(b"S")
    msgs = c.until(b"Z")
    assert kinds(msgs) == b"1EZ" and fields(msgs[1][1])["C"] == "42P05"
    c.execute("nope")
    c.send(b"S")
    assert fields(c.until(b"Z")[0][1])["C"] == "34000"
    c.send(b"C", b"S" + _cstr("dup"))
    c.parse("dup", "echo $1::int4")
    c.bind("", "dup", (b"abc",))
    c.send(b"S")
    msgs = c.until(b"Z")
    assert kinds(msgs) == b"31EZ" and fields(msgs[2][1])["C"] == "22P02"
    c.close()


def test_cancel_request(pg) -> None:
    a = Raw(pg.port)
    a.startup()
    a.send(b"Q", _cstr("sleep"))
    assert pg.db.sessions[-1].sleeping.wait(5)
    b = Raw(pg.port)
    wrong = Raw(pg.port)
    wrong.send_startup(80877102, struct.pack(">ii", a.pid, a.key ^ 1))
    assert wrong.closed_by_server()
    assert not pg.db.sessions[-1].cancelled.is_set()
    b.send_startup(80877102, struct.pack(">ii", a.pid, a.key))
    assert b.closed_by_server()
    msgs = a.until(b"Z")
    assert kinds(msgs) == b"EZ"
    assert fields(msgs[0][1])["C"] == "57014"
    a.close()


def test_garbage_client_does_not_hurt_others(pg) -> None:
    good = Raw(pg.port)
    good.startup()
    bad = Raw(pg.port)
    bad.sock.sendall(b"\x00\x00\x00\x05GARBAGE" * 10)
    assert bad.closed_by_server()
    bad2 = Raw(pg.port)
    bad2.startup()
    bad2.send(b"?", b"junk")
    msgs = []
    try:
        while True:
            msgs.append(bad2.read())
    except EOFError:
        pass
    assert kinds(msgs) == b"E" and fields(msgs[0][1])["S"] == "FATAL"
    assert fields(msgs[0][1])["C"] == "08P01"
    bad3 = Raw(pg.port)
    bad3.startup()
    bad3.sock.sendall(b"Q\x7f\xff\xff\xff")  # absurd length
    assert bad3.closed_by_server()
    good.send(b"Q", _cstr("select 1"))
    assert kinds(good.until(b"Z")) == b"TDCZ"
    good.close()


def test_internal_error_is_not_leaked(pg) -> None:
    c = Raw(pg.port)
    c.startup()
    c.send(b"Q", _cstr("crash"))
    msgs = c.until(b"Z")
    f = fields(msgs[0][1])
    assert (f["C"], f["M"]) == ("XX000", "internal error")
    assert b"secret" not in msgs[0][1]
    c.close()


def test_missing_user_is_fatal(pg) -> None:
    c = Raw(pg.port)
    c.send_startup(196608, _cstr("database") + _cstr("dev") + b"\x00")
    kind, body = c.read()
    assert kind == b"E" and fields(body)["C"] == "28000" and fields(body)["S"] == "FATAL"
    assert c.closed_by_server()


def test_stop_closes_connections_and_sessions() -> None:
    db = FakeDatabase()
    srv = RunningServer(db)
    c = Raw(srv.port)
    c.startup()
    srv.stop()
    kind, body = c.read()
    assert kind == b"E" and fields(body)["C"] == "57P01"
    assert c.closed_by_server()
    assert [s.closed for s in db.sessions] == [True]
    assert not db.closed  # the database belongs to whoever opened it


def test_unencodable_value_is_an_error_not_a_disconnect(pg) -> None:
    c = Raw(pg.port)
    c.startup()
    c.send(b"Q", _cstr("bad value"))
    msgs = c.until(b"Z")
    assert kinds(msgs) == b"TDEZ"
    assert fields(msgs[2][1])["C"] == "XX000"
    c.parse("", "bad value")
    c.bind("", "")
    c.execute("")
    c.send(b"S")
    msgs = c.until(b"Z")
    assert kinds(msgs) == b"12DEZ"
    c.send(b"Q", _cstr("select 1"))
    assert kinds(c.until(b"Z")) == b"TDCZ"
    c.close()


def test_extended_transaction_block_and_status(pg) -> None:
    c = Raw(pg.port)
    c.startup()

    def run(sql: str) -> list[tuple[bytes, bytes]]:
        c.parse("", sql)
        c.bind("", "")
        c.describe(b"P", "")
        c.execute("")
        c.send(b"S")
        return c.until(b"Z")

    msgs = run("begin")
    assert kinds(msgs) == b"12nCZ" and msgs[-1][1] == b"T"
    msgs = run("fail")
    assert kinds(msgs) == b"EZ" and msgs[-1][1] == b"E"
    msgs = run("select 1")
    assert kinds(msgs) == b"EZ" and fields(msgs[0][1])["C"] == "25P02"
    msgs = run("commit")
    assert kinds(msgs) == b"12nCZ" and msgs[-2][1] == b"ROLLBACK\x00" and msgs[-1][1] == b"I"
    msgs = run("set timezone to 'Europe/Berlin'")
    assert kinds(msgs) == b"12nCSZ"
    assert msgs[-2][1] == b"TimeZone\x00Europe/Berlin\x00"
    c.close()


def test_close_portal_and_describe_statement_without_rows(pg) -> None:
    c = Raw(pg.port)
    c.startup()
    c.parse("ins", "insert")
    c.describe(b"S", "ins")
    c.bind("cur", "ins")
    c.send(b"C", b"P" + _cstr("cur"))
    c.execute("cur")
    c.send(b"S")
    msgs = c.until(b"Z")
    assert kinds(msgs) == b"1tn23EZ"
    assert msgs[1][1] == struct.pack(">h", 0)
    assert fields(msgs[5][1])["C"] == "34000"
    c.close()


def test_query_text_after_a_nul_byte_is_refused(pg) -> None:
    c = Raw(pg.port)
    c.startup()
    c.send(b"Q", b"SELECT 1\x00; DROP TABLE t\x00")
    msgs = c.until(b"Z")
    assert kinds(msgs) == b"EZ"
    assert fields(msgs[0][1])["C"] == "08P01"
    c.send(b"Q", _cstr("SELECT 1"))  # the connection keeps working
    assert b"E" not in kinds(c.until(b"Z"))
    c.close()
