"""Streaming inside the two-thread split: each run of the split reads the pieces itself
(simulate_stream(..., threads=N) with a callable giving the pieces afresh); the result is the
whole-array result, bit for bit, for every piece size down to one request, held or in lockstep,
and a trace that fills a queue falls back exactly as simulate does (the lockstep, streamed; one
streaming engine when the lockstep is contended)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sievesim._core import Engine
from sievesim._core import parallel
from sievesim._core._engine import lockstep_exchange
from sievesim.cli import main
from sievesim.dram.config import BUILTIN_CONFIGS, get_config
from sievesim.dram.engine import _to_vectors, simulate, simulate_stream
from sievesim.dram.synthetic import make_trace
from sievesim.dram.traces import RequestTrace, iter_loadstore_chunks, read_loadstore_trace, write_loadstore_trace
from sievesim.errors import TraceError

from test_dram_engine import request_traces
from test_streaming import _pieces

# a lockstep may give up for one thread when the machine is busy: which way it went is not the result
WAY = ("wall_s", "threads", "threads_note")


def _without(d: dict, keys=WAY) -> dict:
    return {k: v for k, v in d.items() if k not in keys}


def _same(config, trace, sizes, threads=2):
    """Streamed split == whole-array split == one thread, for every piece size; returns the results."""
    whole = simulate(config, trace, threads=threads).to_dict()
    one = simulate(config, trace, threads=1).to_dict()
    assert _without(whole) == _without(one)
    got = []
    for k in sizes:
        r = simulate_stream(config, lambda: _pieces(trace, k), threads=threads)
        assert r.request_arrays is None
        assert _without(r.to_dict()) == _without(whole), k
        got.append(r)
    return whole, got


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tr=request_traces(), name=st.sampled_from(sorted(BUILTIN_CONFIGS)),
       policy=st.sampled_from(["open", "closed"]), clock_ratio=st.sampled_from([1, 8]),
       end=st.sampled_from(["accepted", "completed"]), k=st.integers(1, 40))
def test_pieces_of_any_size_give_the_whole_trace_result_on_two_threads(patient, tr, name, policy, clock_ratio,
                                                                        end, k):
    config = get_config(name).replace(row_policy=policy, row_policy_cap=2, clock_ratio=clock_ratio, end=end)
    addrs, writes, arrival = tr
    trace = RequestTrace.from_arrays(arrival, addrs % config.capacity_bytes, writes)
    _same(config, trace, (1, k, max(len(trace), 1)))


@pytest.mark.parametrize("kind", ["stream", "random", "hotrow"])
@pytest.mark.parametrize("end", ["accepted", "completed"])
def test_the_held_split_streams_with_refresh_gaps_and_forwarding(kind, end):
    """hbm2-2000 (refresh: the drain waits for it across runs), clock ratio 1 with arrivals spread
    out (no queue fills: the split holds), re-reads of written addresses (forwarded)."""
    config = get_config("hbm2-2000").replace(end=end)
    base = make_trace(kind, 4000, config, seed=5, write_fraction=0.4)
    addrs = base.addresses.copy()
    addrs[1::7] = addrs[0::7][: addrs[1::7].size]
    trace = RequestTrace.from_arrays(base.arrival * 4 + (np.arange(4000) // 1000) * 20_000, addrs, base.is_write)
    whole, got = _same(config, trace, (1, 64, 999, 4000))
    assert whole["threads"] == 2 and whole["forwarded_reads"] > 0
    assert all(r.threads == 2 and r.threads_note == "" for r in got)
    assert all(r.to_dict() | {"wall_s": 0} == whole | {"wall_s": 0} for r in got)


def _one_controller_trace(config, n=20000):
    """Random requests all at cycle 0, all to controller 0: its read queue fills."""
    spec = config.compile()
    base = make_trace("random", n, config, seed=4)
    vecs, _ = _to_vectors(config, base)
    mine = vecs[:, spec["ctrl_level"]] == 0
    return RequestTrace.from_arrays(np.zeros(int(mine.sum()), np.int64), base.addresses[mine], base.is_write[mine])


def test_a_full_queue_at_clock_ratio_1_streams_the_lockstep(patient):
    config = get_config("ramulator2-hbm3")
    whole, got = _same(config, _one_controller_trace(config), (1, 333, 20000))
    assert patient == ["refused", "lockstep"] * 3 and all(r.threads == 2 for r in got)
    assert all(r.to_dict() | {"wall_s": 0} == whole | {"wall_s": 0} for r in got)


@pytest.fixture
def patient(monkeypatch):
    """The streamed lockstep never gives up (as _run_both's), whatever the machine's load; records
    how each streamed split ran."""
    ways = []
    real = parallel.run_stream_split

    def run(*a, **k):
        raw = real(*a, **(k | {"contention_grace_ns": None}))
        ways.append(raw["speculation"])
        return raw
    monkeypatch.setattr(parallel, "run_stream_split", run)
    return ways


@pytest.mark.parametrize("kind", ["stream", "random", "hotrow"])
@pytest.mark.parametrize("end", ["accepted", "completed"])
def test_a_full_queue_at_clock_ratio_8_streams_the_lockstep(patient, kind, end):
    """hbm2-2000 (refresh), clock ratio 8: queues fill, the held split stops, the lockstep runs
    streamed, each run stopping at the same step when its look-ahead crosses a window's end."""
    config = get_config("hbm2-2000").replace(clock_ratio=8, end=end)
    base = make_trace(kind, 4000, config, seed=5, write_fraction=0.4)
    addrs = base.addresses.copy()
    addrs[1::7] = addrs[0::7][: addrs[1::7].size]
    trace = RequestTrace.from_arrays(base.arrival + (np.arange(4000) // 1000) * 20_000, addrs, base.is_write)
    whole, got = _same(config, trace, (1, 5, 63, 64, 65, 999, 4000))
    # the array split ran the same way (held, or refused then lockstep) at every piece size
    assert patient in (["held"] * 7, ["refused", "lockstep"] * 7), patient
    assert all(r.threads == 2 and r.threads_note == "" for r in got)
    if kind != "stream":
        assert patient[0] == "refused"


def test_one_controller_full_at_clock_ratio_8(patient):
    config = get_config("ramulator2-hbm3").replace(clock_ratio=8)
    addrs = np.arange(2000, dtype=np.int64) * config.capacity_bytes // 2000
    trace = RequestTrace.from_arrays(np.zeros(2000, np.int64), addrs, np.zeros(2000, bool))
    _same(config, trace, (1, 50, 2000))
    assert patient == ["refused", "lockstep"] * 3


def test_a_streamed_lockstep_without_a_core_per_thread_gives_up_for_one_thread(monkeypatch):
    import os
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("needs os.sched_setaffinity")
    ways = []
    real = parallel.run_stream_split
    monkeypatch.setattr(parallel, "run_stream_split", lambda *a, **k: ways.append(
        real(*a, **(k | {"contention_grace_ns": 0}))) or ways[-1])
    config = get_config("ramulator2-hbm3").replace(clock_ratio=8)
    trace = make_trace("random", 20000, config, seed=2)
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})      # this thread, and the threads it starts
    try:
        whole, got = _same(config, trace, (997,))
    finally:
        os.sched_setaffinity(0, before)
    assert [w["speculation"] for w in ways] == ["refused", "contended"]
    assert got[0].threads == 1 and "waited for each other" in got[0].threads_note


def test_errors_in_a_piece_stop_both_runs():
    config = get_config("ramulator2-hbm3")
    far = RequestTrace.from_arrays(np.zeros(30, int), np.r_[np.zeros(29, int), config.capacity_bytes], np.zeros(30, bool))
    with pytest.raises(TraceError, match=r"request 29: "):
        simulate_stream(config, lambda: _pieces(far, 8), threads=2)
    with pytest.raises(TypeError, match="callable"):
        simulate_stream(config, _pieces(far, 8), threads=2)


def test_a_streaming_engine_of_a_split_is_checked():
    config = get_config("ramulator2-hbm3")
    spec, z = config.compile(), np.zeros((0, len(config.standard.levels)), np.int32)
    args = (spec, z, np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, np.int64))
    Engine(*args, own=np.ones(8, bool), stream=True)
    Engine(*args, own=np.ones(8, bool), exchange=lockstep_exchange(np.zeros(8, int)), stream=True)
    with pytest.raises(ValueError, match="stream"):
        Engine(*args, True, own=np.ones(8, bool), stream=True)        # a command log needs the whole run
    e = Engine(*args, own=np.ones(8, bool), exchange=lockstep_exchange(np.zeros(8, int)), stream=True)
    one = (np.zeros((1, z.shape[1]), np.int32), np.zeros(1, np.int64), np.zeros(1, bool), np.zeros(1, np.int64))
    e.feed(*one, False)
    with pytest.raises(RuntimeError, match="not consumed"):
        e.feed(*one, False)
    assert e.run()["need_input"]            # one request: the step's look-ahead crosses the window
    e.feed(*one, True)                      # the one left comes first
    raw = e.run()
    assert not raw["need_input"] and raw["clk"] >= 0


