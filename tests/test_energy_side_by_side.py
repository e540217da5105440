"""DRAMPower's HBM2 core formulas and AttAcc's PIM energy formulas, re-evaluated on sievesim's runs
(sievesim/benchmarks/_drampower_hbm2.py, _attacc_energy.py; docs/validation.md, section 5)."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from sievesim.benchmarks import _attacc_energy as aa
from sievesim.benchmarks import _drampower_hbm2 as dp
from sievesim.dram.config import get_config
from sievesim.dram.energy import dram_energy
from sievesim.dram.engine import simulate
from sievesim.dram.synthetic import parse_synthetic


def _run(policy: str, kind: str, n: int = 3000):
    cfg = get_config("hbm2-2000").replace(row_policy=policy)
    trace = parse_synthetic(f"synthetic:{kind}:{n}", cfg, seed=4)
    trace = dataclasses.replace(trace, arrival=np.arange(len(trace), dtype=np.int64) * 6)   # a few nREFI
    return cfg, simulate(cfg, trace, log_commands=True)


@pytest.mark.parametrize("policy,kind", [("open", "random"), ("open", "hotrow"), ("closed", "random"),
                                         ("closed", "stream")])
def test_drampower_formulas_with_matched_idds_reproduce_our_energy(policy, kind):
    cfg, res = _run(policy, kind)
    stats = dp.replay(res, cfg)
    # the replay's pseudo-channel states (DRAMPower's rules, from the log) = the engine's residency
    assert int(stats["pc_active_cycles"].sum()) == res.residency["active_standby_cycles"]
    assert int(stats["pc_pre_cycles"].sum()) == res.residency["precharge_standby_cycles"]
    assert int(stats["counts"]["ref"].sum()) > 0
    ours = dram_energy(res, cfg)["energy_breakdown_j"]
    theirs = dp.core_energy(stats, dp.memspec_matching_ours(cfg), cfg)
    for k in dp.COMPONENTS:
        assert theirs[k] == pytest.approx(ours[k], rel=1e-9, abs=1e-18), k
    assert theirs["total"] == pytest.approx(math.fsum(theirs[k] for k in dp.COMPONENTS))


def test_drampower_fixture_prices_by_its_currents():
    cfg, res = _run("open", "random", 2000)
    stats = dp.replay(res, cfg)
    f = dp.core_energy(stats, dp.FIXTURE, cfg)
    p, t = dp.FIXTURE, cfg.timings
    n_act = int(stats["counts"]["act"].sum())
    n_pre = int(stats["counts"]["pre"].sum())
    # E_act + E_pre by hand (factRho = 0: I_1 = (IDD3N + 15 IDD2N) / 16, 16 banks per pseudo-channel)
    i_theta = (p.idd0 * (t["nRP"] + t["nRAS"]) - p.ibeta * t["nRP"]) / t["nRAS"]
    i_1 = (p.idd3n + 15 * p.idd2n) / 16
    want = p.vdd * (i_theta - i_1) * t["nRAS"] * 1e-9 * n_act + p.vdd * (p.ibeta - p.idd2n) * t["nRP"] * 1e-9 * n_pre
    assert f["activation"] == pytest.approx(want)
    assert all(f[k] > 0 for k in dp.COMPONENTS)
    # the bankwise background (factRho = 0) is below the all-or-nothing one of the same currents
    rank = dataclasses.replace(dp.FIXTURE, rho=1.0)
    assert f["background"] <= dp.core_energy(stats, rank, cfg)["background"]


def test_replay_needs_the_log():
    cfg, res = _run("open", "random", 50)
    res.command_log = None
    with pytest.raises(ValueError, match="command log"):
        dp.replay(res, cfg)


# gen_trace_attacc_bank.py --dhead 128 --nhead 16 --seqlen L --dbyte 2 (AttAcc c600051), commands counted
_GENERATOR = {512: {"mac": 2048, "wrgb": 128, "mvsb": 512, "mvgb": 256, "sfm": 16},
              2048: {"mac": 8192, "wrgb": 128, "mvsb": 1280, "mvgb": 1024, "sfm": 16}}


@pytest.mark.parametrize("seqlen", sorted(_GENERATOR))
def test_attacc_counts_are_its_generators(seqlen):
    assert aa.attacc_counts(seqlen) == _GENERATOR[seqlen]


def test_attacc_counts_refuse_what_the_generator_does_differently():
    with pytest.raises(ValueError, match="heads = 32"):
        aa.attacc_counts(512, heads=32)


@pytest.mark.parametrize("seqlen", [512, 2048])
def test_attacc_and_sievesim_per_useful_mac(seqlen):
    useful = 2 * seqlen * 128 * 16
    theirs = aa.attacc_energy(aa.attacc_counts(seqlen), seqlen)
    ours = aa.sievesim_energy(seqlen)
    assert ours["macs"] == useful                       # no padding for these shapes
    # ACT: both 0.11 pJ/bit x 16 bits per MAC (each row opened once, read whole)
    assert theirs["activation"] / useful * 1e12 == pytest.approx(0.11 * 16)
    assert ours["activation"] == pytest.approx(theirs["activation"])
    # MAC: cell read 0.44 x 16 for both; AttAcc's ALU for the score layer's MACs only (half)
    assert theirs["mac"] / useful * 1e12 == pytest.approx(0.44 * 16 + 0.32 / 2)
    assert ours["mac"] / useful * 1e12 == pytest.approx(0.44 * 16 + 0.32)
    assert theirs["refresh_background"] == 0 < ours["refresh_background"]
    assert ours["io"] > theirs["io"] > 0
