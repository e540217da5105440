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


def _volumes(ids, own, gpus, experts, nodes):
    sim = SimpleNamespace(gpus=gpus, local_experts=experts // gpus, num_slots=experts,
                          nodes=nodes, early_loads="off")
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
    for gpu_model in ("roofline", "calibrated"):
        one = simulate_step("deepseek-v3", "h100", gpus=16, gpu_model=gpu_model, **kw)
        two = simulate_step("deepseek-v3", "h100", gpus=16, nodes=2, gpu_model=gpu_model, **kw)
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


def test_redundant_experts_in_a_step_hold_more_and_balance_the_busiest_gpu(capsys):
    kw = dict(policy="gpu-only", batch=64 * 64, context_len=2000, steps=1, warmup=0, weight_format="fp8-block",
              energy=False, gpus=64, nodes=8)
    plain = simulate_step("deepseek-v3", "h100", **kw)
    eplb = simulate_step("deepseek-v3", "h100", redundant_experts=64, **kw)
    assert eplb.settings["redundant_experts"] == 64
    assert eplb.memory_per_gpu_bytes["expert_weights"] == pytest.approx(
        plain.memory_per_gpu_bytes["expert_weights"] * 5 / 4)                  # 5 replicas per GPU instead of 4
    assert eplb.step_time_s < plain.step_time_s
    assert (round(plain.step_time_s * 1e3, 1), round(eplb.step_time_s * 1e3, 1)) == (49.6, 38.6)   # docs/hardware.md
    with pytest.raises(ConfigError, match="gpus = 72: expected a divisor"):
        simulate_step("deepseek-v3", "h100", gpus=72, nodes=9, redundant_experts=8, **{k: v for k, v in kw.items()
                                                                                     if k not in ("gpus", "nodes")})
    assert main(["run", "--model", "deepseek-v3", "--hardware", "h100", "--gpus", "72", "--nodes", "9",
                 "--redundant-experts", "32", "--policy", "gpu-only", "--batch", "72", "--warmup", "0",
                 "--weight-format", "fp8-block", "--json"]) == 0
    assert '"redundant_experts": 32' in capsys.readouterr().out
