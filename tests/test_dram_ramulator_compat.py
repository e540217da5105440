"""Ramulator 2.0 inputs as Ramulator takes them: addresses beyond the capacity (--address-overflow
wrap), the TraceRecorder and CommandCounter controller plugins; and the threads fallback said in
the output."""
from __future__ import annotations

import json

import numpy as np
import pytest

from sievesim.cli import main
from sievesim.dram.config import get_config
from sievesim.dram.engine import simulate, write_command_log
from sievesim.dram.mapping import map_addresses
from sievesim.dram.synthetic import make_trace
from sievesim.dram.traces import RequestTrace
from sievesim.errors import ConfigError, TraceError

from test_dram_engine import RAMULATOR_YAML


@pytest.mark.parametrize("mapper", ["RoBaRaCoCh", "ChRaBaRoCo"])
def test_wrap_is_modulo_capacity_for_sliced_mappers(mapper):
    config = get_config("ramulator2-hbm3").replace(mapper=mapper)
    rng = np.random.default_rng(0)
    addrs = rng.integers(0, config.capacity_bytes, 500) & ~np.int64(31)
    base = map_addresses(config, addrs)
    for k in (1, 3):
        assert np.array_equal(map_addresses(config, addrs + k * config.capacity_bytes, overflow="wrap"), base)
    with pytest.raises(TraceError, match=r"request 0: .*below the capacity.*--address-overflow wrap"):
        map_addresses(config, addrs + config.capacity_bytes)


def test_wrap_keeps_the_high_bits_in_the_row_for_mop4clxor():
    """Ramulator's MOP4CLXOR: ``addr_vec[row] = (int) addr`` (every bit left above the other levels)."""
    config = get_config("ramulator2-hbm3").replace(mapper="MOP4CLXOR")
    addrs = np.arange(0, 64 * 1000, 64, dtype=np.int64)
    base = map_addresses(config, addrs)
    row = config.standard.levels.index("row")
    over = map_addresses(config, addrs + 2 * config.capacity_bytes, overflow="wrap")
    assert np.array_equal(np.delete(over, row, axis=1), np.delete(base, row, axis=1))
    assert np.array_equal(over[:, row], base[:, row] + 2 * config.org["row"])


@pytest.mark.parametrize("mapper, name", [
    ("RoBaRaCoCh", "ramulator2-hbm3"), ("ChRaBaRoCo", "ramulator2-hbm3"), ("MOP4CLXOR", "ramulator2-hbm3"),
    ("RoBaRaCoCh", "hbm3e-8000"), ("ChRaBaRoCo", "hbm3e-8000")])     # hbm3e-8000: 3 SIDs, not a power of 2
def test_mapping_in_slices_is_mapping_one_by_one(mapper, name):
    """map_addresses works through the trace in slices of _CHUNK requests, into int32 vectors (the
    sliced mappers in compiled code): the result across slice boundaries equals mapping pieces of
    any size, and the mixed-radix formula below."""
    from sievesim.dram import mapping
    config = get_config(name).replace(mapper=mapper)
    rng = np.random.default_rng(7)
    n = 2 * mapping._CHUNK + 5                      # noqa: SLF001
    addrs = rng.integers(0, 4 * config.capacity_bytes, n)
    whole = map_addresses(config, addrs, overflow="wrap")
    assert whole.dtype == np.int32 and whole.shape == (n, len(config.standard.levels))
    pieces = [map_addresses(config, addrs[lo:lo + 977], overflow="wrap") for lo in range(0, n, 977)]
    assert np.array_equal(np.concatenate(pieces), whole)
    if mapper != "MOP4CLXOR":                       # one level after another from the low bits
        rest = addrs >> (int(config.tx_bytes).bit_length() - 1)
        radix = config.address_radix
        n_lv, row = len(radix), config.standard.levels.index("row")
        order = range(n_lv - 1, -1, -1) if mapper == "ChRaBaRoCo" else [0, n_lv - 1, *range(1, row + 1)]
        for lv in order:
            assert np.array_equal(whole[:, lv], rest % radix[lv])
            rest = rest // radix[lv]


def test_simulate_wrap_equals_the_wrapped_trace_and_counts_it():
    config = get_config("ramulator2-hbm3")
    t = make_trace("random", 2000, config, seed=1, write_fraction=0.0)
    shifted = RequestTrace(is_write=t.is_write, arrival=t.arrival, source="shifted",
                           addresses=np.where(np.arange(len(t)) % 2 == 0, t.addresses + config.capacity_bytes,
                                              t.addresses))
    a, b = simulate(config, t), simulate(config, shifted, address_overflow="wrap")
    assert a.wrapped_requests == 0 and b.wrapped_requests == 1000
    assert (a.cycles, a.row_hits, a.avg_read_latency_cycles) == (b.cycles, b.row_hits, b.avg_read_latency_cycles)


