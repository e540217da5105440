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
    sim = SimpleNamespace(gpus=gpus, local_experts=experts // gpus, model=SimpleNamespace(num_experts=experts),
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
