"""Cost estimates: GPU roofline, interconnect, PIM roofline and the EMA cost table, T_total."""
from __future__ import annotations

import math

import numpy as np
import pytest

from sievesim.costs import (
    AttentionShape,
    CostContext,
    GpuWork,
    PimCostModel,
    PimCostTable,
    PimOrganisation,
    RooflinePimCost,
    attention_shape,
    build_context,
    comm_time_s,
    dispatch_pairs_from_routing,
    gpu_roofline_time_s,
    non_moe_work,
    validate_counts,
)
from sievesim.errors import ConfigError
from sievesim.hardware import get_hardware
from sievesim.models import get_model


def ctx_numbers(**over) -> CostContext:
    """Hand-sized context: 1 us to load an expert, 0.01 us GPU compute and 0.5 us PIM per token."""
    kw = dict(t_comm_s=0.0, t_attention_s=0.0, gpu_fixed=GpuWork(0.0, 0.0), gpu_flops_per_s=1e17,
              gpu_bytes_per_s=1e12, expert_bytes=1e6, expert_flops_per_token=1e9,
              expert_io_bytes_per_token=0.0, pim=RooflinePimCost(1e9, 2e15), batch=16, top_k=4,
              num_experts=8)
    kw.update(over)
    return CostContext(**kw)


# ---------------------------------------------------------------------------------- GPU roofline
def test_gpu_roofline_takes_the_slower_of_compute_and_memory():
    # 2 TFLOP at 1 PFLOP/s = 2 ms; 1 GB at 1 TB/s = 1 ms -> compute bound
    assert gpu_roofline_time_s(2e12, 1e9, 1e15, 1e12) == pytest.approx(2e-3)
    # memory bound: 3 GB at 1 TB/s
    assert gpu_roofline_time_s(1e12, 3e9, 1e15, 1e12) == pytest.approx(3e-3)
    # efficiency factors derate the peaks
    assert gpu_roofline_time_s(1e12, 0.0, 1e15, 1e12, compute_efficiency=0.5) == pytest.approx(2e-3)
    assert gpu_roofline_time_s(0.0, 1e9, 1e15, 1e12, memory_efficiency=0.8) == pytest.approx(1.25e-3)


def test_grouped_gemm_moves_weights_once_and_computes_2_t_params():
    ctx = ctx_numbers(gpu_fixed=GpuWork(1e9, 2e6), expert_io_bytes_per_token=1e4)
    t_gpu, off, comp = ctx.gpu_time_s(3, 10)
    assert off == pytest.approx((2e6 + 3 * 1e6 + 10 * 1e4) / 1e12)  # 5.1 us
    assert comp == pytest.approx((1e9 + 10 * 1e9) / 1e17)  # 0.11 us
    assert t_gpu == pytest.approx(5.1e-6)
    # MoE alone (what PIMoE compares): no fixed work
    assert ctx.moe_gpu_time_s(3, 10) == pytest.approx((3e6 + 1e5) / 1e12)


def test_evaluate_hand_numbers_and_prefix_totals_agree():
    ctx = ctx_numbers(t_comm_s=0.7e-6, t_attention_s=0.25e-6)
    counts = np.array([8, 2, 1, 1, 0])
    est = ctx.evaluate(counts, [False, True, True, True, True])
    assert est.t_gpu_s == pytest.approx(1e-6)            # one expert loaded
    assert est.t_pim_s == pytest.approx(0.25e-6 + 4 * 0.5e-6)
    assert est.t_total_s == pytest.approx(2.25e-6)
    assert est.t_comm_s == 0.7e-6
    totals = ctx.prefix_totals(np.array([8, 2, 1, 1]))
    for k in range(5):
        on_pim = np.array([i >= k for i in range(4)] + [False])
        assert totals[k] == pytest.approx(ctx.evaluate(counts, on_pim).t_total_s, rel=1e-12)
    assert totals.tolist() == pytest.approx([6.25e-6, 2.25e-6, 2e-6, 3e-6, 4e-6])