def test_cli_address_overflow(tmp_path, capsys):
    p = tmp_path / "t.trace"
    p.write_text("LD 0x40\nLD 0xffffffffffc0\n")
    assert main(["dram", "run", str(p), "--config", "ramulator2-hbm3"]) == 2
    assert "--address-overflow wrap" in capsys.readouterr().err
    assert main(["dram", "run", str(p), "--config", "ramulator2-hbm3", "--address-overflow", "wrap", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["wrapped_requests"] == 1


def _yaml_with_plugins(tmp_path, plugins: str):
    p = tmp_path / "r.yaml"
    p.write_text(RAMULATOR_YAML.replace("    plugins:\n", "    plugins:\n" + plugins))
    return p


def test_trace_recorder_and_command_counter(tmp_path):
    rec, cnt = tmp_path / "out" / "cmds.csv", tmp_path / "counts.txt"
    (tmp_path / "out").mkdir()
    p = _yaml_with_plugins(tmp_path, f"""      - ControllerPlugin:
          impl: TraceRecorder
          path: {rec}
      - ControllerPlugin:
          impl: CommandCounter
          path: {cnt}
          commands_to_count: [ACT, RD, WR, REFab]
""")
    config = get_config(p)
    assert [pl.impl for pl in config.plugins] == ["TraceRecorder", "CommandCounter"]
    trace = make_trace("random", 3000, config, seed=2)
    result = simulate(config, trace)
    plain = simulate(config.replace(plugins=()), trace, log_commands=True)  # plugins change no timing
    assert result.cycles == plain.cycles and result.command_log is None
    ref = tmp_path / "ref.csv"
    write_command_log(plain, config, ref)
    assert rec.read_text() == ref.read_text()
    names = np.array(plain.command_log["names"])[plain.command_log["command"].astype(int)]
    expected = {n: int((names == n).sum()) for n in ("ACT", "RD", "WR", "REFab")}
    assert result.command_counts == expected and expected["ACT"] > 0 and expected["RD"] > 0
    assert cnt.read_text() == "".join(f"{n}, {c}\n" for n, c in expected.items())
    assert result.to_dict()["command_counts"] == expected


@pytest.mark.parametrize("plugin, named", [
    ("impl: RFMManager\n          path: x", "impl = 'RFMManager': expected one of ['TraceRecorder', 'CommandCounter']"),
    ("impl: CommandCounter\n          path: x\n          commands_to_count: [ACT, XYZ]",
     "commands_to_count = 'XYZ': expected a command of"),
    ("impl: CommandCounter\n          path: x", "commands_to_count = None"),
    ("impl: TraceRecorder\n          path: x\n          format: csv", "ControllerPlugin.format: not supported"),
])
def test_bad_plugins_are_named(tmp_path, plugin, named):
    p = _yaml_with_plugins(tmp_path, f"      - ControllerPlugin:\n          {plugin}\n")
    with pytest.raises(ConfigError) as exc:
        get_config(p)
    assert named in str(exc.value)


def test_threads_fallback_is_said(capsys):
    assert main(["dram", "run", "synthetic:stream:2000", "--config", "ramulator2-hbm3", "--threads", "9"]) == 0
    out = capsys.readouterr().out
    assert "threads                  8" in out and "the configuration has 8 controllers" in out
    # a queue fills at clock ratio 1: the lockstep runs it on the threads asked for, and says nothing
    assert main(["dram", "run", "synthetic:hotrow:20000", "--config", "hbm2-2000", "--threads", "2"]) == 0
    out = capsys.readouterr().out
    assert ("threads                  2" in out and "threads_note" not in out) or "waited for each other" in out
    assert main(["dram", "run", "synthetic:stream:2000", "--config", "hbm3e-8000", "--threads", "2"]) == 0
    assert "threads_note" not in capsys.readouterr().out


def test_libyaml_reads_a_configuration_as_pyyaml_does(tmp_path, monkeypatch):
    """The YAML reader parses with libyaml where PyYAML has it: the same configuration, and for
    YAML it refuses, PyYAML's own message (the same with or without libyaml)."""
    import yaml

    from sievesim.dram import ramulator_yaml

    good = tmp_path / "r.yaml"
    good.write_text(RAMULATOR_YAML)
    bad = tmp_path / "bad.yaml"
    bad.write_text(RAMULATOR_YAML.replace("  impl: GenericDRAM\n", "  impl: [GenericDRAM\n"))
    calls = []
    real = yaml.load
    monkeypatch.setattr(yaml, "load", lambda text, Loader: calls.append(Loader) or real(text, Loader=Loader))
    with_c = get_config(good)
    with pytest.raises(ConfigError) as refused_c:
        get_config(bad)
    if hasattr(yaml, "CSafeLoader"):
        assert yaml.CSafeLoader in calls
    monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    assert get_config(good) == with_c
    with pytest.raises(ConfigError) as refused:
        get_config(bad)
    assert str(refused.value) == str(refused_c.value) and "not valid YAML" in str(refused.value)
    assert ramulator_yaml._load_yaml(yaml, "a: [1, 2]") == {"a": [1, 2]}      # noqa: SLF001
