"""The start-up reader (sievesim._core._prefetch): its pieces are the file's parse, exactly, wherever
it stops; the reading that takes them over gives the same trace, the same results and the same
errors as a reading without it; and it needs no numpy (it runs while numpy imports)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sievesim._core._prefetch import Prefetch, open_prefetch
from sievesim._core._traceparse import parse_loadstore
from sievesim.cli import main
from sievesim.dram.config import get_config
from sievesim.dram.engine import simulate_stream
from sievesim.dram.synthetic import make_trace
from sievesim.dram.traces import LoadStoreChunks, iter_loadstore_chunks, write_loadstore_trace
from sievesim.errors import TraceError

_line = st.tuples(st.sampled_from([b"LD", b"ST"]), st.integers(0, (1 << 60) - 1), st.booleans(), st.booleans()).map(
    lambda t: t[0] + b" " + (b"0x%x" % t[1] if t[2] else b"%d" % t[1]) + (b"\r\n" if t[3] else b"\n"))


def _prefetched(path, block_bytes, max_bytes, *, wait=True):
    fd = os.open(path, os.O_RDONLY)
    pf = Prefetch(fd, block_bytes, max_bytes)
    pf.start()
    if wait:
        pf.wait()
    return pf


def _check_pieces(data: bytes, got) -> int:
    """The pieces are the parse of the file's first lines; returns how many lines they hold."""
    pieces, offset, next_line, eof = got
    want_w, want_a, bad = parse_loadstore(data[:offset])
    assert bad == -1
    assert next_line == len(want_a) == sum(p.lines for p in pieces)
    first = 0
    for p in pieces:
        assert p.first_line == first
        w, a = np.asarray(p.is_write), np.asarray(p.addrs)
        assert w.dtype == np.bool_ and a.dtype == np.int64
        assert np.array_equal(w, want_w[first:first + p.lines]) and np.array_equal(a, want_a[first:first + p.lines])
        # what the runs would count over it (sievesim.dram.engine._counted_window)
        assert p.max_addr == (int(a.max()) if p.lines else 0) and p.writes == int(w.sum())
        first += p.lines
    assert offset == 0 or data[offset - 1:offset] == b"\n" or offset == len(data)
    assert eof == (offset == len(data))
    return next_line


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_line, max_size=60), final_newline=st.booleans(), bad_at=st.none() | st.integers(0, 59),
       block=st.integers(1, 300), max_bytes=st.sampled_from([0, 9, 100, 1 << 20]),
       released=st.lists(st.integers(0, 300), max_size=8))
def test_pieces_are_the_files_first_lines_parsed(tmp_path, lines, final_newline, bad_at, block, max_bytes, released):
    if bad_at is not None and bad_at < len(lines):
        lines[bad_at] = b"XX 12\n"
    data = b"".join(lines)
    if not final_newline and data:
        data = data.rstrip(b"\n").rstrip(b"\r")
    path = tmp_path / "t.trace"
    path.write_bytes(data)
    pf = _prefetched(path, block, max_bytes)
    ahead = pf.finish()
    n = _check_pieces(data, ahead)
    assert n * 9 <= max_bytes
    assert pf.finish()[2] == n              # finish again: the same
    if bad_at is not None and bad_at < len(lines):
        assert n <= bad_at                  # never past a malformed line
    # the reading that takes over: the whole trace, as without the reader, and the same error
    chunks = LoadStoreChunks(path, 7, prefetch=pf)
    try:
        want = list(iter_loadstore_chunks(path, 7))
    except TraceError as exc:
        with pytest.raises(TraceError) as got:
            list(chunks)
        assert str(got.value) == str(exc)
        return
    assert chunks.prefetch is pf and pf.finish()[0] == ahead[0]
    for again in range(3):                  # more readings (the split again) give the same,
        if again == 2:                      # also where pieces were released (read from the file)
            for i in released:
                if i < len(ahead[0]):
                    chunks.release(ahead[0][i])
        got = list(chunks)
        assert pf.finish()[0] == () and pf.finish()[1:] == ahead[1:]   # handed over, not kept
        for name in ("addresses", "is_write", "arrival"):
            cat = (lambda ps: np.concatenate([getattr(p, name) for p in ps]) if ps else np.zeros(0))
            assert np.array_equal(cat(got), cat(want))


