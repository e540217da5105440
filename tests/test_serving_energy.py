"""Energy in serving (issue 68, item 1): a run's energy is the sum of its iterations' energies and
the GPUs' static power while idle; the requests' shares sum to the iterations' energy; a hand check
of one request alone against the steps priced by a fresh pricer; the CSV columns, a serve sweep's
rows and `plot --y energy_j`; a price without energy leaves the fields empty."""
from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from sievesim.cli import main
from sievesim.serving import IterationPricer, SchedulerConfig, ServingSimulator, poisson_requests
from sievesim.serving.scheduler import run_schedule
from sievesim.system.energy import RESOURCE_KINDS

MODEL = "qwen3-30b-a3b"
SMALL = dict(gpus=1, policy="sieve", scheduler=SchedulerConfig(max_batch=16, token_budget=256), max_model_len=4096)


def _workload(n=40, rate=30.0, seed=2):
    q = poisson_requests(rate, n, seed=seed, lengths="hh-rlhf")
    return type(q)(q.arrival_s, np.minimum(q.prompt_tokens, 300), np.minimum(q.output_tokens, 20), q.description)


@pytest.mark.parametrize("exact", [False, True], ids=["memo", "exact"])
def test_run_energy_is_its_iterations_plus_idle_and_requests_share_the_iterations(exact):
    sim = ServingSimulator(MODEL, exact=exact, error_samples=4, **SMALL)
    q = _workload(25 if exact else 40)
    res = sim.run(q, 30.0)
    d = res.to_dict()
    parts = d["energy_breakdown_j"]
    assert set(parts) == set(RESOURCE_KINDS) | {"idle"}
    it = res.iteration_energy_j
    assert it.size == d["iterations"] and np.all(it > 0)
    busy = math.fsum(res.log.it_time)
    assert parts["idle"] == pytest.approx(sim.pricer.static_power_w * (d["duration_s"] - busy), rel=1e-12)
    assert d["energy_j"] == pytest.approx(math.fsum(it) + parts["idle"], rel=1e-12)
    assert d["energy_j"] == pytest.approx(math.fsum(parts.values()), rel=1e-12)
    # each iteration's static part is the G GPUs' static power over its time
    assert parts["static"] == pytest.approx(sim.pricer.static_power_w * busy, rel=1e-9)
    # the requests' shares: every iteration's energy, split by tokens
    assert res.request_energy_j.sum() == pytest.approx(math.fsum(it), rel=1e-12)
    assert np.all(res.request_energy_j > 0)
    tokens = int(res.log.generated.sum())
    assert d["energy_per_output_token_j"] == pytest.approx(d["energy_j"] / tokens)
    assert d["tokens_per_joule"] == pytest.approx(tokens / d["energy_j"])
    assert d["energy_per_iteration_j"] == pytest.approx(math.fsum(it) / d["iterations"])
    assert d["power_per_gpu_w"] == pytest.approx(d["energy_j"] / d["duration_s"])
    assert d["goodput_requests_per_joule"] == pytest.approx(res.met.sum() / d["energy_j"])
    assert d["energy_per_request_j"]["mean"] == pytest.approx(res.request_energy_j.mean())
    if not exact:   # the memo's energy against the exact step's on the sampled iterations
        err = d["pricing"]["energy_error_vs_exact"]
        assert err["samples"] == 4 and err["mean_abs_rel"] < 0.03


def test_one_request_alone_by_hand():
    """One request at t = 0.5 s: its prefill step, then one decode step per further token, each the
    exact step of a fresh pricer; the GPUs idle 0.5 s before it arrives."""
    q = poisson_requests(1.0, 1, seed=0, prompt_tokens=64, output_tokens=4, lengths=None)
    q = type(q)(np.array([0.5]), q.prompt_tokens, q.output_tokens, q.description)
    sim = ServingSimulator(MODEL, exact=True, **SMALL)
    res = sim.run(q, 1.0)
    ref = IterationPricer(sim.model, sim.hw, gpus=1, policy="sieve", max_batch=16, max_prefill_tokens=256,
                          max_context=4096)
    one, none = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    steps = [ref.exact_priced(none, none, np.array([64]), one, one)]
    steps += [ref.exact_priced(np.array([64 + k]), one, none, none, none) for k in range(1, 4)]
    energies = [float(e.sum()) for _, e in steps]
    assert np.allclose(res.iteration_energy_j, energies, rtol=1e-12, atol=0)
    assert res.request_energy_j[0] == pytest.approx(sum(energies), rel=1e-12)
    static_w = ref.sim.energy.static_w(1)
    assert res.energy_j == pytest.approx(sum(energies) + static_w * 0.5, rel=1e-9)
    # a step's static part is the GPU's static power over the step
    for t, e in steps:
        assert e[RESOURCE_KINDS.index("static")] == pytest.approx(static_w * t, rel=1e-12)


