"""The serving result in a notebook: a one-line repr (colocated and disaggregated), to_pandas() of
the requests and the iterations, run(requests) taking the rate the requests were drawn at; and one
vocabulary on the command line (PIMoE with its unit, each option's own unit in its errors)."""
from __future__ import annotations

import json
import math
import sys
import types

import numpy as np
import pytest

from sievesim.cli import main
from sievesim.errors import ConfigError
from sievesim.serving import SchedulerConfig, ServingSimulator, poisson_requests, simulate_serving
from sievesim.serving.workload import Requests

SMALL = dict(rate=5, requests=6, prompt_tokens=8, output_tokens=2, lengths=None, max_batch=2, token_budget=32,
             max_model_len=64, error_samples=0, gpu_model="roofline")


@pytest.fixture(scope="module")
def served():
    return simulate_serving("qwen3-30b-a3b", **SMALL)


def test_a_disaggregated_result_prints_in_one_line_too():
    r = simulate_serving("qwen3-30b-a3b", gpus=2, prefill_gpus=1, policy="pimoe", **SMALL)
    text = repr(r)
    assert type(r).__name__ == "DisaggResult"
    assert "\n" not in text and len(text) < 300, text[:400]
    assert text.startswith("<DisaggResult qwen3-30b-a3b on 2 x b200, policy pimoe(channel), rate 5/s")
    assert "6/6 requests finished" in text


def test_to_pandas_without_pandas_says_how_to_install_it(served, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)       # "import pandas" raises ImportError
    for table in ("requests", "iterations"):
        with pytest.raises(ImportError, match=r"pip install pandas") as err:
            served.to_pandas(table)
        assert f"{table[:-1]}_rows()" in str(err.value)


def test_to_pandas_hands_pandas_the_rows_of_the_table_asked_for(served, monkeypatch):
    seen = []
    fake = types.SimpleNamespace(DataFrame=lambda rows: seen.append(rows) or "frame")
    monkeypatch.setitem(sys.modules, "pandas", fake)
    assert served.to_pandas() == "frame" and served.to_pandas("iterations") == "frame"
    requests, iterations = seen
    assert len(requests) == 6 and requests == served.request_rows()
    assert len(iterations) == len(served.log.it_time) and iterations == served.iteration_rows()
    with pytest.raises(ConfigError, match=r"table = 'request': expected 'requests' or 'iterations'"):
        served.to_pandas("request")


def test_to_pandas_with_pandas(served):
    pd = pytest.importorskip("pandas")
    df = served.to_pandas()
    assert isinstance(df, pd.DataFrame) and len(df) == 6 and "energy_j" in df.columns
    assert len(served.to_pandas("iterations")) == len(served.log.it_time)


def test_run_takes_the_rate_from_the_requests():
    sim = ServingSimulator("qwen3-30b-a3b", scheduler=SchedulerConfig(max_batch=2, token_budget=32),
                           max_model_len=64, error_samples=0, gpu_model="roofline")
    q = poisson_requests(5.0, 6, prompt_tokens=8, output_tokens=2, lengths=None)
    assert q.rate == 5.0 and q.head(3).rate == 5.0
    once = sim.run(q).to_dict()
    twice = sim.run(q, 5.0).to_dict()                       # the old signature still works
    assert once["rate"] == 5.0
    for d in (once, twice):
        d.pop("wall_s"), d.pop("pricing")
    assert once == twice
    # a workload without a drawn rate (a trace): the observed rate, (requests - 1) / last arrival
    traced = Requests(q.arrival_s, q.prompt_tokens, q.output_tokens, "a trace")
    observed = sim.run(traced).settings["rate"]
    assert observed == pytest.approx(5 / q.arrival_s[-1]) and observed != 5.0
    assert sim.run(traced, 7.0).settings["rate"] == 7.0     # given, it wins


@pytest.mark.parametrize("rate", [0.0, -1.0, math.inf, math.nan, True, "5"])
def test_a_bad_drawn_rate_is_named(rate):
    with pytest.raises(ConfigError, match=r"rate = .*expected None or requests per second"):
        Requests(np.array([0.0]), np.array([1]), np.array([1]), "", rate)


def test_serve_prints_pimoe_with_its_unit(capsys):
    argv = ["serve", "--model", "qwen3-30b-a3b", "--policy", "sieve,pimoe", "--rate", "5", "--requests", "6",
            "--prompt-tokens", "8", "--output-tokens", "2", "--max-batch", "2", "--token-budget", "32",
            "--max-model-len", "64", "--error-samples", "0", "--gpu-model", "roofline", "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = [line.split()[0] for line in out.splitlines()
            if line.split() and line.split()[0].startswith(("sieve", "pimoe"))]
    assert "pimoe(channel)" in rows and "pimoe" not in rows and "sieve" in rows
    assert main(argv + ["--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r.get("pimoe_unit") for r in records] == [None, "channel"]


@pytest.mark.parametrize("option, value, unit", [("--cv", "abc", "a coefficient of variation, no unit"),
                                                 ("--rate", "x", "requests per second"),
                                                 ("--attainment", "y", "a share from 0 to 1")])
def test_serve_errors_name_each_options_own_unit(capsys, option, value, unit):
    argv = ["serve", "--model", "qwen3-30b-a3b", "--rate", "5", option, value]
    if option == "--rate":
        argv = ["serve", "--model", "qwen3-30b-a3b", option, value]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{option} = '{value}'" in err and unit in err and "seconds" not in err


@pytest.mark.parametrize("command", ["sweep", "serve"])
def test_help_states_pimoes_real_default_unit(capsys, command):
    from sievesim.policies import DEFAULT_PIMOE_UNIT
    try:
        rc = main([command, "--help"])
    except SystemExit as exc:          # argparse's own exit, where main lets it through
        rc = exc.code
    assert rc in (0, None)
    text = " ".join(capsys.readouterr().out.split())
    assert f"(default {DEFAULT_PIMOE_UNIT}, the paper's)" in text and "default stack" not in text
