"""The fused linear mapper (``map_with_controllers``: address vectors, controllers and counts in
one compiled pass, what the shared reading of a streamed trace uses) against ``map_addresses``,
``controllers_of`` and numpy counts: the same arrays, the same counts and the same errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from sievesim._core.parallel import controllers_of
from sievesim.dram.config import get_config
from sievesim.dram.mapping import map_addresses, map_with_controllers
from sievesim.errors import TraceError

CONFIGS = {
    "RoBaRaCoCh, channel controllers": get_config("ramulator2-hbm3"),
    "RoBaRaCoCh, 3 SIDs, pseudochannel controllers": get_config("hbm3e-8000"),
    "ChRaBaRoCo": get_config("hbm3e-8000").replace(mapper="ChRaBaRoCo"),
}


def _reference(config, addrs, is_write, overflow):
    spec = config.compile()
    vecs = map_addresses(config, addrs, overflow=overflow, source="t", first=5)
    return (vecs, controllers_of(spec, vecs), int((~is_write).sum()),
            int((addrs >= config.capacity_bytes).sum()))


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(CONFIGS)), overflow=st.sampled_from(["error", "wrap"]),
       data=st.data())
def test_fused_mapping_equals_the_separate_steps(name, overflow, data):
    config = CONFIGS[name]
    spec = config.compile()
    cap = config.capacity_bytes
    n = data.draw(st.integers(0, 40))
    top = 4 * cap if overflow == "wrap" else cap - 1
    addrs = np.asarray(data.draw(st.lists(st.integers(0, top), min_size=n, max_size=n)), dtype=np.int64)
    is_write = np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    got = map_with_controllers(config, addrs, is_write, spec["counts"][: spec["ctrl_level"] + 1],
                               overflow=overflow, source="t", first=5)
    want = _reference(config, addrs, is_write, overflow)
    assert got[0].dtype == want[0].dtype == np.int32 and np.array_equal(got[0], want[0])
    assert got[1].dtype == np.int32 and np.array_equal(got[1], want[1])
    assert got[2:] == want[2:]


@pytest.mark.parametrize("addr, match", [(-1, "request 7: address = -1"), (1 << 40, "request 7: address = 0x")])
def test_fused_mapping_refuses_what_map_addresses_refuses_with_its_words(addr, match):
    config = CONFIGS["ChRaBaRoCo"]
    spec = config.compile()
    addrs = np.asarray([0, 64, addr, 3], dtype=np.int64)
    with pytest.raises(TraceError, match=match) as fused:
        map_with_controllers(config, addrs, np.zeros(4, bool), spec["counts"][:2], source="t", first=5)
    with pytest.raises(TraceError) as separate:
        map_addresses(config, addrs, source="t", first=5)
    assert str(fused.value) == str(separate.value)


def test_fused_mapping_is_only_for_linear_mappers():
    config = get_config("ramulator2-hbm3").replace(mapper="MOP4CLXOR")
    with pytest.raises(ValueError, match="mapper 'MOP4CLXOR'"):
        map_with_controllers(config, np.zeros(1, np.int64), np.zeros(1, bool), np.asarray([16]))


@pytest.mark.parametrize("mapper", ["RoBaRaCoCh", "MOP4CLXOR"])
def test_a_streamed_piece_is_mapped_alike_by_either_path(mapper):
    from sievesim.dram.engine import _map_piece
    from sievesim.dram.synthetic import make_trace

    config = get_config("ramulator2-hbm3").replace(mapper=mapper)
    spec = config.compile()
    piece = make_trace("random", 500, config, seed=3)
    got, reads, wrapped = _map_piece(config, spec, piece, 0, "error", controllers=True)
    vecs = map_addresses(config, piece.addresses)
    want = (vecs, np.asarray(piece.addresses, np.int64), np.asarray(piece.is_write, bool),
            np.asarray(piece.arrival, np.int64))
    want_reads, want_wrapped = int((~piece.is_write).sum()), int((piece.addresses >= config.capacity_bytes).sum())
    for a, b in zip(got, want + (controllers_of(spec, want[0]),)):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert (reads, wrapped) == (want_reads, want_wrapped) and reads == int((~piece.is_write).sum())
    four, _, _ = _map_piece(config, spec, piece, 0, "error")
    assert len(four) == 4 and all(np.array_equal(a, b) for a, b in zip(four, got))
