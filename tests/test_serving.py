"""Serving (issue 24): conservation, Little's law, the closed-form case, saturation, determinism, bad
input. The scheduler's invariants run on a stand-in iteration price (fast, any seed); the checks
of the whole simulator run Qwen3-30B-A3B on one GPU with short requests (cheap steps)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sievesim.cli import main
from sievesim.errors import SievesimError, TraceError
from sievesim.serving import (IterationPricer, SchedulerConfig, ServingSimulator, SloTargets, poisson_requests,
                              read_trace)
from sievesim.serving.metrics import littles_law_ratio
from sievesim.serving.scheduler import run_schedule

MODEL = "qwen3-30b-a3b"


def _price(step_s: float = 0.01, per_token_s: float = 1e-5):
    """A stand-in iteration price: a fixed cost plus a cost per token [s]."""
    def price(dec_ctx, dec_gpu, pf_len, pf_off, pf_gpu):
        return step_s + per_token_s * (dec_ctx.size + int(pf_len.sum()))
    return price


def _schedule(q, cfg=SchedulerConfig(), *, gpus=1, blocks=10_000, block_size=16, price=None):
    return run_schedule(q.arrival_s, q.prompt_tokens, q.output_tokens, cfg, gpus=gpus, blocks_per_gpu=blocks,
                        blocks_for=lambda n: -(-n // block_size), price=price or _price())


def _in_system_matches(q, log) -> None:
    """At every iteration's start: waiting + running = arrived - finished (no request lost or in two places)."""
    for t, w, r in zip(log.it_start, log.it_waiting, log.it_running):
        arrived = int(np.count_nonzero(q.arrival_s <= t))
        done = int(np.count_nonzero(log.finish_s <= t))
        assert w + r == arrived - done


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_conservation_with_and_without_preemption(seed):
    q = poisson_requests(40.0, 150, seed=seed, lengths="hh-rlhf")
    q = type(q)(q.arrival_s, np.minimum(q.prompt_tokens, 512), np.minimum(q.output_tokens, 256), q.description)
    for blocks, gpus in ((100_000, 1), (120, 1), (90, 2)):
        log = _schedule(q, SchedulerConfig(max_batch=32, token_budget=512), gpus=gpus, blocks=blocks)
        assert np.all(~np.isnan(log.finish_s))
        assert np.array_equal(log.generated, q.output_tokens)            # every output token, once
        assert np.all(log.first_token_s >= q.arrival_s) and np.all(log.finish_s >= log.first_token_s)
        assert np.all(log.scheduled_s >= q.arrival_s)
        assert max(log.it_running) <= 32
        _in_system_matches(q, log)
        if blocks < 1000:
            assert log.preemptions.sum() > 0                                # the small pools do preempt
        else:
            assert log.preemptions.sum() == 0


def test_horizon_reports_unfinished_requests():
    q = poisson_requests(200.0, 400, seed=0, prompt_tokens=64, output_tokens=50, lengths=None)
    log = _schedule(q, SchedulerConfig(max_batch=8, token_budget=256, horizon_s=1.0))
    arrived = int(np.count_nonzero(q.arrival_s < 1.0))
    finished = int(np.count_nonzero(~np.isnan(log.finish_s)))
    assert 0 < finished < arrived
    assert log.it_start[-1] < 1.0 <= log.end_s


def test_littles_law_on_a_long_stable_run():
    rate = 8.0
    q = poisson_requests(rate, 4000, seed=5, lengths="hh-rlhf")
    log = _schedule(q, SchedulerConfig(max_batch=64, token_budget=1024), price=_price(0.004, 2e-5))
    in_system = np.asarray(log.it_waiting) + np.asarray(log.it_running)
    ratio = littles_law_ratio(q.arrival_s, log.finish_s, log.end_s, log.it_start, log.it_time, in_system)
    assert abs(ratio - 1.0) < 0.05


