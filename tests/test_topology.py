"""GPUs in several NVLink domains joined by a scale-out network (docs/hardware.md, "Nodes"): the
dispatch volumes per level, the refusal of node counts that do not divide, and what crossing nodes costs."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from sievesim.cli import main
from sievesim.errors import ConfigError
from sievesim.hardware import get_hardware
from sievesim.system import simulate_step
from sievesim.system.routing_volumes import of_microbatch


def _volumes(ids, own, gpus, experts, nodes, dispatch="low-latency"):
    sim = SimpleNamespace(gpus=gpus, local_experts=experts // gpus, num_slots=experts,
                          nodes=nodes, early_loads="off", dispatch=dispatch)
    b = SimpleNamespace(sim=sim, memo={}, ids=np.asarray(ids)[:, None, :])       # one MoE layer
    lb = SimpleNamespace(mb=0, rows=np.arange(len(ids)), own=np.asarray(own))
    return of_microbatch(b, lb)


def test_dispatch_volumes_per_level_are_the_hand_count():
    """4 GPUs in 2 nodes of 2, 8 experts (2 per GPU), top-2. Token 0 on GPU 0 goes to experts 2 (GPU 1,
    same node) and 6 (GPU 3, the other node); token 1 on GPU 2 to experts 0 (GPU 0, other node) and 5
    (its own GPU 2: no transfer); token 2 on GPU 3 to experts 6 and 7 (both its own)."""
    v = _volumes([[2, 6], [0, 5], [6, 7]], [0, 2, 3], gpus=4, experts=8, nodes=2)
    assert v.send[0].tolist() == [2, 0, 1, 0] and v.recv[0].tolist() == [1, 1, 0, 1]
    assert v.send_inter[0].tolist() == [1, 0, 1, 0] and v.recv_inter[0].tolist() == [1, 0, 0, 1]
    one = _volumes([[2, 6], [0, 5], [6, 7]], [0, 2, 3], gpus=4, experts=8, nodes=1)
    assert one.send_inter is None and one.send[0].tolist() == v.send[0].tolist()


def test_normal_mode_volumes_cross_once_per_node_and_forward_over_nvlink():
    """8 GPUs in 2 nodes of 4 (local ranks 0-3), one expert per GPU, top-3. Token A on GPU 0 goes to
    GPUs 1, 5, 6: NVLink to 1, RDMA once to node 1's rank-0 GPU 4, which forwards to 5 and 6. Token B
    on GPU 5 goes to GPUs 1, 0, 4: NVLink to 4, RDMA to node 0's rank-1 GPU 1 (a target itself),
    which forwards to 0. Token C on GPU 2 goes to GPUs 6, 7 and its own 2: RDMA to GPU 6 (a
    target), which forwards to 7."""
    ids, own = [[1, 5, 6], [1, 0, 4], [6, 7, 2]], [0, 5, 2]
    v = _volumes(ids, own, gpus=8, experts=8, nodes=2, dispatch="normal")
    assert v.send_inter[0].tolist() == [1, 0, 1, 0, 0, 1, 0, 0]
    assert v.recv_inter[0].tolist() == [0, 1, 0, 0, 1, 0, 1, 0]
    nvl_send = [1, 1, 0, 0, 2, 1, 1, 0]     # GPU 0 direct; relays 4 (2), 1 (1), 6 (1); GPU 5 direct
    nvl_recv = [1, 1, 0, 0, 1, 1, 1, 1]     # B forwarded to 0, A direct to 1, B direct to 4, A to 5 and 6, C to 7
    assert (v.send[0] - v.send_inter[0]).tolist() == nvl_send
    assert (v.recv[0] - v.recv_inter[0]).tolist() == nvl_recv
    ll = _volumes(ids, own, gpus=8, experts=8, nodes=2)
    assert ll.send_inter[0].tolist() == [2, 0, 2, 0, 0, 2, 0, 0]      # low latency: once per GPU
    # on one node there is nothing to forward: both modes are the same
    one = _volumes(ids, own, gpus=8, experts=8, nodes=1, dispatch="normal")
    assert one.send_inter is None and one.send[0].tolist() == _volumes(ids, own, gpus=8, experts=8, nodes=1).send[0].tolist()


def test_a_node_count_that_does_not_divide_the_gpus_is_refused(capsys):
    with pytest.raises(ConfigError, match="nodes = 3: expected a divisor of gpus = 16"):
        simulate_step("deepseek-v3", "h100", gpus=16, nodes=3, policy="gpu-only", batch=16)
    assert main(["run", "--model", "deepseek-v3", "--hardware", "h100", "--gpus", "16", "--nodes", "3",
                 "--policy", "gpu-only", "--batch", "16"]) == 2
    assert "nodes = 3" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="gpus_per_node"):
        get_hardware("gb200-nvl72").interconnect.nodes(100)


def test_crossing_nodes_costs_the_nic_and_is_in_the_settings():
    kw = dict(policy="gpu-only", batch=256, steps=1, warmup=0, weight_format="fp8-block", energy=False)
    for model_name in ("roofline", "calibrated"):
        one = simulate_step("deepseek-v3", "h100", gpus=16, gpu_model=model_name, **kw)
        two = simulate_step("deepseek-v3", "h100", gpus=16, nodes=2, gpu_model=model_name, **kw)
        assert two.settings["nodes"] == 2 and one.settings["nodes"] == 1
        link = lambda r: sum(n.duration_s for n in r.nodes() if n.gpu == 0 and n.kind in ("dispatch", "combine"))
        assert link(two) > link(one) and two.step_time_s > one.step_time_s


def test_gb200_nvl72_is_one_domain_of_72():
    hw = get_hardware("gb200-nvl72")
    assert hw.interconnect.nodes(72) == 1 and hw.interconnect.nodes(144) == 2
    assert hw.gpu.peak_flops("fp4") == 1.0e16 and hw.gpu.hbm_capacity_bytes == 186_000_000_000
    r = simulate_step("deepseek-v3", hw, gpus=64, policy="gpu-only", batch=64, steps=1, warmup=0,
                      weight_format="fp8-block", energy=False)
    assert r.settings["nodes"] == 1 and r.step_time_s > 0


# ------------------------------------------------------------------ redundant experts (EPLB)
from hypothesis import given, settings, strategies as st  # noqa: E402

from sievesim.system.eplb import gpu_loads, place  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from([(8, 2), (16, 4), (12, 4)]), st.integers(0, 8), st.floats(0.0, 2.0))
def test_redundant_experts_conserve_tokens_and_never_raise_the_busiest_gpu(seed, shape, extra, skew):
    experts, gpus = shape
    redundant = extra * gpus
    rng = np.random.default_rng(seed)
    weights = (np.arange(experts) + 1.0) ** -skew
    loads = rng.multinomial(200, weights / weights.sum(), size=2)          # (L = 2, E)
    p = place(loads, gpus, redundant)
    # tokens: counts split over replicas, and ids mapped to slots, keep every expert's total
    split = p.split_counts(loads)
    for layer in range(2):
        held = p.slot_expert[layer] >= 0                                    # -1: a spare slot left empty
        assert (split[layer][~held] == 0).all()
        assert np.bincount(p.slot_expert[layer][held], weights=split[layer][held], minlength=experts).tolist() == \
            loads[layer].tolist()
    ids = rng.integers(0, experts, size=(50, 2, 2))
    slots = p.to_slots(ids)
    assert (p.slot_expert[np.arange(2)[None, :, None], slots] == ids).all()
    # the busiest GPU's load (each replica carrying its share) never above the plain layout's
    plain = gpu_loads(loads.astype(float), experts // gpus).max(axis=1)
    ours = np.array([gpu_loads(np.append(loads[layer] / p.replicas[layer], 0.0)[p.slot_expert[layer]],
                               p.slots_per_gpu).max() for layer in range(2)])
    assert (ours <= plain + 1e-6).all()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from([(8, 2), (16, 4), (12, 4), (6, 3)]), st.integers(0, 6),
       st.integers(1, 60), st.booleans())
def test_compiled_slots_and_counts_are_to_slots_and_its_counts(seed, shape, extra, tokens, empty_slots):
    """``Placement.slots_and_counts`` (one compiled pass) gives :meth:`Placement.to_slots` and the
    tokens per slot of ``counts_from_ids`` over them, integer for integer, with empty slots (-1) of a
    recorded trace; an expert id past the experts is refused, not read out of bounds."""
    from sievesim.system import eplb
    from sievesim.workload.routing import counts_from_ids
    if eplb._slots_and_counts is None:
        pytest.skip("the package is not built")
    experts, gpus = shape
    rng = np.random.default_rng(seed)
    p = place(rng.multinomial(300, rng.dirichlet(np.ones(experts)), size=3), gpus, extra * gpus)
    ids = np.stack([np.stack([rng.permutation(experts)[:2] for _ in range(3)]) for _ in range(tokens)])
    if empty_slots:
        ids[rng.random(ids.shape) < 0.3] = -1
    ids = ids.astype(np.int32)
    slots, counts = p.slots_and_counts(ids)
    want = p.to_slots(ids)
    assert slots.dtype == want.dtype == np.int64 and np.array_equal(slots, want)
    assert np.array_equal(counts, counts_from_ids(want, p.num_slots)) and counts.shape == (3, p.num_slots)
    ids[0, 0, 0] = experts
    with pytest.raises(IndexError, match=f"expert id {experts} out of range"):
        p.slots_and_counts(ids)


def test_redundant_experts_in_a_step_hold_more_and_balance_the_busiest_gpu(capsys):
    kw = dict(policy="gpu-only", batch=64 * 64, context_len=2000, steps=1, warmup=0, weight_format="fp8-block",
              energy=False, gpus=64, nodes=8)
    plain = simulate_step("deepseek-v3", "h100", **kw)
    eplb = simulate_step("deepseek-v3", "h100", redundant_experts=64, **kw)
    assert eplb.settings["redundant_experts"] == 64
    assert eplb.memory_per_gpu_bytes["expert_weights"] == pytest.approx(
        plain.memory_per_gpu_bytes["expert_weights"] * 5 / 4)                  # 5 replicas per GPU instead of 4
    assert eplb.step_time_s < plain.step_time_s
    assert (round(plain.step_time_s * 1e3, 1), round(eplb.step_time_s * 1e3, 1)) == (49.0, 38.6)   # docs/hardware.md
    normal = simulate_step("deepseek-v3", "h100", dispatch="normal", **kw)
    normal_eplb = simulate_step("deepseek-v3", "h100", dispatch="normal", redundant_experts=64, **kw)
    assert (round(normal.step_time_s * 1e3, 1), round(normal_eplb.step_time_s * 1e3, 1)) == (31.0, 31.8)   # docs
    with pytest.raises(ConfigError, match="gpus = 72: expected a divisor"):
        simulate_step("deepseek-v3", "h100", gpus=72, nodes=9, redundant_experts=8, **{k: v for k, v in kw.items()
                                                                                     if k not in ("gpus", "nodes")})
    assert main(["run", "--model", "deepseek-v3", "--hardware", "h100", "--gpus", "72", "--nodes", "9",
                 "--redundant-experts", "32", "--policy", "gpu-only", "--batch", "72", "--warmup", "0",
                 "--weight-format", "fp8-block", "--json"]) == 0
    assert '"redundant_experts": 32' in capsys.readouterr().out



def test_redundant_experts_auto_takes_the_fewest_that_divide(capsys):
    """The default ("auto") replicates as few experts as make E + R a multiple of G, and nothing when G
    divides E; an explicit count that does not divide is still refused; serving's KV capacity and
    PIMoE's layout count the same replicas."""
    from sievesim.policies.placement import pimoe_layout
    from sievesim.serving.kv import kv_capacity
    from sievesim.system.parallelism import resolve_redundant

    assert [resolve_redundant("auto", 256, g) for g in (8, 72, 144, 48)] == [0, 32, 32, 32]
    assert resolve_redundant("auto", 384, 72) == 48 and resolve_redundant("auto", 256, 72, "tp") == 0
    kw = dict(policy="gpu-only", batch=72, context_len=512, steps=1, warmup=0, weight_format="fp8-block",
              energy=False)
    auto = simulate_step("deepseek-v3", "h100", gpus=72, nodes=9, **kw)
    assert auto.settings["redundant_experts"] == 32
    assert simulate_step("qwen3-30b-a3b", "b200", gpus=8, **kw | dict(batch=8)).settings["redundant_experts"] == 0
    with pytest.raises(ConfigError, match=r"gpus = 72: expected a divisor of the model's 256 routed experts "
                                          r"\(expert parallelism puts as many on each GPU; or redundant_experts = 32"):
        simulate_step("deepseek-v3", "h100", gpus=72, nodes=9, redundant_experts=0, **kw)
    model, hw = get_model("deepseek-v3").with_formats({"weights": "fp8-block"}), get_hardware("h100")
    caps = [kv_capacity(model, hw, 72, max_batch=72, token_budget=512, block_size=16, memory_utilization=0.9,
                        redundant_experts=r) for r in ("auto", 32, 104)]
    assert caps[0] == caps[1] and caps[2].weights_bytes - caps[0].weights_bytes == pytest.approx(
        model.num_moe_layers * float(model.bytes_per_expert))          # 5 replicas per GPU and layer, not 4
    assert pimoe_layout(model, get_hardware("b200"), 72, "channel", 32).local_experts == 4
    assert main(["run", "--model", "kimi-k2", "--hardware", "gb200-nvl72", "--gpus", "72", "--batch", "72",
                 "--policy", "gpu-only", "--warmup", "0", "--context-len", "512"]) == 0
    assert "48 redundant experts" in capsys.readouterr().out

