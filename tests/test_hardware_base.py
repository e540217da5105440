"""Hardware files that extend a preset or another file (``base``), and every problem of a file in
one message."""
from __future__ import annotations

import pytest

from sievesim.cli import main
from sievesim.errors import ConfigError
from sievesim.hardware import get_hardware, hardware_from_dict, hardware_to_dict, load_hardware_toml


def _write(path, text):
    path.write_text(text)
    return path


def test_base_preset_with_one_changed_field(tmp_path):
    p = _write(tmp_path / "b200-slow-link.toml",
               'base = "b200"\n[interconnect]\nbandwidth_bytes_per_s_per_direction = 450e9\n')
    hw = get_hardware(str(p))
    b200 = get_hardware("b200")
    assert hw.name == "b200-slow-link"
    assert hw.interconnect.bandwidth_bytes_per_s_per_direction == 450e9
    assert hw.interconnect.latency_s == b200.interconnect.latency_s
    assert hw.gpu == b200.gpu and hw.pim == b200.pim
    assert hw.description == "b200 with interconnect.bandwidth_bytes_per_s_per_direction"


def test_base_file_chain_relative_to_the_file(tmp_path):
    (tmp_path / "sub").mkdir()
    _write(tmp_path / "sub" / "mid.toml", 'base = "h100"\nname = "mid"\n[gpu]\ncompute_efficiency = 0.8\n')
    p = _write(tmp_path / "sub" / "top.toml",
               'base = "mid.toml"\nname = "top"\ndescription = "mine"\n[pim]\npu_placement = "bankgroup"\nmacs_per_command = 64\n')
    hw = load_hardware_toml(p)
    assert (hw.name, hw.description) == ("top", "mine")
    assert hw.gpu.compute_efficiency == 0.8 and hw.gpu.name == get_hardware("h100").gpu.name
    assert hw.pim.pu_placement == "bankgroup" and hw.pim.dram_config == "hbm3-6400"
    assert hw.pim.internal_bandwidth_ratio == get_hardware("h100").pim.internal_bandwidth_ratio


def test_base_pim_false_drops_pim(tmp_path):
    hw = load_hardware_toml(_write(tmp_path / "plain.toml", 'base = "b200"\npim = false\n'))
    assert hw.pim is None and hw.gpu == get_hardware("b200").gpu


def test_base_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"base = 'b20': expected a preset name .*did you mean b200"):
        load_hardware_toml(_write(tmp_path / "a.toml", 'base = "b20"\n'))
    _write(tmp_path / "x.toml", 'base = "y.toml"\n')
    _write(tmp_path / "y.toml", 'base = "x.toml"\n')
    with pytest.raises(ConfigError, match=r"base = '.*': expected a file that does not .* extend itself"):
        load_hardware_toml(tmp_path / "x.toml")


def test_misspelt_key_suggests_the_right_one(tmp_path):
    p = _write(tmp_path / "t.toml", 'base = "b200"\n[gpu]\npeak_bf16_flops = 1e15\n')
    with pytest.raises(ConfigError, match=r"gpu.peak_bf16_flops = '<unknown field>'.*did you mean gpu.peak_flops_bf16"):
        load_hardware_toml(p)


def test_every_problem_in_one_message():
    d = hardware_to_dict(get_hardware("b200"))
    d["gpu"]["peak_bf16_flops"] = d["gpu"].pop("peak_flops_bf16")   # unknown (and so the right one missing)
    d["gpu"]["num_hbm_stacks"] = "8"                                 # wrong type
    del d["interconnect"]["latency_s"]                               # missing
    d["pim"]["macs_per_comand"] = 16                                 # unknown
    d["topology"] = "switch"                                         # belongs in a table
    with pytest.raises(ConfigError) as exc:
        hardware_from_dict(d, source="my.toml")
    msg = str(exc.value)
    assert len(msg.splitlines()) == 1 and msg.startswith("my.toml: 7 problems: ")
    for part in ("gpu.peak_bf16_flops = '<unknown field>'", "did you mean gpu.peak_flops_bf16",
                 "gpu.peak_flops_bf16 = '<missing>'", "gpu.num_hbm_stacks = '8': expected an integer",
                 "interconnect.latency_s = '<missing>'", "did you mean pim.macs_per_command",
                 "topology = '<unknown field>'", "topology: belongs in the [interconnect] table"):
        assert part in msg, part


