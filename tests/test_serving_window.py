"""The steady-state window (issue 68, item 2): which requests it holds, goodput and latencies over it
by hand, the whole run beside it in the JSON, two policies that meet every SLO get the same window
goodput whatever their drain, and a run too short for a steady state warns on stderr naming what
to raise."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sievesim.cli import main
from sievesim.serving import SchedulerConfig, ServingSimulator, poisson_requests
from sievesim.serving.metrics import WINDOW_EDGE, steady_window, summary

MODEL = "qwen3-30b-a3b"
SMALL = ["--model", MODEL, "--max-batch", "16", "--token-budget", "256", "--max-model-len", "4096"]


def test_the_window_leaves_out_the_first_and_last_tenth_of_the_arrivals():
    arrival = np.arange(100, dtype=float)
    scheduled = arrival + 0.5
    finish = arrival + 3.0
    w = steady_window(arrival, scheduled, finish)
    assert WINDOW_EDGE == 0.1
    assert (w["first"], w["stop"], w["requests"]) == (10, 90, 80)
    assert (w["start_s"], w["end_s"], w["warmup_s"], w["service_s"]) == (10.0, 90.0, 10.0, 2.5)
    assert w["reached"] and not w["empty"] and w["arrival_window_s"] == 25.0
    # a service longer than the warm-up: not reached, and the span that would reach it
    w = steady_window(arrival, scheduled, arrival + 20.0)
    assert not w["reached"] and w["arrival_window_s"] == 195.0
    # a window no request of which finished
    w = steady_window(arrival, scheduled, np.full(100, np.nan))
    assert not w["reached"] and w["arrival_window_s"] is None
    # too few requests, or every arrival at one instant: empty
    assert steady_window(np.array([0.0, 1.0]), np.zeros(2), np.ones(2))["empty"]
    assert steady_window(np.zeros(50), np.zeros(50), np.ones(50))["empty"]
    assert steady_window(np.zeros(0), np.zeros(0), np.zeros(0))["empty"]


@pytest.fixture(scope="module")
def served():
    sims = {p: ServingSimulator(MODEL, gpus=1, policy=p, scheduler=SchedulerConfig(max_batch=16, token_budget=256),
                                max_model_len=4096, error_samples=0) for p in ("sieve", "noexp")}
    q = poisson_requests(25.0, 120, seed=3, prompt_tokens=64, output_tokens=12, lengths=None)
    return {p: s.run(q, 25.0) for p, s in sims.items()}


def test_window_figures_by_hand_and_the_whole_run_beside_them(served):
    res = served["sieve"]
    d = res.to_dict()
    q, lg = res.requests, res.log
    first, stop = 12, 108                                   # 10 % of 120 at each end
    assert d["window"]["requests"] == stop - first and d["window"]["measured_on"] == "window"
    span = q.arrival_s[stop] - q.arrival_s[first]
    assert d["window"]["start_s"] == q.arrival_s[first] and d["window"]["end_s"] == q.arrival_s[stop]
    assert d["goodput_requests_per_s"] == pytest.approx(res.met[first:stop].sum() / span, rel=1e-12)
    assert d["slo_attainment"] == pytest.approx(res.met[first:stop].mean(), rel=1e-12)
    assert d["ttft_s"] == summary(res.ttft[first:stop])
    assert d["tpot_s"] == summary(res.tpot[first:stop])
    whole = d["whole_run"]
    assert whole["goodput_requests_per_s"] == pytest.approx(res.met.sum() / lg.end_s, rel=1e-12)
    assert whole["ttft_s"] == summary(res.ttft) and whole["slo_attainment"] == res.met.mean()
    assert set(whole) == {"ttft_s", "tpot_s", "e2e_s", "queue_s", "goodput_requests_per_s", "slo_attainment",
                          "meets_slos"}
    assert d["window"]["reached"]                           # 12 arrivals (~0.5 s) against a service of ~0.05 s


def test_two_policies_meeting_every_slo_have_the_same_window_goodput(served):
    a, b = (served[p].to_dict() for p in ("sieve", "noexp"))
    assert a["slo_attainment"] == b["slo_attainment"] == 1.0
    assert a["goodput_requests_per_s"] == b["goodput_requests_per_s"]      # the same arrivals, every one met
    # the whole run divides by a duration that includes each policy's own drain
    assert a["whole_run"]["goodput_requests_per_s"] != b["whole_run"]["goodput_requests_per_s"]


def test_a_short_run_warns_naming_what_to_raise(capsys):
    assert main(["serve", *SMALL, "--rate", "20", "--requests", "30", "--json"]) == 0
    cap = capsys.readouterr()
    d = json.loads(cap.out)
    assert not d["window"]["reached"]
    line = next(x for x in cap.err.splitlines() if x.startswith("warning: sieve"))
    assert "too short for a steady state" in line and "--arrival-window" in line and "--requests" in line
    suggested = d["window"]["suggested_arrival_window_s"]
    assert f"--arrival-window (to about {suggested:g} s)" in line


def test_a_long_enough_run_states_its_window_and_does_not_warn(capsys):
    assert main(["serve", *SMALL, "--rate", "25", "--requests", "120", "--prompt-tokens", "64",
                 "--output-tokens", "12", "--seed", "3"]) == 0
    cap = capsys.readouterr()
    assert "warning" not in cap.err
    assert "steady-state window: 96 requests arriving" in cap.out


def test_a_burst_has_no_window_and_reports_the_whole_run(tmp_path, capsys):
    trace = tmp_path / "burst.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n" + "0,64,4\n" * 8)
    assert main(["serve", *SMALL, "--trace", str(trace), "--json"]) == 0
    cap = capsys.readouterr()
    d = json.loads(cap.out)
    assert d["window"]["measured_on"] == "whole run" and not d["window"]["reached"]
    for key in ("goodput_requests_per_s", "slo_attainment", "ttft_s"):
        assert d[key] == d["whole_run"][key]
    assert "warning: sieve" in cap.err and "a longer trace" in cap.err
