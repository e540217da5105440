"""Hardware specs: preset values against facts.md, derived PIM figures, TOML round trip, bad input."""
from __future__ import annotations

import dataclasses

import pytest

from sievesim.errors import ConfigError
from sievesim.hardware import (
    GPUSpec,
    HardwareSpec,
    InterconnectSpec,
    PIMSpec,
    SystemSpec,
    get_hardware,
    hardware_from_dict,
    hardware_to_dict,
    list_hardware,
    load_hardware_toml,
    save_hardware_toml,
)

PRESETS = ["b200", "h100", "h200", "b200-pim4x", "b200-pim8x"]

# B200-class HBM3E stack (facts.md section 3): 32 pseudo-channels x 3 SIDs x 4 bank groups x 4 banks;
# Duplex HBM3_8.0Gbps: nCCDAB = 6 CK at 2 GHz -> one all-bank MAC command every 3 ns.
BANKS_PER_HBM3E_STACK = 32 * 3 * 4 * 4
T_CCD_AB_S = 6 / 2.0e9


def test_presets_listed():
    assert set(PRESETS) <= set(list_hardware())


def test_b200_is_the_paper_default():
    hw = get_hardware("b200")
    assert hw.gpu.peak_flops_bf16 == 2250e12
    assert hw.gpu.num_hbm_stacks == 8
    assert hw.hbm_bandwidth_per_stack == 1.0e12
    assert hw.gpu.hbm_capacity_bytes == 8 * 32 * 3 * 16 * 16384 * 1024
    assert hw.pim.dram_config == "hbm3e-8000" and hw.pim.pu_placement == "bank"
    assert hw.pim.macs_per_command == 16 and hw.pim.internal_bandwidth_ratio == 16
    assert hw.interconnect.bandwidth_bytes_per_s_per_direction == 900e9
    assert hw.interconnect.topology == "switch"
    # 16 TB/s per stack, op/B = 1 for bf16 -> 16 TFLOP/s per stack, 128 TFLOP/s per GPU.
    assert hw.pim.internal_bandwidth_bytes_per_s_per_stack == 16e12
    assert hw.pim.peak_flops_per_stack == 16e12
    assert hw.pim_peak_flops == 128e12
    assert hw.gpu.ridge_flops_per_byte == pytest.approx(281.25)


@pytest.mark.parametrize("name, ratio", [("b200", 16), ("b200-pim8x", 8), ("b200-pim4x", 4)])
def test_pim_ratio_agrees_with_organisation(name, ratio):
    """The roofline ratio must match what PUs x MACs per command x tCCD_AB deliver (within 5 %)."""
    hw = get_hardware(name)
    assert hw.pim.internal_bandwidth_ratio == ratio
    implied = hw.pim.implied_internal_bandwidth_bytes_per_s_per_stack(BANKS_PER_HBM3E_STACK, T_CCD_AB_S)
    assert implied == pytest.approx(hw.pim.internal_bandwidth_bytes_per_s_per_stack, rel=0.05)


def test_h100_h200_values():
    h100, h200 = get_hardware("h100"), get_hardware("h200")
    assert h100.gpu.peak_flops_bf16 == pytest.approx(989.4e12)
    assert h100.gpu.num_hbm_stacks == 5 and h200.gpu.num_hbm_stacks == 6
    assert h200.gpu.hbm_bandwidth_bytes_per_s == 4.8e12
    assert h100.interconnect.bandwidth_bytes_per_s_per_direction == 450e9
    # hbm3-6400's bank PUs read 8.738 TB/s per stack in the engine: 10.92x of H200's 800 GB/s
    assert h200.pim_peak_flops == pytest.approx(6 * 10.92 * 800e9)
    assert h100.pim.internal_bandwidth_ratio == 13.03


def test_efficiency_factors():
    hw = get_hardware("b200")
    gpu = dataclasses.replace(hw.gpu, compute_efficiency=0.8, memory_efficiency=0.85)
    assert gpu.effective_flops == pytest.approx(1800e12)
    assert gpu.effective_bandwidth_bytes_per_s == pytest.approx(6.8e12)


def test_pim_external_bandwidth_follows_gpu():
    hw = get_hardware("b200")
    slower = HardwareSpec(name="x", gpu=dataclasses.replace(hw.gpu, hbm_bandwidth_bytes_per_s=4e12),
                          pim=PIMSpec(), interconnect=hw.interconnect)
    assert slower.pim.internal_bandwidth_bytes_per_s_per_stack == pytest.approx(8e12)
    with pytest.raises(ConfigError, match="external_bandwidth_bytes_per_s_per_stack"):
        PIMSpec().peak_flops_per_stack
    with pytest.raises(ConfigError, match=r"pim.external_bandwidth_bytes_per_s_per_stack = 2.*per stack"):
        HardwareSpec(name="x", gpu=hw.gpu, pim=PIMSpec(external_bandwidth_bytes_per_s_per_stack=2e12),
                     interconnect=hw.interconnect)


