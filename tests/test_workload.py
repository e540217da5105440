"""Unit tests of sievesim.workload on small fixtures made here."""
from __future__ import annotations

import itertools
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

from sievesim.errors import ConfigError, TraceError
from sievesim.workload import (SyntheticParams, SyntheticSource, TraceSource, counts_from_ids,
                               load_routing, load_trace, open_source, routing_stats)
from sievesim.workload.batches import PassCountSource
from sievesim.workload.lengths import (LENGTH_PRESETS, LengthPreset, colocated_batch,
                                       decode_context_lengths, max_prefills)
from sievesim.workload.stats import StatsAccumulator, act_param_ratio
from sievesim.workload.synthetic import PRESETS, layer_popularity, popularity_shape, preset_params
from sievesim.workload.traces import check_model, save_trace, sglang_dump_to_routing

E, K, L = 8, 2, 3


def make_arrays(n_req: int = 6, decode: bool = True, seed: int = 0) -> dict:
    """Requests of lengths 5..(5+n_req-1); ids encode nothing but are valid and distinct per row."""
    rng = np.random.default_rng(seed)
    seq, pos, ids = [], [], []
    for r in range(n_req):
        n = 5 + r
        for t in range(n):
            seq.append(r)
            pos.append(t)
            ids.append(np.stack([rng.choice(E, K, replace=False) for _ in range(L)]))
    n = len(seq)
    arrays = {"topk_ids": np.array(ids, dtype=np.int16), "seq_id": np.array(seq, dtype=np.int32),
              "pos": np.array(pos, dtype=np.int32),
              "phase": np.full(n, 1 if decode else 0, dtype=np.int8),
              "layer_ids": np.arange(L, dtype=np.int16),
              "meta": np.array(json.dumps({"model": "toy", "num_experts": E, "top_k": K,
                                           "num_moe_layers": L}))}
    if not decode:  # BOS: same routing in every prompt
        arrays["topk_ids"][arrays["pos"] == 0] = np.array([[0, 1]] * L, dtype=np.int16)
    return arrays


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    p = tmp_path / "toy.npz"
    np.savez(p, **make_arrays())
    return p


# ---------------------------------------------------------------------------------------------
# reading and validation


def test_load_trace_fields(trace_file: Path) -> None:
    t = load_trace(trace_file)
    assert (t.num_experts, t.top_k, t.num_layers, t.model) == (E, K, L, "toy")
    assert t.num_tokens == sum(5 + r for r in range(6))


def test_truncated_file_names_file(tmp_path: Path, trace_file: Path) -> None:
    bad = tmp_path / "cut.npz"
    data = trace_file.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match="cut.npz"):
        load_trace(bad)


@pytest.mark.parametrize("mutate, field", [
    (lambda a: a.update(topk_ids=a["topk_ids"][:, :, 0]), "topk_ids.shape"),
    (lambda a: a.update(seq_id=a["seq_id"][:-1]), "seq_id.shape"),
    (lambda a: a.update(pos=a["pos"][:-3]), "pos.shape"),
    (lambda a: a.update(topk_ids=a["topk_ids"][:, :, :1]), "topk_ids.shape[2]"),
    (lambda a: a.update(topk_ids=a["topk_ids"][:, :2]), "topk_ids.shape[1]"),
    (lambda a: a.update(topk_ids=a["topk_ids"].astype(np.float32)), "topk_ids.dtype"),
    (lambda a: a.update(phase=np.full(a["seq_id"].size, 3, dtype=np.int8)), "phase[0]"),
    (lambda a: a.update(layer_ids=np.arange(L + 1)), "layer_ids.shape"),
    (lambda a: a.update(meta=np.array("{not json")), "meta"),
    (lambda a: a.pop("seq_id"), "seq_id"),
])
def test_wrong_shapes_name_file_and_field(tmp_path: Path, mutate, field: str) -> None:
    a = make_arrays()
    mutate(a)
    p = tmp_path / "bad.npz"
    np.savez(p, **a)
    with pytest.raises(TraceError) as ei:
        load_trace(p)
    msg = str(ei.value)
    assert "bad.npz" in msg and field in msg, msg