def test_saturation_queueing_grows_with_the_horizon_only_above_capacity():
    # 4 requests of 10 tokens per 10 iterations of 10 ms: capacity about 40 requests/s
    cfg = SchedulerConfig(max_batch=4, token_budget=64)

    def mean_queue(rate, n):
        q = poisson_requests(rate, n, seed=3, prompt_tokens=8, output_tokens=10, lengths=None)
        log = _schedule(q, cfg, price=_price(0.01, 0.0))
        return float(np.mean(log.scheduled_s - q.arrival_s))

    assert mean_queue(60.0, 800) > 1.8 * mean_queue(60.0, 400) > 0.5
    low_short, low_long = mean_queue(20.0, 400), mean_queue(20.0, 800)
    assert low_long < 1.3 * low_short + 0.005 and low_long < 0.05


@pytest.fixture(scope="module")
def sim():
    return ServingSimulator(MODEL, gpus=1, policy="sieve", scheduler=SchedulerConfig(max_batch=16, token_budget=256),
                            max_model_len=4096, error_samples=5)


def test_one_request_at_a_time_gives_prefill_time_and_batch1_steps(sim):
    """Rate far below capacity: TTFT = the prefill step, TPOT = the mean of the batch-1 steps."""
    q = poisson_requests(0.05, 4, seed=0, prompt_tokens=64, output_tokens=6, lengths=None)
    exact = ServingSimulator(MODEL, gpus=1, policy="sieve", scheduler=SchedulerConfig(max_batch=16, token_budget=256),
                             max_model_len=4096, exact=True)
    res = exact.run(q, 0.05)
    ref = IterationPricer(exact.model, exact.hw, gpus=1, policy="sieve", max_batch=16, max_prefill_tokens=256,
                          max_context=4096)          # a fresh pricer: the price is a function of the batch
    one, none = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    ttft = ref.exact_s(none, none, np.array([64]), one - 0, one - 0)
    steps = [ref.exact_s(np.array([64 + k]), one - 0, none, none, none) for k in range(1, 6)]
    # exact up to the rounding of the clock (times are added to arrival times)
    assert np.allclose(res.ttft, ttft, rtol=1e-9, atol=0)
    assert np.allclose(res.tpot, np.mean(steps), rtol=1e-9, atol=0)
    assert np.all(res.log.scheduled_s == q.arrival_s)
    # the memo: batch 1 and prompt 64 are grid points (another routing draw), contexts in between
    memo = sim.run(q, 0.05)
    assert np.allclose(memo.ttft, ttft, rtol=0.01, atol=0)
    assert np.allclose(memo.tpot, np.mean(steps), rtol=0.01)


def test_served_run_reports_the_issue_fields_and_conserves(sim):
    q = poisson_requests(20.0, 60, seed=1, lengths="hh-rlhf").head(60)
    q = type(q)(q.arrival_s, np.minimum(q.prompt_tokens, 256), np.minimum(q.output_tokens, 24), q.description)
    d = sim.run(q, 20.0).to_dict()
    for key in ("ttft_s", "tpot_s", "e2e_s"):
        assert set(d[key]) == {"mean", "p50", "p90", "p99"}
        assert d[key]["p50"] <= d[key]["p90"] <= d[key]["p99"]
    assert d["finished_requests"] == 60 and d["output_tokens"] == int(q.output_tokens.sum())
    assert 0 < d["whole_run"]["goodput_requests_per_s"] <= d["throughput_requests_per_s"]
    assert d["throughput_tokens_per_s"] == pytest.approx(q.output_tokens.sum() / d["duration_s"])
    err = d["pricing"]["error_vs_exact"]
    assert err["samples"] == 5 and err["mean_abs_rel"] < 0.05
    assert d["pricing"]["corner_hit_rate"] > 0.5