def test_expert_parallel_pim_time_is_attention_plus_busiest_unit():
    org = PimOrganisation(stacks=2, channels_per_stack=1, pseudo_channels_per_channel=1)
    ctx = ctx_numbers(pim=RooflinePimCost(1e9, 2e15, organisation=org), organisation=org, t_attention_s=1e-6)
    counts = np.array([3, 1, 2, 0])
    est = ctx.evaluate(counts, [True, True, True, True], unit="stack", unit_of=np.array([0, 1, 0, 1]))
    # a stack has half the PIM: 1 us per token; stack 0 holds 3 + 2 tokens, stack 1 one token
    assert est.unit_busy_s.tolist() == pytest.approx([5e-6, 1e-6])
    assert est.t_pim_s == pytest.approx(6e-6)
    with pytest.raises(ConfigError, match="unit_of"):
        ctx.evaluate(counts, [True] * 4, unit="stack")


# ---------------------------------------------------------------------------------- PIM
def test_roofline_pim_units_scale_with_the_share_of_the_pim():
    pim = RooflinePimCost(2e6, 1e12)  # 2 us per token on the whole PIM
    assert isinstance(pim, PimCostModel)
    assert pim.expert_time_s(3) == pytest.approx(6e-6)
    assert pim.expert_time_on_unit_s(1, "stack") == pytest.approx(8 * 2e-6)
    assert pim.expert_time_on_unit_s(1, "channel") == pytest.approx(128 * 2e-6)
    assert pim.expert_time_on_unit_s(1, "pseudo_channel") == pytest.approx(256 * 2e-6)
    assert pim.expert_times_s(3).tolist() == pytest.approx([0, 2e-6, 4e-6, 6e-6])
    with pytest.raises(ConfigError, match="unit"):
        pim.expert_time_on_unit_s(1, "bank")
    with pytest.raises(ConfigError, match="pim_peak_flops"):
        RooflinePimCost(1.0, 0.0)


def test_attention_cost_grows_with_batch_and_context_sliding_caps_linear_is_flat():
    full = RooflinePimCost(1.0, 1e12, AttentionShape(1e3))
    assert full.attention_time_s([100, 300]) == pytest.approx(4e5 / 1e12)
    assert full.attention_time_s([100, 300, 400]) > full.attention_time_s([100, 300])
    assert full.attention_time_s([]) == 0.0
    slide = RooflinePimCost(1.0, 1e12, AttentionShape(1e3, window=128))
    assert slide.attention_time_s([100, 1000]) == pytest.approx((100 + 128) * 1e3 / 1e12)
    lin = RooflinePimCost(1.0, 1e12, AttentionShape(0.0, None, 5e6))
    assert lin.attention_time_s([10, 10]) == lin.attention_time_s([9000, 10])
    assert lin.attention_time_s([10, 10, 10]) == pytest.approx(3 * 5e6 / 1e12)
    with pytest.raises(ConfigError, match="context length"):
        full.attention_time_s([-1])


def test_attention_shapes_of_the_presets():
    gpt = get_model("gpt-oss-120b")
    kinds = gpt.layer_attention
    sl, fu = kinds.index("sliding"), kinds.index("full")
    a_s, a_f = attention_shape(gpt, sl), attention_shape(gpt, fu)
    # GQA 64 q / 8 kv, head_dim 64: 2 * (2*8*64) * 8 = 16384 FLOP per context token
    assert a_f.flops_per_context_token == pytest.approx(2 * 2 * 8 * 64 * 8)
    assert a_f.window is None and a_s.window == 128
    nxt = get_model("qwen3-next-80b-a3b")
    lin = attention_shape(nxt, nxt.layer_attention.index("linear"))
    assert lin.flops_per_context_token == 0 and lin.fixed_flops_per_request == 4 * 32 * 128 * 128
    ds = get_model("deepseek-v3")
    mla = attention_shape(ds, ds.layer_attention.index("mla"))
    assert mla.flops_per_context_token == pytest.approx(4 * (512 + 64) * 128)