def test_expert_id_out_of_range(tmp_path: Path) -> None:
    a = make_arrays()
    a["topk_ids"][7, 1, 0] = E
    p = tmp_path / "big.npz"
    np.savez(p, **a)
    with pytest.raises(TraceError, match=r"big.npz: topk_ids\[7, 1, 0\] = 8: expected an expert id < num_experts = 8"):
        load_trace(p)


def test_negative_ids_other_than_minus_one(tmp_path: Path) -> None:
    a = make_arrays()
    a["topk_ids"][3, 0, 1] = -1  # allowed: not recorded
    np.savez(tmp_path / "ok.npz", **a)
    t = load_trace(tmp_path / "ok.npz")
    a["topk_ids"][4, 2, 0] = -2
    np.savez(tmp_path / "neg.npz", **a)
    with pytest.raises(TraceError, match=r"neg.npz: topk_ids\[4, 2, 0\] = -2"):
        load_trace(tmp_path / "neg.npz")
    # -1 entries are ignored by the counts
    step = TraceSource(t).stream(6, seed=0, mode="consecutive")
    for _ in range(10):
        s = step.step()
        assert s.counts.sum() == (s.topk_ids >= 0).sum()


def test_model_mismatch(trace_file: Path) -> None:
    t = load_trace(trace_file)
    with pytest.raises(TraceError, match=r"toy.npz: meta.num_experts = 8: expected 16"):
        check_model(t, 16, K, "m")
    with pytest.raises(TraceError, match=r"toy.npz: meta.top_k = 2: expected 4"):
        check_model(t, E, 4, "m")
    with pytest.raises(TraceError, match="meta.num_experts"):
        load_trace(trace_file, num_experts=16)
    check_model(t, E, K)


def test_missing_meta_needs_num_experts(tmp_path: Path) -> None:
    a = make_arrays()
    a.pop("meta")
    np.savez(tmp_path / "nometa.npz", **a)
    with pytest.raises(TraceError, match="nometa.npz: meta.num_experts"):
        load_trace(tmp_path / "nometa.npz")
    assert load_trace(tmp_path / "nometa.npz", num_experts=E).top_k == K


def test_missing_file_and_unknown_npz(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="nothere.npz: file not found"):
        load_routing(tmp_path / "nothere.npz")
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(TraceError, match="other.npz: no routing array"):
        load_routing(tmp_path / "other.npz")


# ---------------------------------------------------------------------------------------------
# batch formation


def test_distinct_follows_sequences(trace_file: Path) -> None:
    t = load_trace(trace_file)
    src = TraceSource(t)
    stream = src.stream(4, seed=3)
    lookup = {(int(s), int(p)): i for i, (s, p) in enumerate(zip(t.seq_id, t.pos))}
    prev = None
    entry_positions = None
    for _ in range(30):
        st = stream.step()
        assert len(set(st.request_ids.tolist())) == 4  # B different requests
        for b in range(4):  # the row is the trace row of (request, position)
            row = lookup[(int(st.request_ids[b]), int(st.positions[b]))]
            np.testing.assert_array_equal(st.topk_ids[b], t.topk_ids[row])
        if prev is not None:
            same = st.request_ids == prev.request_ids
            np.testing.assert_array_equal(st.positions[same], prev.positions[same] + 1)
            assert np.all(st.positions[~same] == 0)  # a replacement starts at its first token
        else:
            entry_positions = st.positions
        prev = st
        np.testing.assert_array_equal(st.counts, counts_from_ids(st.topk_ids, E))
        assert st.counts.sum() == 4 * L * K
    assert np.any(entry_positions > 0)  # entered at random points of their lives


