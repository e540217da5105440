"""The routing pass of a step (routing_volumes.of_microbatch: every MoE layer of a micro-batch at
once) against the per-layer definition it replaced: the token vectors each GPU sends and receives in
the dispatch and each GPU's own tokens per expert, the same values and types, with and without the
empty slots (-1) of a recorded trace."""
from __future__ import annotations

import types

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sievesim.system.routing_volumes import of_microbatch


def _one_layer(lid, own, G, El, E, K):
    """The dispatch of one layer as the step computed it layer by layer."""
    dest = np.where(lid >= 0, lid // El, -1)
    hit = np.zeros((lid.shape[0], G), dtype=bool)
    r_idx = np.repeat(np.arange(lid.shape[0]), K)
    d = dest.ravel()
    hit[r_idx[d >= 0], d[d >= 0]] = True
    hit[np.arange(lid.shape[0]), own] = False
    send = np.bincount(own, weights=hit.sum(axis=1), minlength=G)
    recv = hit.sum(axis=0).astype(np.float64)
    own_counts = np.bincount((own[:, None] * E + lid)[lid >= 0], minlength=G * E).reshape(G, E)
    return send, recv, own_counts


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([1, 2, 4, 8]), st.integers(1, 8), st.integers(1, 4),
       st.integers(1, 30), st.integers(1, 4), st.booleans(), st.sampled_from(["cheaper", "off"]))
def test_routing_pass_equals_the_per_layer_definition(seed, G, El, K, T, L, empty_slots, early):
    rng = np.random.default_rng(seed)
    E = G * El
    K = min(K, E)
    ids = rng.integers(-1 if empty_slots else 0, E, size=(T, L, K)).astype(np.int32)
    owner = rng.integers(0, G, size=T)
    rows = np.sort(rng.choice(T, size=int(rng.integers(1, T + 1)), replace=False))
    sim = types.SimpleNamespace(gpus=G, local_experts=El, num_slots=E, nodes=1, early_loads=early)
    b = types.SimpleNamespace(sim=sim, ids=ids, memo={})
    lb = types.SimpleNamespace(mb=0, rows=rows, own=owner[rows])
    vol = of_microbatch(b, lb)
    ids_mb, send_all, recv_all, own_all = vol.ids, vol.send, vol.recv, vol.own_counts
    assert np.array_equal(ids_mb, ids[rows])
    assert of_microbatch(b, lb).send is send_all      # computed once per micro-batch
    assert vol.send_inter is None                     # one node
    for li in range(L):
        send, recv, own_counts = _one_layer(ids[rows, li, :], owner[rows], G, El, E, K)
        assert send.dtype == send_all.dtype and send.tobytes() == send_all[li].tobytes()
        assert recv.dtype == recv_all.dtype and recv.tobytes() == recv_all[li].tobytes()
        if early == "off":
            assert own_all is None
        else:
            assert own_counts.dtype == own_all.dtype and own_counts.tobytes() == own_all[li].tobytes()
