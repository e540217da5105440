"""Integration tests over the real traces in ../shared/traces (never copied into the repo)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sievesim.errors import TraceError
from sievesim.workload import TraceSource, load_trace, open_source, routing_stats
from sievesim.workload.fit import TRACE_BATCHES, TRACE_FILES, TRACE_SEED, TRACE_STEPS
from sievesim.workload.synthetic import SyntheticSource

TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
pytestmark = pytest.mark.skipif(not TRACES.is_dir(), reason=f"real traces folder {TRACES} is absent")

FILES = {"llama4_maverick_mmlu.npz": (128, 1, 24, 387, 1),
         "deepseek_v2_lite_puffin_prefill.npz": (64, 6, 26, 1999, 0),
         "mixtral_8x7b_humaneval_gsm8k_decode.npz": (8, 2, 32, 4, 1)}


@pytest.mark.parametrize("fname", sorted(FILES))
def test_real_trace_reads(fname: str) -> None:
    e, k, num_layers, n_req, phase = FILES[fname]
    t = load_trace(TRACES / fname)
    assert (t.num_experts, t.top_k, t.num_layers) == (e, k, num_layers)
    src = TraceSource(t)
    assert src.phase == phase and src.num_requests == n_req
    if phase == 0:
        assert np.all(t.pos[src.pool] > 0)  # BOS dropped


def test_real_distinct_batches_follow_requests() -> None:
    src = open_source(str(TRACES / "llama4_maverick_mmlu.npz"))
    steps = src.stream(64, seed=0).take(20)
    for a, b in zip(steps, steps[1:]):
        assert len(set(a.request_ids.tolist())) == 64
        same = a.request_ids == b.request_ids
        assert np.all(b.positions[same] == a.positions[same] + 1)
        assert same.mean() > 0.9  # most requests keep going (decode length up to 128)


def test_real_trace_too_small_for_batch() -> None:
    src = open_source(str(TRACES / "mixtral_8x7b_humaneval_gsm8k_decode.npz"))
    with pytest.raises(TraceError, match="mixtral_8x7b_humaneval_gsm8k_decode.npz: seq_id: the trace has 4 requests"):
        src.stream(16)
    assert src.stream(16, allow_reuse=True, seed=0).step().counts.sum() == 16 * 32 * 2


def test_real_stats_sane() -> None:
    src = open_source(str(TRACES / "llama4_maverick_mmlu.npz"))
    res = routing_stats(src, [1, 16, 256], batches=16, seed=0)
    assert res[0].frac_1 == 1.0 and res[0].activated_ratio == pytest.approx(1 / 128)
    # the paper's point: many activated experts get 1-2 tokens even at large batch (skewed routing)
    assert res[2].frac_1 + res[2].frac_2 > 0.4
    assert res[1].activated_ratio < 16 / 128  # skew: fewer distinct experts than tokens
    assert res == routing_stats(src, [1, 16, 256], batches=16, seed=0)


@pytest.mark.parametrize("group", sorted(TRACE_FILES))
def test_synthetic_fitted_to_real_trace(group: str) -> None:
    """The stored Llama-4 / DeepSeek-V2-Lite parameters reproduce their trace's statistics."""
    real = routing_stats(open_source(str(TRACES / TRACE_FILES[group])), TRACE_BATCHES,
                         batches=TRACE_STEPS, seed=TRACE_SEED)
    name = {"llama-4": "llama-4-maverick", "deepseek-v2-lite": "deepseek-v2-lite"}[group]
    syn = routing_stats(SyntheticSource.from_preset(name), TRACE_BATCHES, batches=32, seed=1)
    for r, s in zip(real, syn):
        for q in ("frac_1", "frac_2", "frac_3_4", "frac_gt4", "activated_ratio"):
            assert getattr(s, q) == pytest.approx(getattr(r, q), abs=0.06), (group, r.batch_size, q)


def test_cli_on_real_trace(capsys: pytest.CaptureFixture) -> None:
    from sievesim.cli import main
    path = str(TRACES / "deepseek_v2_lite_puffin_prefill.npz")
    assert main(["trace-stats", path, "--batch-sizes", "4,64", "--batches", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["num_experts"] == 64 and out["mode"] == "distinct"
    pytest.importorskip("sievesim.models")
    assert main(["trace-stats", path, "--model", "qwen3-30b-a3b"]) == 2
    assert "meta.num_experts = 64" in capsys.readouterr().err