def test_distinct_needs_enough_requests(trace_file: Path) -> None:
    src = TraceSource(load_trace(trace_file))
    with pytest.raises(TraceError, match=r"toy.npz: seq_id: the trace has 6 requests .* batch size 7"):
        src.stream(7, seed=0)
    st = src.stream(9, seed=0, allow_reuse=True).step()
    assert st.topk_ids.shape == (9, L, K)


def test_random_and_consecutive(trace_file: Path) -> None:
    t = load_trace(trace_file)
    src = TraceSource(t)
    r = src.stream(5, seed=1, mode="random").step()
    rows = {(int(s), int(p)) for s, p in zip(r.request_ids, r.positions)}
    assert len(rows) == 5
    c = src.stream(5, seed=1, mode="consecutive")
    a, b = c.step(), c.step()
    order = [(int(s), int(p)) for s, p in zip(t.seq_id, t.pos)]
    i0 = order.index((int(a.request_ids[0]), int(a.positions[0])))
    got = [(int(s), int(p)) for s, p in zip(np.r_[a.request_ids, b.request_ids], np.r_[a.positions, b.positions])]
    assert got == [order[(i0 + j) % len(order)] for j in range(10)]
    with pytest.raises(ConfigError, match="mode"):
        src.stream(2, mode="recorded")
    with pytest.raises(TraceError, match="tokens"):
        src.stream(1000, mode="random")


def test_prefill_trace_drops_bos(tmp_path: Path) -> None:
    np.savez(tmp_path / "pf.npz", **make_arrays(decode=False))
    src = open_source(str(tmp_path / "pf.npz"))
    assert src.phase == 0
    for mode in ("distinct", "random", "consecutive"):
        s = src.stream(3, seed=2, mode=mode)
        for _ in range(40):
            assert np.all(s.step().positions > 0)


@pytest.mark.parametrize("mode", ["distinct", "random", "consecutive"])
def test_trace_batches_deterministic(trace_file: Path, mode: str) -> None:
    src = TraceSource(load_trace(trace_file))
    a = src.stream(4, seed=11, mode=mode).take(12)
    b = src.stream(4, seed=11, mode=mode).take(12)
    c = src.stream(4, seed=12, mode=mode).take(12)
    for x, y in zip(a, b):
        assert x.topk_ids.tobytes() == y.topk_ids.tobytes() and x.counts.tobytes() == y.counts.tobytes()
    assert any(x.topk_ids.tobytes() != z.topk_ids.tobytes() for x, z in zip(a, c))


# ---------------------------------------------------------------------------------------------
# SGLang dumps


def _sglang_per_token() -> dict:
    # 2 layers, 6 physical experts -> 4 logical; model top-k 2, padded to 8 with -1
    p2l = np.array([[0, 1, 2, 3, 0, 1], [3, 2, 1, 0, 3, 2]])

    def pad(a: np.ndarray) -> np.ndarray:
        out = -np.ones(a.shape[:-1] + (8,), dtype=np.int32)
        out[..., : a.shape[-1]] = a
        return out

    extend = {"forward_pass_id": 0, "rank": 0, "gatherer_key": "primary",
              "forward_mode": 1, "extend_seq_lens": [2, 1], "positions": [0, 1, 0], "input_ids": [1, 2, 3],
              "topk_ids_of_layer": pad(np.array([[[0, 5], [1, 2], [3, 4]], [[0, 1], [2, 3], [4, 5]]]))}
    decode = {"forward_pass_id": 1, "rank": 0, "gatherer_key": "primary", "forward_mode": 2,
              "positions": [2, 1], "input_ids": [4, 5],
              "topk_ids_of_layer": pad(np.array([[[4, 1], [2, 3]], [[5, 0], [1, 2]]]))}
    return {"records": [extend, decode], "last_physical_to_logical_map": p2l}


