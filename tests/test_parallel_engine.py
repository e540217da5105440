"""Splitting controllers between threads gives the one-thread result, bit for bit."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sievesim._core import Engine
from sievesim._core._engine import lockstep_exchange, new_outputs
from sievesim._core.parallel import run_requests
from sievesim.cli import main
from sievesim.dram.config import BUILTIN_CONFIGS, get_config
from sievesim.dram.engine import _to_vectors, simulate
from sievesim.dram.synthetic import make_trace
from sievesim.dram.traces import RequestTrace

from test_dram_engine import request_traces

PER_REQUEST = ("arrive", "depart", "row_class", "forwarded")
SCALARS = ("clk", "last_issue", "n_commands", "n_refresh")


def _inputs(config, trace):
    vecs, keys = _to_vectors(config, trace)
    return config.compile(), vecs, keys, trace.is_write, trace.arrival


def _assert_same(one, many):
    for name in SCALARS:
        assert one[name] == many[name], name
    for name in PER_REQUEST + ("log_clk", "log_addr", "log_cmd"):
        np.testing.assert_array_equal(one[name], many[name], err_msg=name)


def _run_both(config, trace, threads, **kw):
    """The one-thread and the split run, compared; the lockstep never gives up here (``**kw`` can
    say otherwise), so what a test asserts about it does not depend on the machine's load."""
    args = _inputs(config, trace)
    one = run_requests(*args, log_commands=True, threads=1)
    many = run_requests(*args, log_commands=True, threads=threads, **({"contention_grace_ns": None} | kw))
    assert one["threads"] == 1 and one["speculation"] == "none"
    _assert_same(one, many)
    return many


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tr=request_traces(), name=st.sampled_from(sorted(BUILTIN_CONFIGS)),
       policy=st.sampled_from(["open", "closed"]), clock_ratio=st.sampled_from([1, 8]),
       end=st.sampled_from(["accepted", "completed"]), threads=st.integers(2, 5))
def test_split_runs_give_the_one_thread_result(tr, name, policy, clock_ratio, end, threads):
    config = get_config(name).replace(row_policy=policy, row_policy_cap=2, clock_ratio=clock_ratio, end=end)
    addrs, writes, arrival = tr
    trace = RequestTrace.from_arrays(arrival, addrs % config.capacity_bytes, writes)
    many = _run_both(config, trace, threads)
    assert many["speculation"] in ("held", "lockstep") and many["threads"] > 1


def test_a_lockstep_without_a_core_per_thread_gives_up_for_one_thread():
    """Both runs of a lockstep on one core: each waits for the other, which cannot run while it
    spins, so it sleeps (futex) and the other runs. Sleeping a third of the time, a run gives up
    and the trace runs on one thread: same result, ``speculation`` "contended"."""
    import os
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("needs os.sched_setaffinity")
    config = get_config("ramulator2-hbm3").replace(clock_ratio=8)
    trace = make_trace("random", 20000, config, seed=2)
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})      # this thread, and the threads it starts
    try:
        many = _run_both(config, trace, 2, contention_grace_ns=0)
        held = _run_both(config, trace, 2)          # without giving up: lockstep to the end, on one core
    finally:
        os.sched_setaffinity(0, before)
    assert many["speculation"] == "contended" and many["threads"] == 1
    assert held["speculation"] == "lockstep" and held["threads"] == 2


@pytest.mark.parametrize("threads", [2, 3])
def test_lockstep_runs_at_most_a_ring_apart(monkeypatch, threads):
    """Runs of a lockstep go ahead of each other where promises decide for them, up to their
    ring of stops: a ring of 64 cycles makes the runs wait for the slowest often, with the same
    result; 64 or more runs are refused."""
    from sievesim._core import parallel
    monkeypatch.setattr(parallel, "LOCKSTEP_RING_CYCLES", 64)
    config = get_config("hbm2-2000").replace(clock_ratio=8)
    trace = make_trace("random", 20000, config, seed=5, write_fraction=0.3)
    many = _run_both(config, trace, threads)
    assert many["speculation"] == "lockstep" and many["threads"] == threads
    with pytest.raises(ValueError, match="at most 64"):
        Engine(*_inputs(config, trace), own=np.arange(16) == 0, exchange=lockstep_exchange(np.arange(16), 65))


