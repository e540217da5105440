"""Every option a command accepts changes its result or is refused: trace-stats --top-k, a trace
and a model that disagree, policy --top-k, policy compare --units --pim-cost engine, --batch 0."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sievesim.cli import main


def _run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _trace(tmp_path, layers=24, experts=128, k=1):
    rng = np.random.default_rng(0)
    n = 200
    p = tmp_path / "t.npz"
    np.savez(p, topk_ids=rng.integers(0, experts, (n, layers, k)).astype(np.int16),
             seq_id=np.repeat(np.arange(20), 10).astype(np.int32), pos=np.tile(np.arange(10), 20).astype(np.int32),
             phase=np.ones(n, dtype=np.int8),
             meta=np.array(json.dumps({"model": "test", "num_experts": experts, "top_k": k, "num_moe_layers": layers})))
    return p


def test_trace_stats_top_k_replaces_synthetic_top_k(capsys):
    rc, out, _ = _run(capsys, "trace-stats", "synthetic:qwen3-30b-a3b", "--top-k", "4", "--batch-sizes", "1,16",
                      "--batches", "4", "--json")
    four = json.loads(out)
    rc8, out8, _ = _run(capsys, "trace-stats", "synthetic:qwen3-30b-a3b", "--batch-sizes", "1,16", "--batches", "4",
                        "--json")
    eight = json.loads(out8)
    assert rc == rc8 == 0 and four["top_k"] == 4 and eight["top_k"] == 8
    # B = 1: one token activates exactly top-k experts per layer
    assert four["results"][0]["activated_ratio"] == pytest.approx(4 / 128)
    assert eight["results"][0]["activated_ratio"] == pytest.approx(8 / 128)


def test_trace_stats_synthetic_llama4_uses_the_llama4_preset(capsys):
    rc, out, _ = _run(capsys, "trace-stats", "synthetic:llama-4-maverick", "--batch-sizes", "1", "--batches", "2",
                      "--json")
    assert rc == 0 and json.loads(out)["model"] == "llama4-maverick"


def test_trace_and_model_that_disagree_are_refused_by_name(tmp_path, capsys):
    p = _trace(tmp_path)
    rc, _, err = _run(capsys, "trace-stats", str(p), "--model", "qwen3-30b-a3b", "--batch-sizes", "4")
    assert rc == 2 and "MoE layers (topk_ids.shape[1]) = 24: expected 48" in err
    rc, _, err = _run(capsys, "trace-stats", str(p), "--model", "mixtral-8x7b", "--batch-sizes", "4")
    assert rc == 2 and "meta.num_experts = 128: expected 8" in err
    rc, _, err = _run(capsys, "trace-stats", str(p), "--top-k", "4", "--batch-sizes", "4")
    assert rc == 2 and "meta.top_k = 1: expected 4 (the top-k asked for)" in err
    rc, out, _ = _run(capsys, "trace-stats", str(p), "--model", "llama4-maverick", "--batch-sizes", "4",
                      "--batches", "2")
    assert rc == 0 and "model llama4-maverick" in out


def test_synthetic_and_model_layers_must_agree(capsys):
    rc, _, err = _run(capsys, "trace-stats", "synthetic:gpt-oss-20b", "--model", "gpt-oss-120b", "--batch-sizes", "1")
    assert rc == 2 and "num_experts/top_k/MoE layers = 32/4/24: expected those of model gpt-oss-120b" in err


def test_policy_compare_refuses_batch_zero(capsys):
    rc, out, err = _run(capsys, "policy", "compare", "--model", "qwen3-30b-a3b", "--batch", "0,4")
    assert rc == 2 and out == "" and "--batch = '0,4'" in err and len(err.strip().splitlines()) == 1


def test_policy_compare_top_k_changes_the_result(capsys):
    rows = {}
    for k in ("4", None):
        argv = ["policy", "compare", "--model", "qwen3-30b-a3b", "--batch", "16", "--json"]
        rc, out, _ = _run(capsys, *(argv + (["--top-k", k] if k else [])))
        assert rc == 0
        rows[k] = {r["policy"]: r["t_total_us"] for r in json.loads(out)}
    assert rows["4"]["noexp"] < rows[None]["noexp"]


@pytest.mark.slow
def test_policy_compare_units_with_engine_pim_uses_the_engine(capsys):
    argv = ["policy", "compare", "--model", "qwen3-30b-a3b", "--batch", "16", "--units", "--json"]
    rc, out, _ = _run(capsys, *argv)
    rc2, out2, _ = _run(capsys, *(argv + ["--pim-cost", "engine"]))
    roof = {r["policy"]: r["t_total_us"] for r in json.loads(out)}
    engine = {r["policy"]: r["t_total_us"] for r in json.loads(out2)}
    assert rc == rc2 == 0 and set(roof) == set(engine) and "pimoe[stack]" in engine
    assert engine != roof


def test_policy_decide_top_k(tmp_path, capsys):
    counts = tmp_path / "c.json"
    counts.write_text(json.dumps([1] * 64 + [0] * 64))
    outs = []
    for k in ("4", "8"):
        rc, out, _ = _run(capsys, "policy", "decide", "--model", "qwen3-30b-a3b", "--counts", str(counts),
                          "--top-k", k, "--json")
        assert rc == 0
        outs.append(json.loads(out))
    assert outs[0]["batch"] == 16 and outs[1]["batch"] == 8  # B = ceil(G * sum / top_k)
