"""PIM fidelity: refresh phases, the last result's return, the GPU step of an expert, cache keys,
preset consistency, power-limited command rates."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from sievesim.pim import gemv_program, geometry_for, pim_config, plan_gemv, run_programs
from sievesim.pim.engine import run_phases
from sievesim.pim.expert import EnginePimCost, PIMDevice, gemv


def _refresh_requests_met(start: int, end: int, interval: int, rfc: int) -> int:
    """Refresh requests (every ``interval`` from cycle ``interval``) in (start - rfc, end]."""
    return sum(1 for k in range(1, end // interval + 2) if start - rfc < k * interval <= end)


@settings(max_examples=12, deadline=None)
@given(d_in=st.integers(64, 16384), d_out=st.integers(48, 16384), tokens=st.integers(1, 8),
       pcs=st.sampled_from([1, 32, 256]), config=st.sampled_from(["hbm3e-8000", "hbm3-6400"]),
       count=st.integers(3, 24))
def test_refresh_inside_short_programs_costs_between_nothing_and_one_refresh_per_request_met(
        d_in, d_out, tokens, pcs, config, count):
    cfg = pim_config(config, 1)
    t = cfg.timings
    geo = geometry_for(cfg)
    prog = gemv_program(plan_gemv(d_in, d_out, tokens, pcs, geo, dict(t)), geo)
    aligned = run_programs(cfg, [prog]).cycles - 1      # released at 0, an engine run's first visit is cycle 1
    interval, rfc = int(t["nREFI"]), int(t["nRFC"])
    per_refresh = rfc + t["nRC"] + t["nRP"] + t["nRCDRD"]     # wait for the row to close, refresh, reopen
    assume(aligned + per_refresh < interval)           # short: the aligned run meets no refresh
    phases = [k * interval // count for k in range(count)]
    res = run_phases(cfg, prog, phases)
    met = []
    for phase, cycles in zip(res.phases, res.phase_cycles):
        start = interval + phase
        n = _refresh_requests_met(start, start + cycles, interval, rfc)
        assert aligned <= cycles <= aligned + n * per_refresh
        met.append(n)
    expected = res.mean_phase_cycles
    assert aligned <= expected <= aligned + np.mean(met) * per_refresh
    if aligned < interval // 2:
        assert max(met) <= 2 and max(res.phase_cycles) > aligned     # the phase at 0 meets the running refresh


@pytest.mark.parametrize("d_in,d_out,tokens", [(4096, 2048, 1), (1024, 4096, 1), (2880, 5760, 4), (4096, 8192, 32)])
def test_default_phases_give_the_dense_mean(d_in, d_out, tokens):
    dev = PIMDevice()
    cfg = dev.config
    geo = dev.geometry
    prog = gemv_program(plan_gemv(d_in, d_out, tokens, 256, geo, dict(cfg.timings)), geo)
    dense = run_phases(cfg, prog, list(range(0, 7800, 20)))         # every 20 cycles of nREFI = 7800
    t_default = dev.program_cycles(gemv(dev, d_in, d_out, tokens, 256), 256)
    aligned = run_programs(cfg, [prog]).cycles
    assert aligned < dense.mean_phase_cycles
    assert abs(t_default - dense.mean_phase_cycles) < 0.015 * dense.mean_phase_cycles


def test_issue_example_refresh_costs_a_short_gemv_its_share_of_the_interval():
    cfg = pim_config("hbm3e-8000", 1)
    geo = geometry_for(cfg)
    prog = gemv_program(plan_gemv(4096, 8192, 1, 256, geo, dict(cfg.timings)), geo)
    aligned = run_programs(cfg, [prog]).cycles
    dense = run_phases(cfg, prog, list(range(0, 7800, 20)))
    # about aligned x (nRFC + reopen) / nREFI, plus the refresh running at the start (tRFC^2 / 2 nREFI)
    extra = dense.mean_phase_cycles - aligned
    assert 0.6 * (aligned * 968 / 7800 + 900 ** 2 / 2 / 7800) < extra < 1.4 * (aligned * 968 / 7800 + 900 ** 2 / 2 / 7800)
    assert max(dense.phase_cycles) >= aligned + 900


def test_staggered_refresh_takes_the_slowest_pseudo_channel():
    mean = PIMDevice()
    stag = PIMDevice(refresh="staggered")
    cost_mean, cost_stag = EnginePimCost(mean, 4096, 1024), EnginePimCost(stag, 4096, 1024)
    assert cost_stag.expert_time_s(1) > cost_mean.expert_time_s(1)
    # one pseudo-channel has one refresh phase: nothing to wait for
    assert cost_stag.expert_time_on_unit_s(2, "pseudo_channel") == cost_mean.expert_time_on_unit_s(2, "pseudo_channel")
    with pytest.raises(Exception, match="refresh"):
        PIMDevice(refresh="sometimes")


def test_cache_keyed_on_refresh_mode():
    a = gemv(PIMDevice(), 2048, 1536, 2, 256)
    b = gemv(PIMDevice(refresh="aligned"), 2048, 1536, 2, 256)
    assert a.phase_cycles and not b.phase_cycles


def test_a_program_ends_when_its_last_result_has_reached_the_gpu():
    cfg = pim_config("hbm3e-8000", 1)
    t = cfg.timings
    geo = geometry_for(cfg)
    prog = gemv_program(plan_gemv(2048, 768, 1, 256, geo, dict(t)), geo)
    res = run_programs(cfg, [prog], log_commands=True)
    names = res.command_log["names"]
    cmds = [names[c] for c in res.command_log["command"]]
    clk = res.command_log["cycle"]
    last_rdres = max(c for c, n in zip(clk, cmds) if n == "RDRES")
    last_preab = max(c for c, n in zip(clk, cmds) if n == "PREAB")
    assert last_preab < last_rdres + t["nCL"] + t["nBL"]          # the PREAB is not the end
    assert res.cycles == last_rdres + t["nCL"] + t["nBL"]


def test_an_expert_on_pim_is_the_whole_round_trip():
    dev = PIMDevice()
    cost = EnginePimCost(dev, 4096, 1024)
    for n in (1, 4):
        st_ = cost.expert_stages_s(n)
        assert sum(st_.values()) == pytest.approx(cost.expert_time_s(n, hand_over=True))
        assert cost.expert_time_s(n) == pytest.approx(sum(st_.values()) - st_["sync"])   # paid once per layer
        assert st_["sync"] == dev.sync_latency_s > 0
        assert st_["gate_up"] > 0 and st_["down"] > 0 and st_["gpu"] > 0
        # the GPU adds the gate/up partial sums of every input segment and applies the activation
        parts = dev.pcs_in(4096, 2048, n, 256)
        flops = (parts - 1) * 2048 * n + 5 * 1024 * n
        assert st_["gpu"] == pytest.approx(flops / dev.gpu_flops_per_s)      # results on-chip (paper)
        via_hbm = EnginePimCost(dataclasses.replace(dev, gpu_step_via_hbm=True), 4096, 1024)
        assert via_hbm.expert_stages_s(n)["gpu"] == pytest.approx(
            max(flops / dev.gpu_flops_per_s, (parts * 2048 * n * 4 + 1024 * n * 2) / dev.gpu_bytes_per_s))
    no_sync = EnginePimCost(dataclasses.replace(dev, sync_latency_s=0.0), 4096, 1024)
    assert cost.expert_time_s(1, hand_over=True) - no_sync.expert_time_s(1, hand_over=True) \
        == pytest.approx(dev.sync_latency_s)
    assert cost.expert_time_s(1) == pytest.approx(no_sync.expert_time_s(1), rel=1e-12)
    on_pim = EnginePimCost(dataclasses.replace(dev, activation_on_pim=True), 4096, 1024)
    assert on_pim.expert_stages_s(2)["sync"] == 0 == on_pim.expert_stages_s(2)["gpu"]


def test_attention_on_pim_hands_scores_to_the_gpu_and_back():
    from sievesim.pim.expert import AttentionLayer
    dev = PIMDevice()
    no_sync = dataclasses.replace(dev, sync_latency_s=0.0)
    full = AttentionLayer("full", kv_heads=2, q_per_kv=8, head_dim=128, value_dim=128)
    assert full.time_s(dev, [1024] * 4) - full.time_s(no_sync, [1024] * 4) == pytest.approx(dev.sync_latency_s)
    linear = AttentionLayer("linear", kv_heads=4, head_dim=128, value_dim=128)
    assert linear.time_s(dev, [1024] * 4) == linear.time_s(no_sync, [1024] * 4)


def test_sync_latency_is_a_hardware_field():
    from sievesim.errors import ConfigError
    from sievesim.hardware import PIMSpec, get_hardware
    hw = get_hardware("b200")
    assert PIMDevice.from_hardware(hw).sync_latency_s == hw.pim.sync_latency_s == 8.75e-7
    hw0 = dataclasses.replace(hw, pim=dataclasses.replace(hw.pim, sync_latency_s=0.0))
    assert PIMDevice.from_hardware(hw0).sync_latency_s == 0.0
    with pytest.raises(ConfigError, match="sync_latency_s"):
        PIMSpec(sync_latency_s=-1.0)


def test_the_cost_cache_returns_the_new_time_after_a_configuration_file_changes(tmp_path):
    from sievesim.hardware import get_hardware
    from sievesim.models import get_model
    path = tmp_path / "pim-hbm3e.toml"

    def write(n_ccdab: int) -> None:
        path.write_text(f'name = "my-hbm3e"\nstandard = "hbm3"\nbase = "hbm3e-8000"\n[timing]\nnCCDAB = {n_ccdab}\n')

    b200 = get_hardware("b200")
    hw = dataclasses.replace(b200, pim=dataclasses.replace(b200.pim, dram_config=str(path)))
    model = get_model("qwen3-30b-a3b")
    write(6)
    fast = EnginePimCost.for_model(model, hw).expert_time_s(4)
    assert fast == pytest.approx(EnginePimCost.for_model(model, b200).expert_time_s(4))   # same contents
    write(12)
    slow = EnginePimCost.for_model(model, hw).expert_time_s(4)
    assert slow > 1.15 * fast
    write(6)
    assert EnginePimCost.for_model(model, hw).expert_time_s(4) == fast


@pytest.mark.parametrize("name", __import__("sievesim.hardware", fromlist=["list_hardware"]).list_hardware())
def test_every_preset_roofline_peak_is_what_its_engine_configuration_issues(name):
    from sievesim.hardware import get_hardware
    hw = get_hardware(name)
    if hw.pim is None:
        pytest.skip("plain HBM")
    engine_peak = PIMDevice.from_hardware(hw).peak_flops()     # PUs x MACs x 2 FLOP per nCCDAB, every PC
    assert hw.pim_peak_flops == pytest.approx(engine_peak, rel=0.05)


def test_tokens_share_opened_rows_only_with_a_multi_vector_pu():
    shared, serial = PIMDevice(multi_vector_pu=True), PIMDevice(multi_vector_pu=False)
    for dev in (dataclasses.replace(shared, refresh="aligned"), dataclasses.replace(serial, refresh="aligned")):
        one, four = gemv(dev, 4096, 2048, 1, 256), gemv(dev, 4096, 2048, 4, 256)
        if dev.multi_vector_pu:
            assert four.activations < 2 * one.activations
        else:                                   # one GEMV per token: every token opens the rows again
            assert four.activations >= 4 * one.activations
    assert EnginePimCost(serial, 4096, 1024).expert_time_s(4) > EnginePimCost(shared, 4096, 1024).expert_time_s(4)


def test_power_limited_mac_rate_slows_pim_and_matches_its_preset_peak():
    from sievesim.hardware import get_hardware
    free, limited = get_hardware("b200"), get_hardware("b200-power")
    dev_free, dev_lim = PIMDevice.from_hardware(free), PIMDevice.from_hardware(limited)
    assert dev_lim.config.timings["nCCDAB"] == 11 and dev_free.config.timings["nCCDAB"] == 6
    assert dev_lim.peak_flops() == pytest.approx(dev_free.peak_flops() * 6 / 11)
    assert limited.pim_peak_flops == pytest.approx(dev_lim.peak_flops(), rel=0.05)
    assert dev_lim.config_key != dev_free.config_key
    t_free = EnginePimCost(dev_free, 4096, 1024).expert_stages_s(8)
    t_lim = EnginePimCost(dev_lim, 4096, 1024).expert_stages_s(8)
    assert t_lim["gate_up"] > 1.4 * t_free["gate_up"]
    with pytest.raises(Exception, match="macab_interval_cycles"):
        PIMDevice(macab_interval_cycles=-1)


def test_roofline_overestimate_depends_on_the_peak(capsys):
    import json
    from sievesim.cli import main
    from sievesim.hardware import get_hardware
    from sievesim.models import get_model
    from sievesim.pim import roofline_overestimate
    hw = get_hardware("b200")
    rows = roofline_overestimate(get_model("qwen3-30b-a3b"), hw, (1, 8))
    assert [r["tokens"] for r in rows] == [1, 8]
    for r in rows:
        # the MAC-issue peak is a lower bound on the engine's programs; 4x external is 4/16.4 of it
        assert r["mac_peak_over_programs"] < 1 < r["external_over_programs"]
        assert r["roofline_external_us"] / r["roofline_mac_peak_us"] == pytest.approx(131.072 / 32)
        assert r["engine_us"] > r["pim_programs_us"]
    assert main(["pim", "table", "--models", "qwen3-30b-a3b", "--tokens", "1,2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["tokens"] for r in out] == [1, 2] and out[0]["engine_us"] == pytest.approx(rows[0]["engine_us"])


def test_a_long_program_at_one_mid_interval_phase_is_within_one_refresh_of_the_mean():
    dev = PIMDevice()
    cfg, geo = dev.config, dev.geometry
    prog = gemv_program(plan_gemv(4096, 48 * 700, 1, 1, geo, dict(cfg.timings)), geo)  # ~10 nREFI long
    res = dev.run(prog, 1)
    assert res.phases == [cfg.timings["nREFI"] // 2]                       # the long-program shortcut
    many = run_phases(cfg, prog, list(range(0, 7800, 975)))
    per_refresh = cfg.timings["nRFC"] + cfg.timings["nRC"] + cfg.timings["nRP"] + cfg.timings["nRCDRD"]
    assert abs(dev.program_cycles(res, 1) - many.mean_phase_cycles) < per_refresh