def test_stopped_at_once_it_hands_everything_to_the_reader(tmp_path):
    config = get_config("ramulator2-hbm3")
    t = make_trace("random", 20_000, config, seed=3)
    path = tmp_path / "t.trace"
    write_loadstore_trace(path, t.addresses, t.is_write)
    fd = os.open(path, os.O_RDONLY)
    pf = Prefetch(fd, 4096, 1 << 30)
    got = pf.finish()                       # never started: nothing read
    assert got[:3] == ((), 0, 0)
    got = list(LoadStoreChunks(path, prefetch=pf))
    assert np.array_equal(np.concatenate([p.addresses for p in got]), t.addresses)
    pf = _prefetched(path, 4096, 1 << 30, wait=False)
    _check_pieces(path.read_bytes(), pf.finish())    # wherever it was


def test_the_bound_holds_and_the_rest_is_read(tmp_path):
    config = get_config("ramulator2-hbm3")
    t = make_trace("hotrow", 30_000, config, seed=4)
    path = tmp_path / "t.trace"
    write_loadstore_trace(path, t.addresses, t.is_write)
    pf = _prefetched(path, 8192, 9 * 10_000)
    pieces, offset, n, eof = pf.finish()
    assert 0 < n <= 10_000 and not eof and len(pieces) > 1
    got = simulate_stream(config, LoadStoreChunks(path, prefetch=pf), threads=2).to_dict()
    want = simulate_stream(config, LoadStoreChunks(path), threads=1).to_dict()
    got.pop("wall_s"), want.pop("wall_s")
    for key in ("threads", "threads_note"):
        got.pop(key, None), want.pop(key, None)
    assert got == want


def test_nothing_to_read_ahead(tmp_path):
    assert open_prefetch(tmp_path / "missing.trace") is None
    assert open_prefetch(tmp_path) is None                  # a directory
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert open_prefetch(fifo) is None                      # not waited on
    with pytest.raises(ValueError, match="block_bytes"):
        Prefetch(0, 0, 10)


def test_the_reader_needs_no_numpy():
    code = "import sys, sievesim.commands.dram, sievesim._core._prefetch\nprint('numpy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_the_command_reads_ahead_and_gives_the_same_results_and_errors(tmp_path, capsys, monkeypatch):
    import sievesim.commands.dram as dram_command

    config = get_config("ramulator2-hbm3")
    t = make_trace("random", 120_000, config, seed=5)        # above a megabyte: pieces beyond the first
    path = tmp_path / "t.trace"
    write_loadstore_trace(path, t.addresses, t.is_write)
    started = []
    real = dram_command._start_prefetch                       # noqa: SLF001

    def spy(args):
        pf = real(args)
        if pf is not None:
            pf.wait()                   # read ahead as far as it goes, whatever the machine's speed
        started.append(pf)
        return pf
    monkeypatch.setattr(dram_command, "_start_prefetch", spy)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)   # two cores, as on CI
    outs = []
    for extra in ([], ["--threads", "1"]):
        assert main(["dram", "run", str(path), "--config", "ramulator2-hbm3", "--json", *extra]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert started[0] is not None and started[0].finish()[2] > 0 and started[1] is None
    for d in outs:
        for key in ("wall_s", "threads", "threads_note"):
            d.pop(key, None)
    assert outs[0] == outs[1]
    text = path.read_bytes().split(b"\n")
    text[100_000] = b"LD zz"                                  # past the first megabyte
    path.write_bytes(b"\n".join(text))
    errs = []
    for extra in ([], ["--threads", "1"]):
        assert main(["dram", "run", str(path), "--config", "ramulator2-hbm3", *extra]) == 2
        errs.append(capsys.readouterr().err)
    assert errs[0] == errs[1] and ":100001: " in errs[0]


def test_a_shared_reading_releases_what_every_run_took(tmp_path):
    config = get_config("ramulator2-hbm3")
    t = make_trace("random", 60_000, config, seed=6)
    path = tmp_path / "t.trace"
    write_loadstore_trace(path, t.addresses, t.is_write)
    want = simulate_stream(config, LoadStoreChunks(path), threads=1).to_dict()
    pf = _prefetched(path, 16384, 1 << 30)
    chunks = LoadStoreChunks(path, 16384, prefetch=pf)
    got = simulate_stream(config, chunks, threads=2).to_dict()
    for d in (got, want):
        for key in ("wall_s", "threads", "threads_note"):
            d.pop(key, None)
    assert got == want
    held = chunks._held                                           # noqa: SLF001
    assert len(held) > 3 and all(p is None for p in held)       # a held split to its end took every piece
    again = list(chunks)                                          # and a reading after it reads the file
    assert np.array_equal(np.concatenate([p.addresses for p in again]), t.addresses)
