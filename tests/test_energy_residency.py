"""Bank-state residency (the engine's count of cycles with a row open, for the background term of
energy, docs/energy.md): hand-computed cases, a replay of the command log, bounds, and energy that
never falls with more traffic."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from sievesim.dram import energy as en
from sievesim.dram.config import get_config
from sievesim.dram.engine import simulate
from sievesim.dram.synthetic import parse_synthetic
from sievesim.dram.traces import RequestTrace


def _trace(addrs, writes=None, arrival=None) -> RequestTrace:
    n = len(addrs)
    return RequestTrace.from_arrays(np.zeros(n, int) if arrival is None else np.asarray(arrival, dtype=np.int64),
                                    np.asarray(addrs, dtype=np.int64),
                                    np.zeros(n, bool) if writes is None else np.asarray(writes, bool))


def _log(res):
    names = list(res.command_log["names"])
    return [(int(c), names[k], tuple(a)) for c, k, a in
            zip(res.command_log["cycle"], res.command_log["command"], res.command_log["addr"])]


def replay_residency(res, config) -> tuple[int, int]:
    """Row-open and refresh cycles summed over pseudo-channels, recomputed from the command log
    alone (independently of the engine's counters): a pseudo-channel is open from the ACT that
    opens its first bank to the PRE/PREA/RDA/WRA that closes its last; a REFab keeps it busy nRFC."""
    levels = config.standard.levels
    unit = levels.index("pseudochannel") + 1
    rfc = int(config.timings["nRFC"]) if config.refresh and config.standard.refresh else 0
    open_banks: dict[tuple, set] = {}
    since: dict[tuple, int] = {}
    open_cycles = ref_cycles = 0
    t_end = res.cycles
    for clk, name, addr in _log(res):
        u, bank = addr[:unit], addr[:levels.index("row")]
        banks = open_banks.setdefault(u, set())
        if name == "ACT":
            if not banks:
                since[u] = clk
            banks.add(bank)
        elif name in ("PRE", "RDA", "WRA", "PREA"):
            was_open = bool(banks)
            banks.difference_update({bank} if name != "PREA" else set(banks))
            if was_open and not banks:
                open_cycles += clk - since[u]
        elif name == "REFab":
            ref_cycles += min(rfc, t_end - clk)
    for u, banks in open_banks.items():
        if banks:
            open_cycles += t_end - since[u]
    return open_cycles, ref_cycles


def test_empty_trace_has_no_residency():
    cfg = get_config("hbm3-6400")
    res = simulate(cfg, _trace([]))
    r = res.residency
    assert (r["row_open_cycles"], r["refresh_cycles"], r["active_standby_cycles"]) == (0, 0, 0)
    assert r["precharge_standby_cycles"] == r["units"] * res.cycles
    assert r["units"] == cfg.num_controllers and r["unit"] == "pseudochannel"


def test_single_read_closed_row_is_open_from_act_to_pre():
    cfg = get_config("hbm3-6400").replace(row_policy="closed", refresh=False)
    t = cfg.timings
    res = simulate(cfg, _trace([0]), log_commands=True)
    log = _log(res)
    assert [n for _, n, _ in log] == ["ACT", "RD", "PRE"]
    act, rd, pre = (c for c, _, _ in log)
    # ACT at 1, RD nRCDRD later, PRE when both nRAS (from ACT) and nRTPL (from RD) have passed
    assert (act, rd) == (1, 1 + t["nRCDRD"])
    assert pre == act + max(t["nRAS"], t["nRCDRD"] + t["nRTPL"])
    r = res.residency
    assert r["row_open_cycles"] == pre - act == max(t["nRAS"], t["nRCDRD"] + t["nRTPL"])
    assert r["active_standby_cycles"] == pre - act
    assert r["precharge_standby_cycles"] == r["units"] * res.cycles - (pre - act)


def test_single_read_open_row_stays_open_to_the_end():
    cfg = get_config("hbm3-6400").replace(refresh=False)
    res = simulate(cfg, _trace([0]), log_commands=True)
    assert res.residency["row_open_cycles"] == res.cycles - 1      # ACT at cycle 1, never closed


@pytest.mark.parametrize("kind,policy", [("random", "open"), ("hotrow", "open"), ("random", "closed"),
                                         ("stream", "closed")])
def test_residency_replays_from_the_command_log(kind, policy):
    cfg = get_config("hbm3-6400").replace(row_policy=policy)
    trace = parse_synthetic(f"synthetic:{kind}:6000", cfg, seed=2)
    trace = dataclasses.replace(trace, arrival=np.arange(len(trace), dtype=np.int64) * 5)   # past a few nREFI
    res = simulate(cfg, trace, log_commands=True, threads=1)
    r = res.residency
    assert (r["row_open_cycles"], r["refresh_cycles"]) == replay_residency(res, cfg)
    assert r["refresh_cycles"] > 0
    # the same on two threads (each counts its own pseudo-channels)
    assert simulate(cfg, trace, threads=2).residency == r


def test_residency_feeds_the_background_term():
    cfg = get_config("hbm3-6400")
    res = simulate(cfg, parse_synthetic("synthetic:random:3000", cfg, seed=1))
    out = en.dram_energy(res, cfg)
    assert out["energy_background"] == "residency"
    p = en.ENERGY_PARAMS["hbm3"]
    r = res.residency
    tck = cfg.tck_ns * 1e-9
    want = (p.active_standby_mw * r["active_standby_cycles"] + p.precharge_standby_mw * r["precharge_standby_cycles"]) \
        * 1e-3 * tck
    assert out["energy_breakdown_j"]["background"] == pytest.approx(want, rel=1e-12)
    # without residency: nRC per ACT, capped at every pseudo-channel active the whole run (it is
    # no bound of the residency: activations of different banks of one pseudo-channel overlap)
    approx = en.dram_energy(dataclasses.replace(res, residency=None), cfg)
    assert approx["energy_background"] == "nRC per ACT"
    assert approx["energy_breakdown_j"]["background"] <= \
        p.active_standby_mw * 1e-3 * r["units"] * res.time_ns * 1e-9 * (1 + 1e-12)


_CFG = get_config("hbm3-6400").replace(clock_ratio=2)
_ADDR = st.integers(0, _CFG.capacity_bytes // _CFG.tx_bytes - 1).map(lambda a: a * _CFG.tx_bytes)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(_ADDR, st.booleans(), st.integers(0, 3000)), min_size=0, max_size=60),
       st.lists(st.tuples(_ADDR, st.booleans()), min_size=1, max_size=30),
       st.sampled_from(["open", "closed"]))
def test_residency_bounded_and_more_traffic_never_less_energy(first, more, policy):
    cfg = _CFG.replace(row_policy=policy)
    first = sorted(first, key=lambda x: x[2])
    a = _trace([x[0] for x in first], [x[1] for x in first], [x[2] for x in first])
    res_a = simulate(cfg, a, threads=1)
    r = res_a.residency
    assert 0 <= r["active_standby_cycles"] <= r["units"] * res_a.cycles
    assert r["row_open_cycles"] + r["refresh_cycles"] >= r["active_standby_cycles"]
    assert r["precharge_standby_cycles"] >= 0
    # the same requests, then more after the first ones are done: never less energy
    start = res_a.cycles + 1
    b = _trace([x[0] for x in first] + [x[0] for x in more], [x[1] for x in first] + [x[1] for x in more],
               [x[2] for x in first] + [start] * len(more))
    res_b = simulate(cfg, b, threads=1)
    assert res_b.residency["active_standby_cycles"] >= r["active_standby_cycles"]
    assert en.dram_energy(res_b, cfg)["energy_j"] >= en.dram_energy(res_a, cfg)["energy_j"]