def test_sglang_per_token() -> None:
    t = sglang_dump_to_routing(_sglang_per_token(), source="dump.pt")
    assert (t.num_experts, t.top_k, t.num_layers, t.num_tokens) == (4, 2, 2, 5)
    np.testing.assert_array_equal(t.phase, [0, 0, 0, 1, 1])
    np.testing.assert_array_equal(t.seq_id, [0, 0, 1, 2, 3])
    np.testing.assert_array_equal(t.pass_id, [0, 0, 0, 1, 1])
    # token 0, layer 0: physical [0, 5] -> logical [0, 1]; layer 1: physical [0, 1] -> [3, 2]
    np.testing.assert_array_equal(t.topk_ids[0], [[0, 1], [3, 2]])
    np.testing.assert_array_equal(t.topk_ids[3], [[0, 1], [2, 3]])  # [4,1] and [5,0] mapped
    src = TraceSource(t, phase="decode")
    st = src.stream(None, mode="recorded").step()  # type: ignore[arg-type]
    assert st.topk_ids.shape == (2, 2, 2)


def test_sglang_per_pass_and_stat(tmp_path: Path) -> None:
    p2l = np.array([[0, 1, 0], [1, 0, 1]])
    dump = {"records": [{"forward_pass_id": 7, "rank": 0, "gatherer_key": "primary",
                         "global_physical_count": np.array([[1, 2, 3], [4, 5, 6]])}],
            "last_physical_to_logical_map": p2l}
    pc = sglang_dump_to_routing(dump, source="pp.pt", top_k=2)
    np.testing.assert_array_equal(pc.counts[0], [[4, 2], [5, 10]])
    assert pc.batch_sizes().tolist() == [3]
    stat = {"rank": 0, "logical_count": np.array([[[2, 2, 0]], [[0, 0, 0]], [[1, 0, 1]]], dtype=np.int32)}
    pc2 = sglang_dump_to_routing(stat, source="stat.pt", top_k=2)
    assert pc2.counts.shape == (2, 1, 3)  # unused all-zero ring-buffer row dropped
    save_trace(pc2, tmp_path / "stat.npz")
    back = load_routing(tmp_path / "stat.npz")
    np.testing.assert_array_equal(back.counts, pc2.counts)
    src = PassCountSource(back)
    assert src.stream(2).step().counts.tolist() == [[2, 2, 0]]
    with pytest.raises(TraceError, match="no recorded pass has 5 tokens"):
        src.stream(5)


def test_sglang_roundtrip_npz_without_torch(tmp_path: Path) -> None:
    t = sglang_dump_to_routing(_sglang_per_token(), source="dump.pt")
    save_trace(t, tmp_path / "conv.npz")
    back = load_routing(tmp_path / "conv.npz")
    assert back.topk_ids.tobytes() == t.topk_ids.astype(back.topk_ids.dtype).tobytes()
    np.testing.assert_array_equal(back.pass_id, t.pass_id)


def test_sglang_bad_records() -> None:
    with pytest.raises(TraceError, match="d.pt: records"):
        sglang_dump_to_routing({"records": []}, source="d.pt")
    bad = _sglang_per_token()
    bad["records"][0]["topk_ids_of_layer"] = np.zeros((2, 3))
    with pytest.raises(TraceError, match=r"d.pt: records\[0\].topk_ids_of_layer.shape"):
        sglang_dump_to_routing(bad, source="d.pt")
    bad = _sglang_per_token()
    bad["records"][0]["extend_seq_lens"] = [1, 1]
    with pytest.raises(TraceError, match=r"records\[0\].extend_seq_lens"):
        sglang_dump_to_routing(bad, source="d.pt")