@pytest.mark.parametrize("pools", [[], ["--gpus", "2", "--prefill-gpus", "1"]], ids=["colocated", "disaggregated"])
def test_determinism_same_seed_same_bytes(tmp_path, capsys, pools):
    argv = ["serve", "--model", MODEL, *pools, "--rate", "30", "--requests", "30", "--output-tokens", "12",
            "--max-batch", "16", "--token-budget", "256", "--max-model-len", "4096", "--json", "--seed", "4"]
    outs = []
    for _ in range(2):
        assert main(argv) == 0
        d = json.loads(capsys.readouterr().out)
        d.pop("wall_s")
        outs.append(json.dumps(d, sort_keys=True))
    assert outs[0] == outs[1]
    assert main(argv[:-2] + ["--seed", "5"]) == 0
    other = json.loads(capsys.readouterr().out)
    other.pop("wall_s")
    assert json.dumps(other, sort_keys=True) != outs[0]


def test_trace_formats_and_column_names(tmp_path):
    azure = tmp_path / "azure.csv"
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
                     "2023-11-16 18:15:47.1805900,396,109\n")
    q = read_trace(str(azure))
    assert q.arrival_s.tolist() == pytest.approx([0.0, 0.5])
    assert q.prompt_tokens.tolist() == [374, 396] and q.output_tokens.tolist() == [44, 109]
    mooncake = tmp_path / "mooncake.jsonl"
    mooncake.write_text('{"timestamp": 0, "input_length": 100, "output_length": 5, "hash_ids": [1]}\n'
                        '{"timestamp": 1500, "input_length": 200, "output_length": 7, "hash_ids": [2]}\n')
    assert read_trace(str(mooncake)).arrival_s.tolist() == [0.0, 1.5]
    burst = tmp_path / "burst.csv"
    burst.write_text("Timestamp,Model,Request tokens,Response tokens\n5,ChatGPT,10,3\n7.5,GPT-4,20,4\n")
    q = read_trace(str(burst))
    assert q.arrival_s.tolist() == [0.0, 2.5] and q.output_tokens.tolist() == [3, 4]


@pytest.mark.parametrize("text, needle", [
    ("arrival_s,prompt_tokens,output_tokens\n0,10,5\n2,10,5\n1,10,5\n", "line 4"),
    ("arrival_s,prompt_tokens,output_tokens\n0,10,5\n1,ten,5\n", "line 3: prompt_tokens = 'ten'"),
    ("arrival_s,prompt_tokens,output_tokens\n0,10,0\n", "line 2: output_tokens = '0'"),
    ("arrival_s,prompt_tokens,output_tokens\n0,10\n", "line 2"),
    ("when,prompt_tokens,output_tokens\n0,10,3\n", "no arrival time column"),
])
def test_bad_trace_rows_name_their_line(tmp_path, text, needle):
    f = tmp_path / "t.csv"
    f.write_text(text)
    with pytest.raises(TraceError, match=needle):
        read_trace(str(f))


@pytest.mark.parametrize("extra, needle", [
    (["--rate", "0"], "--rate = 0.0"),
    (["--rate", "-2"], "--rate = -2.0"),
    (["--rate", "1", "--horizon", "0"], "--horizon = '0'"),
    (["--rate", "1", "--ttft-slo", "-1"], "--ttft-slo = '-1'"),
    (["--rate", "1", "--tpot-slo", "-0.01"], "--tpot-slo = '-0.01'"),
    (["--rate", "1", "--prompt-tokens", "5000", "--output-tokens", "10", "--max-model-len", "4096"],
     "max_model_len = 4096"),
    (["--rate", "1", "--prompt-tokens", "150000", "--output-tokens", "1", "--max-model-len", "1000000",
      "--memory-utilization", "0.33"], "fits one GPU"),
])
def test_bad_input_is_one_line_and_exit_2(extra, needle, capsys):
    assert main(["serve", "--model", MODEL, "--requests", "3"] + extra) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and needle in err, err


def test_bad_trace_through_the_cli(tmp_path, capsys):
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,5\n2,10,5\n1,10,5\n")
    assert main(["serve", "--model", MODEL, "--trace", str(f)]) == 2
    assert "line 4" in capsys.readouterr().err