def test_a_full_queue_runs_the_split_in_lockstep():
    # clock ratio 8, all requests at cycle 0 to one controller: its read queue fills at once
    config = get_config("ramulator2-hbm3").replace(clock_ratio=8)
    addrs = np.arange(2000, dtype=np.int64) * config.capacity_bytes // 2000
    trace = RequestTrace.from_arrays(np.zeros(2000, np.int64), addrs, np.zeros(2000, bool))
    many = _run_both(config, trace, 2)
    assert many["speculation"] == "lockstep" and many["threads"] == 2


def test_a_full_queue_at_clock_ratio_1_runs_the_lockstep():
    # one request per memory cycle at most, and the lockstep still pays (docs/dram.md, "Threads").
    # Random requests, all to controller 0 (three commands each): its read queue fills.
    config = get_config("ramulator2-hbm3")
    spec = config.compile()
    base = make_trace("random", 20000, config, seed=4)
    vecs, _ = _to_vectors(config, base)
    mine = vecs[:, spec["ctrl_level"]] == 0
    trace = RequestTrace.from_arrays(np.zeros(int(mine.sum()), np.int64), base.addresses[mine], base.is_write[mine])
    many = _run_both(config, trace, 2)
    assert many["speculation"] == "lockstep" and many["threads"] == 2