def test_pt_dump(tmp_path: Path) -> None:
    p = tmp_path / "dump.pt"
    try:
        import torch
    except ImportError:
        p.write_bytes(b"not a torch file")
        with pytest.raises(TraceError, match="dump.pt: reading SGLang .pt dumps needs torch"):
            load_routing(p)
        from sievesim.workload.convert import main as convert_main
        assert convert_main([str(p), str(tmp_path / "out.npz")]) == 2
        return
    dump = _sglang_per_token()
    dump["records"] = [{k: (torch.as_tensor(v) if isinstance(v, np.ndarray) else v) for k, v in r.items()}
                       for r in dump["records"]]
    dump["last_physical_to_logical_map"] = torch.as_tensor(dump["last_physical_to_logical_map"])
    torch.save(dump, p)
    assert load_routing(p).num_tokens == 5
    from sievesim.workload.convert import main as convert_main
    assert convert_main([str(p), str(tmp_path / "out.npz")]) == 0
    assert load_routing(tmp_path / "out.npz").num_tokens == 5


# ---------------------------------------------------------------------------------------------
# synthetic routing


def _pl_inclusion(p: np.ndarray, k: int) -> np.ndarray:
    """Exact Plackett-Luce inclusion probabilities by enumeration."""
    inc = np.zeros(p.size)
    for seq in itertools.permutations(range(p.size), k):
        prob, rest = 1.0, 1.0
        for e in seq:
            prob *= p[e] / rest
            rest -= p[e]
        inc[list(seq)] += prob
    return inc


@pytest.mark.parametrize("p, k", [
    (np.array([0.4, 0.3, 0.2, 0.1]), 2),
    (np.array([0.97, 0.01, 0.01, 0.01]), 3),  # concentrated: exercises the masked fallback
    (np.array([0.5, 0.2, 0.1, 0.1, 0.05, 0.05]), 3),
])
def test_topk_without_replacement_is_exact(p: np.ndarray, k: int) -> None:
    params = SyntheticParams(num_experts=p.size, top_k=k, num_layers=1)
    src = SyntheticSource(params)
    src.popularity = p[None, :].copy()  # install an exact popularity
    from sievesim.workload.synthetic import _alias_tables
    prob, alias = _alias_tables(src.popularity)
    src._prob, src._alias = prob.ravel(), alias.ravel()
    n = 40_000
    ids = src.sample_tokens(np.random.default_rng(5), n)[:, 0, :]
    assert all(len(set(r)) == k for r in ids[:2000].tolist())
    freq = np.bincount(ids.ravel(), minlength=p.size) / n
    exact = _pl_inclusion(p, k)
    np.testing.assert_allclose(freq, exact, atol=4 * np.sqrt(0.25 / n))


def test_popularity_shape() -> None:
    p = popularity_shape(128, hot_frac=0.5, cold_mass=0.1, head_sigma=0.2, tail_sigma=2.0)
    assert p.sum() == pytest.approx(1.0)
    assert p[:64].sum() == pytest.approx(0.9, abs=0.01)
    head = np.sort(p[:64])
    assert head[-1] / np.median(head) < 2.0  # flat top
    tail = np.sort(p[64:])
    assert tail[-1] / tail[0] > 100  # heavy, long cold tail


def test_layer_popularity_permuted_per_layer() -> None:
    params = SyntheticParams(64, 4, 5, hot_frac=0.2, cold_mass=0.05)
    pop = layer_popularity(params, seed=1)
    top = [set(np.argsort(-pop[l])[:8].tolist()) for l in range(5)]
    assert len({frozenset(t) for t in top}) > 1
    np.testing.assert_allclose(pop.sum(axis=1), 1.0)
    assert not np.array_equal(pop, layer_popularity(params, seed=2))


def test_synthetic_deterministic() -> None:
    params = SyntheticParams(64, 6, 4, persistence=0.4, hot_frac=0.3)
    a = SyntheticSource(params, seed=1).stream(32, seed=9).take(5)
    b = SyntheticSource(params, seed=1).stream(32, seed=9).take(5)
    c = SyntheticSource(params, seed=1).stream(32, seed=10).take(5)
    assert all(x.topk_ids.tobytes() == y.topk_ids.tobytes() for x, y in zip(a, b))
    assert any(x.topk_ids.tobytes() != z.topk_ids.tobytes() for x, z in zip(a, c))


def _overlap(x: np.ndarray, y: np.ndarray) -> float:
    return float((x[..., :, None] == y[..., None, :]).any(-1).mean())


