"""Issue 66: early loads that join the pipelined grouped GEMM, no wasted early load under the
expert-work rule, and Overlap (ours) against the best baseline."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import dataclasses

from sievesim.costs import build_context
from sievesim.errors import ConfigError
from sievesim.hardware import get_hardware
from sievesim.models import get_model
from sievesim.policies import Overlap, get_policy
from sievesim.policies._prefix import sorted_active
from sievesim.system import simulate_step

HERE = pathlib.Path(__file__).parent


def _layer_gemm(r, layer: int):
    nodes = [n for n in r.nodes() if n.layer == layer]
    loads = [n for n in nodes if n.kind in ("early_load", "weight_load")]
    gemm = [n for n in nodes if n.kind == "gemm"]
    return loads, gemm


def test_noexp_with_eight_prefills_is_not_overcharged():
    """NoExp loads every expert early; its grouped GEMM starts on the first expert's weights and ends
    at max(start + compute - tail, last weights) + the last expert's compute, computed here by hand
    from the roofline (not load + compute, which overcharged it by 29.6 %)."""
    r = simulate_step("qwen3-30b-a3b", "b200", gpus=1, policy="noexp", batch=16, prefill="8:1024", steps=1,
                      warmup=0, gpu_model="roofline")
    m, hw = get_model("qwen3-30b-a3b"), get_hardware("b200")
    flops_s = hw.gpu.peak_flops_bf16 * hw.gpu.compute_efficiency
    assert m.weight_tensor_core == "bf16"
    bytes_s = hw.gpu.hbm_bandwidth_bytes_per_s * hw.gpu.memory_efficiency
    io = m.dtype_bytes * (2.0 * m.hidden_size + 2.0 * m.moe_intermediate_size)

    def compute(tokens: float) -> float:
        return max(2.0 * m.params_per_expert * tokens / flops_s, io * tokens / bytes_s)

    layer = 5
    loads, gemm = _layer_gemm(r, layer)
    assert [n.kind for n in loads] == ["early_load", "early_load"] and len(gemm) == 2
    first, rest = loads
    experts = len(first.experts) + len(rest.experts)
    assert rest.end_s - first.start_s == pytest.approx(experts * m.bytes_per_expert / bytes_s, rel=1e-9)
    body, tail = gemm
    tokens = body.tokens + tail.tokens
    assert body.start_s == pytest.approx(first.end_s, abs=1e-12)      # dispatch and decision are done by then
    end = max(body.start_s + compute(tokens) - compute(tail.tokens), rest.end_s) + compute(tail.tokens)
    assert tail.end_s == pytest.approx(end, rel=1e-9)
    serial = (rest.end_s - first.start_s) + compute(tokens)
    assert tail.end_s - first.start_s < 0.8 * serial      # the old graph charged load + compute


def test_a_lone_late_expert_waits_for_its_weights():
    r = simulate_step("gpt-oss-120b", "b200", gpus=4, policy="sieve", batch=64, steps=1, warmup=1,
                      gpu_model="roofline")
    checked = 0
    for layer in range(r.settings["layers"] if "layers" in r.settings else 36):
        loads, gemm = _layer_gemm(r, layer)
        for g in range(4):
            late = [n for n in loads if n.gpu == g and n.kind == "weight_load"]
            mine = [n for n in gemm if n.gpu == g]
            if late and mine:
                assert mine[-1].start_s >= max(n.end_s for n in late) - 1e-15
                checked += 1
    assert checked


def test_expert_work_rule_wastes_no_early_load():
    """``experts_only`` wasted 7-8.6 GB of early loads per step on Qwen3 (an expert cheaper on the GPU
    by itself stays on PIM when the GPU side is the larger); it now asks for none."""
    sieve = get_policy("sieve", experts_only=True)
    assert sieve.early_loads == "off"
    r = simulate_step("qwen3-30b-a3b", "b200", gpus=1, policy="sieve", batch=256, steps=1, warmup=1,
                      policy_options={"experts_only": True}, gpu_model="roofline")
    assert r.early_load_bytes == 0 and r.early_load_wasted_bytes == 0
    assert simulate_step("qwen3-30b-a3b", "b200", gpus=1, policy="overlap", batch=256, steps=1, warmup=1,
                         gpu_model="roofline").early_load_wasted_bytes == 0


# ------------------------------------------------------------------ Overlap
def _ctx(batch: int = 64, gpus: int = 1, microbatches: int = 1):
    """A context of GPT-OSS-120B on b200 (32 experts per GPU on 4 GPUs) with the given batch."""
    ctx = build_context(get_model("gpt-oss-120b"), get_hardware("b200"), 4, batch, context_lens=2048)
    return dataclasses.replace(ctx, gpus=gpus, microbatches=microbatches)


def test_overlap_skips_the_decision_at_one_request_per_gpu():
    counts = np.zeros(32, dtype=np.int64)
    counts[[1, 5, 9, 30]] = 1
    part = Overlap().decide(counts, _ctx(batch=4, gpus=4))
    assert part.info["decided"] is False and part.pim_experts.tolist() == [1, 5, 9, 30]
    one = simulate_step("qwen3-30b-a3b", "b200", gpus=1, policy="overlap", batch=1, steps=1, warmup=1,
                        gpu_model="roofline")
    allexp = simulate_step("qwen3-30b-a3b", "b200", gpus=1, policy="allexp", batch=1, steps=1, warmup=1,
                           gpu_model="roofline")
    assert one.step_time_s == allexp.step_time_s      # no decision latency: AllExp's graph


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 64), min_size=32, max_size=32))
def test_overlap_tensor_cut_is_the_minimum_of_its_estimate(counts):
    """One micro-batch: the rule weighs max(GPU experts, PIM experts), an increasing and a decreasing
    sequence along the sorted list, so the greedy cut is the minimum over every prefix cut."""
    c = np.array(counts, dtype=np.int64)
    ctx = _ctx(batch=max(int(c.max()), -(-int(c.sum()) // 4), 2))
    work = dataclasses.replace(ctx, t_comm_s=0.0, t_attention_s=0.0, gpu_fixed=ctx.gpu_beside)
    part = Overlap(placements="tensor").decide(c, ctx)
    totals = work.prefix_totals(sorted_active(c)[1])
    est = work.evaluate(c, part.on_pim).t_total_s
    assert est <= totals.min() * (1 + 1e-9)


def test_overlap_keeps_one_placement_after_calibration():
    pol = Overlap(calibration=2)
    ctx = _ctx(batch=64, gpus=2)
    rng = np.random.default_rng(0)
    for _ in range(4):
        part = pol.decide(rng.integers(0, 9, 32), ctx)
        assert None in part.info["profile"] and len(part.info["profile"]) == 3
    layer = ctx.moe_layer
    assert set(pol.layout()) == {layer} and pol.layout()[layer] in ("tensor", "stack", "channel")
    part = pol.decide(rng.integers(0, 9, 32), ctx)
    assert "profile" not in part.info and part.info["placement"] == pol.layout()[layer]


def test_overlap_options_are_checked():
    with pytest.raises(ConfigError, match="placements"):
        get_policy("overlap", placements="diagonal")
    with pytest.raises(ConfigError, match="calibration"):
        get_policy("overlap", calibration=0)
    with pytest.raises(ConfigError, match="overlap scope"):
        Overlap(scope="rack")
    with pytest.raises(ConfigError, match="overlap rule"):
        Overlap(rule="fastest")
    assert repr(Overlap(rule="experts")) == "Overlap(rule='experts')"


@pytest.mark.parametrize("batch,microbatches", [(16, 1), (64, 2)])
def test_overlap_is_not_behind_the_best_baseline_on_qwen3(batch, microbatches):
    from sievesim.benchmarks.policy_table import BASELINES, throughput
    best = max(throughput("qwen3-30b-a3b", 1, pol, batch, unit=unit, microbatches=microbatches)
               for _, pol, unit in BASELINES)
    assert throughput("qwen3-30b-a3b", 1, "overlap", batch, microbatches=microbatches) >= best


def test_policy_table_in_the_docs_is_what_the_command_prints(capsys):
    from sievesim.benchmarks.policy_table import main
    main(["--models", "qwen3-30b-a3b", "--batches", "4,256", "--microbatches", "1"])
    doc = (HERE.parent / "docs" / "policies.md").read_text()
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| qwen3")]
    assert len(rows) == 2
    for line in rows:
        assert line in doc, line


@pytest.mark.slow
@settings(max_examples=5, deadline=None)
@given(st.sampled_from((("qwen3-30b-a3b", 1), ("gpt-oss-120b", 4))), st.sampled_from((1, 2, 8, 32)),
       st.integers(0, 3))
def test_no_policy_beats_the_oracle(model_gpus, per_gpu, seed):
    """The oracle (every prefix cut and busiest-unit walk, priced on the executed layer) is an upper
    bound of every policy, executed as the figures execute them."""
    from sievesim.benchmarks.policy_table import BASELINES, throughput
    model, gpus = model_gpus
    batch = gpus * per_gpu
    oracle = throughput(model, gpus, "oracle", batch, seed=seed)
    for name, pol, unit in BASELINES + (("Overlap", "overlap", None),):
        assert throughput(model, gpus, pol, batch, unit=unit, seed=seed) <= oracle * (1 + 1e-12), name


def test_system_page_early_load_sentence_is_what_the_runs_give():
    """docs/system.md's early-load sentence: the waste and step times its commands print."""
    import re
    text = re.sub(r"\s+", " ", (HERE.parent / "docs" / "system.md").read_text())
    kw = dict(batch=64, gpu_model="roofline")
    cheap = simulate_step("qwen3-30b-a3b", policy="pimoe", pimoe_unit="stack", early_loads="cheaper", **kw)
    off = simulate_step("qwen3-30b-a3b", policy="pimoe", pimoe_unit="stack", **kw)
    only = simulate_step("qwen3-30b-a3b", policy="sieve", policy_options={"experts_only": True},
                         early_loads="cheaper", **kw)
    assert (f"wastes {cheap.early_load_wasted_bytes / 1e9:.1f} GB per step and runs {cheap.step_time_s * 1e3:.3f} "
            f"ms against {off.step_time_s * 1e3:.3f} ms") in text
    assert f"--early-loads cheaper` wastes {only.early_load_wasted_bytes / 1e9:.1f} GB" in text