@pytest.mark.parametrize("kind", ["stream", "random", "hotrow"])
@pytest.mark.parametrize("end", ["accepted", "completed"])
def test_lockstep_on_full_queues_with_gaps_and_forwarding(kind, end):
    """Clock ratio 8 fills the queues; bursts separated by idle gaps make the runs jump together;
    writes and re-reads of their addresses exercise forwarding in the dry run."""
    config = get_config("hbm2-2000").replace(clock_ratio=8, end=end)      # 16 controllers, refresh
    base = make_trace(kind, 6000, config, seed=3, write_fraction=0.4)
    arrival = base.arrival + (np.arange(6000) // 2000) * 20_000         # three bursts
    addrs = base.addresses.copy()
    addrs[1::7] = addrs[0::7][: addrs[1::7].size]                       # re-reads of recent addresses
    trace = RequestTrace.from_arrays(arrival, addrs, base.is_write)
    for threads in (2, 3):
        many = _run_both(config, trace, threads)
        assert many["threads"] == threads
        assert many["speculation"] == "lockstep"


def test_lockstep_arguments_are_checked():
    config = get_config("ramulator2-hbm3")
    args = _inputs(config, make_trace("random", 10, config, seed=1))
    own = np.arange(8) % 2 == 0
    with pytest.raises(ValueError, match="exchange needs own"):
        Engine(*args, exchange=np.zeros(32, np.int64))
    with pytest.raises(ValueError, match="exchange"):
        Engine(*args, own=own, exchange=np.zeros(20, np.int64))
    owners = (~own).astype(int)                  # run 0 the even controllers, run 1 the odd
    with pytest.raises(ValueError, match="rank"):
        Engine(*args, own=own, exchange=lockstep_exchange(owners), rank=2)
    with pytest.raises(ValueError, match="own: expected the controllers the exchange gives to rank 1"):
        Engine(*args, own=own, exchange=lockstep_exchange(owners), rank=1)
    with pytest.raises(ValueError, match="exchange"):
        Engine(*args, own=own, exchange=lockstep_exchange(np.zeros(16, int)))       # 16 controllers, not 8
    with pytest.raises(ValueError, match="ring"):
        lockstep_exchange(owners, ring=100)
    Engine(*args, own=own, exchange=lockstep_exchange(owners), rank=0)


@pytest.mark.parametrize("name, write_lead, read_before_refresh",
                         [("hbm3-6400", 12, 32), ("hbm2-2000", 0, 15)])
def test_drain_waits_for_a_refresh_on_another_thread(name, write_lead, read_before_refresh):
    """End "completed": a write to controller 1 and a read to controller 0 just before the first
    refresh. Controller 1 goes idle first, then its refresh waits for the write recovery to
    close the bank; controller 0 is idle (its refresh issued) while controller 1's is still
    pending: the system stops only when both are idle at the same cycle."""
    config = get_config(name)
    spec = config.compile()
    nrefi = spec["refresh_interval"]
    probe = np.arange(0, 1 << 20, 32, dtype=np.int64)
    vecs, _ = _to_vectors(config, RequestTrace.from_arrays(np.zeros(probe.size, np.int64), probe,
                                                            np.zeros(probe.size, bool)))
    ctrl = np.ravel_multi_index(tuple(vecs[:, :spec["ctrl_level"] + 1].T),
                                tuple(np.asarray(spec["counts"])[:spec["ctrl_level"] + 1]))
    t_read = nrefi - read_before_refresh
    arrival = np.array([t_read, t_read - write_lead])
    order = np.argsort(arrival, kind="stable")          # the read first when both arrive together
    trace = RequestTrace.from_arrays(arrival[order], np.array([probe[ctrl == 0][0], probe[ctrl == 1][0]])[order],
                                     np.array([False, True])[order])
    many = _run_both(config, trace, 2)
    assert many["speculation"] == "held" and many["drain_steps"] > 0


def test_synthetic_traces_match_and_hold():
    for kind in ("stream", "random", "hotrow"):
        config = get_config("ramulator2-hbm3")
        many = _run_both(config, make_trace(kind, 5000, config, seed=2), 2)
        assert many["speculation"] == "held"      # clock ratio 1: the queues never fill


def test_simulate_reports_threads_and_checks_the_argument():
    config = get_config("hbm3e-8000")
    trace = make_trace("random", 3000, config, seed=1)
    a = simulate(config, trace, threads=1)
    b = simulate(config, trace, threads=3)
    assert (a.threads, b.threads) == (1, 3)
    assert a.to_dict() | {"wall_s": 0, "threads": 0} == b.to_dict() | {"wall_s": 0, "threads": 0}
    for bad in (0, -1, 1.5, "2", True):
        with pytest.raises(ValueError, match="threads"):
            simulate(config, trace, threads=bad)


def test_timing_rows_across_controllers_are_refused():
    # hbm3-6400 has rows at the pseudo-channel level; pretend controllers sit one level lower
    config = get_config("hbm3-6400")
    spec, vecs, keys, is_write, arrival = _inputs(config, make_trace("random", 10, config))
    Engine(spec, vecs, keys, is_write, arrival)
    with pytest.raises(ValueError, match="above the controller level"):
        Engine(spec | {"ctrl_level": spec["ctrl_level"] + 1}, vecs, keys, is_write, arrival)


def test_partial_engine_arguments_are_checked():
    config = get_config("ramulator2-hbm3")
    spec, vecs, keys, is_write, arrival = _inputs(config, make_trace("random", 10, config))
    with pytest.raises(ValueError, match="own"):
        Engine(spec, vecs, keys, is_write, arrival, own=np.ones(3, bool))
    with pytest.raises(ValueError, match="skip_idle"):
        Engine(spec, vecs, keys, is_write, arrival, False, False, own=np.ones(8, bool))
    with pytest.raises(ValueError, match="abort"):
        Engine(spec, vecs, keys, is_write, arrival, own=np.ones(8, bool), abort=np.zeros(1, np.int64))
    bad = new_outputs(10) | {"depart": np.zeros(9, np.int64)}
    with pytest.raises(ValueError, match=r"outputs\['depart'\].*\(10,\)"):
        Engine(spec, vecs, keys, is_write, arrival, outputs=bad)
    shared = new_outputs(10)
    raw = Engine(spec, vecs, keys, is_write, arrival, outputs=shared).run()
    assert raw["arrive"] is shared["arrive"] and (shared["arrive"] >= 0).all()


def test_cli_threads_flag(capsys):
    assert main(["dram", "run", "synthetic:random:3000", "--config", "ramulator2-hbm3", "--threads", "2",
                 "--json"]) == 0
    two = json.loads(capsys.readouterr().out)
    assert main(["dram", "run", "synthetic:random:3000", "--config", "ramulator2-hbm3", "--threads", "1",
                 "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert (one["threads"], two["threads"]) == (1, 2)
    assert one | {"wall_s": 0, "threads": 0} == two | {"wall_s": 0, "threads": 0}
    assert main(["dram", "run", "synthetic:random:30", "--threads", "0"]) == 2
    assert "--threads = 0: expected an integer from 1 to" in capsys.readouterr().err