def test_persistence() -> None:
    base = SyntheticParams(64, 4, 6, hot_frac=0.5, cold_mass=0.1, head_sigma=0.3, tail_sigma=1.0)
    with_p = SyntheticParams(**{**base.__dict__, "persistence": 0.5})
    res = {}
    for name, params in (("none", base), ("half", with_p)):
        steps = SyntheticSource(params, seed=0).stream(64, seed=1).take(60)
        cons = np.mean([_overlap(a.topk_ids, b.topk_ids) for a, b in zip(steps, steps[1:])])
        unrel = np.mean([_overlap(a.topk_ids, np.roll(b.topk_ids, 1, axis=0)) for a, b in zip(steps, steps[1:])])
        counts = sum(s.counts for s in steps)
        res[name] = (cons, unrel, counts / counts.sum(axis=1, keepdims=True))
    assert abs(res["none"][0] - res["none"][1]) < 0.02
    assert res["half"][0] > res["half"][1] + 0.35  # ~ 0.5 + 0.5 * unrelated
    # persistence keeps the marginal popularity (within sampling noise)
    assert np.abs(res["half"][2] - res["none"][2]).max() < 0.03


def test_new_requests_reset_persistence() -> None:
    params = SyntheticParams(32, 2, 2, persistence=0.9)
    st = SyntheticSource(params).stream(16, seed=0, new_request_prob=0.5)
    steps = st.take(5)
    assert any(np.any(s.positions == 0) for s in steps[1:])
    assert steps[-1].request_ids.max() >= 16


def test_synthetic_bad_params() -> None:
    with pytest.raises(ConfigError, match="synthetic.hot_frac"):
        SyntheticParams(8, 2, 1, hot_frac=1.5)
    with pytest.raises(ConfigError, match="synthetic.top_k"):
        SyntheticParams(8, 9, 1)
    with pytest.raises(ConfigError, match="synthetic model"):
        preset_params("nope")
    with pytest.raises(ConfigError, match="unknown parameters"):
        SyntheticSource.from_preset("mixtral-8x7b", bogus=1)


@pytest.mark.parametrize("name", PRESETS)
def test_presets_shapes(name: str) -> None:
    src = SyntheticSource.from_preset(name)
    st = src.stream(3, seed=0).step()
    assert st.topk_ids.shape == (3, src.num_layers, src.top_k)
    assert st.counts.shape == (src.num_layers, src.num_experts)


def test_presets_match_models() -> None:
    get_model = pytest.importorskip("sievesim.models").get_model
    for name in PRESETS:
        try:
            m = get_model(name)
        except ConfigError:
            continue  # synthetic-only presets (llama-4-maverick, deepseek-v2-lite)
        p = preset_params(name)
        assert (p.num_experts, p.top_k, p.num_layers) == (m.num_experts, m.top_k, m.num_moe_layers), name


# ---------------------------------------------------------------------------------------------
# statistics


def test_stats_exact() -> None:
    acc = StatsAccumulator(4)
    acc.add(np.array([[1, 2, 0, 5], [3, 0, 0, 0]]))
    acc.add(np.array([[4, 1, 1, 0], [0, 0, 0, 1]]))
    r = acc.result(3)
    # activated counts: 1,2,5,3 | 4,1,1,1 -> N=1: 4, N=2: 1, N=3-4: 2, N>4: 1 of 8
    assert (r.frac_1, r.frac_2, r.frac_3_4, r.frac_gt4) == (0.5, 0.125, 0.25, 0.125)
    assert r.activated_ratio == pytest.approx(np.mean([3 / 4, 1 / 4, 3 / 4, 1 / 4]))
    assert r.tokens_per_active == pytest.approx(18 / 8)


