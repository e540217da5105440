"""Streaming: a trace given in pieces to one engine (simulate_stream, Engine(stream=True) + feed)
gives simulate's result on the whole trace, bit for bit, for every piece size down to one request;
a LoadStoreTrace file read in blocks is read_loadstore_trace's trace."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sievesim._core import Engine
from sievesim.cli import main
from sievesim.dram.config import BUILTIN_CONFIGS, get_config
from sievesim.dram.engine import simulate, simulate_stream
from sievesim.dram.synthetic import make_trace
from sievesim.dram.traces import (RequestTrace, iter_loadstore_chunks, read_loadstore_trace,
                                  write_loadstore_trace)
from sievesim.errors import TraceError

from test_dram_engine import request_traces


def _pieces(trace: RequestTrace, k: int):
    for lo in range(0, len(trace), k):
        yield RequestTrace(is_write=trace.is_write[lo:lo + k], arrival=trace.arrival[lo:lo + k],
                           addresses=trace.addresses[lo:lo + k], source=trace.source)


def _same(config, trace, sizes):
    whole = simulate(config, trace, threads=1).to_dict()
    whole.pop("wall_s")
    for k in sizes:
        got = simulate_stream(config, _pieces(trace, k)).to_dict()
        got.pop("wall_s")
        assert got == whole, k


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tr=request_traces(), name=st.sampled_from(sorted(BUILTIN_CONFIGS)),
       policy=st.sampled_from(["open", "closed"]), clock_ratio=st.sampled_from([1, 8]),
       end=st.sampled_from(["accepted", "completed"]), k=st.integers(1, 40))
def test_pieces_of_any_size_give_the_whole_trace_result(tr, name, policy, clock_ratio, end, k):
    config = get_config(name).replace(row_policy=policy, row_policy_cap=2, clock_ratio=clock_ratio, end=end)
    addrs, writes, arrival = tr
    trace = RequestTrace.from_arrays(arrival, addrs % config.capacity_bytes, writes)
    _same(config, trace, (1, k, len(trace)))


@pytest.mark.parametrize("kind", ["stream", "random", "hotrow"])
@pytest.mark.parametrize("end", ["accepted", "completed"])
def test_long_traces_with_refresh_full_queues_and_forwarding(kind, end):
    """hbm2-2000 (refresh), clock ratio 8 (queues fill), re-reads of written addresses (forwarded)."""
    config = get_config("hbm2-2000").replace(clock_ratio=8, end=end)
    base = make_trace(kind, 4000, config, seed=5, write_fraction=0.4)
    addrs = base.addresses.copy()
    addrs[1::7] = addrs[0::7][: addrs[1::7].size]
    trace = RequestTrace.from_arrays(base.arrival + (np.arange(4000) // 1000) * 20_000, addrs, base.is_write)
    assert simulate(config, trace, threads=1).forwarded_reads > 0
    _same(config, trace, (1, 64, 999, 4000))


def test_an_empty_trace_and_a_trace_of_one():
    config = get_config("ramulator2-hbm3")
    _same(config, RequestTrace.from_arrays(np.zeros(0, int), np.zeros(0, int), np.zeros(0, bool)), (1,))
    assert simulate_stream(config, iter(())).requests == 0
    _same(config, RequestTrace.from_arrays([0], [4096], [True]), (1, 5))


@pytest.mark.parametrize("block", [1, 13, 4096, 1 << 20])
def test_a_file_read_in_blocks_is_the_whole_file(tmp_path, block):
    config = get_config("ramulator2-hbm3")
    t = make_trace("random", 3000, config, seed=2)
    path = tmp_path / "t.trace"
    write_loadstore_trace(path, t.addresses, t.is_write)
    with open(path, "ab") as fh:        # a CR line, a decimal line and no final newline
        fh.write(b"LD 4096\r\nST 0x40")
    whole = read_loadstore_trace(path)
    pieces = list(iter_loadstore_chunks(path, block))
    assert np.array_equal(np.concatenate([p.addresses for p in pieces]), whole.addresses)
    assert np.array_equal(np.concatenate([p.is_write for p in pieces]), whole.is_write)
    # arrivals all 0, read-only views of a shared array (no fresh memory per piece)
    assert all((p.arrival == 0).all() and not p.arrival.flags.writeable for p in pieces)
    assert len(pieces) < 3 or len(pieces[-2]) > len(pieces[-3]) \
        or np.shares_memory(pieces[-2].arrival, pieces[-3].arrival)
    got = simulate_stream(config, iter_loadstore_chunks(path, block)).to_dict()
    want = simulate(config, whole, threads=1).to_dict()
    got.pop("wall_s"), want.pop("wall_s")
    assert got == want


def test_errors_name_the_line_and_the_request_of_the_whole_trace(tmp_path):
    path = tmp_path / "t.trace"
    path.write_bytes(b"LD 0x40\n" * 50 + b"LD 0x40\nXX 1\n")
    with pytest.raises(TraceError, match=r"t.trace:52: "):
        list(iter_loadstore_chunks(path, 16))
    config = get_config("ramulator2-hbm3")
    far = RequestTrace.from_arrays(np.zeros(30, int), np.r_[np.zeros(29, int), config.capacity_bytes], np.zeros(30, bool))
    with pytest.raises(TraceError, match=r"request 29: "):
        simulate_stream(config, _pieces(far, 8))


def test_feed_is_checked():
    config = get_config("ramulator2-hbm3")
    spec, z = config.compile(), np.zeros((0, len(config.standard.levels)), np.int32)
    args = (spec, z, np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, np.int64))
    with pytest.raises(RuntimeError, match="not a streaming engine"):
        Engine(*args).feed(*args[1:], True)
    e = Engine(*args, stream=True)
    one = (np.zeros((1, z.shape[1]), np.int32), np.zeros(1, np.int64), np.zeros(1, bool), np.zeros(1, np.int64))
    e.feed(*one, False)
    with pytest.raises(RuntimeError, match="not consumed"):
        e.feed(*one, False)
    assert e.run()["need_input"]
    e.feed(*one, True)
    assert not e.run()["need_input"]
    with pytest.raises(ValueError, match="stream"):
        Engine(*args, True, stream=True)        # a command log needs the whole run


def test_cli_stream_flag(tmp_path, capsys):
    config = get_config("ramulator2-hbm3")
    t = make_trace("hotrow", 5000, config, seed=1)
    path = tmp_path / "t.trace"
    write_loadstore_trace(path, t.addresses, t.is_write)
    outs = []
    for extra in ([], ["--stream"]):
        assert main(["dram", "run", str(path), "--config", "ramulator2-hbm3", "--json", "--threads", "1", *extra]) == 0
        outs.append(capsys.readouterr().out)
    import json
    a, b = (json.loads(o) for o in outs)
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b
    assert main(["dram", "run", str(path), "--config", "ramulator2-hbm3", "--stream", "--log-commands",
                 str(tmp_path / "log.csv")]) == 2
    assert "--stream" in capsys.readouterr().err


def test_a_one_thread_cli_run_of_a_file_streams(tmp_path, capsys, monkeypatch):
    from sievesim.dram import engine as dram_engine
    calls = []
    real = dram_engine.simulate_stream
    monkeypatch.setattr(dram_engine, "simulate_stream", lambda *a, **k: calls.append(1) or real(*a, **k))
    config = get_config("ramulator2-hbm3")
    t = make_trace("random", 500, config, seed=1)
    path = tmp_path / "t.trace"
    write_loadstore_trace(path, t.addresses, t.is_write)
    argv = ["dram", "run", str(path), "--config", "ramulator2-hbm3"]
    assert main(argv + ["--threads", "1"]) == 0 and calls == [1]
    assert main(argv + ["--threads", "2"]) == 0 and calls == [1, 1]       # the held split streams too
    assert main(argv + ["--threads", "1", "--log-commands", str(tmp_path / "l.csv")]) == 0 and calls == [1, 1]
    assert main(["dram", "run", "synthetic:random:500", "--threads", "1"]) == 0 and calls == [1, 1]
    capsys.readouterr()