# ------------------------------------------------------------------ node-limited routing (groups)
from sievesim.models import get_model  # noqa: E402
from sievesim.system.step import StepSimulator  # noqa: E402
from sievesim.workload.synthetic import source_for_model  # noqa: E402


def test_group_limited_routing_keeps_every_token_in_its_top_groups():
    """DeepSeek-V3 (8 groups of 32 experts, top-4 groups): over steps with persistence and new
    requests, every token's 8 distinct experts lie in at most 4 groups; without the limit many do not."""
    m = get_model("deepseek-v3")
    assert (m.expert_groups, m.top_k_groups, m.group_size) == (8, 4, 32)
    src, spec = source_for_model(m, seed=5)
    assert spec == "synthetic:deepseek-v3" and src.params.persistence > 0
    stream = src.stream(256, seed=1, new_request_prob=0.2)
    for _ in range(4):
        ids = stream.step().topk_ids
        groups = np.sort(ids // 32, axis=2)
        assert ((np.diff(groups, axis=2) > 0).sum(axis=2) + 1).max() <= 4
        assert (np.diff(np.sort(ids, axis=2), axis=2) > 0).all()             # no expert twice
    free = source_for_model(m, seed=5, group_limited=False)[0].stream(256, seed=1).step().topk_ids
    spans = (np.diff(np.sort(free // 32, axis=2), axis=2) > 0).sum(axis=2) + 1
    assert spans.max() > 4


def test_eight_nodes_of_eight_gpus_send_a_token_to_at_most_four_nodes():
    """Contiguous experts on 64 GPUs in 8 nodes: node n holds group n, so a DeepSeek-V3 token reaches
    at most 4 nodes. One token per GPU, so each GPU's RDMA sends (normal kernels) are its token's
    other nodes."""
    sim = StepSimulator("deepseek-v3", "h100", gpus=64, nodes=8, policy="gpu-only", batch=64,
                        weight_format="fp8-block", energy=False)
    assert sim.source.params.expert_groups == 8
    ids = sim.stream.step().topk_ids
    own = np.arange(64)
    nodes_hit = np.array([[len(set(ids[t, layer] // 32)) for layer in range(ids.shape[1])] for t in range(64)])
    assert nodes_hit.max() <= 4
    assert max(len(set(row // 16)) for row in ids.reshape(-1, 8)) <= 8       # 16 nodes: each group on 2, at most 8
    v = _volumes(ids[:, 0, :], own, gpus=64, experts=256, nodes=8, dispatch="normal")
    remote = nodes_hit[:, 0] - np.array([int(t // 8 in set(ids[t, 0] // 32)) for t in range(64)])
    assert v.send_inter[0].tolist() == remote.tolist() and v.send_inter[0].max() <= 4
    # one node: the model's router is group-limited too (the groups are the model's, not the deployment's)
    one = dict(gpus=8, policy="gpu-only", batch=8, weight_format="fp8-block")
    assert StepSimulator("deepseek-v3", "h200", **one).source.params.top_k_groups == 4
    assert StepSimulator("deepseek-v3", "h200", trace="synthetic:deepseek-v3", **one).source.params.top_k_groups == 4
    assert StepSimulator("qwen3-30b-a3b", "h200", gpus=1, batch=8).source.params.expert_groups is None


def test_models_without_groups_cross_nodes_as_before():
    """Qwen3 and GPT-OSS over several nodes give the step times of the commit before group-limited
    routing and the normal kernels, to the last bit, but for the pipelined, hottest-first expert loads of issue 66 (tests/data/multinode_steps.json)."""
    import json
    from pathlib import Path
    golden = json.loads((Path(__file__).parent / "data" / "multinode_steps.json").read_text())
    for p in golden["points"]:
        r = simulate_step(p["model"], p["hardware"], gpus=p["gpus"], batch=p["batch"], steps=2, warmup=1,
                          **p["options"])
        assert [repr(x) for x in r.step_times_s] == p["step_times_s"], p
        assert repr(r.estimated_step_time_s) == p["estimated_step_time_s"], p


# ------------------------------------------------------------------ DeepEP's normal (NVLink-forwarded) kernels
from sievesim.costs.gpu_model import gpu_model  # noqa: E402


def test_normal_kernels_are_priced_on_deepeps_normal_table():
    """Calibrated: the low-latency kernel's fixed time, then NVLink at 155.5 GB/s (DeepEP normal,
    intranode EP8 on H800: 153 and 158) and RDMA at the NIC's 50 GB/s (the table's 43-58 GB/s mean,
    50.3, above the line rate); the roofline: the same line rates as low latency."""
    h = get_hardware("h100")
    link = h.interconnect
    lat = max(link.alltoall_latency_s, link.latency_s, link.scaleout_alltoall_latency_s, link.scaleout_latency_s)
    normal = gpu_model("calibrated", h, dispatch="normal")
    assert normal.dispatch_s(1.555e9, 0.0) == pytest.approx(lat + 0.01)
    assert normal.dispatch_s(1.0e6, 5.0e8) == pytest.approx(lat + 0.01)
    ll = gpu_model("calibrated", h)
    assert ll.dispatch_s(0.0, 4.6e8) == pytest.approx(lat + 0.01)              # pure RDMA: 46 GB/s
    roof_n, roof_ll = gpu_model("roofline", h, dispatch="normal"), gpu_model("roofline", h)
    assert roof_n.dispatch_s(1e6, 1e7) == roof_ll.dispatch_s(1e6, 1e7)
    import dataclasses
    bare = dataclasses.replace(h, interconnect=dataclasses.replace(link, scaleout_forwarded_bandwidth_bytes_per_s=None))
    with pytest.raises(ConfigError, match="scaleout_forwarded_bandwidth_bytes_per_s"):
        gpu_model("calibrated", bare, dispatch="normal").dispatch_s(1.0, 1.0)
    with pytest.raises(ConfigError, match="dispatch = 'fast'"):
        gpu_model("calibrated", h, dispatch="fast")


def test_normal_kernels_in_a_step(capsys):
    """DeepSeek-V3 on 8 nodes of 8 H100s: once per node over the NIC costs the dispatch less than
    once per GPU; on one node both modes are the same step."""
    kw = dict(policy="gpu-only", batch=16 * 64, context_len=2000, steps=1, warmup=0, weight_format="fp8-block",
              energy=False, gpus=64, nodes=8)
    ll = simulate_step("deepseek-v3", "h100", **kw)
    normal = simulate_step("deepseek-v3", "h100", dispatch="normal", **kw)
    assert (ll.settings["dispatch"], normal.settings["dispatch"]) == ("low-latency", "normal")
    link = lambda r: sum(n.duration_s for n in r.nodes() if n.kind in ("dispatch", "combine"))
    assert link(normal) < link(ll) and normal.step_time_s < ll.step_time_s
    one = dict(kw, gpus=8, nodes=1, batch=64)
    assert simulate_step("qwen3-30b-a3b", "h100", dispatch="normal", **one).step_times_s == \
        simulate_step("qwen3-30b-a3b", "h100", **one).step_times_s
    assert main(["run", "--model", "qwen3-30b-a3b", "--gpus", "2", "--batch", "4", "--dispatch", "fast"]) == 2
    assert "--dispatch" in capsys.readouterr().err


def test_group_limited_draws_have_the_stated_distribution():
    """6 experts in 3 groups of 2, a token's 1 expert from its 2 chosen groups: groups by Plackett-Luce
    over their mass, then the expert in proportion to its popularity among the chosen groups'.
    200,000 draws against the enumeration."""
    from itertools import permutations

    from sievesim.workload.grouped import GroupedSampler
    from sievesim.workload.synthetic import _alias_tables
    p = np.array([[0.30, 0.05, 0.20, 0.15, 0.25, 0.05]])
    mass = p[0].reshape(3, 2).sum(axis=1)
    want = np.zeros(6)
    for a, b in permutations(range(3), 2):                          # ordered draws of two groups
        pr = mass[a] * mass[b] / (1 - mass[a])
        for g in (a, b):
            want[2 * g:2 * g + 2] += pr * p[0, 2 * g:2 * g + 2] / (mass[a] + mass[b])
    ids = GroupedSampler(p, 3, 2, 1, _alias_tables).sample(np.random.default_rng(0), 200_000)
    got = np.bincount(ids.ravel(), minlength=6) / ids.size
    assert np.abs(got - want).max() < 0.004


@pytest.mark.parametrize("seed", range(5))
def test_chosen_groups_come_in_falling_key_order_ties_by_id(seed):
    """The draw walks a row's chosen groups in order, so that order must not depend on the machine:
    kept groups first (ties among them by group id), then falling log mass + Gumbel noise, the same
    from the compiled and the numpy paths (numpy's argpartition orders its first elements one way
    with its SIMD code and another without)."""
    from sievesim.workload import grouped
    from sievesim.workload.synthetic import _alias_tables
    rng = np.random.default_rng(seed)
    layers, groups, size, chosen, k = 3, 8, 4, 4, 6
    p = rng.pareto(1.0, size=(layers, groups * size)) + 1e-6
    sampler = grouped.GroupedSampler(p / p.sum(axis=1, keepdims=True), groups, chosen, k, _alias_tables)
    n = 200
    prev = sampler.sample(np.random.default_rng(seed), n)
    keep = np.random.default_rng(seed + 1).random(prev.shape) < 0.4
    rows, layer = n * layers, np.tile(np.arange(layers), n)
    kept_pair = (prev.reshape(rows, k).T.astype(np.int64), np.ascontiguousarray(keep.reshape(rows, k).T))
    got = sampler._choose_groups(np.random.default_rng(seed + 2), layer, kept_pair)
    key = sampler._log_mass[layer] + np.random.default_rng(seed + 2).gumbel(size=(rows, groups))
    for r in range(rows):
        forced = {int(e) // size for e, kept in zip(prev.reshape(rows, k)[r], keep.reshape(rows, k)[r]) if kept}
        ranked = sorted(range(groups), key=lambda g: (g not in forced, -key[r, g] if g not in forced else 0.0, g))
        assert got[r].tolist() == ranked[:chosen]
    if grouped._kernels is None:
        return                      # an unbuilt source tree: the numpy path only
    compiled = grouped._kernels.choose_groups(np.random.default_rng(seed + 2).gumbel(size=(rows, groups)),
                                              sampler._log_mass, np.ascontiguousarray(prev.reshape(rows, k)),
                                              np.ascontiguousarray(keep.reshape(rows, k)).view(np.uint8), size, chosen)
    assert np.array_equal(compiled, got)


def test_groups_are_read_from_the_hf_config():
    """``n_group``/``topk_group`` become ``expert_groups``/``top_k_groups``; one group, or
    ``topk_method = "greedy"``, is no groups; a bad value names its key, and a model field that
    cannot hold the top-k is refused."""
    import json
    from pathlib import Path

    from sievesim.models.hf import from_hf_config
    cfg = json.loads((Path(__file__).parent / "data" / "hf_configs" / "deepseek-ai--DeepSeek-V3.json").read_text())
    spec = from_hf_config(cfg, name="v3")
    assert (spec.expert_groups, spec.top_k_groups) == (8, 4) and "n_group" not in dict(spec.ignored_keys)
    assert from_hf_config({**cfg, "topk_method": "greedy"}, name="v3").expert_groups is None
    assert from_hf_config({**cfg, "n_group": 1, "topk_group": 1}, name="v3").top_k_groups is None
    with pytest.raises(ConfigError, match="n_group"):
        from_hf_config({**cfg, "n_group": "eight"}, name="v3")
    with pytest.raises(ConfigError, match="expert_groups = 7"):
        from_hf_config({**cfg, "n_group": 7}, name="v3")
    with pytest.raises(ConfigError, match="top_k = 8: expected at most the 4 experts"):
        get_model("deepseek-v3").replace(expert_groups=64, top_k_groups=1)


# ------------------------------------------------------------------ dispatch volumes: sparse count = dense count
@settings(max_examples=60, deadline=None)
@given(st.data())
def test_sparse_dispatch_volumes_equal_the_dense_hit_array(data):
    """The step counts each token's distinct destinations (O(rows x layers x K)); a dense (L, R, G)
    array of hits, built independently here, gives the same sends and receives per GPU and level,
    with empty slots (-1) of a recorded trace; the compiled count gives the same."""
    from sievesim.system import routing_volumes
    from sievesim.system.routing_volumes import _sparse_volumes

    gpus = data.draw(st.sampled_from([1, 2, 4, 8, 16]))
    per_gpu = data.draw(st.integers(1, 4))
    nodes = data.draw(st.sampled_from([n for n in (1, 2, 4) if gpus % n == 0]))
    rows, layers = data.draw(st.integers(1, 20)), data.draw(st.integers(1, 3))
    k = data.draw(st.integers(1, min(6, gpus * per_gpu)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    ids = np.stack([rng.permutation(gpus * per_gpu)[:k] for _ in range(rows * layers)]).reshape(rows, layers, k)
    if data.draw(st.booleans()):
        ids[rng.random(ids.shape) < 0.25] = -1
    own = rng.integers(0, gpus, rows)
    send, recv, send_far, recv_far = _sparse_volumes(ids, own, gpus, per_gpu, nodes)
    if routing_volumes._dispatch_counts is not None:     # the compiled count: the same integers
        slots = gpus * per_gpu
        own_counts = routing_volumes._own_counts(ids, own, gpus, slots)
        for dtype, own_experts in ((np.int32, slots), (np.int64, 0)):
            compiled = routing_volumes._dispatch_counts(ids.astype(dtype), own.astype(np.int64), gpus, per_gpu, nodes,
                                                        own_experts)
            want = (send, recv, send_far, recv_far, own_counts if own_experts else None)
            assert all((a is None and c is None) or (a.dtype == c.dtype and np.array_equal(a, c))
                       for a, c in zip(want, compiled))
        bad = ids.astype(np.int64)
        bad.flat[0] = slots
        with pytest.raises(IndexError, match=f"slot id {slots} out of range"):
            routing_volumes._dispatch_counts(bad, own.astype(np.int64), gpus, per_gpu, nodes, slots)
    hit = np.zeros((layers, rows, gpus), dtype=bool)
    for r in range(rows):
        for layer in range(layers):
            for e in ids[r, layer]:
                if e >= 0 and e // per_gpu != own[r]:
                    hit[layer, r, e // per_gpu] = True
    node = np.arange(gpus) // (gpus // nodes)
    far = hit & (node[own][None, :, None] != node[None, None, :])
    for mine, dense in ((send, hit), (send_far, far)):
        if mine is None:
            assert nodes == 1
            continue
        want = np.zeros((layers, gpus))
        for r in range(rows):
            want[:, own[r]] += dense[:, r, :].sum(axis=1)
        assert np.array_equal(mine, want)
    assert np.array_equal(recv, hit.sum(axis=1))
    if nodes > 1:
        assert np.array_equal(recv_far, far.sum(axis=1))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_compiled_grouped_draw_gives_the_numpy_draws_ids(data):
    """The compiled sampler (``sievesim.workload._grouped_draw``: group keys, draws, clash checks and
    redraws in C) takes the same random numbers in the same order and gives the same ids as the
    numpy expressions it replaces, through whole samples: first tokens, persistence (kept slots),
    concentrated layers that fall back to the masked draw. The draw kernel alone inside the numpy
    sampler, too; every path leaves the generator in the same state."""
    from sievesim.workload import grouped
    from sievesim.workload.synthetic import _alias_tables
    if grouped._kernels is None:
        pytest.skip("the package is not built")
    groups = data.draw(st.sampled_from([2, 3, 4, 8]), label="groups")
    size = data.draw(st.integers(1, 6), label="group size")
    chosen = data.draw(st.integers(1, groups), label="chosen groups")
    k = data.draw(st.integers(1, chosen * size), label="top k")
    layers = data.draw(st.integers(1, 3), label="layers")
    n = data.draw(st.integers(1, 40), label="tokens")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    p = rng.pareto(data.draw(st.sampled_from([0.3, 1.0, 3.0]), label="skew"), size=(layers, groups * size)) + 1e-6
    p /= p.sum(axis=1, keepdims=True)
    sampler = grouped.GroupedSampler(p, groups, chosen, k, _alias_tables)
    prev = sampler.sample(np.random.default_rng(seed), n)
    keep = np.random.default_rng(seed + 1).random(prev.shape) < 0.5
    for args in ((), (prev, keep)):
        ran = []
        for patched in ((), ("_kernels",), ("_kernels", "_grouped_draw")):
            rng = np.random.default_rng(seed + 2)
            with pytest.MonkeyPatch.context() as mp:
                for name in patched:
                    mp.setattr(grouped, name, None)
                ids = sampler.sample(rng, n, *args)
            ran.append((ids, rng.random()))
        compiled, reference = ran[0][0], ran[2][0]
        assert compiled.dtype == reference.dtype == np.int32 and compiled.shape == (n, layers, k)
        for ids, after in ran[1:]:
            assert np.array_equal(ids, compiled) and after == ran[0][1]