def test_act_param_ratio() -> None:
    m = SimpleNamespace(name="m", total_params=1000.0, params_per_expert=10.0, num_experts=8,
                        num_moe_layers=10)  # routed 800, always-active 200
    assert act_param_ratio(np.full(10, 2), m) == pytest.approx((200 + 10 * 2 * 10) / 1000)
    assert act_param_ratio(np.full(10, 8), m) == pytest.approx(1.0)
    assert act_param_ratio(np.array([2, 4]), m) == pytest.approx((200 + 10 * 3 * 10) / 1000)


def test_routing_stats_deterministic(trace_file: Path) -> None:
    src = TraceSource(load_trace(trace_file))
    a = routing_stats(src, [1, 4], batches=10, seed=4)
    b = routing_stats(src, [1, 4], batches=10, seed=4)
    assert a == b
    assert a[0].frac_1 == 1.0 and a[0].activated_ratio == pytest.approx(K / E)


# ---------------------------------------------------------------------------------------------
# request lengths


def test_lengths() -> None:
    p = LENGTH_PRESETS["math-500"]
    a = decode_context_lengths("math-500", 1000, np.random.default_rng(0))
    b = decode_context_lengths(p, 1000, np.random.default_rng(0))
    assert a.tobytes() == b.tobytes() and a.dtype == np.int64
    assert a.min() >= p.prompt_min
    hh = decode_context_lengths("hh-rlhf", 1000, np.random.default_rng(0))
    assert np.median(a) > 2 * np.median(hh)  # long reasoning outputs dominate MATH-500 contexts
    prompts = p.sample_prompts(1000, np.random.default_rng(1))
    assert np.median(prompts) == pytest.approx(p.prompt_median, rel=0.15)


def test_colocated() -> None:
    assert max_prefills(32) == 2 and max_prefills(64) == 8
    c = colocated_batch("hh-rlhf", 64, prefill_len=512, seed=1)
    assert c.prefill_lengths.tolist() == [512] * 8
    assert c.total_tokens == 64 + 8 * 512
    c2 = colocated_batch("hh-rlhf", 16, num_prefill=1, seed=1)
    assert c2.prefill_lengths.size == 1 and c2.decode_context.size == 16
    with pytest.raises(ConfigError, match="lengths preset"):
        colocated_batch("nope", 4)
    with pytest.raises(ConfigError, match="prefill_len"):
        colocated_batch("hh-rlhf", 4, prefill_len=0)
    with pytest.raises(ConfigError, match="prompt_median"):
        LengthPreset("x", 0, 1, 1, 2, 1, 1, 1, 2)


# ---------------------------------------------------------------------------------------------
# CLI


