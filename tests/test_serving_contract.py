"""Issue 69, serving: the memo outside its grid, and the examples of the issue as commands a user types.

Every example of the issue's list that a serving command or the serving API can be given is here or in
the test named beside its class (tests/test_serving_traces.py: trace dialects and bounds;
tests/test_serving_answers.py, tests/test_sweep_files.py: outputs, damaged searches, locks;
tests/test_plot.py: plot text and numbers; tests/test_contract_messages.py: /dev/full, base).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sievesim.cli import main
from sievesim.errors import ConfigError, SievesimError
from sievesim.serving import ServingSimulator, simulate_serving
from sievesim.serving.pricing import IterationPricer, prefill_grid
from sievesim.serving.scheduler import SchedulerConfig
from sievesim.serving.workload import Requests

MODEL = "qwen3-30b-a3b"
SMALL = ["--requests", "2", "--max-batch", "2", "--token-budget", "32", "--max-model-len", "64", "--error-samples", "0"]
FIXED = ["--prompt-tokens", "8", "--output-tokens", "2"]


# ------------------------------------------------------------------------------------------------
# item 7: the memo refuses to extrapolate; what lies outside its grid is priced exactly and counted


def test_a_tiny_token_budget_gets_a_grid_of_every_count():
    assert prefill_grid(4) == [0, 1, 2, 3, 4]
    assert prefill_grid(1) == [0, 1]
    assert prefill_grid(8) == [0, 8] and prefill_grid(2048)[:3] == [0, 8, 16] and prefill_grid(2048)[-1] == 2048


@pytest.fixture(scope="module")
def pricer():
    return IterationPricer(MODEL, "b200", gpus=1, policy="sieve", max_batch=4, max_prefill_tokens=64,
                           max_context=256)


def _batch(ctx, pf):
    z = np.zeros(len(pf), dtype=np.int64)
    return (np.array(ctx, dtype=np.int64), np.zeros(len(ctx), dtype=np.int64), np.array(pf, dtype=np.int64), z, z)


@pytest.mark.parametrize("ctx, pf, why", [([], [4], "prefill alone of 4 tokens, below 8"),
                                          ([], [3, 2], "prefill alone of 5 tokens, below 8"),
                                          ([8, 9], [], "decode context 8.5 below 16 tokens"),
                                          ([3], [2], "decode context 3 below 16 tokens")])
def test_an_iteration_outside_the_grid_is_priced_exactly_and_counted(pricer, ctx, pf, why):
    b = _batch(ctx, pf)
    assert pricer.outside_grid(b[0], b[1], b[2]) == why
    before = pricer.stats()
    t, energy = pricer.memo_priced(*b)
    assert (t, None if energy is None else energy.tolist()) == tuple(
        x if i == 0 or x is None else x.tolist() for i, x in enumerate(pricer.exact_priced(*b)))
    after = pricer.stats()
    assert after["outside_grid_exact"] == before["outside_grid_exact"] + 1
    assert after["lookups"] == before["lookups"]            # no memo lookup, no grid point priced
    assert pricer.memo_priced(*b)[0] == t                   # the same batch again: the same price, kept
    assert pricer.stats()["exact_steps"] == after["exact_steps"]


@pytest.mark.parametrize("ctx, pf", [([100, 200], [16]), ([16], []), ([], [8]), ([40], [3])])
def test_an_iteration_inside_the_grid_is_memoised(pricer, ctx, pf):
    b = _batch(ctx, pf)
    assert pricer.outside_grid(b[0], b[1], b[2]) is None
    before = pricer.stats()
    pricer.memo_priced(*b)
    after = pricer.stats()
    assert after["outside_grid_exact"] == before["outside_grid_exact"] and after["lookups"] == before["lookups"] + 1


def _serve(exact: bool, **kw):
    return simulate_serving(MODEL, rate=5.0, requests=20, prompt_tokens=8, output_tokens=2, lengths=None,
                            token_budget=4, exact=exact, error_samples=0 if exact else 20, **kw).to_dict()


def test_a_token_budget_of_4_agrees_with_exact_steps():
    # before: every prefill-only iteration of 4 tokens cost 8 tokens' step and 1 to 3 tokens beside
    # decode were interpolated towards 8 (TTFT p50 +6.9 %, e2e +4.7 % against --exact on this run)
    memo, exact = _serve(False), _serve(True)
    assert memo["pricing"]["outside_grid_exact"] > 0 and exact["pricing"]["outside_grid_exact"] == 0
    for key in ("ttft_s", "e2e_s", "tpot_s"):
        assert memo[key]["p50"] == pytest.approx(exact[key]["p50"], rel=5e-3), key
    assert memo["pricing"]["error_vs_exact"]["mean_abs_rel"] < 5e-3
    doc = " ".join((Path(__file__).parent.parent / "docs" / "serving.md").read_text().split())
    said = (f"TTFT p50 {memo['ttft_s']['p50'] * 1e3:.3f} ms with the memo and {exact['ttft_s']['p50'] * 1e3:.3f} ms "
            f"with `--exact`", f"e2e p50 {memo['e2e_s']['p50'] * 1e3:.3f} ms and {exact['e2e_s']['p50'] * 1e3:.3f} ms",
            f"with {memo['pricing']['outside_grid_exact']} iterations priced exactly")
    for text in said:
        assert text in doc, text


def test_the_json_says_how_many_iterations_were_priced_exactly(capsys):
    argv = ["serve", "--model", MODEL, "--rate", "5", "--json", "--token-budget", "4"] + SMALL + FIXED
    assert main(argv) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["pricing"]["mode"] == "memo" and d["pricing"]["outside_grid_exact"] > 0


# ------------------------------------------------------------------------------------------------
# messages that name what the user gave


def _cli(argv, capsys):
    rc = main(["serve", "--model", MODEL] + argv)
    captured = capsys.readouterr()
    return rc, captured.err


@pytest.mark.parametrize("argv, needle", [
    (["--rate", "5", "--arrival-window", "1e12"] + SMALL,
     "--arrival-window = 1000000000000.0: expected at most 2e+06 s at 5 requests/s (rate x window = 5e+12 requests"),
    (["--max-rate", "1:10", "--arrival-window", "1e12"] + SMALL, "--arrival-window = 1000000000000.0: expected at most "
                                                                 "1e+06 s at 10 requests/s"),
    (["--rate", "5", "--horizon", "1e-300"] + SMALL + FIXED,
     "horizon_s (--horizon) = 1e-300: expected a time after the first arrival (0.0132768 s)"),
    (["--rate", "1", "--model", "qwen3.5-397b-a17b", "--gpus", "12", "--prefill-gpus", "8", "--requests", "5"],
     "decode pool (--gpus 12 minus --prefill-gpus 8 = 4 GPUs): qwen3.5-397b-a17b on 4 x b200: needs"),
    (["--requests", "0", "--rate", "1"], "--requests = 0: expected an integer from 1 to 10000000 (requests one serving"),
    (["--max-rate", "1:2", "--bisect-steps", "0"] + SMALL,
     "--bisect-steps = 0: expected an integer from 1 to 40 (halvings of a max-rate bracket)"),
    (["--rate", "1", "--bisect-steps", "3"] + SMALL, "--bisect-steps = 3: expected only with --max-rate LO:HI"),
    (["--max-rate", "1:2", "--requests-csv", "r.csv"] + SMALL + FIXED,
     "--requests-csv = 'r.csv': expected no --requests-csv with --max-rate"),
    (["--max-rate", "1:2", "--timeline-csv", "r.csv"] + SMALL, "expected no --timeline-csv with --max-rate"),
    (["--max-rate", "1:2", "--plot", "p.png"] + SMALL, "--plot = 'p.png': expected no --plot with --max-rate"),
    (["--rate", "1", "--pimoe-unit", "channel"] + SMALL, "--pimoe-unit = 'channel': expected only with policy pimoe"),
    (["--rate", "1", "--max-rate", "1:2"] + SMALL, "--rate = 1.0: expected no --rate with --max-rate"),
    (["--rate", "1", "--lengths", "bogus"] + SMALL + FIXED,
     "--lengths = 'bogus': expected no length preset with both --prompt-tokens and --output-tokens"),
    (["--rate", "1", "--requests-csv", "a.csv", "--timeline-csv", "a.csv"] + SMALL,
     "--timeline-csv = 'a.csv': expected a file other than --requests-csv's"),
    (["--rate", "1", "--plot", "p.txt"] + SMALL, "--plot = 'p.txt': expected a file ending in .png, .svg"),
])
def test_a_refused_option_names_itself(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, err = _cli(argv, capsys)
    assert rc == 2 and err.count("\n") == 1 and needle in err, err
    assert list(tmp_path.iterdir()) == []                     # refused before anything is written


@pytest.mark.parametrize("option", ["--requests-csv", "--timeline-csv", "--cv", "--lengths", "--prompt-tokens"])
def test_options_beside_a_trace_are_refused_and_the_trace_kept(option, capsys, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,8,2\n0.5,8,2\n")
    value = {"--requests-csv": str(trace), "--timeline-csv": str(trace), "--cv": "2", "--lengths": "math-500",
             "--prompt-tokens": "8"}[option]
    rc, err = _cli(["--trace", str(trace), option, value] + SMALL, capsys)
    assert rc == 2 and option in err and "--trace" in err, err
    assert trace.read_text().startswith("arrival_s,prompt_tokens")


@pytest.mark.parametrize("rows, needle", [
    ("0,8,2\n1e17,8,2\n", "line 3: arrival_s = '1e17': expected a number of seconds from 0 to 1e+12"),
    ("0,8,2\n1,5000000000000000000,2\n", "line 3: prompt_tokens = '5000000000000000000': expected an integer from 1"),
    ("0,8,2\n1,8,40000\n", "line 3: request 1: prompt + output tokens = 40008: expected at most max_model_len = 32768"),
])
def test_a_trace_row_is_named_by_its_file_and_line(rows, needle, capsys, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n" + rows)
    rc, err = _cli(["--trace", str(trace)], capsys)
    assert rc == 2 and f"{trace}: " in err and needle in err, err


def test_check_requests_names_the_file_and_line_from_the_api(tmp_path):
    from sievesim.serving import read_trace

    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival_s": 0, "prompt_tokens": 8, "output_tokens": 2}\n\n'
                     '{"arrival_s": 1, "prompt_tokens": 60, "output_tokens": 9}\n')
    q = read_trace(str(trace))
    assert q.lines.tolist() == [1, 3] and q.head(1).lines.tolist() == [1]
    sim = ServingSimulator(MODEL, scheduler=SchedulerConfig(2, 32), max_model_len=64, error_samples=0)
    with pytest.raises(ConfigError, match=rf"{trace}: line 3: request 1: prompt \+ output tokens = 69: expected at "
                                          "most max_model_len = 64"):
        sim.run(q)
    made = Requests(np.array([0.0, 1.0]), np.array([8, 60]), np.array([2, 9]))
    with pytest.raises(ConfigError, match=r"request 1 \(row 2\): prompt \+ output tokens = 69"):
        sim.run(made)
    with pytest.raises(TypeError, match="lines"):
        Requests(np.array([0.0]), np.array([8]), np.array([2]), lines=np.array([1, 2]))


def test_a_horizon_before_the_first_arrival_is_refused_by_the_api():
    sim = ServingSimulator(MODEL, scheduler=SchedulerConfig(2, 32, horizon_s=0.5), max_model_len=64, error_samples=0)
    with pytest.raises(SievesimError, match=r"horizon_s \(--horizon\) = 0.5: expected a time after the first arrival "
                                            r"\(1 s\)"):
        sim.run(Requests(np.array([1.0, 2.0]), np.array([8, 8]), np.array([2, 2])))


def test_a_run_where_nothing_finishes_is_warned_about(capsys, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,8,2\n0.5,8,2\n")
    rc, err = _cli(["--trace", str(trace), "--horizon", "1e-300", "--json"] + SMALL, capsys)
    assert rc == 0
    assert "warning: sieve: no request finished before the horizon (1e-300 s; 1 arrived): TTFT, TPOT and e2e are " \
           "not defined; raise --horizon" in err, err


def test_the_policy_option_the_issue_named_is_documented_as_valid(capsys):
    # --policy-option scalar_steps=0 is the documented "vectorise at once" (the result does not depend on it)
    from sievesim.policies.sieve import Sieve

    assert Sieve.options["scalar_steps"].lo == 0
    rc, err = _cli(["--rate", "5", "--policy-option", "scalar_steps=0", "--json"] + SMALL + FIXED, capsys)
    assert rc == 0, err


def test_arrivals_where_the_clock_is_coarse_are_warned_about():
    # a trace row 1e17 s after the one before is refused as read (above); up to 1e12 s is served, and
    # past about 8.6e9 s the clock's step passes a microsecond: the run says so
    sim = ServingSimulator(MODEL, scheduler=SchedulerConfig(2, 32), max_model_len=64, error_samples=0)
    with pytest.warns(UserWarning, match=r"the last request arrives at 1e\+11 s, where the simulated clock moves in "
                                         r"steps of 1.5e-05 s \(1.5% of a 1 ms iteration\)"):
        sim.run(Requests(np.array([0.0, 1e11]), np.array([8, 8]), np.array([2, 2])))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sim.run(Requests(np.array([0.0, 1e9]), np.array([8, 8]), np.array([2, 2])))
