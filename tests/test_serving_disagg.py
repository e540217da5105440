"""Disaggregated prefill (issue 24): conservation, no request in two places, the closed-form case,
KV transfer time and link contention, preemption, determinism, bad input. The loop's invariants run
on stand-in pools (a fixed iteration price, fast, any seed); the checks of the whole simulator run
Qwen3-30B-A3B on 1 + 1 GPUs with short requests (cheap steps)."""
from __future__ import annotations

import csv
import json
from types import SimpleNamespace

import numpy as np
import pytest

from sievesim.cli import main
from sievesim.errors import SievesimError
from sievesim.hardware import InterconnectSpec
from sievesim.models import get_model
from sievesim.serving import IterationPricer, SchedulerConfig, ServingSimulator, poisson_requests, simulate_serving
from sievesim.serving.disagg import _Loop, run_disaggregated
from sievesim.serving.metrics import littles_law_ratio

MODEL = "qwen3-30b-a3b"
LINK = InterconnectSpec(bandwidth_bytes_per_s_per_direction=1e9, latency_s=1e-5)


def _pool(name, gpus, blocks, step_s=0.01, per_token_s=1e-5, block_size=16):
    """A stand-in pool: ``blocks`` KV blocks per GPU and an iteration price of a fixed cost plus a
    cost per token [s]."""
    def price(dec_ctx, dec_gpu, pf_len, pf_off, pf_gpu):
        return step_s + per_token_s * (dec_ctx.size + int(pf_len.sum()))
    return SimpleNamespace(name=name, gpus=gpus, kv=SimpleNamespace(blocks_per_gpu=blocks),
                           blocks_for=lambda n: -(-n // block_size),
                           pricer=SimpleNamespace(memo_priced=price, exact_priced=price))


def _kv_bytes(tokens):
    return 1e5 * tokens


class _Checked(_Loop):
    """The loop with its invariant checked at every decision: each unfinished arrived request is in
    exactly one place (prefill queue, prefilling, prefilled, on the link, arrived, decoding), and
    the blocks each pool holds add up."""

    def _arrived_transfers(self, t):
        super()._arrived_transfers(t)
        places = [list(self.waiting), self.prefilling, list(self.ready), [r for _, _, r, _ in self.in_flight],
                  self.joining, self.running]
        flat = [r for p in places for r in p]
        assert len(flat) == len(set(flat)), "a request in two places"
        arrived = set(range(self.nxt))
        finished = set(np.flatnonzero(~np.isnan(self.log.prefill.finish_s)).tolist())
        assert set(flat) == arrived - finished
        assert self.in_sys == len(flat)
        held_p = sum(int(self.held[r]) for r in self.prefilling + list(self.ready)) + sum(self._held_p.values())
        assert held_p == sum(self.pools["prefill"].kv.blocks_per_gpu - f for f in self.free["prefill"])
        held_d = sum(int(self.held[r]) for r in self.running + self.joining + [r for _, _, r, _ in self.in_flight])
        assert held_d == sum(self.pools["decode"].kv.blocks_per_gpu - f for f in self.free["decode"])
        assert all(self.held[r] == 0 for r in self.waiting)


def _serve(q, cfg=SchedulerConfig(max_batch=32, token_budget=512), *, gp=1, gd=1, blocks_p=100_000,
           blocks_d=100_000, link=LINK, checked=True):
    cls = _Checked if checked else _Loop
    return cls(q.arrival_s, q.prompt_tokens, q.output_tokens, cfg, _pool("prefill", gp, blocks_p),
               _pool("decode", gd, blocks_d), link, _kv_bytes, False, 0).run()


def _short(q, prompt=512, output=256):
    return type(q)(q.arrival_s, np.minimum(q.prompt_tokens, prompt), np.minimum(q.output_tokens, output),
                   q.description)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_conservation_and_one_place_with_and_without_preemption(seed):
    q = _short(poisson_requests(40.0, 150, seed=seed, lengths="hh-rlhf"))
    for gp, gd, blocks_d in ((1, 1, 100_000), (2, 3, 100_000), (1, 1, 120), (2, 2, 90)):
        log = _serve(q, gp=gp, gd=gd, blocks_d=blocks_d)
        p = log.prefill
        assert np.all(~np.isnan(p.finish_s))
        assert np.array_equal(p.generated, q.output_tokens)             # every output token, once
        assert np.all(p.scheduled_s >= q.arrival_s) and np.all(p.first_token_s >= p.scheduled_s)
        assert np.all(p.finish_s >= p.first_token_s)
        assert max(log.decode.it_running) <= 32
        # every request with more than one output token crossed the link once, plus once per preemption
        # unless its recompute emitted its last token
        once = int(np.count_nonzero(q.output_tokens > 1))
        assert once <= len(log.transfer_bytes) <= once + int(p.preemptions.sum())
        if blocks_d < 1000:
            assert p.preemptions.sum() > 0
        else:
            assert p.preemptions.sum() == 0


def test_a_small_prefill_pool_holds_prompts_until_their_kv_has_left():
    # prefill KV for 3 prompts of 512 tokens: the pool waits for transfers, nothing is lost
    q = _short(poisson_requests(80.0, 60, seed=3, prompt_tokens=512, output_tokens=40, lengths=None))
    log = _serve(q, blocks_p=3 * 32, link=InterconnectSpec(bandwidth_bytes_per_s_per_direction=2e9, latency_s=1e-4))
    assert np.array_equal(log.prefill.generated, q.output_tokens)
    assert max(log.prefill.it_kv_blocks) <= 96


def test_kv_transfer_time_is_bytes_over_bandwidth_plus_latency_and_serialised_per_gpu():
    # two prompts finish prefill in the same iteration on two prefill GPUs; one decode GPU receives
    # them one after the other
    q = poisson_requests(1.0, 2, seed=0, prompt_tokens=100, output_tokens=3, lengths=None)
    q = type(q)(np.array([0.0, 0.0]), q.prompt_tokens, q.output_tokens, q.description)
    log = _serve(q, gp=2, gd=1)
    x = 1e5 * 100 / 1e9 + 1e-5
    assert log.transfer_bytes == [1e7, 1e7]
    assert log.transfer_time_s == [pytest.approx(x, rel=1e-12)] * 2
    assert log.transfer_wait_s[0] == 0.0 and log.transfer_wait_s[1] == pytest.approx(x, rel=1e-12)
    # two decode GPUs: each receives one, at the same time
    log2 = _serve(q, gp=2, gd=2)
    assert log2.transfer_wait_s == [0.0, 0.0]


def test_kv_bytes_follow_sliding_window_and_linear_layers():
    """The transfer carries what the request holds: sliding-window layers their window, linear
    layers their state (GPT-OSS alternates 128-token windows with full attention; Qwen3.5 is mostly
    linear attention)."""
    for name in ("gpt-oss-120b", "qwen3.5-397b-a17b"):
        m = get_model(name)
        q = poisson_requests(1.0, 1, seed=0, prompt_tokens=4000, output_tokens=2, lengths=None)
        log = _Loop(q.arrival_s, q.prompt_tokens, q.output_tokens, SchedulerConfig(), _pool("prefill", 1, 10**6),
                    _pool("decode", 1, 10**6), LINK, m.kv_cache_bytes_per_request, False, 0).run()
        assert log.transfer_bytes == [m.kv_cache_bytes_per_request(4000)]
        full = 4000 * m.kv_bytes_per_token_all_layers          # every attention layer at 4000 tokens
        if name == "gpt-oss-120b":
            assert log.transfer_bytes[0] < full                # the windowed layers hold 128 tokens
        else:
            assert log.transfer_bytes[0] == pytest.approx(full + m.linear_state_bytes_per_request)
        assert log.transfer_time_s[0] == LINK.transfer_time_s(log.transfer_bytes[0])


def test_littles_law_on_a_long_stable_run():
    q = poisson_requests(8.0, 3000, seed=5, lengths="hh-rlhf")
    log = _serve(q, SchedulerConfig(max_batch=64, token_budget=1024), checked=False)
    t, dt, n = log.in_system()
    ratio = littles_law_ratio(q.arrival_s, log.prefill.finish_s, log.end_s, t, dt, n)
    assert abs(ratio - 1.0) < 0.05


def test_horizon_reports_unfinished_requests():
    q = poisson_requests(200.0, 400, seed=0, prompt_tokens=64, output_tokens=50, lengths=None)
    log = _serve(q, SchedulerConfig(max_batch=8, token_budget=256, horizon_s=1.0))
    finished = int(np.count_nonzero(~np.isnan(log.prefill.finish_s)))
    assert 0 < finished < int(np.count_nonzero(q.arrival_s < 1.0))
    assert max(log.prefill.it_start + log.decode.it_start) < 1.0 <= log.end_s


# ---------------------------------------------------------------------------------------------
# the whole simulator: Qwen3-30B-A3B on 1 + 1 GPUs

def _sim(**kw):
    return ServingSimulator(MODEL, gpus=2, prefill_gpus=1, policy="sieve",
                            scheduler=SchedulerConfig(max_batch=16, token_budget=256), max_model_len=4096, **kw)


@pytest.fixture(scope="module")
def sim():
    return _sim(error_samples=5)


def test_one_request_at_a_time_closed_form():
    """Far below capacity: TTFT = the prefill-only step of the prompt on the prefill pool; the first
    decode iteration starts when the KV has arrived (prefill end + bytes / bandwidth + latency); the
    tokens after it are the batch-1 decode-only steps on the decode pool."""
    q = poisson_requests(0.05, 3, seed=0, prompt_tokens=64, output_tokens=6, lengths=None)
    ex = _sim(exact=True)
    res, hw = ex.run(q, 0.05), ex.hw
    # fresh pricers with the pools' settings: the price is a function of the batch
    pre = IterationPricer(ex.model, hw, gpus=1, policy="sieve", max_batch=1, max_prefill_tokens=256,
                          max_context=4096, warmup="prefill")
    dec = IterationPricer(ex.model, hw, gpus=1, policy="sieve", max_batch=16, max_prefill_tokens=1,
                          max_context=4096, warmup="decode")
    one, none = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    ttft = pre.exact_s(none, none, np.array([64]), one, one)
    steps = [dec.exact_s(np.array([64 + k]), one, none, none, none) for k in range(1, 6)]
    x = hw.interconnect.transfer_time_s(ex.model.kv_cache_bytes_per_request(64))
    assert x == pytest.approx(ex.model.kv_cache_bytes_per_request(64)
                              / hw.interconnect.bandwidth_bytes_per_s_per_direction + hw.interconnect.latency_s)
    assert np.allclose(res.ttft, ttft, rtol=1e-9, atol=0)
    pl = res.pools_log
    assert pl.transfer_time_s == [x] * 3 and pl.transfer_wait_s == [0.0] * 3
    first_decode = np.asarray(pl.decode.it_start[::5])
    assert np.allclose(first_decode, res.log.first_token_s + x, rtol=1e-12, atol=0)
    assert np.allclose(pl.decode.it_time, steps * 3, rtol=1e-12, atol=0)
    assert np.allclose(res.tpot, (x + sum(steps)) / 5, rtol=1e-9, atol=0)
    assert np.all(res.log.scheduled_s == q.arrival_s)
    d = res.to_dict()
    assert d["kv_transfer"]["time_s"]["mean"] == pytest.approx(x) and d["kv_transfer"]["transfers"] == 3
    # the memo: prompt 64 and batch 1 are grid points (another routing draw), contexts in between
    memo = _sim(error_samples=0).run(q, 0.05)
    assert np.allclose(memo.ttft, ttft, rtol=0.01, atol=0)
    assert np.allclose(memo.tpot, (x + sum(steps)) / 5, rtol=0.01)


def test_served_run_reports_the_fields_and_conserves(sim):
    q = _short(poisson_requests(20.0, 60, seed=1, lengths="hh-rlhf"), 256, 24)
    d = sim.run(q, 20.0).to_dict()
    assert d["mode"] == "disaggregated" and (d["prefill_gpus"], d["decode_gpus"], d["gpus"]) == (1, 1, 2)
    for key in ("ttft_s", "tpot_s", "e2e_s"):
        assert d[key]["p50"] <= d[key]["p90"] <= d[key]["p99"]
    assert d["finished_requests"] == 60 and d["output_tokens"] == int(q.output_tokens.sum())
    assert 0 < d["whole_run"]["goodput_requests_per_s"] <= d["throughput_requests_per_s"]
    x = d["kv_transfer"]
    assert x["transfers"] == int(np.count_nonzero(q.output_tokens > 1))
    kv = sim.model.kv_cache_bytes_per_request
    assert x["bytes_total"] == pytest.approx(sum(kv(int(p)) for p, o in zip(q.prompt_tokens, q.output_tokens) if o > 1))
    pools = d["pools"]
    assert pools["prefill"]["iterations"] + pools["decode"]["iterations"] == d["iterations"]
    assert 0 < pools["prefill"]["busy_share"] < 1 and 0 < pools["decode"]["busy_share"] <= 1
    assert pools["decode"]["kv_capacity"] == d["kv_capacity"]
    err = d["pricing"]["error_vs_exact"]
    assert err["samples"] == 10 and err["mean_abs_rel"] < 0.05
    assert pools["prefill"]["pricing"]["error_vs_exact"]["samples"] == 5


def test_preemption_under_a_tiny_decode_kv(sim):
    """A decode pool with room for about 300 blocks (the HBM share set from the pool's own budget):
    16 requests of 256 + 200 tokens (29 blocks each) do not fit at once, so the newest are preempted,
    recomputed on the prefill pool and sent again; every one finishes."""
    kv = sim.pools[1].kv
    hbm = kv.capacity_bytes / 0.9
    mu = (kv.weights_bytes + kv.activations_bytes + 300 * kv.block_bytes) / hbm
    tiny = _sim(error_samples=0, memory_utilization=mu)
    assert 280 <= tiny.pools[1].kv.blocks_per_gpu <= 300
    q = poisson_requests(200.0, 24, seed=2, prompt_tokens=256, output_tokens=200, lengths=None)
    res = tiny.run(q, 200.0)
    d = res.to_dict()
    assert d["preemptions"] > 0 and d["finished_requests"] == 24
    assert d["output_tokens"] == int(q.output_tokens.sum())
    assert d["kv_transfer"]["transfers"] == 24 + d["preemptions"]
    assert d["pools"]["decode"]["kv_use"]["max"] <= 1.0


def test_timeline_csv_has_a_pool_column(tmp_path, capsys):
    tl, rq = tmp_path / "it.csv", tmp_path / "rq.csv"
    assert main(["serve", "--model", MODEL, "--gpus", "2", "--prefill-gpus", "1", "--rate", "20", "--requests", "8",
                 "--prompt-tokens", "32", "--output-tokens", "4", "--max-batch", "8", "--token-budget", "64",
                 "--max-model-len", "256", "--error-samples", "0", "--timeline-csv", str(tl),
                 "--requests-csv", str(rq)]) == 0
    out = capsys.readouterr().out
    assert "1 prefill + 1 decode, disaggregated" in out and "KV transfers 8," in out
    rows = list(csv.DictReader(tl.open()))
    assert {r["pool"] for r in rows} == {"prefill", "decode"}
    starts = [float(r["start_s"]) for r in rows]
    assert starts == sorted(starts)
    assert sum(int(r["prefill_tokens"]) for r in rows) == 8 * 32
    assert sum(int(r["decode_requests"]) for r in rows) == 8 * 3       # tokens after the first
    reqs = list(csv.DictReader(rq.open()))
    assert len(reqs) == 8 and all(float(r["kv_transfer_s"]) > 0 for r in reqs)


def test_the_api_takes_prefill_gpus():
    d = simulate_serving(MODEL, gpus=2, prefill_gpus=1, rate=5.0, requests=4, prompt_tokens=16, output_tokens=3,
                         lengths=None, max_batch=4, token_budget=32, max_model_len=64, error_samples=0).to_dict()
    assert d["mode"] == "disaggregated" and d["finished_requests"] == 4


@pytest.mark.parametrize("extra, needle", [
    (["--gpus", "2", "--prefill-gpus", "2"], "prefill_gpus (--prefill-gpus) = 2: expected an integer from 1 to 1"),
    (["--gpus", "4", "--prefill-gpus", "7"], "prefill_gpus (--prefill-gpus) = 7: expected an integer from 1 to 3"),
    (["--gpus", "2", "--prefill-gpus", "-1"], "--prefill-gpus = -1: expected an integer from 0"),
    (["--prefill-gpus", "1"], "gpus (--gpus) = 1: expected at least 2 GPUs"),
    (["--model", "qwen3.5-397b-a17b", "--gpus", "4", "--prefill-gpus", "1"],
     "prefill pool (--prefill-gpus = 1 GPU): qwen3.5-397b-a17b on 1 x b200: needs 738.5 GiB of HBM per GPU"),
    (["--model", "qwen3.5-397b-a17b", "--gpus", "8", "--prefill-gpus", "7"],
     "decode pool (--gpus 8 minus --prefill-gpus 7 = 1 GPU): qwen3.5-397b-a17b on 1 x b200: needs 738.3 GiB"),
    # (a pool whose GPU count the model's experts do not divide takes redundant experts: docs/hardware.md)
])
def test_bad_input_is_one_line_and_exit_2(extra, needle, capsys):
    argv = ["serve", "--model", MODEL, "--rate", "1", "--requests", "3"] + extra
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and needle in err, err
    if "GiB" in needle:
        assert "but one GPU holds 172.8 GiB" in err


def test_api_refuses_bad_pool_sizes():
    with pytest.raises(SievesimError, match="prefill_gpus"):
        ServingSimulator(MODEL, gpus=2, prefill_gpus=True)
    with pytest.raises(SievesimError, match="prefill_gpus"):
        ServingSimulator(MODEL, gpus=3, prefill_gpus=1.5)


def test_run_disaggregated_is_the_loop():
    q = poisson_requests(10.0, 20, seed=0, prompt_tokens=32, output_tokens=5, lengths=None)
    a = run_disaggregated(q.arrival_s, q.prompt_tokens, q.output_tokens, SchedulerConfig(),
                          prefill=_pool("prefill", 1, 1000), decode=_pool("decode", 1, 1000), link=LINK,
                          kv_bytes=_kv_bytes, exact=False, samples=0)
    b = _serve(q, SchedulerConfig(), checked=False)
    assert np.array_equal(a.prefill.finish_s, b.prefill.finish_s) and a.event_t == b.event_t


def test_max_rate_bisection_names_the_pools(capsys):
    argv = ["serve", "--model", MODEL, "--gpus", "2", "--prefill-gpus", "1", "--max-rate", "1:4", "--bisect-steps", "1",
            "--requests", "4", "--prompt-tokens", "16", "--output-tokens", "3", "--max-batch", "4", "--token-budget",
            "32", "--max-model-len", "64", "--error-samples", "0"]
    assert main(argv + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["prefill_gpus"], d["decode_gpus"]) == (1, 1) and d["tried"] and d["max_rate"] is not None
    assert main(argv) == 0
    assert "(1 prefill + 1 decode, disaggregated)" in capsys.readouterr().out


def test_prefill_gpus_0_or_none_is_colocated_as_in_sweeps(capsys):
    base = ["serve", "--model", MODEL, "--rate", "5", "--requests", "3", "--prompt-tokens", "8", "--output-tokens", "2",
            "--policy", "noexp", "--json"]
    outs = []
    for extra in ([], ["--prefill-gpus", "0"], ["--prefill-gpus", "none"]):
        assert main(base + extra) == 0
        row = json.loads(capsys.readouterr().out)
        row = row[0] if isinstance(row, list) else row
        outs.append((row["ttft_s"], row.get("prefill_gpus")))
    assert outs[0] == outs[1] == outs[2]


def test_serving_prices_redundant_experts_on_their_slots():
    """With redundant experts (3 GPUs do not divide Qwen3-30B-A3B's 128 experts: one replica, 129
    slots), a priced iteration routes every token to a slot as the step does: the counts cover every
    slot and every GPU runs experts."""
    from sievesim.serving.pricing import IterationPricer
    from sievesim.system.step import StepSimulator

    pricer = IterationPricer("qwen3-30b-a3b", "b200", gpus=3, policy="gpu-only", max_batch=24,
                             max_prefill_tokens=256, max_context=600, energy=False)
    sim = pricer.sim
    assert sim.num_slots == 129 and sim.placement is not None
    dec_ctx, dec_gpu = np.full(24, 300), np.arange(24) % 3
    none = np.zeros(0, dtype=np.int64)
    sim.set_batch(dec_ctx, dec_gpu, none, none, none, np.random.default_rng(0))
    ids, counts, owner, _ = sim._step_tokens()
    assert counts.shape == (48, 129) and int(ids.max()) < 129
    raw = sim.run_step(grow_contexts=False)
    assert all(x > 0 for x in raw["busy_s"]["gpu"])
    assert min(raw["experts_on_gpu"]) > 0