def test_plain_hbm_has_no_pim_figures():
    hw = get_hardware("b200")
    plain = HardwareSpec(name="plain", gpu=hw.gpu, pim=None, interconnect=hw.interconnect)
    assert not plain.has_pim
    with pytest.raises(ConfigError, match="pim"):
        plain.pim_peak_flops


def test_interconnect_transfer_time():
    link = InterconnectSpec(bandwidth_bytes_per_s_per_direction=900e9, latency_s=0.8e-6)
    assert link.transfer_time_s(0) == 0.0
    assert link.transfer_time_s(900e6) == pytest.approx(1e-3 + 0.8e-6)


def test_system_spec():
    sys_ = SystemSpec(get_hardware("b200"), num_gpus=4)
    assert sys_.experts_per_gpu(128) == 32
    with pytest.raises(ConfigError, match="num_experts = 130"):
        sys_.experts_per_gpu(130)
    with pytest.raises(ConfigError, match="num_gpus = 0"):
        SystemSpec(get_hardware("b200"), num_gpus=0)
    assert SystemSpec(get_hardware("b200"), num_gpus=2, attention="tp", experts="tp").experts == "tp"
    with pytest.raises(ConfigError, match="attention = 'sp'"):
        SystemSpec(get_hardware("b200"), num_gpus=2, attention="sp")
    with pytest.raises(ConfigError, match="experts = 'tp'"):
        SystemSpec(get_hardware("b200"), num_gpus=2, experts="tp")       # needs tensor-parallel attention


@pytest.mark.parametrize("name", PRESETS)
def test_toml_round_trip(name, tmp_path):
    hw = get_hardware(name)
    p1, p2 = tmp_path / "a.toml", tmp_path / "b.toml"
    save_hardware_toml(hw, p1)
    back = load_hardware_toml(p1)
    assert back == hw
    save_hardware_toml(back, p2)
    assert p1.read_text() == p2.read_text()
    assert get_hardware(str(p1)) == hw


def _good() -> dict:
    return hardware_to_dict(get_hardware("b200"))


@pytest.mark.parametrize("section, key, value, match", [
    ("gpu", "peak_flops_bf16", -1.0, r"peak_flops_bf16 = -1.0"),
    ("gpu", "num_hbm_stacks", 2.5, r"num_hbm_stacks = 2.5"),
    ("gpu", "compute_efficiency", 1.5, r"compute_efficiency = 1.5"),
    ("gpu", "hbm_capacity_bytes", "192GB", r"hbm_capacity_bytes = '192GB'"),
    ("pim", "pu_placement", "banks", r"pu_placement = 'banks'.*did you mean 'bank'"),
    ("pim", "internal_bandwidth_ratio", 0, r"internal_bandwidth_ratio = 0"),
    ("pim", "activation_on_pim", "no", r"activation_on_pim = 'no'"),
    ("pim", "dram_config", "", r"dram_config = ''"),
    ("interconnect", "topology", "ring", r"topology = 'ring'"),
    ("interconnect", "latency_s", -1e-6, r"latency_s = -1e-06"),
    ("gpu", "peak_flops", 1e15, r"gpu.peak_flops = '<unknown field>'.*peak_flops_bf16"),
])
def test_bad_fields(section, key, value, match):
    d = _good()
    d[section][key] = value
    with pytest.raises(ConfigError, match=match):
        hardware_from_dict(d)


def test_missing_field_is_named():
    d = _good()
    del d["gpu"]["num_hbm_stacks"]
    with pytest.raises(ConfigError, match=r"gpu.num_hbm_stacks = '<missing>'"):
        hardware_from_dict(d)
    d = _good()
    del d["interconnect"]
    with pytest.raises(ConfigError, match=r"interconnect = '<missing>'"):
        hardware_from_dict(d)


def test_pim_section_optional_in_toml(tmp_path):
    d = _good()
    del d["pim"]
    hw = hardware_from_dict(d)
    assert hw.pim is None
    save_hardware_toml(hw, tmp_path / "p.toml")
    assert load_hardware_toml(tmp_path / "p.toml") == hw


def test_unknown_preset_suggests_nearest():
    with pytest.raises(ConfigError, match=r"hardware = 'b20'.*nearest: b200"):
        get_hardware("b20")


def test_gpu_spec_positional_contract():
    gpu = GPUSpec("G", 1e15, 4e12, 80 * 2**30, 4)
    assert gpu.compute_efficiency == 1.0 and gpu.hbm_bandwidth_per_stack == 1e12