@pytest.mark.parametrize("block", [64, 1 << 20])
def test_a_file_on_two_threads_streams(tmp_path, capsys, monkeypatch, block):
    from sievesim.dram import traces
    config = get_config("ramulator2-hbm3")
    t = make_trace("random", 60000, config, seed=3, write_fraction=0.3)
    path = tmp_path / "t.trace"
    write_loadstore_trace(path, t.addresses, t.is_write)
    monkeypatch.setattr(traces, "STREAM_BLOCK_BYTES", block)
    outs = []
    for extra in (["--threads", "2"], ["--threads", "1"], ["--stream"], [], ["--stream", "--threads", "2"]):
        assert main(["dram", "run", str(path), "--config", "ramulator2-hbm3", "--json", *extra]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0]["threads"] == 2 and outs[1]["threads"] == 1 and outs[4]["threads"] == 2
    assert all(_without(o) == _without(outs[0]) for o in outs)
    # the whole-array split on the same trace: the same numbers
    want = simulate(config, read_loadstore_trace(path), threads=2).to_dict()
    got = simulate_stream(config, lambda: iter_loadstore_chunks(path, block), threads=2).to_dict()
    assert got | {"wall_s": 0} == want | {"wall_s": 0}


def test_cli_at_clock_ratio_8_streams_the_lockstep(tmp_path, capsys, patient):
    config = get_config("ramulator2-hbm3").replace(clock_ratio=8)
    addrs = np.arange(3000, dtype=np.int64) * config.capacity_bytes // 3000
    path = tmp_path / "t.trace"
    write_loadstore_trace(path, addrs, np.zeros(3000, bool))
    outs = []
    argv = ["dram", "run", str(path), "--config", "ramulator2-hbm3", "--clock-ratio", "8", "--json"]
    for extra in (["--stream", "--threads", "2"], ["--threads", "2"], ["--threads", "1"]):
        assert main(argv + extra) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert patient == ["refused", "lockstep"] * 2 and outs[0]["threads"] == 2
    assert all(_without(o) == _without(outs[0]) for o in outs)
