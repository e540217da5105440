"""The notebook API of a step: StepResult.nodes(), to_records(), to_pandas(), a short repr,
documented properties, typed model/hardware parameters."""
from __future__ import annotations

import inspect
import json
import pathlib
import sys
import typing

import numpy as np
import pytest

import sievesim
from sievesim.errors import SievesimError
from sievesim.models import get_model
from sievesim.system import StepResult, simulate_step
from sievesim.system.result import StepNode


@pytest.fixture(scope="module")
def two_gpus() -> StepResult:
    return simulate_step("qwen3-30b-a3b", gpus=2, batch=8, policy="sieve", steps=2, warmup=1)


def test_nodes_are_the_executed_graph_with_their_work(two_gpus):
    res, model = two_gpus, get_model("qwen3-30b-a3b")
    nodes = res.nodes()
    assert len(nodes) == len(res.schedule.graph) and all(isinstance(n, StepNode) for n in nodes)
    assert max(n.end_s for n in nodes) == pytest.approx(res.step_times_s[-1])
    assert all(0 <= n.start_s <= n.end_s for n in nodes)
    for n in nodes:
        assert all(nodes[d].end_s <= n.start_s + 1e-15 for d in n.depends_on)
    el = model.num_experts // 2
    for layer in (0, 17, model.num_layers - 1):
        experts = [n for n in nodes if n.layer == layer and n.kind in ("gemm", "pim_experts")]
        # every routed (token, expert) pair of the layer is in exactly one expert node
        assert sum(n.tokens for n in experts) == 8 * model.top_k
        for g in (0, 1):
            ids = [e for n in experts if n.gpu == g for e in n.experts]
            assert len(ids) == len(set(ids)) and all(g * el <= e < (g + 1) * el for e in ids)
        for n in experts:
            assert n.flops == pytest.approx(2.0 * model.params_per_expert * n.tokens)
            assert (n.engine_cycles is not None) == (n.kind == "pim_experts")
            assert n.resources == (f"g{n.gpu}.{'gpu' if n.kind == 'gemm' else 'pim'}",)
    attention = [n for n in nodes if n.kind == "attention"]
    assert attention and all(n.engine_cycles > 0 and n.tokens == 4 and n.context_tokens >= 4 * 4096
                             for n in attention)
    loads = [n for n in nodes if n.kind == "weight_load"]
    assert all(n.bytes == pytest.approx(len(n.experts) * model.bytes_per_expert) for n in loads)
    assert all(n.bytes > 0 for n in nodes if n.kind in ("dispatch", "combine", "allgather"))
    assert {n.kind for n in nodes if n.flops is None and n.bytes is None} <= {"decision", "attention", "step_overhead"}


def test_records_and_pandas(two_gpus, monkeypatch):
    recs = two_gpus.to_records()
    assert len(recs) == len(two_gpus.nodes())
    assert recs[0]["duration_s"] == recs[0]["end_s"] - recs[0]["start_s"]
    json.dumps(recs)
    monkeypatch.setitem(sys.modules, "pandas", None)       # pandas is optional
    with pytest.raises(SievesimError, match=r"pip install 'sievesim\[pandas\]'"):
        two_gpus.to_pandas()


def test_to_pandas_with_pandas(two_gpus):
    pd = pytest.importorskip("pandas")
    df = two_gpus.to_pandas()
    assert isinstance(df, pd.DataFrame) and len(df) == len(two_gpus.nodes())
    assert {"name", "kind", "start_s", "end_s", "tokens", "engine_cycles"} <= set(df.columns)


def test_repr_is_short_and_says_the_result(two_gpus):
    text = repr(two_gpus)
    assert len(text) < 300
    assert "qwen3-30b-a3b on 2 x b200" in text and f"{two_gpus.step_time_s * 1e3:.3f}" in text
    assert "+-" in text                                      # two steps: the spread


def test_every_public_property_and_method_has_a_docstring_with_units():
    for name, member in inspect.getmembers(StepResult):
        if name.startswith("_"):
            continue
        if isinstance(member, property) or inspect.isfunction(member):
            doc = inspect.getdoc(member) or ""
            assert doc, f"StepResult.{name} has no docstring"
            if name.endswith("_s") and isinstance(member, property):
                assert "[s]" in doc, f"StepResult.{name}'s docstring names no unit"


def test_model_and_hardware_parameters_are_typed_and_take_paths(tmp_path):
    from sievesim.hardware import HardwareSpec
    from sievesim.models import ModelSpec

    space = {**vars(sys.modules["sievesim.system.step"]), "ModelSpec": ModelSpec, "HardwareSpec": HardwareSpec}
    hints = typing.get_type_hints(simulate_step, globalns=space)
    assert "ModelSpec" in str(hints["model"]) and "PathLike" in str(hints["model"])
    assert "HardwareSpec" in str(hints["hardware"])
    preset = pathlib.Path(sievesim.__file__).parent / "data" / "models" / "qwen3-30b-a3b.toml"
    by_path = simulate_step(preset, batch=4, warmup=0)
    by_name = simulate_step("qwen3-30b-a3b", batch=4, warmup=0)
    assert by_path.step_time_s == by_name.step_time_s
    assert np.isfinite(by_path.step_time_s)
