"""PIM timing of a given device (input-write-to-MAC gap, input-write spacing, PU-clock MAC
pacing, mode switch per kernel): each gap holds in the engine's command log, a gap no longer than
the standard's changes nothing, and the defaults leave every preset as it was."""
from __future__ import annotations

import numpy as np
import pytest

from sievesim.dram import get_config
from sievesim.pim import gemv_program, pim_config, plan_gemv, run_programs
from sievesim.pim.device import PIMDevice, gemv
from sievesim.pim.engine import with_pim_timing

AQUABOLT = dict(dram_config="hbm2-pim-2400", stacks=4, banks_per_pu=2, global_buffer_bytes=256,
                dual_row_buffer=False)


def _gaps(res, first: str, then: str) -> np.ndarray:
    """Cycles from each ``first`` command to the next ``then`` command after it."""
    log = res.command_log
    names = list(log["names"])
    cyc, cmd = np.asarray(log["cycle"]), np.asarray(log["command"])
    a, b = cyc[cmd == names.index(first)], cyc[cmd == names.index(then)]
    nxt = np.searchsorted(b, a, side="right")
    keep = nxt < b.size
    return b[nxt[keep]] - a[keep]


def _run(device: PIMDevice, d_in: int, d_out: int):
    geo = device.geometry
    plan = plan_gemv(d_in, d_out, 1, 1, geo, dict(device.config.timings))
    cfg, spec = device._compiled_for(1)
    return run_programs(cfg, [gemv_program(plan, geo)], compiled=spec, log_commands=True)


def test_each_device_gap_holds_in_the_command_log():
    dev = PIMDevice(**AQUABOLT, input_write_to_mac_cycles=19, input_write_interval_cycles=4, pu_clock_divider=4)
    res = _run(dev, 1024, 64)
    assert _gaps(res, "GWRITE", "MACAB").min() == 19          # the MAC waits for the last input write
    assert _gaps(res, "GWRITE", "GWRITE").min() == 4
    assert _gaps(res, "MACAB", "MACAB").min() == 4            # nCCDAB = PU clock = 4 on hbm2-pim-2400
    plain = _run(PIMDevice(**AQUABOLT), 1024, 64)
    assert 8 + 2 <= _gaps(plain, "GWRITE", "MACAB").min() < 19  # the standard's nCWL + nBL (and row rules)
    assert _gaps(plain, "GWRITE", "GWRITE").min() == 2        # nBL


def test_a_pu_clock_slower_than_the_command_rate_paces_the_macs():
    dev = PIMDevice(**AQUABOLT, pu_clock_divider=6)
    res = _run(dev, 4096, 16)
    assert _gaps(res, "MACAB", "MACAB").min() == 6
    base = _run(PIMDevice(**AQUABOLT), 4096, 16)
    assert res.cycles > base.cycles + (6 - 4) * (res.macabs - 1) * 0.8


def test_gaps_no_longer_than_the_standards_change_nothing():
    # hbm3e-8000: nCWL + nBL = 10, nBL = 2, nCCDAB = 6
    same = PIMDevice(input_write_to_mac_cycles=10, input_write_interval_cycles=2, pu_clock_divider=6)
    base = PIMDevice()
    for shape in ((4096, 4096, 1, 256), (2880, 5760, 2, 2)):
        assert base.program_cycles(gemv(base, *shape), shape[-1]) == same.program_cycles(gemv(same, *shape), shape[-1])


def test_the_mode_switch_is_paid_once_per_kernel():
    dev, switched = PIMDevice(**AQUABOLT), PIMDevice(**AQUABOLT, mode_switch_cycles=300)
    r, s = gemv(dev, 4096, 4096, 1, 64), gemv(switched, 4096, 4096, 1, 64)
    assert switched.program_cycles(s, 64) == pytest.approx(dev.program_cycles(r, 64) + 300)


def test_the_b200_presets_keep_the_standards_pim_timing():
    from sievesim.hardware import get_hardware
    for name in ("b200", "b200-pim4x", "b200-pim8x", "b200-power"):
        dev = PIMDevice.from_hardware(get_hardware(name))
        assert (dev.input_write_to_mac_cycles, dev.input_write_interval_cycles, dev.pu_clock_divider,
                dev.mode_switch_cycles, dev.banks_per_row_opening, dev.input_write_closes_row) == (0, 0, 0, 0, 0, False)
        assert dev._base.standard.constraints == get_config(dev.dram_config).standard.constraints


