"""Energy of a decode step (sievesim/system/energy.py): per node, per step, by resource kind;
hardware energy fields and their checks (docs/energy.md)."""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from contract_helpers import run_cli
from sievesim.hardware import get_hardware
from sievesim.system import StepSimulator, simulate_step
from sievesim.system.chrome import chrome_trace
from sievesim.system.energy import RESOURCE_KINDS, StepEnergy


@pytest.fixture(scope="module")
def two_gpus():
    return simulate_step("qwen3-30b-a3b", gpus=2, batch=16, policy="sieve", steps=1, warmup=1)


def test_step_breakdown_sums_to_the_total_and_nodes_add_up(two_gpus):
    rec = two_gpus.to_dict()
    parts = rec["energy_breakdown_j"]
    assert set(parts) == set(RESOURCE_KINDS)
    assert math.fsum(parts.values()) == pytest.approx(rec["energy_j"], rel=1e-12)
    assert rec["tokens_per_joule"] == pytest.approx(16 / rec["energy_j"])
    assert parts["link"] > 0 and parts["pim"] > 0 and parts["hbm"] > 0 and parts["gpu_compute"] > 0
    nodes = two_gpus.nodes()
    # one measured step: the nodes' energies plus the static power over the step give the total
    assert math.fsum(n.energy_j for n in nodes) + parts["static"] == pytest.approx(rec["energy_j"], rel=1e-9)


def test_a_node_that_does_nothing_costs_nothing(two_gpus):
    nodes = two_gpus.nodes()
    for n in nodes:
        idle = not n.flops and not n.bytes and not n.tokens and not n.engine_cycles
        if idle:
            assert n.energy_j == 0.0, n
    assert all(n.energy_j == 0.0 for n in nodes if n.kind == "decision")
    assert any(n.energy_j > 0 for n in nodes if n.kind == "pim_experts")


def test_chrome_trace_carries_energy(two_gpus):
    events = [e for e in chrome_trace(two_gpus.schedule)["traceEvents"] if e.get("ph") == "X"]
    assert all("energy_j" in e["args"] for e in events)


@pytest.fixture(scope="module")
def energy_model():
    sim = StepSimulator("qwen3-30b-a3b", "b200", batch=8, policy="allexp")
    return sim.energy


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 24), st.integers(1, 8), st.sampled_from([None, "channel"]))
def test_more_tokens_never_less_pim_energy(energy_model, tokens, more, unit):
    assert energy_model.expert_j(tokens + more, unit) >= energy_model.expert_j(tokens, unit) > 0


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["gemm", "weight_load", "attention", "dispatch", "combine", "allgather"]),
       st.floats(0, 1e12), st.floats(0, 1e9), st.floats(0, 1e12), st.floats(0, 1e9))
def test_more_work_never_less_node_energy(energy_model, kind, flops, nbytes, extra_flops, extra_bytes):
    small = sum(energy_model.node_j({"kind": kind, "flops": flops, "bytes": nbytes}).values())
    big = sum(energy_model.node_j({"kind": kind, "flops": flops + extra_flops, "bytes": nbytes + extra_bytes}).values())
    assert big >= small >= 0
    assert sum(energy_model.node_j({"kind": kind}).values()) == 0.0


def test_more_tokens_never_less_step_energy():
    small = simulate_step("qwen3-30b-a3b", batch=8, policy="allexp", warmup=0).energy_j["total"]
    big = simulate_step("qwen3-30b-a3b", batch=32, policy="allexp", warmup=0).energy_j["total"]
    assert big > small


def test_hbm_per_byte_is_the_published_read_path():
    e = StepEnergy(get_hardware("b200"))
    # O'Connor et al. via AttAcc: 0.11 + 0.44 + 1.01 + 1.23 + 0.5 + 0.3 pJ/bit
    assert e.dram_pj_per_byte == pytest.approx(3.59 * 8)


