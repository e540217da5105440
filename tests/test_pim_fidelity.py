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