def test_cli_json(trace_file: Path, capsys: pytest.CaptureFixture) -> None:
    from sievesim.cli import main
    assert main(["trace-stats", str(trace_file), "--batch-sizes", "1,2,4", "--batches", "5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["batch_size"] for r in out["results"]] == [1, 2, 4]
    r = out["results"][2]
    assert r["frac_1"] + r["frac_2"] + r["frac_3_4"] + r["frac_gt4"] == pytest.approx(1.0)
    assert out["results"][0]["activated_ratio"] == pytest.approx(K / E)


def test_cli_table_and_errors(tmp_path: Path, trace_file: Path, capsys: pytest.CaptureFixture) -> None:
    from sievesim.cli import main
    assert main(["trace-stats", str(trace_file), "--batch-sizes", "1,4", "--batches", "3"]) == 0
    out = capsys.readouterr().out
    assert "N=1" in out and "N>4" in out
    a = make_arrays()
    a["topk_ids"][0, 0, 0] = 99
    np.savez(tmp_path / "bad.npz", **a)
    assert main(["trace-stats", str(tmp_path / "bad.npz")]) == 2
    err = capsys.readouterr().err
    assert "bad.npz" in err and "topk_ids[0, 0, 0] = 99" in err
    assert main(["trace-stats", str(trace_file), "--batch-sizes", "4,x"]) == 2
    assert main(["trace-stats", str(trace_file), "--batch-sizes", "8"]) == 2
    assert "--allow-reuse" in capsys.readouterr().err
    assert main(["trace-stats", str(trace_file), "--batch-sizes", "8", "--allow-reuse", "--batches", "2"]) == 0


def test_cli_synthetic_with_model(capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("sievesim.models")
    from sievesim.cli import main
    assert main(["trace-stats", "synthetic:gpt-oss-120b", "--batch-sizes", "1", "--batches", "2", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)["results"][0]
    from sievesim.models import get_model
    m = get_model("gpt-oss-120b")
    routed = m.params_per_expert * m.num_experts * m.num_moe_layers
    expected = (m.total_params - routed + m.params_per_expert * m.top_k * m.num_moe_layers) / m.total_params
    assert r["act_param_ratio"] == pytest.approx(expected)


@pytest.mark.parametrize("seed", range(30))
def test_compiled_counts_of_ids_are_the_bincount(seed):
    """``counts_from_ids`` counts in one compiled pass where the package was built: the same (L, E)
    int64 counts as ``np.bincount`` for int32 and int64 ids with empty slots (-1), any shape; an id
    past the experts is refused with its value."""
    from sievesim.workload import routing
    if routing._counts_of_ids is None:
        pytest.skip("the package is not built")
    rng = np.random.default_rng(seed)
    experts = int(rng.integers(1, 40))
    ids = rng.integers(-1, experts, (int(rng.integers(0, 50)), int(rng.integers(1, 5)), int(rng.integers(1, 9))))
    for dtype in (np.int32, np.int64):
        got = counts_from_ids(ids.astype(dtype), experts)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(routing, "_counts_of_ids", None)
            want = counts_from_ids(ids.astype(dtype), experts)
        assert got.dtype == want.dtype == np.int64 and np.array_equal(got, want)
    if ids.size:
        ids.flat[0] = experts
        with pytest.raises(ValueError, match=f"expert id {experts} out of range for {experts} experts"):
            counts_from_ids(ids.astype(np.int32), experts)


@settings(max_examples=60, deadline=None)
@given(hst.data())
def test_compiled_plain_sample_gives_the_numpy_samples_ids(data):
    """The synthetic source's compiled sample (draws and clash checks in C) takes the same uniforms
    in the same order and gives the same ids as its numpy reference: first tokens, persistence
    (kept slots), concentrated layers that fall back to the masked draw; the generator ends in
    the same state."""
    from sievesim.workload import synthetic
    from sievesim.workload.synthetic import _alias_tables
    if synthetic._kernels is None:
        pytest.skip("the package is not built")
    experts = data.draw(hst.integers(1, 24), label="experts")
    k = data.draw(hst.integers(1, experts), label="top k")
    layers = data.draw(hst.integers(1, 4), label="layers")
    n = data.draw(hst.integers(1, 50), label="tokens")
    seed = data.draw(hst.integers(0, 2**32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    src = SyntheticSource(SyntheticParams(num_experts=experts, top_k=k, num_layers=layers))
    p = rng.pareto(data.draw(hst.sampled_from([0.2, 1.0, 3.0]), label="skew"), size=(layers, experts)) + 1e-9
    src.popularity = p / p.sum(axis=1, keepdims=True)
    prob, alias = _alias_tables(src.popularity)
    src._prob, src._alias = prob.ravel(), (alias + (np.arange(layers) * experts)[:, None]).ravel()
    prev = src.sample_tokens(np.random.default_rng(seed), n)
    keep = np.random.default_rng(seed + 1).random(prev.shape) < 0.5
    for args in ((None, None), (prev, keep)):
        ran = []
        for sample in (src._sample_compiled, src._sample_numpy):
            gen = np.random.default_rng(seed + 2)
            ran.append((sample(gen, n, *args), gen.random()))
        (compiled, after_c), (reference, after_r) = ran
        assert compiled.dtype == reference.dtype == np.int32 and compiled.shape == (n, layers, k)
        assert np.array_equal(compiled, reference) and after_c == after_r
