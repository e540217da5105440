"""Windows of keys alone: a linear mapper's requests handed to the engine as their byte addresses
(``addr_vecs`` None after ``Engine.map_keys``), each run of a split working out its own requests'
vectors and every request's controller. The results are those of windows with vectors, bit for
bit (held, in lockstep, one engine; both linear mappers, power-of-two radices or 3 SIDs; addresses
wrapped); the counts that replace the mapping pass (``address_counts``, the start-up reader's
``max_addr`` and ``writes``) are the mapping's; bad input is refused with the mapping's words."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sievesim._core import Engine
from sievesim._core._traceparse import address_counts, map_linear
from sievesim._core.parallel import run_stream_split
from sievesim.dram.config import get_config
from sievesim.dram.engine import simulate, simulate_stream
from sievesim.dram.mapping import (_linear_order, check_linear, linear_key_map, map_addresses,
                                   map_with_controllers)
from sievesim.dram.traces import LoadStoreChunks, RequestTrace, write_loadstore_trace
from sievesim.errors import TraceError

from test_streaming_split import patient  # noqa: F401 - the fixture: a lockstep that never gives up

CONFIGS = {
    "RoBaRaCoCh, channel controllers": get_config("ramulator2-hbm3"),
    "RoBaRaCoCh, 3 SIDs, pseudochannel controllers": get_config("hbm3e-8000"),
    "RoBaRaCoCh, bit fields, pseudochannel controllers": get_config("hbm3-6400"),
    "ChRaBaRoCo, bit fields, pseudochannel controllers": get_config("hbm2-2000").replace(mapper="ChRaBaRoCo"),
    "ChRaBaRoCo, 3 SIDs": get_config("hbm3e-8000").replace(mapper="ChRaBaRoCo"),
    "RoBaRaCoCh, clock ratio 8 (lockstep)": get_config("ramulator2-hbm3").replace(clock_ratio=8),
}
WAY = ("wall_s", "threads", "threads_note")


def _windows(config, addrs, is_write, size, vectors):
    """The trace in windows of ``size`` requests: (vectors, keys, is_write, arrival, ctrl) or keys alone."""
    spec = config.compile()
    out = []
    for lo in range(0, len(addrs), size):
        a, w = addrs[lo:lo + size], is_write[lo:lo + size]
        vecs, ctrl, _, _ = map_with_controllers(config, a, w, spec["counts"][: spec["ctrl_level"] + 1], overflow="wrap")
        out.append((vecs, a, w, np.zeros(len(a), np.int64), ctrl) if vectors else
                   (None, a, w, np.zeros(len(a), np.int64)))
    return out


def _trace(config, data, n_max=400):
    n = data.draw(st.integers(1, n_max))
    cap = config.capacity_bytes
    hot = data.draw(st.lists(st.integers(0, 4 * cap - 1), min_size=1, max_size=6))
    addrs = np.asarray(data.draw(st.lists(st.sampled_from(hot) | st.integers(0, 4 * cap - 1), min_size=n, max_size=n)),
                       dtype=np.int64)
    is_write = np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    return addrs, is_write


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(CONFIGS)), size=st.integers(1, 300), data=st.data())
def test_a_split_fed_keys_alone_gives_the_results_of_vectors(patient, name, size, data):
    config = CONFIGS[name]
    spec = config.compile()
    addrs, is_write = _trace(config, data)
    owner = map_addresses(config, addrs, overflow="wrap")
    got = {}
    for vectors in (True, False):
        for lockstep in (False, True):
            windows = _windows(config, addrs, is_write, size, vectors)
            raw = run_stream_split(spec, lambda k, ws=windows: iter(ws), owner, 2, lockstep=lockstep,
                                   key_map=None if vectors else linear_key_map(config))
            got[vectors, lockstep] = {k: raw[k] for k in ("speculation", "cycles", "totals", "n_commands")
                                      if k in raw}
    assert got[False, False] == got[True, False]
    assert got[False, True] == got[True, True]


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(sorted(CONFIGS)), size=st.integers(1, 300), with_ctrl=st.booleans(), data=st.data())
def test_one_engine_fed_keys_alone_gives_the_results_of_vectors(name, size, with_ctrl, data):
    config = CONFIGS[name]
    spec = config.compile()
    addrs, is_write = _trace(config, data)
    results = []
    for vectors in (True, False):
        z = (np.zeros((0, spec["addr_len"]), np.int32), np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, np.int64))
        e = Engine(spec, *z, stream=True)
        if not vectors:
            e.map_keys(*linear_key_map(config))
        windows = _windows(config, addrs, is_write, size, True)
        for i, w in enumerate(windows):
            e.feed(w[0] if vectors else None, *w[1:4], i == len(windows) - 1, ctrl=w[4] if with_ctrl else None)
            raw = e.run()
        results.append((raw["clk"], raw["n_commands"], e.stream_totals(raw["clk"])))
    assert results[0] == results[1]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_command_path_streams_keys_alone_with_the_whole_array_result(tmp_path, patient, name, threads):
    """A trace that wraps (addresses past the capacity), read ahead by the start-up reader and
    streamed on one thread (one engine that maps every request) or two, as the whole-array path
    gives it."""
    from sievesim._core._prefetch import open_prefetch

    config = CONFIGS[name]
    rng = np.random.default_rng(5)
    addrs = rng.integers(0, config.capacity_bytes, 5000) & ~63
    addrs[rng.random(5000) < 0.01] += 3 * config.capacity_bytes      # a few past the capacity
    is_write = rng.random(5000) < 0.3
    path = tmp_path / "t.trace"
    write_loadstore_trace(path, addrs, is_write)
    want = simulate(config, RequestTrace.from_arrays(np.zeros(5000, int), addrs, is_write), threads=1,
                    address_overflow="wrap").to_dict()
    for prefetch in (None, open_prefetch(path, 4096, 40000)):     # read ahead: part of the trace
        got = simulate_stream(config, LoadStoreChunks(path, 4096, prefetch=prefetch), threads=threads,
                              address_overflow="wrap").to_dict()
        assert got["threads"] == threads
        assert {k: v for k, v in got.items() if k not in WAY} == {k: v for k, v in want.items() if k not in WAY}
        assert got["wrapped_requests"] == int((addrs >= config.capacity_bytes).sum()) > 0
    with pytest.raises(TraceError, match=r"request \d+: address = 0x.*--address-overflow wrap"):
        simulate_stream(config, LoadStoreChunks(path, 4096, prefetch=open_prefetch(path, 4096, 40000)),
                        threads=threads)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(CONFIGS)), wrap=st.booleans(), data=st.data())
def test_address_counts_are_the_fused_mappings(name, wrap, data):
    config = CONFIGS[name]
    spec = config.compile()
    cap = config.capacity_bytes
    n = data.draw(st.integers(0, 40))
    addrs = np.asarray(data.draw(st.lists(st.integers(-3, 2 * cap), min_size=n, max_size=n)), dtype=np.int64)
    is_write = np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=np.uint8)
    order = _linear_order(config)
    radix = np.asarray(config.address_radix, dtype=np.int64)
    out = np.empty((n, len(radix)), np.int32)
    ctrl = np.empty(n, np.int32)
    want = map_linear(addrs, is_write, int(config.tx_bytes).bit_length() - 1, cap, wrap, out, ctrl, order, radix,
                      np.asarray(spec["counts"][: spec["ctrl_level"] + 1], dtype=np.int64))
    assert address_counts(addrs, is_write, cap, wrap) == want
    if want[0] < 0:
        assert check_linear(config, addrs, is_write.astype(bool), overflow="wrap" if wrap else "error") == \
            (want[2], want[1])


@pytest.mark.parametrize("addr, match", [(-1, "request 7: address = -1"), (1 << 40, "request 7: address = 0x")])
def test_check_linear_refuses_with_the_mappings_words(addr, match):
    config = CONFIGS["ChRaBaRoCo, 3 SIDs"]
    addrs = np.asarray([0, 64, addr, 3], dtype=np.int64)
    with pytest.raises(TraceError, match=match) as checked:
        check_linear(config, addrs, np.zeros(4, bool), source="t", first=5)
    with pytest.raises(TraceError) as mapped:
        map_addresses(config, addrs, source="t", first=5)
    assert str(checked.value) == str(mapped.value)
    other = get_config("ramulator2-hbm3").replace(mapper="MOP4CLXOR")
    with pytest.raises(ValueError, match="mapper 'MOP4CLXOR'"):
        check_linear(other, addrs, np.zeros(4, bool))
    with pytest.raises(ValueError, match="mapper 'MOP4CLXOR'"):
        linear_key_map(other)


def test_the_engine_refuses_keys_it_cannot_map():
    config = CONFIGS["RoBaRaCoCh, channel controllers"]
    spec = config.compile()
    z = (np.zeros((0, spec["addr_len"]), np.int32), np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, np.int64))
    e = Engine(spec, *z, stream=True)
    keys = (np.asarray([0, 64]), np.zeros(2, bool), np.zeros(2, np.int64))
    with pytest.raises(ValueError, match="needs Engine.map_keys first"):
        e.feed(None, *keys, True)
    order, radix, shift = linear_key_map(config)
    for bad in ((order[:-1], radix, shift), (np.r_[order[:-1], order[0]], radix, shift), (order, radix[:-1], shift),
                (order, np.r_[radix[:-1], 0], shift), (order, radix, 63)):
        with pytest.raises(ValueError, match="map_keys"):
            e.map_keys(*bad)
    e.map_keys(order, radix, shift)
    with pytest.raises(ValueError, match="keys: expected byte addresses >= 0"):
        e.feed(None, np.asarray([0, -64]), *keys[1:], True)
    with pytest.raises(ValueError, match="keys, is_write, arrival: expected shape"):
        e.feed(None, np.asarray([0, 64, 128]), *keys[1:], True)
