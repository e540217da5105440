"""Regression tests of the input contract: every example of issue 15, one test (or one row) each.

Each case runs ``sievesim.cli.main`` in-process (tests/contract_helpers.py) and must end in well
under a second with exit status 2 and one stderr line naming the field or file -- or, where the
input is fine, with a correct result.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from contract_helpers import assert_refused, run_cli

# ------------------------------------------------------------------------------------------
# 1. the CLI's last line of defence: files, encodings, output paths, seeds, YAML syntax


def _write(path, data: bytes | str):
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


NOT_UTF8 = b'name = "\xff\xfe"\n'


@pytest.mark.parametrize("argv, name, needle", [
    (["dram", "run", "synthetic:stream:10", "--config", "{f}"], "c.toml", "not UTF-8"),
    (["dram", "run", "synthetic:stream:10", "--config", "{f}"], "c.yaml", "not UTF-8"),
    (["model", "show", "{f}"], "config.json", "not UTF-8"),
    (["model", "show", "{f}"], "m.toml", "not UTF-8"),
    (["hardware", "show", "{f}"], "h.toml", "not UTF-8"),
    (["policy", "decide", "--model", "mixtral-8x7b", "--counts", "{f}"], "counts.json", "not UTF-8"),
])
def test_non_utf8_files_are_named(tmp_path, argv, name, needle):
    f = _write(tmp_path / name, NOT_UTF8)
    line = assert_refused(run_cli([a.format(f=f) for a in argv]), needle)
    assert str(f) in line


@pytest.mark.parametrize("argv", [
    ["dram", "gen-trace", "stream", "--requests", "10", "-o", "{missing}/t"],
    ["dram", "gen-trace", "stream", "--requests", "10", "-o", "{dir}"],
    ["dram", "run", "synthetic:stream:10", "--log-commands", "{missing}/log.csv"],
    ["pim", "gemv", "--d-in", "64", "--d-out", "64", "--log-commands", "{dir}"],
    ["model", "save", "mixtral-8x7b", "{missing}/m.toml"],
    ["hardware", "save", "b200", "{dir}"],
])
def test_unwritable_output_paths(tmp_path, argv):
    argv = [a.format(missing=tmp_path / "no" / "such", dir=tmp_path) for a in argv]
    line = assert_refused(run_cli(argv), "cannot open")
    assert str(tmp_path) in line


@pytest.mark.parametrize("argv", [
    ["dram", "run", "synthetic:stream:10", "--seed", "-1"],
    ["dram", "gen-trace", "stream", "--requests", "10", "-o", "x", "--seed", "-1"],
    ["trace-stats", "synthetic:mixtral-8x7b", "--seed", "-1"],
])
def test_negative_seed(argv):
    assert_refused(run_cli(argv), "--seed", "-1")


def test_yaml_syntax_error_is_one_line(tmp_path):
    f = _write(tmp_path / "c.yaml", "MemorySystem:\n  impl: [GenericDRAM\n  DRAM: {\n")
    assert_refused(run_cli(["dram", "run", "synthetic:stream:10", "--config", f]), str(f), "not valid YAML", "line")


def test_json_integer_of_5000_digits(tmp_path):
    f = _write(tmp_path / "counts.json", "[" + "9" * 5000 + "]")
    assert_refused(run_cli(["policy", "decide", "--model", "mixtral-8x7b", "--counts", f]), "--counts")
    g = _write(tmp_path / "config.json", '{"num_local_experts": ' + "9" * 5000 + "}")
    assert_refused(run_cli(["model", "show", g]), str(g))


def test_deeply_nested_json(tmp_path):
    f = _write(tmp_path / "counts.json", "[" * 100_000 + "]" * 100_000)
    assert_refused(run_cli(["policy", "decide", "--model", "mixtral-8x7b", "--counts", f]), "--counts")


def test_usage_errors_are_one_line():
    assert_refused(run_cli(["pim", "gemv", "--d-in", "x", "--d-out", "4"]), "--d-in")
    assert_refused(run_cli(["no-such-command"]))


def test_max_memory_is_parsed_everywhere():
    assert_refused(run_cli(["--max-memory", "lots", "models"]), "--max-memory")
    assert run_cli(["models", "--max-memory", "1GiB"]).rc == 0
    assert run_cli(["--max-memory", "8G", "hardware", "show", "b200"]).rc == 0


def test_other_exceptions_keep_their_traceback(monkeypatch):
    """Only input errors are turned into one line: a bug still raises (so tests catch it)."""
    import sievesim.commands.hardware as hw_cmd

    def boom(args):
        raise KeyError("a bug")
    monkeypatch.setattr(hw_cmd, "_show", boom)
    with pytest.raises(KeyError):
        run_cli(["hardware", "show", "b200"])


def test_subprocess_exit_code_and_stderr(tmp_path):
    """Through a real process: exit status 2, one stderr line, nothing on stdout, no traceback."""
    f = _write(tmp_path / "c.toml", NOT_UTF8)
    p = subprocess.run([sys.executable, "-m", "sievesim", "dram", "run", "synthetic:stream:10", "--config", str(f)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


# ------------------------------------------------------------------------------------------
# 2. bounds and the memory estimate: what used to hang or allocate gigabytes ends at once

DRAM_TOML = 'standard = "hbm3"\nbase = "hbm3-6400"\n'
HW_TOML = """name = "x"
[gpu]
name = "g"
peak_flops_bf16 = 2.25e15
hbm_bandwidth_bytes_per_s = 8.0e12
hbm_capacity_bytes = 192000000000
num_hbm_stacks = {stacks}
[pim]
dram_config = "hbm3e-8000"
operand_bytes = {operand_bytes}
[interconnect]
bandwidth_bytes_per_s_per_direction = 9.0e11
latency_s = 1e-6
"""


def _hw(tmp_path, stacks=8, operand_bytes=2.0, drop_pim=False):
    text = HW_TOML.format(stacks=stacks, operand_bytes=operand_bytes)
    if drop_pim:
        text = text.replace('[pim]\ndram_config = "hbm3e-8000"\n', "").replace(f"operand_bytes = {operand_bytes}\n", "")
    return _write(tmp_path / "hw.toml", text)


@pytest.mark.parametrize("argv, needles", [
    (["pim", "gemv", "--d-in", "1000000000000", "--d-out", "4096", "--tokens", "1"], ["--d-in", "1048576"]),
    (["trace-stats", "synthetic:mixtral-8x7b", "--batch-sizes", "1000000000"], ["--batch-sizes", "16384"]),
    (["policy", "compare", "--model", "mixtral-8x7b", "--batch", "1000000000"], ["--batch", "16384"]),
    (["policy", "compare", "--model", "mixtral-8x7b", "--batch", ",".join(["1"] * 65)], ["--batch"]),
    (["dram", "run", "synthetic:stream:99999999999"], ["TRACE"]),
    (["dram", "gen-trace", "stream", "--requests", "4294967296", "-o", "x"], ["--requests"]),
    (["policy", "bench", "--inner", "1000000000000"], ["--inner"]),
    (["policy", "decide", "--model", "mixtral-8x7b", "--counts", "x", "--context-len", "99999999999"],
     ["--context-len"]),
])
def test_sizes_above_their_bound(argv, needles):
    res = run_cli(argv, timeout_s=5)
    assert_refused(res, *needles)
    assert res.seconds < 1.0


@pytest.mark.parametrize("argv, needles", [
    # within every bound, but the program would need about 1.4 TiB
    (["pim", "gemv", "--d-in", "1048576", "--d-out", "1048576", "--tokens", "16384"], ["d_in x d_out x tokens", "TiB"]),
    (["trace-stats", "synthetic:qwen3.5-397b-a17b", "--batch-sizes", "16384", "--max-memory", "100MiB"],
     ["batch size = 16384", "450 MiB", "--max-memory"]),
    (["dram", "gen-trace", "random", "--requests", "2000000000", "-o", "x"], ["requests", "GiB"]),
    (["dram", "run", "synthetic:random:1000000", "--max-memory", "10MB"], ["requests = 1000000", "--max-memory"]),
])
def test_memory_estimate_refuses_before_allocating(argv, needles):
    res = run_cli(argv, timeout_s=5, memory_bytes=2 * 2**30)
    assert_refused(res, "needs about", *needles)
    assert res.seconds < 1.0


def test_max_memory_raises_the_limit():
    argv = ["trace-stats", "synthetic:mixtral-8x7b", "--batch-sizes", "64", "--batches", "2", "--json"]
    assert_refused(run_cli(argv + ["--max-memory", "10KB"]), "batch size = 64")
    assert run_cli(argv + ["--max-memory", "1GiB"]).rc == 0


def test_dram_toml_with_a_huge_queue(tmp_path):
    f = _write(tmp_path / "q.toml", DRAM_TOML + "[controller]\nread_queue_size = 1000000000000\n")
    assert_refused(run_cli(["dram", "run", "synthetic:stream:10", "--config", f]), "read_queue_size", "65536")
    # within the bound, every controller's queues together are still refused by the estimate
    f = _write(tmp_path / "q2.toml", DRAM_TOML + "[controller]\nread_queue_size = 65536\nwrite_queue_size = 65536\n"
               "active_queue_size = 65536\npriority_queue_size = 65536\n")
    assert_refused(run_cli(["dram", "run", "synthetic:stream:10", "--config", f, "--max-memory", "1GiB"]),
                   "queue_size", "needs about")


def test_dram_toml_with_a_huge_organisation(tmp_path):
    f = _write(tmp_path / "o.toml", DRAM_TOML + "[org]\nchannel = 9223372036854775807\n")
    assert_refused(run_cli(["dram", "run", "synthetic:stream:10", "--config", f]), "org.channel")
    f = _write(tmp_path / "o2.toml", DRAM_TOML + "[org]\nchannel = 16777216\nbank = 16\n")
    assert_refused(run_cli(["dram", "run", "synthetic:stream:10", "--config", f]), "org")


def test_hardware_with_huge_stack_count(tmp_path):
    f = _hw(tmp_path, stacks=9223372036854775807)
    for argv in (["hardware", "show", f], ["pim", "expert", "--model", "mixtral-8x7b", "--hardware", f]):
        res = run_cli(argv, timeout_s=5)
        assert_refused(res, "num_hbm_stacks")
        assert res.seconds < 1.0