def test_value_errors_of_all_sections_together():
    d = hardware_to_dict(get_hardware("b200"))
    d["gpu"]["compute_efficiency"] = 1.5
    d["interconnect"]["topology"] = "ring"
    d["pim"]["macs_per_command"] = 0
    with pytest.raises(ConfigError, match=r"3 problems: gpu.compute_efficiency = 1.5: .*; "
                                          r"pim.macs_per_command = 0: .*; interconnect.topology = 'ring'"):
        hardware_from_dict(d)
    # a range problem is reported with the type and presence problems of the same file
    del d["interconnect"]["latency_s"]
    d["gpu"]["num_hbm_stacks"] = "8"
    with pytest.raises(ConfigError, match=r"5 problems: .*gpu.num_hbm_stacks = '8': expected an integer.*"
                                          r"interconnect.latency_s = '<missing>'"):
        hardware_from_dict(d)


def test_cli_exit_2_one_line(tmp_path, capsys):
    p = _write(tmp_path / "t.toml", 'base = "b200"\n[gpu]\npeak_bf16_flops = 1e15\nnum_hbm_stacks = 2.5\n')
    assert main(["hardware", "show", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "2 problems" in err
    ok = _write(tmp_path / "ok.toml", 'base = "b200"\n[interconnect]\nlatency_s = 2e-6\n')
    assert main(["hardware", "show", str(ok)]) == 0
    assert "2.00 us" in capsys.readouterr().out


def test_ratio_checked_against_the_engine(tmp_path):
    p = _write(tmp_path / "t.toml", 'base = "b200"\n[pim]\ninternal_bandwidth_ratio = 8\n')
    with pytest.raises(ConfigError, match=r"pim.internal_bandwidth_ratio = 8: expected 16.38 within 5%, the ratio "
                                          r"the engine derives .*'bank'.*16.38 TB/s per stack"):
        load_hardware_toml(p)
    # left out, it is derived: bank-group PUs with 16 MACs read a quarter of bank PUs
    q = _write(tmp_path / "q.toml", 'name = "q"\n[gpu]\nname = "G"\npeak_flops_bf16 = 1e15\n'
               'hbm_bandwidth_bytes_per_s = 8e12\nhbm_capacity_bytes = 1000\nnum_hbm_stacks = 8\n'
               '[pim]\npu_placement = "bankgroup"\n[interconnect]\nbandwidth_bytes_per_s_per_direction = 1e11\n'
               'latency_s = 1e-6\n')
    hw = load_hardware_toml(q)
    assert hw.pim.internal_bandwidth_ratio == pytest.approx(16.384 / 4)


@pytest.mark.parametrize("dram, named", [("hbm4-12800", "did you mean"), ("hbm2-2000", "PIM commands")])
def test_dram_config_resolved_when_the_file_is_read(tmp_path, capsys, dram, named):
    p = _write(tmp_path / "t.toml", f'base = "b200"\n[pim]\ndram_config = "{dram}"\n')
    assert main(["hardware", "show", str(p)]) == 2
    err = capsys.readouterr().err
    assert f"pim.dram_config = '{dram}'" in err and named in err


def test_a_ratio_from_the_base_is_derived_again_when_the_file_changes_what_it_depends_on(tmp_path):
    """The base's internal_bandwidth_ratio belongs to the base's PUs: a file that changes the PU
    placement and leaves the ratio out gets the ratio the engine derives for its own PUs."""
    p = _write(tmp_path / "t.toml", 'base = "b200"\n[pim]\npu_placement = "bankgroup"\n')
    hw = load_hardware_toml(p)
    assert hw.pim.internal_bandwidth_ratio == pytest.approx(4.096, rel=1e-3)
    assert get_hardware("b200").pim.internal_bandwidth_ratio == pytest.approx(16.0, rel=0.05)