def test_the_aquabolt_preset_carries_the_device_timing():
    from sievesim.hardware import get_hardware
    hw = get_hardware("aquabolt-xl")
    dev = PIMDevice.from_hardware(hw)
    assert (dev.input_write_to_mac_cycles, dev.input_write_interval_cycles, dev.pu_clock_divider) == (19, 4, 4)
    assert (dev.input_write_closes_row, dev.banks_per_row_opening, dev.geometry.steps_per_row) == (True, 1, 32)
    assert (dev.banks_per_pu, dev.macs_per_command, dev.global_buffer_bytes, dev.stacks) == (2, 16, 256, 4)
    # peaks (ISSCC 2021): 128 PUs x 16 lanes x 2 FLOP x 300 MHz = 1.2288 TFLOP/s per cube; 4x the
    # cube's 307.2 GB/s
    assert dev.peak_flops() / 4 == pytest.approx(128 * 16 * 2 * 1.2e9 / 4, rel=1e-3)
    assert hw.pim.internal_bandwidth_bytes_per_s_per_stack == pytest.approx(4 * 1024 * 2.4e9 / 8)


@pytest.mark.parametrize("field, value", [("input_write_to_mac_cycles", -1), ("pu_clock_divider", 2.5),
                                          ("input_write_interval_cycles", True), ("mode_switch_cycles", -3)])
def test_bad_timing_fields_name_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        PIMDevice(**{field: value})
    from sievesim.hardware.spec import PIMSpec
    with pytest.raises(ValueError, match=field):
        PIMSpec(**{field: value})


def test_device_timing_needs_pim_commands():
    from sievesim.dram import get_config
    with pytest.raises(ValueError, match="dram_config"):
        with_pim_timing(get_config("hbm2-2000"), pu_clock_divider=4)
    cfg = pim_config("hbm2-pim-2400", 1)
    assert with_pim_timing(cfg) is cfg


def test_input_writes_through_a_reserved_row_wait_for_its_activation_and_recovery():
    # hbm2-pim-2400: nRP 14 + nRCDWR 10 from the weight row's precharge to the first input write;
    # nCWL 8 + nBL 2 + nWR 16 + nRP 14 from the last input write to the weight row's activation
    dev = PIMDevice(**AQUABOLT, input_write_closes_row=True, input_write_to_mac_cycles=19,
                    input_write_interval_cycles=4, pu_clock_divider=4)
    res = _run(dev, 4096, 64)
    assert _gaps(res, "PREAB", "GWRITE").min() == 14 + 10
    assert _gaps(res, "GWRITE", "ACTAB").min() == 8 + 2 + 16 + 14         # from the last write of a tile
    plain = _run(PIMDevice(**AQUABOLT, input_write_to_mac_cycles=19, input_write_interval_cycles=4,
                           pu_clock_divider=4), 4096, 64)
    assert res.cycles > plain.cycles
    with pytest.raises(ValueError, match="banks_per_row_opening"):
        PIMDevice(**AQUABOLT, banks_per_row_opening=4)      # more banks than the pair


@pytest.mark.parametrize("single", [False, True])
@pytest.mark.parametrize("d_in, d_out, tokens", [(3000, 100, 1), (1000, 700, 2), (4096, 64, 1)])
def test_samsungs_row_order_obeys_every_rule_of_the_standard(tmp_path, single, d_in, d_out, tokens):
    # the PREABs before input writes and one bank per opened row, replayed by the independent checker
    from dram_checker import check, read_log
    from sievesim.dram.engine import write_command_log
    from sievesim.pim import geometry_for

    cfg = pim_config("hbm3-6400", 1, dual_row_buffer=not single)
    geo = geometry_for(cfg, banks_per_pu=2, global_buffer_bytes=256, multi_vector=False, banks_per_row_opening=1,
                       input_write_closes_row=True)
    cfg = with_pim_timing(cfg, input_write_closes_row=True, input_write_to_mac_cycles=19)
    plan = plan_gemv(d_in, d_out, tokens, 1, geo, dict(cfg.timings))
    res = run_programs(cfg, [gemv_program(plan, geo)], log_commands=True)

    class _Logged:
        command_log = res.command_log

    path = tmp_path / "pim.csv"
    write_command_log(_Logged(), cfg, path)
    assert check(read_log(path), "jedec", single_buffer=single) == []
    assert res.macabs == plan.tokens * plan.macs_per_token
