"""docs/serving.md's goodput tables are what `python benchmarks/serving_goodput.py` prints: a row
recomputed here must match the doc's (a change of the simulator that moves it fails here)."""
from __future__ import annotations

import pathlib

import pytest
from conftest import load_script

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "serving.md"


def _doc_tables(model: str) -> list[str]:
    """The lines of the doc's tables for ``model`` (from its caption to the max-rate line)."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{model} on "))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("max rate meeting the SLOs"))
    return lines[start:end]


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["noexp", "sieve"])
def test_the_first_goodput_row_of_qwen3_30b(policy):
    """Qwen3-30B-A3B at 10 requests/s (each rate's run stands alone: a batch's price is a function of
    the batch): its goodput cell and its memo-error cell, as the script renders them."""
    from sievesim.serving import ServingSimulator, poisson_requests
    from sievesim.serving.simulator import requests_for

    script = load_script(ROOT / "benchmarks" / "serving_goodput.py")
    model, rate = "qwen3-30b-a3b", 10
    gpus = script.MODELS[model][0]
    sim = ServingSimulator(model, gpus=gpus, policy=policy, seed=0, gpu_model="roofline")
    d = sim.run(poisson_requests(float(rate), requests_for(float(rate), 1000, 30.0), seed=0), float(rate)).to_dict()
    d["arrival_window_s"] = 30.0
    ours = [line for line in script.render([d]).splitlines() if line.startswith(f"| {rate} |")]
    doc = [line for line in _doc_tables(model) if line.startswith(f"| {rate} |")]
    assert len(ours) == 2 and len(doc) == 2            # the goodput table's row, then the memo table's
    header = next(line for line in _doc_tables(model) if line.startswith("| rate"))
    column = [c.strip() for c in header.strip("|").split("|")].index(policy)
    for mine, theirs in zip(ours, doc):
        assert mine.strip("|").split("|")[1].strip() == theirs.strip("|").split("|")[column].strip(), (mine, theirs)


def _doc_row(first_cells: str) -> str:
    return next(line for line in DOC.read_text(encoding="utf-8").splitlines() if line.startswith(first_cells))


@pytest.mark.slow
def test_the_memo_error_rows_of_qwen3_30b():
    """docs/serving.md's memo error under bursty arrivals (CV 4) and its burst of prompts are what
    `python benchmarks/serving_memo_error.py` prints for Qwen3-30B-A3B."""
    script = load_script(ROOT / "benchmarks" / "serving_memo_error.py")
    model = "qwen3-30b-a3b"
    mine = script.row(script.cell(model, 4.0, 500, 40))
    assert mine == _doc_row(f"| {model} | 1 | 50 | 4 |")
    burst = script.burst_ttft(model)
    assert abs(burst["memo"] - burst["exact"]) / burst["exact"] < 0.01
    assert script.burst_row(model, burst) in DOC.read_text(encoding="utf-8").splitlines()


@pytest.mark.slow
def test_the_disaggregated_max_rate_brackets_of_gpt_oss(capsys):
    """docs/serving.md's largest rates meeting the SLOs on GPT-OSS-120B, colocated and split 2+2, are
    the brackets the two `serve --max-rate` commands it names print."""
    import json
    import re

    from sievesim.cli import main

    common = ["serve", "--model", "gpt-oss-120b", "--gpus", "4", "--policy", "sieve", "--requests", "1000",
              "--arrival-window", "10", "--bisect-steps", "2", "--gpu-model", "roofline", "--json"]
    brackets = []
    for extra in (["--max-rate", "300:400"], ["--prefill-gpus", "2", "--max-rate", "300:600"]):
        assert main(common + extra) == 0
        out = json.loads(capsys.readouterr().out)
        out = out[0] if isinstance(out, list) else out
        assert out["answer"] == "between"
        brackets.append("{:g} .. {:g}".format(*out["bracket"]))
    text = re.sub(r"\s+", " ", DOC.read_text(encoding="utf-8"))
    assert f"steady-state window): colocated {brackets[0]} requests/s, 2+2 {brackets[1]}." in text, brackets