def test_api_refuses_bad_values():
    with pytest.raises(SievesimError, match="rate"):
        poisson_requests(0.0, 5)
    with pytest.raises(SievesimError, match="horizon_s"):
        ServingSimulator(MODEL, scheduler=SchedulerConfig(horizon_s=0.0))
    with pytest.raises(SievesimError, match="slo tpot_s"):
        ServingSimulator(MODEL, slo=SloTargets(tpot_s=-1.0))


@pytest.mark.slow
def test_littles_law_and_memo_error_on_the_simulated_system():
    """The whole simulator on a long stable run (hh-rlhf lengths at 4 requests/s)."""
    s = ServingSimulator(MODEL, gpus=1, policy="sieve", error_samples=20)
    d = s.run(poisson_requests(4.0, 1500, seed=2), 4.0).to_dict()
    assert abs(d["littles_law_ratio"] - 1.0) < 0.05
    assert d["pricing"]["error_vs_exact"]["mean_abs_rel"] < 0.02


@pytest.mark.parametrize("cv", [0.5, 1.0, 3.0])
def test_arrivals_have_the_rate_and_the_cv(cv):
    q = poisson_requests(5.0, 20000, seed=1, cv=cv, prompt_tokens=10, output_tokens=2, lengths=None)
    gaps = np.diff(np.concatenate([[0.0], q.arrival_s]))
    assert gaps.mean() == pytest.approx(0.2, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.08)


def test_a_trace_served_through_the_cli(tmp_path, capsys):
    f = tmp_path / "t.jsonl"
    f.write_text("".join(f'{{"arrival_ms": {250 * i}, "prompt_tokens": {20 + i}, "output_tokens": 4}}\n'
                         for i in range(8)))
    rows = tmp_path / "r.csv"
    assert main(["serve", "--model", MODEL, "--trace", str(f), "--max-batch", "16", "--token-budget", "256",
                 "--max-model-len", "4096", "--json", "--requests-csv", str(rows),
                 "--plot", str(tmp_path / "b.png")]) == 0
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"
    d = json.loads(capsys.readouterr().out)
    assert d["finished_requests"] == 8 and d["output_tokens"] == 32
    assert d["rate"] == pytest.approx(7 / 1.75)
    lines = rows.read_text().splitlines()
    assert len(lines) == 9 and lines[0].startswith("request,arrival_s,prompt_tokens")


def test_max_rate_bisection_brackets_the_slo_boundary(sim):
    from sievesim.serving import max_rate_under_slos

    slo_sim = ServingSimulator(MODEL, gpus=1, policy="sieve", scheduler=SchedulerConfig(max_batch=8, token_budget=128),
                               slo=SloTargets(ttft_s=0.05, tpot_s=0.05), max_model_len=4096, error_samples=0)
    found = max_rate_under_slos(slo_sim, requests=60, lo=1.0, hi=5000.0, steps=4, prompt_tokens=32, output_tokens=8,
                                lengths=None)
    lo, hi = found["bracket"]
    assert found["max_rate"] == lo and 1.0 <= lo < hi <= 5000.0
    by_rate = {t["rate"]: t for t in found["tried"]}
    assert by_rate[lo]["meets_slos"] and not by_rate[hi]["meets_slos"]
    assert len(found["tried"]) == 2 + 4


def test_arrival_window_sets_the_number_of_requests(capsys):
    assert main(["serve", "--model", MODEL, "--rate", "10", "--arrival-window", "2", "--requests", "5",
                 "--prompt-tokens", "16", "--output-tokens", "4", "--max-batch", "16", "--token-budget", "256",
                 "--max-model-len", "4096", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["requests"] == 20


def test_a_chunk_is_priced_as_the_prompt_covering_its_positions():
    from sievesim.serving.pricing import equivalent_prompt

    length, offset = np.array([100, 100, 7, 1]), np.array([0, 1000, 0, 4095])
    eq = equivalent_prompt(length, offset)
    assert eq[0] == 100 and eq[2] == 7                                # a fresh prompt is itself
    covered = length * offset + length * (length + 1) // 2
    assert np.all(np.abs(eq * (eq + 1) // 2 - covered) <= eq)         # the same positions, to one row
