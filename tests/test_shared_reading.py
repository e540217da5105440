"""One reading of a LoadStoreTrace file for the runs of a split (sievesim.dram.engine._SharedWindows,
used when simulate_stream gets a LoadStoreChunks): the same results as runs that read the file each,
bit for bit, held or in lockstep, for any piece size; each piece parsed once; a piece dropped once
every run took it; no run more than MAX_AHEAD pieces ahead of the slowest; errors reach every run,
and a run that stops early holds no other up."""
from __future__ import annotations

import re
import threading

import numpy as np
import pytest

from sievesim.dram.config import get_config
from sievesim.dram.engine import _SharedWindows, simulate, simulate_stream
from sievesim.dram.synthetic import make_trace
from sievesim.dram.traces import LoadStoreChunks, iter_loadstore_chunks, read_loadstore_trace, write_loadstore_trace
from sievesim.errors import ConfigError, TraceError

from test_streaming_split import patient  # noqa: F401 - the fixture: a lockstep that never gives up

WAY = ("wall_s", "threads", "threads_note")


def _without(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in WAY}


def _file(tmp_path, config, n=6000, kind="random", seed=3):
    t = make_trace(kind, n, config, seed=seed, write_fraction=0.3) if kind == "random" else \
        make_trace(kind, n, config, seed=seed)
    path = tmp_path / "t.trace"
    write_loadstore_trace(path, t.addresses, t.is_write)
    return path


@pytest.mark.parametrize("clock_ratio", [1, 8])
@pytest.mark.parametrize("block", [15, 4096, 1 << 20])
def test_one_shared_reading_gives_the_whole_array_result(tmp_path, patient, clock_ratio, block):
    config = get_config("ramulator2-hbm3").replace(clock_ratio=clock_ratio)
    path = _file(tmp_path, config)
    want = simulate(config, read_loadstore_trace(path), threads=1).to_dict()
    own = simulate_stream(config, lambda: iter_loadstore_chunks(path, block), threads=2).to_dict()
    got = simulate_stream(config, LoadStoreChunks(path, block), threads=2).to_dict()
    assert _without(got) == _without(want) == _without(own)
    assert got["requests"] == 6000 and got["reads"] == want["reads"] and got["threads"] == 2
    assert patient[-1] == ("lockstep" if clock_ratio == 8 else "held")


def test_each_piece_is_parsed_once(tmp_path, monkeypatch):
    config = get_config("ramulator2-hbm3")
    path = _file(tmp_path, config, n=60000)
    calls = []
    real = LoadStoreChunks.parse
    monkeypatch.setattr(LoadStoreChunks, "parse", lambda self, piece, first, *rest: calls.append(first) or
                        real(self, piece, first, *rest))
    chunks = LoadStoreChunks(path, 1 << 14)
    pieces = sum(1 for _ in chunks.blocks())
    r = simulate_stream(config, chunks, threads=2)
    assert r.threads == 2 and r.requests == 60000
    # the first requests are read once more, before the split, to balance the runs' controllers
    assert calls[0] == 0 and 0 in calls[1:]
    split = calls[calls.index(0, 1):]
    assert sorted(split) == split and len(split) == pieces, "every piece parsed once, in order of reading"


def _windows_of(config, path, block, runs=2):
    return _SharedWindows(config, LoadStoreChunks(path, block), "error", runs)


def test_pieces_are_dropped_once_every_run_took_them_and_no_run_runs_far_ahead(tmp_path):
    config = get_config("ramulator2-hbm3")
    path = _file(tmp_path, config, n=3000)
    shared = _windows_of(config, path, 256)
    ahead, slow = shared.runs(0), shared.runs(1)
    taken = []

    def fast():
        for w in ahead:
            taken.append(len(w[0]))

    t = threading.Thread(target=fast, daemon=True)
    t.start()
    t.join(2.0)
    assert t.is_alive() and len(taken) == _SharedWindows.MAX_AHEAD     # waits for the slow run
    assert len(shared._state) <= _SharedWindows.MAX_AHEAD + 1          # noqa: SLF001
    n_slow = sum(len(w[0]) for w in slow)                                # the slow run catches up
    t.join(5.0)
    assert not t.is_alive() and sum(taken) == n_slow == shared.n == 3000
    assert shared._state == {} and shared._left == {}                   # noqa: SLF001


def test_a_run_that_stops_holds_no_other_up(tmp_path):
    config = get_config("ramulator2-hbm3")
    path = _file(tmp_path, config, n=3000)
    shared = _windows_of(config, path, 256)
    stopping = shared.runs(1)
    next(stopping)
    stopping.close()                       # e.g. its engine was refused: the split stops
    assert sum(len(w[0]) for w in shared.runs(0)) == 3000
    assert shared._state == {}             # noqa: SLF001


@pytest.mark.parametrize("bad, match", [(b"XX 1\n", r"t.trace:2001: "), (b"LD 0x7fffffffffffffff\n", "request 2000")])
def test_errors_reach_every_run(tmp_path, bad, match):
    config = get_config("ramulator2-hbm3")
    path = tmp_path / "t.trace"
    path.write_bytes(b"LD 0x40\n" * 2000 + bad + b"LD 0x40\n" * 2000)
    shared = _windows_of(config, path, 512)
    errors = []

    def run(k):
        try:
            for _ in shared.runs(k):
                pass
        except TraceError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10.0)
    assert not any(t.is_alive() for t in threads)
    assert len(errors) == 2 and all(re.search(match, e) for e in errors), errors
    with pytest.raises(TraceError, match=match):
        simulate_stream(config, LoadStoreChunks(path, 512), threads=2)


def test_an_unreadable_file_is_an_error_for_every_run(tmp_path):
    config = get_config("ramulator2-hbm3")
    shared = _windows_of(config, tmp_path / "missing.trace", 512)
    for k in range(2):
        with pytest.raises(ConfigError, match="expected an existing DRAM request trace"):
            list(shared.runs(k))


def test_each_window_carries_its_requests_controllers(tmp_path):
    config = get_config("hbm2-2000")
    spec = config.compile()
    path = _file(tmp_path, config, n=3000)
    levels = spec["ctrl_level"] + 1
    for w in _windows_of(config, path, 4096, runs=1).runs(0):
        want = np.ravel_multi_index(tuple(w[0][:, :levels].T.astype(np.int64)), tuple(spec["counts"][:levels]))
        assert w[4].dtype == np.int32 and np.array_equal(w[4], want)
    from sievesim._core import Engine
    z = (np.zeros((0, w[0].shape[1]), np.int32), np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, np.int64))
    e = Engine(spec, *z, own=np.arange(config.num_controllers) == 0, stream=True)
    with pytest.raises(ValueError, match="ctrl: expected"):
        e.feed(*w[:4], True, ctrl=w[4] + config.num_controllers)
