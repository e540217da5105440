"""PIM energy per PU placement: a MAC command is charged for the cells its PUs read (one bank per
PU: every bank with a PU per bank, one in 2 per bank pair, one in 4 per bank group), counted by hand
from the per-bit figures (O'Connor et al., MICRO 2017, via AttAcc's src/config.py)."""
from __future__ import annotations

import pytest

from sievesim.dram import get_config
from sievesim.dram.energy import ENERGY_PARAMS, command_energies, macab_cell_bits

CELL, COLUMN, MAC = 0.44, 1.01, 0.32      # pJ/bit, pJ/bit, pJ per MAC (docs/energy.md)


def test_the_per_bit_figures_are_the_documented_ones():
    p = ENERGY_PARAMS["hbm3"]
    assert (p.cell_pj_per_bit, p.column_pj_per_bit, p.mac_pj) == (CELL, COLUMN, MAC)


# hbm3e-8000: 48 banks per pseudo-channel (3 SIDs x 4 bank groups x 4 banks), 32-byte columns.
# (banks_per_pu, MACs per command, PUs, bytes one PU reads, path pJ/bit)
CASES = [
    (1, 16, 48, 32, CELL),                 # b200: a PU per bank, 16 bf16 lanes = one 32 B column per bank
    (2, 16, 24, 32, CELL),                 # bank pair, 16 lanes (Samsung's PU): one bank of two
    (2, 8, 24, 16, CELL),                  # b200-pim4x: 16 lanes at half the command rate = 16 B per command
    (4, 16, 12, 32, CELL + COLUMN),        # bank group: one bank of four, through the column path
    (4, 32, 12, 64, CELL + COLUMN),        # b200-pim8x: 32 lanes, 64 B per PU per command
]


@pytest.mark.parametrize("banks_per_pu, macs, pus, bytes_per_pu, path", CASES)
def test_a_mac_command_is_charged_for_the_cells_its_pus_read(banks_per_pu, macs, pus, bytes_per_pu, path):
    cfg = get_config("hbm3e-8000")
    hand_bits = pus * bytes_per_pu * 8
    assert macab_cell_bits(cfg, banks_per_pu=banks_per_pu, macs_per_command=macs) == hand_bits
    e = command_energies(cfg, banks_per_pu=banks_per_pu, macs_per_command=macs)
    hand_pj = hand_bits * path + pus * macs * MAC
    assert e.per_command["MACAB"] == pytest.approx(hand_pj, rel=1e-12)
    assert e.macs_per_macab == pus * macs
    # per MAC: 2 bytes of cells (16 bits) and one MAC, for every placement
    assert e.per_command["MACAB"] / e.macs_per_macab == pytest.approx(16 * path + MAC, rel=1e-12)


def test_bank_pair_pays_half_the_cells_of_bank_pus_for_the_same_lanes():
    cfg = get_config("hbm3e-8000")
    bank = command_energies(cfg, banks_per_pu=1).per_command["MACAB"]
    pair = command_energies(cfg, banks_per_pu=2).per_command["MACAB"]
    assert bank == pytest.approx(48 * 256 * CELL + 48 * 16 * MAC)          # 5.65 nJ (docs/energy.md)
    assert pair == pytest.approx(24 * 256 * CELL + 24 * 16 * MAC)          # 2.83 nJ, not 48 banks' cells
    assert pair == pytest.approx(bank / 2)


def test_an_hbm2_pseudo_channel_with_bank_pair_pus_reads_eight_banks():
    # Aquabolt-XL's pseudo-channel: 16 banks, 8 bank-pair PUs of 16 FP16 lanes (ISSCC 2021)
    cfg = get_config("hbm2-2000")
    e = command_energies(cfg, banks_per_pu=2, macs_per_command=16)
    assert macab_cell_bits(cfg, banks_per_pu=2) == 8 * 256
    assert e.per_command["MACAB"] == pytest.approx(8 * 256 * CELL + 8 * 16 * MAC)


def test_fp8_weights_read_half_the_bytes():
    cfg = get_config("hbm3e-8000")
    assert macab_cell_bits(cfg, operand_bytes=1) == 48 * 16 * 8


@pytest.mark.parametrize("field, kwargs", [("banks_per_pu", dict(banks_per_pu=3)),
                                           ("operand_bytes", dict(operand_bytes=0)),
                                           ("operand_bytes", dict(operand_bytes="2"))])
def test_bad_pu_fields_name_the_field(field, kwargs):
    with pytest.raises(ValueError, match=field):
        command_energies(get_config("hbm3e-8000"), **kwargs)


def test_a_gemv_on_the_pim4x_preset_costs_its_cells_once(capsys):
    # docs/energy.md's b200-pim4x block: 4096 x 4096, one token, tensor-parallel over 8 stacks
    from sievesim.cli import main

    assert main(["pim", "gemv", "--hardware", "b200-pim4x", "--d-in", "4096", "--d-out", "4096", "--json"]) == 0
    import json
    d = json.loads(capsys.readouterr().out)
    macabs = d["mac_ops"] / (24 * 8)
    assert d["energy_breakdown_j"]["pim_mac"] == pytest.approx(macabs * (24 * 128 * CELL + 24 * 8 * MAC) * 1e-12)