def test_cost_table_falls_back_then_smooths():
    fb = RooflinePimCost(2e6, 1e12)
    table = PimCostTable(fb, alpha=0.25)
    assert isinstance(table, PimCostModel)
    assert table.expert_time_s(2) == pytest.approx(4e-6)  # roofline fallback
    assert table.update(("expert", 2), 1e-6) == 1e-6       # first observation replaces it
    assert table.expert_time_s(2) == 1e-6
    assert table.update(("expert", 2), 3e-6) == pytest.approx(0.75 * 1e-6 + 0.25 * 3e-6)
    assert table.expert_time_s(3) == pytest.approx(6e-6)   # other keys untouched
    table.update((("expert", "stack"), 1), 9e-6)
    assert table.expert_time_on_unit_s(1, "stack") == 9e-6
    assert table.expert_time_on_unit_s(1, "channel") == fb.expert_time_on_unit_s(1, "channel")
    assert len(table) == 2 and table.version == 3
    with pytest.raises(ConfigError, match="alpha"):
        PimCostTable(fb, alpha=0.0)
    with pytest.raises(ConfigError, match="observed_s"):
        table.update(("expert", 1), -1.0)


def test_context_rebuilds_its_table_after_a_cost_table_update():
    table = PimCostTable(RooflinePimCost(1e9, 2e15), alpha=1.0)
    ctx = ctx_numbers(pim=table)
    assert ctx.pim_times()[1] == pytest.approx(0.5e-6)
    table.update(("expert", 1), 0.1e-6)
    assert ctx.pim_times()[1] == pytest.approx(0.1e-6)


# ---------------------------------------------------------------------------------- interconnect
def test_comm_time_hand_numbers():
    assert comm_time_s(num_gpus=1, local_tokens=8, top_k=4, hidden_size=4096, dtype_bytes=2,
                       dispatch_send_tokens=0, dispatch_recv_tokens=0, bandwidth_bytes_per_s=1e11,
                       latency_s=1e-6).total_s == 0.0
    c = comm_time_s(num_gpus=4, local_tokens=8, top_k=4, hidden_size=1000, dtype_bytes=2,
                    dispatch_send_tokens=10, dispatch_recv_tokens=25, bandwidth_bytes_per_s=1e9,
                    latency_s=1e-6)
    assert c.allgather_s == pytest.approx(1e-6 + 3 * 8 * 4 * 8 / 1e9)
    assert c.dispatch_s == pytest.approx(1e-6 + 25 * 2000 / 1e9)   # the larger direction
    assert c.combine_s == pytest.approx(c.dispatch_s)
    assert c.total_s == pytest.approx(c.allgather_s + 2 * c.dispatch_s)


def test_dispatch_pairs_from_routing():
    # 4 tokens on 2 GPUs (tokens 0,1 on GPU 0), 4 experts (0,1 on GPU 0; 2,3 on GPU 1)
    routing = np.array([[0, 2], [1, 0], [3, 2], [0, 1]])
    send, recv = dispatch_pairs_from_routing(routing, 4, 2)
    # token 0 -> GPU 1 once; token 2 -> GPU 0? no, experts 3,2 are local; token 3 -> GPU 0 once
    assert send.tolist() == [1, 1] and recv.tolist() == [1, 1]
    with pytest.raises(ConfigError, match="routing expert id"):
        dispatch_pairs_from_routing(np.array([[0, 4]]), 4, 2)


# ---------------------------------------------------------------------------------- specs
@pytest.mark.parametrize("name,gpus", [("gpt-oss-120b", 4), ("qwen3.5-397b-a17b", 8), ("qwen3-30b-a3b", 1),
                                       ("deepseek-v3", 8), ("mixtral-8x22b", 1), ("qwen3-next-80b-a3b", 1)])
def test_build_context_from_presets(name, gpus):
    model, hw = get_model(name), get_hardware("b200")
    ctx = build_context(model, hw, gpus, 64, context_lens=2048)
    assert ctx.num_experts == model.num_experts // gpus
    assert ctx.expert_bytes == model.bytes_per_expert
    assert ctx.expert_flops_per_token == 2 * model.params_per_expert
    assert ctx.t_attention_s > 0
    assert (ctx.t_comm_s > 0) == (gpus > 1)
    bigger = build_context(model, hw, gpus, 128, context_lens=2048)
    longer = build_context(model, hw, gpus, 64, context_lens=8192)
    assert bigger.t_attention_s > ctx.t_attention_s and longer.t_attention_s > ctx.t_attention_s
    assert bigger.t_comm_s >= ctx.t_comm_s
    # roofline PIM: one GPT-OSS expert token = 2 * params / 128 TFLOP/s
    assert ctx.pim_times()[1] == pytest.approx(2 * model.params_per_expert / hw.pim_peak_flops)


