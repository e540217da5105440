"""Every GPU's decision of a layer at once (``Policy.decide_rows``, ``figure8.decide_all``) builds the
step the GPU-by-GPU decisions build: the same graph (names, durations, resources, dependencies,
metadata) and the same results, bit for bit, over models, GPU counts, policies and options."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from sievesim.costs import CostContext, GpuWork
from sievesim.costs.pim_cost import RooflinePimCost
from sievesim.policies import get_policy
from sievesim.system import figure8 as f8
from sievesim.system.step import StepSimulator

_WALL = ("wall_step_s", "wall_decide_s", "schedule")


def _graph(schedule) -> tuple:
    g = schedule.graph
    meta = [{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in m.items()} for m in g.meta]
    return g.names, g.durations, g.resources, g.deps, g.priority, meta, schedule.start, schedule.end


def _steps(monkeypatch, rows: bool, model: str, gpus: int, policy: str, batch: int, steps: int = 3, **options):
    if not rows:
        monkeypatch.setattr(f8, "decide_all", lambda b, lb, r: None)
    one_by_one, gpu_paths = [], []
    original, original_path = f8.decide, f8.add_gpu_path
    monkeypatch.setattr(f8, "decide", lambda *a: one_by_one.append(1) or original(*a))
    monkeypatch.setattr(f8, "add_gpu_path", lambda *a: gpu_paths.append(1) or original_path(*a))
    sim = StepSimulator(model, gpus=gpus, policy=policy, batch=batch, **options)
    out = []
    for _ in range(steps):      # the first steps warm the cost table: later ones decide on learned times
        raw = sim.run_step()
        out.append(({k: v for k, v in raw.items() if k not in _WALL}, _graph(raw["schedule"])))
    monkeypatch.undo()
    assert bool(one_by_one) != rows, "the path under test was not the one taken"
    assert bool(gpu_paths) == (not rows or options.get("pipelined_gemm") is False)
    return out


CASES = [
    ("qwen3-30b-a3b", 1, "sieve", 64, {}),
    ("qwen3-30b-a3b", 4, "sieve", 256, {"gpu_model": "roofline"}),
    ("gpt-oss-120b", 4, "noexp", 64, {}),
    ("gpt-oss-120b", 2, "allexp", 32, {"early_loads": "paper"}),
    ("qwen3.5-397b-a17b", 8, "sieve", 256, {}),
    ("qwen3.5-397b-a17b", 8, "gpu-only", 128, {}),
    ("mixtral-8x7b", 2, "sieve", 16, {"microbatches": 2}),
    ("deepseek-v3", 16, "sieve", 128, {"nodes": 2}),
    ("deepseek-v3", 16, "gpu-only", 256, {"weight_format": "fp8-block", "nodes": 2, "redundant_experts": 16}),
    ("gpt-oss-120b", 4, "sieve", 64, {"pipelined_gemm": False, "early_loads": "off"}),
    ("qwen3-30b-a3b", 2, "sieve", 64, {"early_loads": "paper", "prefill": "2:256"}),
    ("qwen3-30b-a3b", 2, "noexp", 32, {"attention_on": "gpu", "gpu_model": "roofline"}),
    ("deepseek-v3", 8, "sieve", 64, {"mtp_tokens": 1}),
    ("gpt-oss-120b", 4, "sieve", 64, {"attention": "tp"}),
]


@pytest.mark.parametrize("model,gpus,policy,batch,options", CASES)
def test_rows_build_the_step_the_gpu_by_gpu_decisions_build(monkeypatch, model, gpus, policy, batch, options):
    ref = _steps(monkeypatch, False, model, gpus, policy, batch, **options)
    rows = _steps(monkeypatch, True, model, gpus, policy, batch, **options)
    for (r_raw, r_graph), (w_raw, w_graph) in zip(ref, rows):
        assert r_graph == w_graph
        assert r_raw == w_raw


def test_policies_that_decide_gpu_by_gpu_take_the_gpu_by_gpu_path(monkeypatch):
    """PIMoE, Sieve on units, Overlap and the oracle have no row decision: ``decide_all`` says so
    once per step and every GPU is decided by ``decide``."""
    calls = []
    original = f8.decide
    monkeypatch.setattr(f8, "decide", lambda *a: calls.append(1) or original(*a))
    for policy, opts in (("pimoe", {}), ("sieve", {"policy_options": {"unit": "stack"}}), ("overlap", {})):
        calls.clear()
        StepSimulator("qwen3-30b-a3b", gpus=2, policy=policy, batch=32, **opts).run_step()
        assert len(calls) == 2 * 48, policy


def _ctx(rng, pim, experts: int, batch: int) -> CostContext:
    return CostContext(t_comm_s=float(rng.uniform(0, 2e-4)), t_attention_s=float(rng.uniform(0, 3e-4)),
                       gpu_fixed=GpuWork(float(rng.uniform(0, 1e12)), float(rng.uniform(0, 1e9))),
                       gpu_flops_per_s=1e15, gpu_bytes_per_s=8e12, expert_bytes=2.4e7, expert_flops_per_token=2.4e7,
                       expert_io_bytes_per_token=2.0e4, pim=pim, batch=batch, top_k=8, num_experts=experts)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 9), experts=st.integers(1, 40),
       batch=st.integers(1, 300))
def test_sieve_rows_are_its_decisions_row_by_row(seed, rows, experts, batch):
    """Random counts and contexts (each row its own T_comm, attention and fixed work; one table):
    the compiled row walk gives each row's ``decide(validate=False)``."""
    rng = np.random.default_rng(seed)
    pim = RooflinePimCost(expert_flops_per_token=2.4e7, pim_peak_flops=float(rng.uniform(1e13, 1e14)))
    counts = rng.integers(0, batch + 1, size=(rows, experts)) * (rng.random((rows, experts)) < 0.6)
    ctxs = [_ctx(rng, pim, experts, batch) for _ in range(rows)]
    sieve = get_policy("sieve")
    got = sieve.decide_rows(counts, ctxs)
    for g in range(rows):
        want = sieve.decide(counts[g].astype(np.int64), ctxs[g], validate=False).on_pim
        assert np.array_equal(got[g], want)


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(1, 9), experts=st.integers(1, 40),
       high=st.sampled_from([1, 3, 50]))
def test_compiled_bookkeeping_is_the_numpy_one(seed, rows, experts, high):
    """The early and late loads' first and last experts, the tail and the node masks of every GPU
    (``expert_rows.bookkeeping``, compiled) against the numpy reference, on random partitions with
    ties in the counts (``high`` small) and GPUs without early, late or any GPU experts."""
    from sievesim.system import expert_rows
    if expert_rows._expert_rows is None:
        pytest.skip("the package is not built")
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, high + 1, size=(rows, experts))
    local = np.minimum(counts, rng.integers(0, high + 1, size=(rows, experts)))
    active = counts > 0
    on_pim = active & (rng.random((rows, experts)) < rng.random())
    on_gpu = active & ~on_pim
    early = (local > 0) & (rng.random((rows, experts)) < rng.random())
    got = expert_rows.bookkeeping(counts, local, on_gpu, on_pim, early)
    want = expert_rows.bookkeeping_numpy(counts, local, on_gpu, on_pim, early)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
