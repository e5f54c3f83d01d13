"""The local transport's frames: a response that stops half-way times out instead of
holding the coordinator's read forever (a worker stopped while writing a large one)."""

from __future__ import annotations

import os
import struct
import threading
import time

import pytest

from engine.stream.parallel.transport import read_frame


def test_a_frame_cut_short_times_out_and_a_whole_one_is_read() -> None:
    r, w = os.pipe()
    with os.fdopen(r, "rb", buffering=0) as reader, os.fdopen(w, "wb", buffering=0) as writer:
        writer.write(struct.pack(">Q", 5) + b"hello")
        assert read_frame(reader, time.monotonic() + 5) == b"hello"
        writer.write(struct.pack(">Q", 100) + b"only ten b")  # the rest never comes
        with pytest.raises(TimeoutError):
            read_frame(reader, time.monotonic() + 0.2)
        writer.close()
        assert read_frame(reader, time.monotonic() + 5) is None  # then the writer is gone


def test_a_frame_larger_than_the_pipe_is_read_whole_in_order() -> None:
    payload = bytes(range(256)) * 4099  # about 1 MB: many reads of what the pipe holds
    r, w = os.pipe()
    with os.fdopen(r, "rb", buffering=0) as reader, os.fdopen(w, "wb", buffering=0) as writer:
        t = threading.Thread(target=writer.write, args=(struct.pack(">Q", len(payload)) + payload,))
        t.start()
        got = read_frame(reader, time.monotonic() + 30)
        t.join()
        assert got == payload