def test_a_disaggregated_run_counts_both_pools_and_the_kv_transfers():
    sim = ServingSimulator(MODEL, gpus=2, prefill_gpus=1, policy="sieve", error_samples=2,
                           scheduler=SchedulerConfig(max_batch=16, token_budget=256), max_model_len=4096)
    res = sim.run(_workload(30), 30.0)
    d = res.to_dict()
    pl = res.pools_log
    iterations = math.fsum(pl.prefill.it_energy_j) + math.fsum(pl.decode.it_energy_j)
    link = sim.hw.interconnect.energy_pj_per_bit * 8e-12 * sum(pl.transfer_bytes)
    assert pl.transfer_energy_j == pytest.approx(link, rel=1e-12) and link > 0
    assert d["energy_j"] == pytest.approx(iterations + link + d["energy_breakdown_j"]["idle"], rel=1e-12)
    assert res.request_energy_j.sum() == pytest.approx(iterations + link, rel=1e-12)
    assert d["energy_per_iteration_j"] == pytest.approx(iterations / d["iterations"])
    pre, dec = (p.pricer.static_power_w for p in sim.pools)
    idle = pre * (d["duration_s"] - math.fsum(pl.prefill.it_time)) + dec * (d["duration_s"] - math.fsum(pl.decode.it_time))
    assert d["energy_breakdown_j"]["idle"] == pytest.approx(idle, rel=1e-12)


def test_a_price_without_energy_logs_none():
    q = poisson_requests(20.0, 10, seed=0, prompt_tokens=16, output_tokens=3, lengths=None)
    log = run_schedule(q.arrival_s, q.prompt_tokens, q.output_tokens, SchedulerConfig(), gpus=1, blocks_per_gpu=1000,
                       blocks_for=lambda n: -(-n // 16), price=lambda *a: 0.01)
    assert log.energy_parts_j is None and np.all(np.isnan(log.it_energy_j)) and not log.request_energy_j.any()


def test_the_csv_columns_sum_to_the_run(tmp_path, capsys):
    req, tl = tmp_path / "r.csv", tmp_path / "t.csv"
    assert main(["serve", "--model", MODEL, "--rate", "30", "--requests", "20", "--output-tokens", "8",
                 "--max-batch", "16", "--token-budget", "256", "--max-model-len", "4096", "--json",
                 "--requests-csv", str(req), "--timeline-csv", str(tl)]) == 0
    d = json.loads(capsys.readouterr().out)
    rows = list(csv.DictReader(req.open()))
    its = list(csv.DictReader(tl.open()))
    assert len(rows) == 20 and len(its) == d["iterations"]
    per_request = sum(float(r["energy_j"]) for r in rows)
    per_iteration = sum(float(r["energy_j"]) for r in its)
    assert per_request == pytest.approx(per_iteration, rel=1e-9)
    assert per_iteration + d["energy_breakdown_j"]["idle"] == pytest.approx(d["energy_j"], rel=1e-9)


def test_the_text_names_energy_per_request_and_tokens_per_joule(capsys):
    assert main(["serve", "--model", MODEL, "--rate", "30", "--requests", "10", "--output-tokens", "6",
                 "--max-batch", "16", "--token-budget", "256", "--max-model-len", "4096"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("sieve    energy"))
    assert "J per request" in line and "tokens/J" in line and "W per GPU" in line and "per kJ" in line


def test_a_serve_sweep_row_has_energy_columns_and_plots_them(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "sw"
    assert main(["sweep", "--kind", "serve", "--model", MODEL, "--requests", "15", "--prompt-tokens", "64",
                 "--output-tokens", "8", "--max-batch", "16", "--token-budget", "256", "--max-model-len", "512",
                 "--error-samples", "0", "--rate", "10,40", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    from sievesim.results import read_results
    rows = read_results(out)
    for row in rows:
        assert row["energy_j"] > 0 and row["goodput_requests_per_joule"] > 0
        assert row["energy_per_request_mean_j"] > 0 and row["tokens_per_joule"] > 0
        assert row["energy_j"] == pytest.approx(sum(row[f"energy_breakdown_{k}_j"]
                                                    for k in RESOURCE_KINDS + ("idle",)), rel=1e-9)
    for y in ("energy_j", "goodput_requests_per_joule"):
        assert main(["plot", str(out), "--y", y, "--out", str(tmp_path / f"{y}.png")]) == 0
        assert (tmp_path / f"{y}.png").read_bytes()[:4] == b"\x89PNG"


def test_hardware_without_energy_fields_gives_null_energy(capsys):
    import dataclasses

    from sievesim.commands.serve import _energy_line
    from sievesim.hardware import get_hardware

    hw = get_hardware("b200")
    hw = dataclasses.replace(hw, gpu=dataclasses.replace(hw.gpu, energy_pj_per_flop=None, energy_pj_per_hbm_byte=None,
                                                         static_power_w=None))
    sim = ServingSimulator(MODEL, hw, error_samples=2, **SMALL)
    res = sim.run(_workload(10), 30.0)
    d = res.to_dict()
    assert d["energy_j"] is None and d["energy_breakdown_j"] is None and d["tokens_per_joule"] is None
    assert res.energy_j is None and np.all(np.isnan(res.request_energy_j))
    assert d["pricing"]["energy_error_vs_exact"]["samples"] == 0
    assert all(math.isnan(r["energy_j"]) for r in res.iteration_rows())
    json.dumps(d)                                                   # still valid JSON
    assert "energy: none" in _energy_line(d)