def test_non_moe_work_counts_projections_router_shared_experts():
    m = get_model("qwen3.5-397b-a17b")
    layer = m.layer_attention.index("full")
    w = non_moe_work(m, layer, 10)
    params = m.attention_params_per_layer(layer) + m.router_params + m.shared_expert_params
    assert w.flops >= 2 * 10 * params
    assert w.bytes >= params * m.dtype_bytes


def test_build_context_bad_input():
    model, hw = get_model("gpt-oss-120b"), get_hardware("b200")
    with pytest.raises(ConfigError, match="gpus"):
        build_context(model, hw, 3, 16)
    with pytest.raises(ConfigError, match="layer"):
        build_context(model, hw, 4, 16, layer=999)
    with pytest.raises(ConfigError, match="context length"):
        build_context(model, hw, 4, 16, context_lens=[-5])
    with pytest.raises(ConfigError, match="a MoE layer"):
        build_context(get_model("deepseek-v3"), hw, 8, 16, layer=0)  # a dense layer
    assert build_context(get_model("deepseek-v3"), hw, 8, 16).t_attention_s == 0.0  # context 0


def test_build_context_with_routing_uses_exact_volumes():
    model, hw = get_model("gpt-oss-120b"), get_hardware("b200")
    rng = np.random.default_rng(0)
    routing = np.stack([rng.choice(128, 4, replace=False) for _ in range(32)])
    ctx = build_context(model, hw, 4, 32, routing=routing)
    # every token routed to experts of its own GPU (token i on GPU i // 8): no dispatch volume
    local = np.stack([32 * (i // 8) + rng.choice(32, 4, replace=False) for i in range(32)])
    ctx_local = build_context(model, hw, 4, 32, routing=local)
    assert ctx.t_comm_s > ctx_local.t_comm_s
    assert ctx_local.comm.dispatch_s == pytest.approx(hw.interconnect.latency_s)  # latency only
    send, recv = dispatch_pairs_from_routing(routing, 128, 4)
    vec = model.hidden_size * model.dtype_bytes
    bw = hw.interconnect.bandwidth_bytes_per_s_per_direction
    assert ctx.comm.dispatch_s == pytest.approx(hw.interconnect.latency_s + max(send[0], recv[0]) * vec / bw)


# ---------------------------------------------------------------------------------- validation
def test_validate_counts_errors_are_clear():
    ctx = ctx_numbers(batch=4, top_k=2, num_experts=4)
    c, ids = validate_counts([1, 0, 4, 2], ctx)
    assert c.dtype == np.int64 and ids.tolist() == [0, 1, 2, 3]
    with pytest.raises(ConfigError, match=r"counts\[1\] = -1: expected a non-negative"):
        validate_counts([1, -1], ctx)
    with pytest.raises(ConfigError, match=r"sum of counts = 9: expected at most B x top_k = 4 x 2 = 8"):
        validate_counts([3, 3, 3], ctx)
    with pytest.raises(ConfigError, match=r"counts\[0\] = 5: expected at most the batch size B = 4"):
        validate_counts([5], ctx)
    with pytest.raises(ConfigError, match="expert_ids"):
        validate_counts([1, 1], ctx, expert_ids=[0])
    with pytest.raises(ConfigError, match="expert id = 2: expected unique"):
        validate_counts([1, 1], ctx, expert_ids=[2, 2])
    with pytest.raises(ConfigError, match=r"expert id = 7: expected an id in \[0, 4\)"):
        validate_counts([1, 1], ctx, expert_ids=[0, 7])
    with pytest.raises(ConfigError, match="number of counts = 5"):
        validate_counts([0, 0, 0, 0, 1], ctx)
    with pytest.raises(ConfigError, match="integer"):
        validate_counts([1.5, 1], ctx)
    with pytest.raises(ConfigError, match="flat list"):
        validate_counts([[1, 2]], ctx)
    assert validate_counts([2.0, 1.0], ctx)[0].tolist() == [2, 1]
    assert validate_counts([], ctx)[0].size == 0


def test_context_rejects_bad_numbers():
    with pytest.raises(ConfigError, match="gpu_bytes_per_s"):
        ctx_numbers(gpu_bytes_per_s=0.0)
    with pytest.raises(ConfigError, match="t_comm_s"):
        ctx_numbers(t_comm_s=math.nan)