def test_energy_can_be_switched_off_and_is_absent_without_fields(tmp_path):
    off = json.loads(run_cli(["run", "--model", "qwen3-30b-a3b", "--batch", "4", "--policy", "noexp", "--warmup", "0",
                              "--json", "--quiet", "--no-energy"], timeout_s=60).out)
    assert "energy_j" not in off and "tokens_per_joule" not in off
    on = json.loads(run_cli(["run", "--model", "qwen3-30b-a3b", "--batch", "4", "--policy", "noexp", "--warmup", "0",
                             "--json", "--quiet"], timeout_s=60).out)
    assert on["step_time_s"] == off["step_time_s"] and on["energy_j"] > 0
    f = tmp_path / "plain.toml"
    from sievesim.hardware import hardware_to_dict
    import tomli_w
    d = hardware_to_dict(get_hardware("b200"))
    for k in ("energy_pj_per_flop", "energy_pj_per_hbm_byte", "static_power_w"):
        d["gpu"].pop(k)
    d["interconnect"].pop("energy_pj_per_bit")
    f.write_bytes(tomli_w.dumps(d).encode())
    rec = json.loads(run_cli(["run", "--model", "qwen3-30b-a3b", "--hardware", f, "--batch", "4", "--policy",
                              "noexp", "--warmup", "0", "--json", "--quiet"], timeout_s=60).out)
    assert "energy_j" not in rec and rec["step_time_s"] == on["step_time_s"]


@pytest.mark.parametrize("section, line, field", [
    ("gpu", "static_power_w = -1.0", "gpu.static_power_w"),
    ("gpu", "energy_pj_per_flop = nan", "gpu.energy_pj_per_flop"),
    ("gpu", "energy_pj_per_hbm_byte = \"low\"", "gpu.energy_pj_per_hbm_byte"),
    ("interconnect", "energy_pj_per_bit = inf", "interconnect.energy_pj_per_bit"),
])
def test_bad_energy_fields_are_one_line_exit_2(tmp_path, section, line, field):
    f = tmp_path / "bad.toml"
    f.write_text(f'base = "b200"\n[{section}]\n{line}\n')
    r = run_cli(["hardware", "show", f])
    assert r.rc == 2 and r.err.count("\n") == 1 and field in r.err, r.err


def test_energy_fields_missing_where_required(tmp_path):
    from sievesim.hardware import hardware_to_dict
    import tomli_w
    d = hardware_to_dict(get_hardware("h100"))
    d["gpu"].pop("static_power_w")
    f = tmp_path / "partial.toml"
    f.write_bytes(tomli_w.dumps(d).encode())
    r = run_cli(["hardware", "show", f])
    assert r.rc == 2 and r.err.count("\n") == 1 and "gpu.static_power_w = '<missing>'" in r.err, r.err


def test_sweep_rows_carry_the_energy_columns():
    from sievesim.sweep import step_point
    row = step_point({"model": "qwen3-30b-a3b", "batch": 4, "warmup": 0, "policy": "noexp"})
    assert row["energy_j"] > 0 and row["tokens_per_joule"] == pytest.approx(4 / row["energy_j"])
    assert set(row["energy_breakdown_j"]) == set(RESOURCE_KINDS)


def test_reproduce_energy_quick(tmp_path):
    from sievesim.reproduce import NO_NUMBER, reproduce
    rep, = reproduce("energy", tmp_path, quick=True, plot=False)
    assert {r["model"] for r in rep.data.records} == {"qwen3-30b-a3b", "gpt-oss-120b", "qwen3.5-397b-a17b"}
    assert {r["series"] for r in rep.data.records} == {"NoExp", "AllExp", "PIMoE (channel)", "Sieve"}
    for r in rep.data.records:
        per_token = sum(r[f"energy_{k}_j_per_token"] for k in RESOURCE_KINDS)
        assert per_token * r["batch"] == pytest.approx(r["energy_j"], rel=1e-9)
        assert r["tokens_per_joule"] == pytest.approx(r["batch"] / r["energy_j"])
    assert rep.data.claims and all(c.verdict == NO_NUMBER for c in rep.data.claims)
    assert "tokens_per_joule" in rep.csv.read_text().splitlines()[0]
