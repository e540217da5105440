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
from conftest import subprocess_env

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


# ------------------------------------------------------------------------------------------
# 3. wrong types, numeric edge cases and nonsense: refused, naming the field that was set

from test_dram_engine import RAMULATOR_YAML  # noqa: E402  (a complete Ramulator 2.0 file)

QWEN3_MOE = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "num_hidden_layers": 4,
             "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
             "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 96, "intermediate_size": 768,
             "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 1000, "torch_dtype": "bfloat16",
             "sliding_window": None, "use_sliding_window": False}


def _dram(tmp_path, extra: str, name="c.toml"):
    return _write(tmp_path / name, DRAM_TOML + extra)


@pytest.mark.parametrize("text, field", [
    ('standard = ["hbm3"]\n', "standard"),
    ('standard = "hbm3"\norg = 5\n', "org"),
    ('standard = "hbm3"\nbase = "hbm3-6400"\n[controller]\nrefresh = "no"\n', "controller.refresh"),
    ('standard = "hbm3"\nbase = "hbm3-6400"\nname = 5\n', "name"),
    ('standard = "hbm3"\nbase = "hbm3-6400"\n[timing]\ntCK_ps = 0\n', "timing.tCK_ps"),
    ('standard = "hbm3"\nbase = "hbm3-6400"\n[timing]\nnBL = 0\n', "timing.nBL"),
    ('standard = "hbm3"\nbase = "hbm3-6400"\n[timing]\nrate = 0\n', "timing.rate"),
    ('standard = "hbm3"\nbase = "hbm3-6400"\n[timing]\nnCL = 9223372036854775807\n', "timing.nCL"),
    ('standard = "hbm3"\nbase = "hbm3-6400"\n[timing]\nnREFI = 1\n', "timing.nREFI"),
    ('standard = "hbm3"\nbase = "hbm3-6400"\n[controller]\nwr_low_watermark = "0.2"\n', "controller.wr_low_watermark"),
    ('standard = "hbm3"\nbase = "hbm3-6400"\n[org]\nchannel = 1.5\n', "org.channel"),
    ('standard = "hbm3"\nbase = "hbm3-6400"\n[org]\npreset = ["x"]\n', "org.preset"),
])
def test_dram_toml_types_and_ranges(tmp_path, text, field):
    f = _write(tmp_path / "c.toml", text)
    res = run_cli(["dram", "run", "synthetic:stream:10", "--config", f], timeout_s=5)
    assert_refused(res, field, str(f))


@pytest.mark.parametrize("edit, field", [
    (("impl: GenericDRAM", "impl: [GenericDRAM]"), "MemorySystem.impl"),
    (("preset: HBM3_2Gbps", "rate: 0"), "timing.rate"),
    (("preset: HBM3_2Gbps", "preset: HBM3_2Gbps\n      tCL: .nan"), "timing.tCL"),
    (("impl: Generic\n", "impl: Generic\n    wr_low_watermark: low\n"), "wr_low_watermark"),
])
def test_ramulator_yaml_types_and_ranges(tmp_path, edit, field):
    assert edit[0] in RAMULATOR_YAML
    f = _write(tmp_path / "r.yaml", RAMULATOR_YAML.replace(*edit, 1))
    assert_refused(run_cli(["dram", "run", "synthetic:stream:10", "--config", f]), field)


def test_hardware_numeric_edge_cases(tmp_path):
    argv = ["pim", "expert", "--model", "mixtral-8x7b", "--hardware"]
    assert_refused(run_cli(argv + [_hw(tmp_path, operand_bytes=0.5)]), "pim.operand_bytes = 0.5")
    assert_refused(run_cli(argv + [_hw(tmp_path, drop_pim=True)]), "pim", "plain HBM")
    f = _write(tmp_path / "big.toml", HW_TOML.format(stacks=8, operand_bytes=2.0).replace("2.25e15", "1e308"))
    assert_refused(run_cli(["hardware", "show", f]), "peak_flops_bf16 = 1e+308")
    f = _write(tmp_path / "ratio.toml", HW_TOML.format(stacks=8, operand_bytes=2.0).replace(
        'dram_config = "hbm3e-8000"', 'dram_config = "hbm3e-8000"\ninternal_bandwidth_ratio = 1e308'))
    assert_refused(run_cli(["hardware", "show", f]), "internal_bandwidth_ratio")


@pytest.mark.parametrize("argv, needles", [
    (["policy", "compare", "--model", "mixtral-8x7b", "--gpus", "0"], ["--gpus = 0"]),
    (["pim", "table", "--tokens", "0"], ["--tokens = 0"]),
    (["pim", "table", "--tokens", "abc"], ["--tokens = 'abc'"]),
    (["pim", "table", "--tokens", "1,,2"], ["--tokens"]),
    (["policy", "bench", "--policies", ","], ["--policies"]),
    (["trace-stats", "synthetic:mixtral-8x7b", "--batch-sizes", ""], ["--batch-sizes = ''"]),
    (["trace-stats", "synthetic:mixtral-8x7b", "--batch-sizes", "\u0663"], ["--batch-sizes"]),
    (["dram", "run", "synthetic:random:\u0663"], ["TRACE", "\u0663"]),
    (["pim", "gemv", "--d-in", "\u0663", "--d-out", "4"], ["--d-in"]),
    # every integer and number option, not only those of the issue: int() and float() read
    # Unicode digits, float() reads nan and inf
    (["reproduce", "fig3", "--seed", "\u0663"], ["--seed = '\u0663'"]),
    (["reproduce", "fig3", "--jobs", "0"], ["--jobs = 0"]),
    (["policy", "compare", "--model", "mixtral-8x7b", "--top-k", "\u0664"], ["--top-k = '\u0664'"]),
    (["policy", "decide", "--model", "mixtral-8x7b", "--counts", "[1]", "--top-k", "2.0"], ["--top-k = '2.0'"]),
    (["run", "--model", "qwen3-30b-a3b", "--scheduler-latency-us", "nan"], ["--scheduler-latency-us = 'nan'"]),
    (["run", "--model", "qwen3-30b-a3b", "--scheduler-latency-us", "\u0661"], ["--scheduler-latency-us"]),
    (["run", "--model", "qwen3-30b-a3b", "--top-k", "\u0664"], ["--top-k = '\u0664'"]),
    (["dram", "gen-trace", "stream", "--write-fraction", "inf", "-o", "t"], ["--write-fraction = 'inf'"]),
    (["dram", "gen-trace", "stream", "--write-fraction", "1.5", "-o", "t"], ["--write-fraction = 1.5"]),
    (["pim", "table", "--sync-latency-s", "1_0"], ["--sync-latency-s = '1_0'"]),
    (["sweep", "--model", "qwen3-30b-a3b", "--batch", "1", "--scheduler-latency-us", "1,nan"],
     ["--scheduler-latency-us = 'nan'"]),
    (["sweep", "--model", "qwen3-30b-a3b", "--batch", "1", "--jobs", "\u0662"], ["--jobs = '\u0662'"]),
    (["sweep", "--model", "qwen3-30b-a3b", "--batch", "\u0663"], ["--batch = '\u0663'"]),
    (["serve", "--model", "qwen3-30b-a3b", "--gpus", "2", "--rate", "1", "--prefill-gpus", "\u0661"],
     ["--prefill-gpus = '\u0661'"]),
    (["serve", "--model", "qwen3-30b-a3b", "--gpus", "2", "--rate", "1", "--prefill-gpus", "2"],
     ["prefill_gpus (--prefill-gpus) = 2", "from 1 to 1"]),
])
def test_cli_values(argv, needles):
    assert_refused(run_cli(argv), *needles)


def test_policy_decide_layer_and_counts(tmp_path):
    counts = _write(tmp_path / "c.json", json.dumps([1] * 8))
    base = ["policy", "decide", "--model", "mixtral-8x7b", "--counts", counts]
    assert_refused(run_cli(base + ["--pim-cost", "engine", "--layer", "99"]), "--layer = 99")
    assert run_cli(base + ["--layer", "3"]).rc == 0
    _write(counts, "[1e30, 1, 1, 1, 1, 1, 1, 1]")
    assert_refused(run_cli(base), "counts[0] = 1e+30")
    _write(counts, '{"\u0663": 1}')
    assert_refused(run_cli(base), "expert id")


def test_npz_empty_bitflipped_and_string_meta(tmp_path):
    import numpy as np

    empty = _write(tmp_path / "empty.npz", b"")
    assert_refused(run_cli(["trace-stats", empty]), str(empty))
    ids = np.zeros((4, 2, 2), dtype=np.int32)
    ids[:, :, 1] = 1
    good = tmp_path / "good.npz"
    np.savez(good, topk_ids=ids, seq_id=np.arange(4), pos=np.zeros(4, dtype=np.int64),
             meta=np.array(json.dumps({"num_experts": 8, "top_k": 2})))
    assert run_cli(["trace-stats", good, "--batch-sizes", "2", "--batches", "2"]).rc == 0
    data = bytearray(good.read_bytes())
    # every byte of the first array's header flipped in turn (shape, dtype, header length)
    start = data.index(b"{'descr'")
    for i in range(start - 4, start + 70):
        flipped = tmp_path / f"flip{i}.npz"
        b = bytearray(data)
        b[i] ^= 0xFF
        flipped.write_bytes(bytes(b))
        res = run_cli(["trace-stats", flipped, "--batch-sizes", "2", "--batches", "2"], timeout_s=5,
                      memory_bytes=2 * 2**30)
        if res.rc != 0:
            assert_refused(res, str(flipped))
    # a shape of 2**40 rows written into the header: refused from the header, nothing allocated
    huge = tmp_path / "huge.npz"
    _npz_claiming_shape(huge, (99999999999, 2, 2))
    assert_refused(run_cli(["trace-stats", huge], timeout_s=5, memory_bytes=2 * 2**30), str(huge), "needs about")
    bad_meta = tmp_path / "meta.npz"
    np.savez(bad_meta, topk_ids=ids, seq_id=np.arange(4), pos=np.zeros(4, dtype=np.int64),
             meta=np.array(json.dumps({"num_experts": "8", "top_k": 2})))
    assert_refused(run_cli(["trace-stats", bad_meta]), "meta.num_experts = '8'")


def _npz_claiming_shape(path, shape) -> None:
    """A well-formed zip (right CRCs) whose topk_ids.npy header claims ``shape`` over 64 bytes of data."""
    import io
    import zipfile

    import numpy as np

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<i4", "fortran_order": False, "shape": shape})
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("topk_ids.npy", buf.getvalue() + bytes(64))


def test_readwrite_trace_field_beyond_int32(tmp_path):
    f = _write(tmp_path / "rw.trace", "R 0,0,0,0,0,0,2147483648\n")
    assert_refused(run_cli(["dram", "run", f, "--config", "hbm2-2000"]), f"{f}:1", "below 2**31")


@pytest.mark.parametrize("change, field", [
    ({"moe_intermediate_size": None}, "moe_intermediate_size"),
    ({"torch_dtype": "float7"}, "torch_dtype = 'float7'"),
    ({"sliding_window": 0}, "sliding_window = 0"),
    ({"mlp_only_layers": [100]}, "mlp_only_layers"),
    ({"num_hidden_layers": 10**12}, "num_hidden_layers"),
    ({"hidden_size": 10**30}, "hidden_size"),
])
def test_hf_config_nonsense(tmp_path, change, field):
    cfg = {k: v for k, v in {**QWEN3_MOE, **change}.items() if v is not None or k == "sliding_window"}
    f = _write(tmp_path / "config.json", json.dumps(cfg))
    assert run_cli(["model", "show", _write(tmp_path / "ok.json", json.dumps(QWEN3_MOE))]).rc == 0
    res = run_cli(["model", "show", f], timeout_s=5)
    assert_refused(res, field)
    assert res.seconds < 1.0


def test_model_toml_derived_inf_names_the_field(tmp_path):
    f = _write(tmp_path / "m.toml", 'name = "x"\nnum_layers = 2\nattention = "full"\nhidden_size = 64\n'
               'num_attention_heads = 4\nnum_kv_heads = 2\nnum_experts = 4\ntop_k = 2\n'
               'moe_intermediate_size = 32\nvocab_size = 100\ndtype_bytes = 1e308\n')
    assert_refused(run_cli(["model", "show", f]), "dtype_bytes = 1e+308")


def test_every_problem_of_a_dram_file_in_one_message(tmp_path):
    f = _write(tmp_path / "c.toml", DRAM_TOML + "[timing]\nnBL = 0\nnCL = -5\n[controller]\nread_queue_size = 0\n")
    line = assert_refused(run_cli(["dram", "run", "synthetic:stream:10", "--config", f]), "3 problems")
    for field in ("timing.nBL = 0", "timing.nCL = -5", "read_queue_size = 0"):
        assert field in line


def _one_message(res, count: int, parts) -> str:
    """The refusal is one line that counts ``count`` problems and names every one of ``parts``."""
    line = assert_refused(res, f"{count} problems: ")
    missing = [p for p in parts if p not in line]
    assert not missing, f"{missing} not in {line!r}"
    return line


def test_every_problem_of_a_dram_toml_structure_in_one_message(tmp_path):
    """Unknown keys, levels and timings are reported together with the types of the values."""
    f = _write(tmp_path / "c.toml", DRAM_TOML + 'colour = 1\n[org]\nchanel = 2\nchannel = 1.5\n'
               '[timing]\nnCL = "x"\nnCLL = 2\n[controller]\nrefresh = "no"\nread_queue_size = 0\n')
    _one_message(run_cli(["dram", "run", "synthetic:stream:10", "--config", f]), 7, [
        "colour: unknown key", "org.chanel = 2", "org.channel = 1.5", "timing.nCL = 'x'",
        "timing.nCLL = 2: expected a timing of hbm3 (did you mean nCL?)", "controller.refresh = 'no'",
        "controller.read_queue_size = 0"])


def test_every_problem_of_a_ramulator_yaml_in_one_message(tmp_path):
    text = (RAMULATOR_YAML.replace("clock_ratio: 8", "clock_ratio: eight\n  colour: red", 1)
            .replace("      channel: 8\n", "      channel: 8.5\n")
            .replace("preset: HBM3_2Gbps", "preset: HBM3_2Gbps\n      nCL: -3\n      tRCD: .nan")
            .replace("impl: FRFCFS", "impl: BLISS")
            .replace("impl: Generic\n", "impl: Generic\n    wr_low_watermark: low\n"))
    f = _write(tmp_path / "r.yaml", text)
    _one_message(run_cli(["dram", "run", "synthetic:stream:10", "--config", f]), 7, [
        "Frontend.colour: not supported", "Frontend.clock_ratio = 'eight'", "MemorySystem.DRAM.org.channel = 8.5",
        "MemorySystem.DRAM.timing.tRCD: not supported", "MemorySystem.DRAM.timing.nCL = -3",
        "Scheduler.impl = 'BLISS'", "MemorySystem.Controller.wr_low_watermark = 'low'"])


def test_every_problem_of_a_ramulator_yaml_meaning_in_one_message(tmp_path):
    """Once every value has its type: the density and the timings the file leaves out, together."""
    text = RAMULATOR_YAML.replace("      preset: HBM3_8Gb\n      channel: 8\n",
                                  "      preset: HBM3_8Gb\n      channel: 8\n      density: 4096\n"
                                  ).replace("preset: HBM3_2Gbps", "rate: 2000")
    f = _write(tmp_path / "r.yaml", text)
    line = assert_refused(run_cli(["dram", "run", "synthetic:stream:10", "--config", f]),
                          "org.density = 4096: expected 8192 Mb")
    assert "problems" not in line  # the density is wrong: the timings are not derived from it
    f = _write(tmp_path / "r.yaml", RAMULATOR_YAML.replace("preset: HBM3_2Gbps", "rate: 2000"))
    line = assert_refused(run_cli(["dram", "run", "synthetic:stream:10", "--config", f]), "problems: ")
    assert "timing.nCL = None" in line and "timing.nRP = None" in line


MODEL_TOML = ('name = "x"\nnum_layers = 4\nhidden_size = 512\nnum_attention_heads = 8\nnum_kv_heads = 2\n'
              'num_experts = 8\ntop_k = 2\nmoe_intermediate_size = 256\nvocab_size = 1000\nattention = "full"\n')


def test_every_problem_of_a_model_toml_in_one_message(tmp_path):
    text = (MODEL_TOML.replace("hidden_size = 512", 'hidden_size = "big"')
            .replace("num_attention_heads = 8", "num_attention_heads = 0")
            .replace('attention = "full"', 'attention_pattern = ["full", "slidng"]')
            + 'tie_word_embeddings = "no"\ndense_layers = [7]\nhidden_sise = 3\n')
    f = _write(tmp_path / "m.toml", text)
    _one_message(run_cli(["model", "show", f]), 6, [
        f"{f}: 6 problems", "hidden_sise = '<unknown field>'", "did you mean hidden_size", "hidden_size = 'big'",
        "num_attention_heads = 0", "tie_word_embeddings = 'no'", "attention_pattern[1] = 'slidng'",
        "(did you mean 'sliding'?)", "dense_layers = [7]"])


def test_every_meaning_problem_of_a_model_toml_in_one_message(tmp_path):
    text = (MODEL_TOML.replace("num_kv_heads = 2", "num_kv_heads = 3").replace("top_k = 2", "top_k = 9")
            .replace('attention = "full"', 'attention = "sliding"') + "dense_layers = [0]\n")
    f = _write(tmp_path / "m.toml", text)
    _one_message(run_cli(["model", "show", f]), 4, [
        f"{f}: 4 problems", "top_k = 9: expected at most num_experts = 8", "dense_intermediate_size = 0",
        "num_kv_heads = 3: expected a divisor of num_attention_heads = 8", "sliding_window = None"])


def test_every_problem_of_a_hf_config_in_one_message(tmp_path):
    types = dict(QWEN3_MOE, num_hidden_layers="4", hidden_size=256.0, tie_word_embeddings="no",
                 torch_dtype="float7", mlp_only_layers=5)
    f = _write(tmp_path / "config.json", json.dumps(types))
    _one_message(run_cli(["model", "show", f]), 5, [
        "num_hidden_layers = '4'", "hidden_size = 256.0", "tie_word_embeddings = 'no'", "torch_dtype = 'float7'",
        "mlp_only_layers = 5: expected a list"])
    structure = dict(QWEN3_MOE, num_key_value_heads=3, mlp_only_layers=[100], moe_layer_start_index=3)
    del structure["moe_intermediate_size"]
    f = _write(tmp_path / "config.json", json.dumps(structure))
    _one_message(run_cli(["model", "show", f]), 4, [
        "mlp_only_layers = [100]", "moe_intermediate_size = '<missing>'",
        "num_key_value_heads = 3: expected a divisor of num_attention_heads = 4", "moe_layer_start_index"])


def test_every_problem_of_a_hardware_file_in_one_message(tmp_path):
    """Missing fields, wrong types and values out of range of every section, together."""
    f = _write(tmp_path / "h.toml", '[gpu]\nname = 5\npeak_flops_bf16 = -1\ncompute_efficiency = 1.5\n'
               '[pim]\nmacs_per_command = 0\n')
    _one_message(run_cli(["hardware", "show", f]), 9, [
        "name = '<missing>'", "interconnect = '<missing>'", "gpu.name = 5", "gpu.peak_flops_bf16 = -1",
        "gpu.compute_efficiency = 1.5", "pim.macs_per_command = 0", "gpu.num_hbm_stacks = '<missing>'"])


def test_every_problem_of_a_trace_in_one_message(tmp_path):
    import numpy as np

    n, layers = 4, 2
    f = tmp_path / "t.npz"
    np.savez(f, topk_ids=np.full((n, layers, 2), 9, dtype=np.int32), seq_id=np.array([0, 0, -1, 1]),
             pos=np.arange(n, dtype=np.float32), meta=np.array(json.dumps({"num_experts": "8", "top_k": 0})))
    _one_message(run_cli(["trace-stats", str(f)]), 3, [
        "meta.num_experts = '8'", "meta.top_k = 0", "pos.dtype = 'float32'"])
    np.savez(f, topk_ids=np.full((n, layers, 2), 9, dtype=np.int32), seq_id=np.array([0, 0, -1, 1]),
             pos=np.arange(n), phase=np.array([1, 1, 2, 1], dtype=np.int8), layer_ids=np.arange(3),
             meta=np.array(json.dumps({"num_experts": 8, "top_k": 2})))
    _one_message(run_cli(["trace-stats", str(f)]), 4, [
        "layer_ids.shape = (3,)", "topk_ids[0, 0, 0] = 9", "phase[2] = 2", "seq_id[2] = -1"])


@pytest.mark.parametrize("config", ['[controller]\nwr_low_watermark = 0\n', '[controller]\nwr_low_watermark = 1e-50\n',
                                    '[controller]\nwr_low_watermark = 0.0\nwr_high_watermark = 0.0\n'])
def test_zero_low_watermark_would_never_leave_write_mode(tmp_path, config):
    """Found by the long fuzz profile: the engine looped for ever (reads starved in write mode)."""
    from contract_helpers import run_cli_forked

    f = _write(tmp_path / "w.toml", DRAM_TOML + config)
    res = run_cli_forked(["dram", "run", "synthetic:stream:20", "--config", str(f)], timeout_s=20)
    assert_refused(res, "wr_low_watermark")
    assert res.seconds < 1.0


@pytest.mark.parametrize("argv, field", [
    (["trace-stats", "synthetic:mixtral-8x7b", "--batch-sizes", "16384,16384", "--batches", "1000"],
     "--batches x sum of --batch-sizes"),
    (["policy", "bench", "--repeat", "10000", "--inner", "1000000"], "--repeat x --inner"),
    (["policy", "compare", "--model", "mixtral-8x7b", "--batch", "16384,16384,16384,16384,16384"], "--batch"),
])
def test_work_that_would_run_for_hours(argv, field):
    res = run_cli(argv, timeout_s=5)
    assert_refused(res, field)
    assert res.seconds < 1.0


# ------------------------------------------------------------------------------------------
# issue 26, 1. policy options: one table per policy (sievesim/policies/options.py), every door

RUN_SIEVE = ["run", "--model", "qwen3-30b-a3b", "--batch", "4", "--warmup", "0", "--policy", "sieve"]


@pytest.mark.parametrize("option, field", [
    ("include_attention=no", "include_attention"), ("include_attention=nan", "include_attention"),
    ("include_attention=0.5", "include_attention"), ("include_attention=[]", "include_attention"),
    ("include_attention=", "include_attention"), ("include_attention=1", "include_attention"),
    ("scalar_steps=-5", "scalar_steps"), ("scalar_steps=1e9", "scalar_steps"), ("scalar_steps=abc", "scalar_steps"),
    ("scalar_steps=1e999", "scalar_steps"), ("scalar_steps=[1]", "scalar_steps"), ("scalar_steps=8.0", "scalar_steps"),
    ("scalar_steps=" + "9" * 5000, "scalar_steps"), ("rel_tol=nan", "rel_tol"), ("rel_tol=NaN", "rel_tol"),
    ("rel_tol=-1", "rel_tol"), ("rel_tol=inf", "rel_tol"), ("rel_tol=Infinity", "rel_tol"), ("rel_tol=0.5", "rel_tol"),
    ("use_kernel=maybe", "use_kernel"), ("experts_only=2", "experts_only"), ("experts_only=null", "experts_only"),
    ("candidates=x", "candidates"), ("includ_attention=false", "did you mean 'include_attention'"),
    ("unit=bank", "unit"),
])
def test_run_policy_options_are_checked(option, field):
    line = assert_refused(run_cli(RUN_SIEVE + ["--policy-option", option]), "--policy-option", field)
    assert "Traceback" not in line


def test_policy_option_unknown_key_lists_every_option():
    line = assert_refused(run_cli(RUN_SIEVE + ["--policy-option", "bogus=1"]), "bogus")
    for name in ("scalar_steps", "rel_tol", "use_kernel", "include_attention", "experts_only"):
        assert name in line


def test_policy_options_that_contradict_a_flag_are_refused(tmp_path):
    assert_refused(run_cli(["run", "--model", "qwen3-30b-a3b", "--batch", "4", "--warmup", "0", "--policy", "pimoe",
                            "--policy-option", "unit=channel", "--pimoe-unit", "stack"]), "unit", "--pimoe-unit")
    assert_refused(run_cli(["run", "--model", "qwen3-30b-a3b", "--batch", "4", "--warmup", "0", "--policy", "sieve",
                            "--pimoe-unit", "bank"]), "--pimoe-unit")
    counts = _write(tmp_path / "c.json", json.dumps([3, 0, 1, 2, 0, 0, 0, 1]))
    decide = ["policy", "decide", "--model", "mixtral-8x7b", "--counts", str(counts)]
    assert_refused(run_cli(decide + ["--policy", "pimoe", "--policy-option", "unit=channel", "--unit", "stack"]),
                   "unit", "--unit")
    assert_refused(run_cli(decide + ["--policy", "noexp", "--policy-option", "unit=channel"]), "noexp takes none")
    assert_refused(run_cli(decide + ["--policy", "sieve", "--policy-option", "experts_only=yes"]), "experts_only")
    assert_refused(run_cli(decide + ["--policy", "oracle", "--policy-option", "verify=1"]), "verify")
    ok = run_cli(decide + ["--policy", "sieve", "--policy-option", "experts_only=true", "--json"])
    assert ok.rc == 0, ok.err


@pytest.mark.parametrize("point", ["estimate", "step"])
@pytest.mark.parametrize("options, needle", [
    ("bogus=1", "bogus"), ("include_attention=no", "include_attention"), ("scalar_steps=1e999", "scalar_steps"),
])
def test_sweep_policy_options_are_checked_for_every_point_function(tmp_path, point, options, needle):
    argv = ["sweep", "--model", "qwen3-30b-a3b", "--batch", "4", "--point", point, "--jobs", "1", "--quiet",
            "--out", str(tmp_path / "o"), "--policy-options", options]
    assert_refused(run_cli(argv), "policy_options", needle)
    assert not (tmp_path / "o" / "results.jsonl").exists()


def test_sweep_grid_policy_options_and_units(tmp_path):
    grid = _write(tmp_path / "g.toml", 'model = "qwen3-30b-a3b"\nbatch = 4\npolicy = ["sieve", "noexp"]\n'
                                       'policy_options = "include_attention=false"\n')
    base = ["sweep", "--point", "estimate", "--jobs", "1", "--quiet", "--out", str(tmp_path / "o")]
    assert_refused(run_cli(base + ["--grid", str(grid)]), "noexp", "[[grid]]")
    assert_refused(run_cli(base + ["--model", "qwen3-30b-a3b", "--batch", "4", "--policy", "sieve",
                                   "--pimoe-unit", "channel"]), "pimoe_unit", "channel")
    ok = run_cli(base + ["--model", "qwen3-30b-a3b", "--batch", "4", "--policy", "sieve",
                         "--policy-options", "experts_only=true"])
    assert ok.rc == 0, ok.err


def test_estimate_point_honours_policy_options():
    from sievesim.sweep import estimate_point

    base = {"model": "qwen3-30b-a3b", "batch": 16, "policy": "sieve", "context_len": 4096}
    with_attention = estimate_point(base)
    without = estimate_point({**base, "policy_options": "include_attention=false"})
    # attention left out of T_PIM makes PIM look cheaper: fewer experts move to the GPU (8 vs 3)
    assert without["experts_on_gpu"] < with_attention["experts_on_gpu"]


def test_python_api_checks_policy_options():
    from sievesim.errors import ConfigError
    from sievesim.policies import get_policy
    from sievesim.system import StepSimulator

    for kwargs in ({"include_attention": "no"}, {"scalar_steps": -5}, {"rel_tol": float("nan")},
                   {"experts_only": 2}, {"bogus": 1}):
        with pytest.raises(ConfigError, match=next(iter(kwargs))):
            get_policy("sieve", **kwargs)
    with pytest.raises(ConfigError, match="candidates"):
        get_policy("oracle", candidates="x")
    assert get_policy("sieve", include_attention=False).include_attention is False
    with pytest.raises(ConfigError, match="include_attention"):
        StepSimulator("qwen3-30b-a3b", batch=4, policy_options={"include_attention": "false"})
    with pytest.raises(TypeError, match="policy_options"):
        StepSimulator("qwen3-30b-a3b", batch=4, policy_options="include_attention=false")
    with pytest.raises(ConfigError, match="unit"):
        StepSimulator("qwen3-30b-a3b", batch=4, policy="pimoe", pimoe_unit="stack", policy_options={"unit": "channel"})


# ------------------------------------------------------------------------------------------
# issue 26, 2. special files: one opener (sievesim/_inputs.py open_input) for every input


def _fifo(path):
    import os
    os.mkfifo(path)
    return path


def test_fifo_as_hardware_base_grid_and_sweep_files(tmp_path):
    from contract_helpers import run_cli_forked

    base = _fifo(tmp_path / "base.toml")
    hw = _write(tmp_path / "hw.toml", f'name = "x"\nbase = "{base}"\n')
    res = run_cli_forked(["hardware", "show", str(hw)], timeout_s=10)
    assert_refused(res, str(base), "FIFO")
    grid = _fifo(tmp_path / "grid.toml")
    res = run_cli_forked(["sweep", "--grid", str(grid), "--out", str(tmp_path / "o")], timeout_s=10)
    assert_refused(res, str(grid), "FIFO")
    for name in ("results.jsonl", "grid.json"):   # a finished sweep, one of its files replaced by a FIFO
        out = tmp_path / f"out-{name}"
        argv = ["sweep", "--model", "qwen3-30b-a3b", "--batch", "4", "--point", "estimate", "--jobs", "1", "--quiet",
                "--out", str(out)]
        assert run_cli(argv).rc == 0
        (out / name).unlink()
        _fifo(out / name)
        assert_refused(run_cli_forked(argv, timeout_s=10), str(out / name), "FIFO")


def test_sizes_above_the_limit_of_their_kind(tmp_path):
    import os
    sparse = tmp_path / "t.trace"
    with open(sparse, "wb") as fh:          # 2 GiB, sparse: nothing is written to disk
        fh.truncate(2 * 2**30)
    line = assert_refused(run_cli(["--max-memory", "1GiB", "dram", "run", str(sparse)]), str(sparse), "2 GiB",
                          "--max-memory")
    assert "128 MiB" in line               # an eighth of the memory limit
    big = tmp_path / "c.toml"
    with open(big, "wb") as fh:
        fh.truncate(17 * 2**20)
    assert_refused(run_cli(["dram", "run", "synthetic:stream:10", "--config", str(big)]), str(big), "16 MiB")
    os.unlink(sparse)


def test_stdin_from_a_device_and_closed_stdin(tmp_path):
    argv = [sys.executable, "-m", "sievesim", "policy", "decide", "--model", "mixtral-8x7b", "--counts", "-"]
    env = subprocess_env()
    with open("/dev/zero", "rb") as zero:
        p = subprocess.run(argv, stdin=zero, capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 2 and "<stdin>: more than 16 MiB" in p.stderr, p.stderr
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 2 and "--counts" in p.stderr and "Traceback" not in p.stderr, p.stderr
    p = subprocess.run(["bash", "-c", 'exec "$@" <&-', "-", *argv], capture_output=True, text=True, timeout=60,
                       env=env)
    assert p.returncode == 2 and "stdin is closed" in p.stderr, p.stderr


def test_npz_zip_bomb_is_refused_from_the_declared_sizes(tmp_path):
    """A member that declares a small array header but 96 MiB of (highly compressible) data, and one
    whose header declares 2**31 elements: both refused before anything is decompressed."""
    import io
    import zipfile

    import numpy as np

    bomb = tmp_path / "bomb.npz"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open("topk_ids.npy", "w", force_zip64=True) as fh:
            buf = io.BytesIO()
            np.lib.format.write_array_header_1_0(buf, {"descr": "<i4", "fortran_order": False, "shape": (4, 1, 1)})
            fh.write(buf.getvalue())
            chunk = bytes(2**20)
            for _ in range(96):
                fh.write(chunk)
    assert bomb.stat().st_size < 2**20
    line = assert_refused(run_cli(["--max-memory", "64MiB", "trace-stats", str(bomb)]), str(bomb))
    assert "memory" in line
    huge = tmp_path / "huge.npz"
    with zipfile.ZipFile(huge, "w", zipfile.ZIP_DEFLATED) as zf:
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(buf, {"descr": "<i4", "fortran_order": False, "shape": (2**31, 1, 1)})
        zf.writestr("topk_ids.npy", buf.getvalue())
    assert_refused(run_cli(["trace-stats", str(huge)]), str(huge), "memory")


def test_deep_hardware_base_chain(tmp_path):
    """3,000 files each extending the next: a depth limit with a clear message, no RecursionError."""
    n = 3000
    _write(tmp_path / f"h{n}.toml", 'base = "b200"\nname = "end"\n')
    for i in range(n):
        _write(tmp_path / f"h{i}.toml", f'base = "h{i + 1}.toml"\nname = "h{i}"\n')
    assert_refused(run_cli(["hardware", "show", str(tmp_path / "h0.toml")]), "base", "chain of at most 32")
    ok = run_cli(["hardware", "show", str(tmp_path / f"h{n - 5}.toml")])
    assert ok.rc == 0, ok.err


# ------------------------------------------------------------------------------------------
# issue 26, 4. one writer (sievesim/_outputs.py): temporary file, fsync, rename; never a lost file

OUTPUTS = {   # command -> argv with {out} where the output file goes
    "model save": ["model", "save", "mixtral-8x7b", "{out}"],
    "hardware save": ["hardware", "save", "b200", "{out}"],
    "dram gen-trace -o": ["dram", "gen-trace", "stream", "--requests", "200", "-o", "{out}"],
    "dram run --log-commands": ["dram", "run", "synthetic:stream:50", "--log-commands", "{out}"],
    "pim gemv --log-commands": ["pim", "gemv", "--d-in", "64", "--d-out", "64", "--log-commands", "{out}"],
    "run --chrome-trace": ["run", "--model", "qwen3-30b-a3b", "--batch", "4", "--warmup", "0", "--policy", "sieve",
                           "--chrome-trace", "{out}"],
}


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_output_to_a_full_device_names_the_path_and_the_cause(name):
    line = assert_refused(run_cli([a.format(out="/dev/full") for a in OUTPUTS[name]]))
    assert "/dev/full" in line and "No space left on device" in line, line


def _with_file_size_limit(argv, limit):
    import os
    import resource

    def limit_size():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    env = {**subprocess_env(),
           "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-m", "sievesim", *argv], capture_output=True, text=True, timeout=120,
                          env=env, preexec_fn=limit_size)


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_a_failed_write_leaves_the_earlier_file_intact(tmp_path, name):
    """Under a file-size limit (as on a full disk), the write fails with one line naming the path and
    the cause; the good earlier file is unchanged and no temporary file is left behind."""
    out = tmp_path / "out.file"
    out.write_text("EARLIER\n")
    p = _with_file_size_limit([a.format(out=out) for a in OUTPUTS[name]], 100)
    assert p.returncode == 2, p.stderr
    assert str(out) in p.stderr and "File too large" in p.stderr and "earlier file is unchanged" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    assert out.read_text() == "EARLIER\n"
    assert sorted(f.name for f in tmp_path.iterdir()) == ["out.file"]


def test_reproduce_keeps_its_earlier_csv_on_a_failed_write(tmp_path):
    (tmp_path / "fig5.csv").write_text("EARLIER\n")
    p = _with_file_size_limit(["reproduce", "fig5", "--quick", "--out", str(tmp_path)], 100)
    assert p.returncode == 2 and "fig5.csv" in p.stderr and "File too large" in p.stderr, p.stderr
    assert (tmp_path / "fig5.csv").read_text() == "EARLIER\n"


def test_the_writer_keeps_the_mode_and_follows_links(tmp_path):
    import os

    from sievesim._outputs import write_output

    target = tmp_path / "t.txt"
    target.write_text("old")
    os.chmod(target, 0o640)
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    write_output(link, "new")
    assert link.is_symlink() and target.read_text() == "new" and (target.stat().st_mode & 0o777) == 0o640
    write_output("/dev/null", b"discarded")      # a device is written in place
    with pytest.raises(ValueError, match="boom"):
        from sievesim._outputs import open_output
        with open_output(target, "t") as fh:      # an exception while writing: the earlier file stays
            fh.write(b"partial")
            raise ValueError("boom")
    assert target.read_text() == "new" and sorted(f.name for f in tmp_path.iterdir()) == ["link.txt", "t.txt"]


# ------------------------------------------------------------------------------------------
# issue 26, 8. the Python API: arguments checked at the door; arrays checked before compiled code

@pytest.mark.parametrize("call, exc, needle", [
    (lambda s: s.simulate_step(None, batch=4, warmup=0), TypeError, "model = None"),
    (lambda s: s.simulate_step(5, batch=4, warmup=0), TypeError, "model = 5"),
    (lambda s: s.simulate_step(b"qwen3-30b-a3b", batch=4, warmup=0), TypeError, "model = b'qwen3"),
    (lambda s: s.simulate_step({"a": 1}, batch=4, warmup=0), TypeError, "model = {"),
    (lambda s: s.simulate_step("qwen3-30b-a3b", None, batch=4, warmup=0), TypeError, "hardware = None"),
    (lambda s: s.simulate_step("qwen3-30b-a3b", 5, batch=4, warmup=0), TypeError, "hardware = 5"),
    (lambda s: s.simulate_step("qwen3-30b-a3b", batch=4, warmup=0, context_preset=5), TypeError, "context_preset"),
    (lambda s: s.simulate_step("qwen3-30b-a3b", batch=4, warmup=0, policy_options=[1]), TypeError, "policy_options"),
    (lambda s: s.simulate_step("qwen3-30b-a3b", batch=4, warmup=0, scheduler_latency_s="1"), TypeError,
     "scheduler_latency_s"),
    (lambda s: s.simulate_step("qwen3-30b-a3b", batch=4, warmup=0, prefill=(2.7, 1024.9)), ValueError, "prefill"),
    (lambda s: s.simulate_step("qwen3-30b-a3b", batch=4, warmup=0, prefill="2:" + "9" * 5000), ValueError, "prefill"),
    (lambda s: s.simulate_step("qwen3-30b-a3b", batch=4, warmup=0, early_loads="false"), ValueError, "early_loads"),
    (lambda s: s.simulate_step("qwen3-30b-a3b", batch=4, warmup=0, contention="no"), TypeError, "contention"),
    (lambda s: s.simulate_step("qwen3-30b-a3b", batch=4, warmup=0, contention=1), TypeError, "contention"),
    (lambda s: s.get_model(None), TypeError, "model = None"),
    (lambda s: s.get_model("a\x00b"), ValueError, "NUL"),
    (lambda s: s.get_hardware(5), TypeError, "hardware = 5"),
    (lambda s: s.from_hf_config([]), TypeError, "path_or_dict"),
    (lambda s: s.expand_grid("abc"), TypeError, "products"),
    (lambda s: s.expand_grid({"model": ["qwen3-30b-a3b"], "batch": [4]}), TypeError, "products"),
    (lambda s: s.run_grid([], None, point_fn=s.estimate_point), TypeError, "out_dir = None"),
    (lambda s: s.run_grid([], "x", point_fn=5), TypeError, "point_fn"),
    (lambda s: s.get_config(5), TypeError, "config = 5"),
])
def test_python_api_checks_its_arguments_at_the_door(call, exc, needle):
    import types

    from sievesim.dram.config import get_config
    from sievesim.hardware import get_hardware
    from sievesim.models import from_hf_config, get_model
    from sievesim.sweep import estimate_point, expand_grid, run_grid
    from sievesim.system import simulate_step

    api = types.SimpleNamespace(simulate_step=simulate_step, get_model=get_model, get_hardware=get_hardware,
                                from_hf_config=from_hf_config, expand_grid=expand_grid, run_grid=run_grid,
                                estimate_point=estimate_point, get_config=get_config)
    with pytest.raises(exc) as info:
        call(api)
    assert needle in str(info.value)
    if exc is ValueError:
        from sievesim.errors import SievesimError
        assert isinstance(info.value, SievesimError)


def _trace(**arrays):
    import numpy as np

    from sievesim.dram.traces import RequestTrace

    base = {"is_write": np.zeros(4, bool), "arrival": np.arange(4, dtype=np.int64),
            "addresses": np.arange(4, dtype=np.int64) * 64}
    return RequestTrace(**{**base, **arrays})


@pytest.mark.parametrize("arrays, needle", [
    ({"arrival": __import__("numpy").zeros(2, "int64")}, "arrival: 2 entries: expected 4"),   # would read past it
    ({"addresses": __import__("numpy").zeros(9, "int64")}, "addresses: 9 entries"),
    ({"is_write": __import__("numpy").zeros(1, bool)}, "entries"),
    ({"arrival": __import__("numpy").array([3, 2, 1, 0])}, "non-decreasing"),
    ({"arrival": __import__("numpy").array([-1, 0, 1, 2])}, ">= 0"),
    ({"arrival": __import__("numpy").array([0.0, 1.5, 2.0, 3.0])}, "dtype float64"),
    ({"arrival": __import__("numpy").array([0, 1, 2, 2**62])}, "2**60"),
    ({"addresses": __import__("numpy").array(["a", "b", "c", "d"])}, "dtype"),
    ({"is_write": __import__("numpy").array([0, 2, 0, 1])}, "is_write"),
    ({"arrival": __import__("numpy").zeros((4, 1), "int64")}, "shape"),
    ({"addr_vectors": __import__("numpy").zeros((4, 3), "int32")}, "exactly one"),
])
def test_mismatched_arrays_never_reach_the_compiled_engine(arrays, needle):
    """Every compiled entry point's Python face: the DRAM engine (request mode) and the PIM engine
    (its background traffic), fed arrays of different lengths, dtypes and orders."""
    from sievesim.dram.engine import simulate
    from sievesim.errors import TraceError
    from sievesim.pim.engine import pim_config, run_programs

    with pytest.raises(TraceError, match=needle.replace("*", r"\*")):
        simulate("hbm3-6400", _trace(**arrays), threads=1)
    with pytest.raises(TraceError, match=needle.replace("*", r"\*")):
        run_programs(pim_config("hbm3-6400"), [], background=_trace(**arrays))


def test_engine_boundary_checks_programs_and_raw_arrays():
    import numpy as np

    from sievesim.dram.engine import _check_engine_arrays
    from sievesim.errors import SievesimError, TraceError
    from sievesim.pim.engine import pim_config, run_programs

    cfg = pim_config("hbm3-6400")
    with pytest.raises(SievesimError, match="rowcol"):
        run_programs(cfg, [(np.zeros(5, np.int32), np.zeros((3, 2), np.int32))])
    with pytest.raises(SievesimError, match="ops"):
        run_programs(cfg, [(np.full(2, 7, np.int32), np.zeros((2, 2), np.int32))])
    with pytest.raises(TypeError, match="programs"):
        run_programs(cfg, "abc")
    with pytest.raises(TypeError, match="config"):
        run_programs("hbm3-6400", [])
    n = 3
    ok = (np.zeros((n, 5), np.int32), np.zeros(n, np.int64), np.zeros(n, bool), np.zeros(n, np.int64))
    _check_engine_arrays(*ok, 5)
    for i, bad in enumerate((np.zeros((n + 1, 5), np.int32), np.zeros(n, np.int32), np.zeros(n - 1, bool),
                             np.zeros(2 * n, np.int64)[::2])):
        arrays = list(ok)
        arrays[i] = bad
        with pytest.raises(TraceError, match="engine input"):
            _check_engine_arrays(*arrays, 5)


def test_far_future_arrival_is_refused_with_the_estimate_and_the_flag():
    import numpy as np

    from sievesim._validate import work_limit
    from sievesim.dram.engine import simulate
    from sievesim.errors import ConfigError

    far = _trace(arrival=np.array([0, 1, 2, 2**50]))
    with pytest.raises(ConfigError, match="--max-work"):
        simulate("hbm3-6400", far, threads=1)
    with work_limit(1e-3):     # a lower limit refuses smaller work too
        with pytest.raises(ConfigError, match="refresh"):
            simulate("hbm3-6400", _trace(arrival=np.array([0, 1, 2, 10**9])), threads=1)
    assert simulate("hbm3-6400", _trace(arrival=np.array([0, 1, 2, 10**6])), threads=1).requests == 4
    assert simulate("hbm3-6400", _trace(is_write=[False, True, False, True]), threads=1).writes == 2


# ------------------------------------------------------------------------------------------
# issue 26, 3. unbounded work: the work estimate guards time (--max-work) as well as memory

L64 = ",".join(str(i) for i in range(1, 65))


@pytest.mark.parametrize("argv, needles", [
    (["run", "--model", "qwen3-30b-a3b", "--steps", "4096", "--warmup", "4096", "--batch", "16384",
      "--context-len", "16"], ("steps + warmup = 8192", "hours", "--max-work")),
    (["sweep", "--model", "qwen3-30b-a3b", "--batch", L64, "--context-len", L64, "--seed", L64, "--steps", L64,
      "--point", "estimate", "--out", "{tmp}/o"], ("grid points = 16777216", "at most 65,536")),
    (["sweep", "--model", "qwen3-30b-a3b", "--batch", "4096,8192,16384", "--context-len", "16", "--steps", "4096",
      "--out", "{tmp}/o"], ("the sweep (3 points", "--max-work")),
    (["policy", "compare", "--model", "qwen3-30b-a3b", "--pim-cost", "engine", "--batch", "16384"],
     ("--pim-cost engine", "hours", "--max-work")),
    (["--max-memory", "512MiB", "policy", "compare", "--model", "deepseek-v3", "--pim-cost", "engine", "--batch",
      "1024"], ("--pim-cost engine", "memory")),
    (["--max-memory", "512MiB", "run", "--model", "qwen3.5-397b-a17b", "--gpus", "512", "--batch", "16384",
      "--context-len", "16", "--policy", "sieve"], ("gpus = 512", "layer graphs", "--max-memory")),
    (["--max-work", "1s", "run", "--model", "qwen3-30b-a3b", "--steps", "64", "--batch", "4096", "--context-len", "16",
      "--policy", "sieve"], ("steps + warmup = 66", "above the limit of 1 s")),
])
def test_work_estimate_guards_time_and_memory(tmp_path, argv, needles):
    res = run_cli([a.format(tmp=tmp_path) for a in argv], timeout_s=10)
    assert_refused(res, *needles)
    assert res.seconds < 2.0


@pytest.mark.parametrize("extra", [[], ["--gpus", "2", "--prefill-gpus", "1"]])
def test_a_serving_run_stops_at_the_work_limit(extra):
    """A serving run has no estimate before it starts: its loop stops it once it has run longer than
    --max-work (a typo of 553323 requests would otherwise run for about an hour)."""
    res = run_cli(["--max-work", "1s", "serve", "--model", "mixtral-8x7b", "--requests", "553323", "--rate", "5",
                   *extra], timeout_s=30)
    assert_refused(res, "requests = 553323", "passed the work limit of 1 s", "of 553323 arrived", "--max-work")
    assert res.seconds < 8.0


def test_python_api_serving_work_limit():
    from sievesim import simulate_serving
    from sievesim._validate import work_limit
    from sievesim.errors import ConfigError

    for extra in ({}, {"gpus": 2, "prefill_gpus": 1}):
        with work_limit(1e-6), pytest.raises(ConfigError, match="requests = 40: .*--max-work"):
            simulate_serving("mixtral-8x7b", requests=40, rate=5, **extra)
    assert len(simulate_serving("mixtral-8x7b", requests=8, rate=5).requests) == 8     # the default limit


def test_grid_files_obey_the_list_caps_and_are_counted_before_expansion(tmp_path):
    grid = _write(tmp_path / "g.toml", 'model = "qwen3-30b-a3b"\nbatch = [' + ",".join(map(str, range(1, 1001)))
                  + "]\nseed = [" + ",".join(map(str, range(1000))) + "]\ncontext_len = ["
                  + ",".join(map(str, range(1000))) + "]\n")
    line = assert_refused(run_cli(["sweep", "--grid", str(grid), "--out", str(tmp_path / "o")], timeout_s=10),
                          str(grid), "at most 64 values")
    assert line.count("at most 64 values") == 3
    from sievesim.errors import ConfigError
    from sievesim.sweep import expand_grid

    with pytest.raises(ConfigError, match="grid points"):
        expand_grid([{"model": "qwen3-30b-a3b", "batch": list(range(1, 65)), "seed": list(range(64)),
                      "steps": list(range(1, 65)), "context_len": list(range(64))}])


def test_python_api_work_limits():
    from sievesim._validate import work_limit
    from sievesim.errors import ConfigError
    from sievesim.sweep import estimate_point
    from sievesim.system import simulate_step

    with pytest.raises(ConfigError, match="steps = 1000000000"):
        estimate_point({"model": "qwen3-30b-a3b", "batch": 4, "steps": 10**9})
    with work_limit(0.01):
        with pytest.raises(ConfigError, match="--max-work"):
            simulate_step("qwen3-30b-a3b", batch=4096, context_len=16, steps=10, warmup=0)
    with pytest.raises(ValueError, match="max_work_s"):
        with work_limit(float("inf")):
            pass


# ------------------------------------------------------------------------------------------
# issue 26, 7. very long numbers: digits counted before any int() conversion

def test_very_long_numbers_are_refused_before_conversion(tmp_path):
    digits = "9" * 5000
    t = _write(tmp_path / "t.trace", "LD " + "9" * 1_000_000 + "\n")
    assert_refused(run_cli(["dram", "run", str(t)]), str(t), "below 2**63")
    t2 = _write(tmp_path / "t2.trace", "LD 0x" + "f" * 100_000 + "\n")
    assert_refused(run_cli(["dram", "run", str(t2)]), str(t2))
    assert_refused(run_cli(["run", "--model", "qwen3-30b-a3b", "--prefill", f"{digits}:10", "--warmup", "0",
                            "--batch", "4"]), "prefill")
    assert_refused(run_cli(["run", "--model", "qwen3-30b-a3b", "--prefill", f"1:{digits}", "--warmup", "0",
                            "--batch", "4"]), "prefill")
    c = _write(tmp_path / "c.json", f"[{digits}]")
    assert_refused(run_cli(["policy", "decide", "--model", "mixtral-8x7b", "--counts", str(c)]), str(c),
                   "5000 digits", "at most 40")
    h = _write(tmp_path / "config.json", '{"num_experts": ' + digits + "}")
    assert_refused(run_cli(["model", "show", str(h)]), str(h), "5000 digits")
    assert_refused(run_cli(["run", "--model", "qwen3-30b-a3b", "--policy", "sieve", "--policy-option",
                            f"scalar_steps={digits}"]), "scalar_steps", "at most 100 characters")
    assert_refused(run_cli(["dram", "run", f"synthetic:random:{digits}"]), "ASCII digits")


# ------------------------------------------------------------------------------------------
# issue 26, 9. ignored or contradictory options: refused or honoured, never ignored

def test_options_are_honoured_or_refused(tmp_path):
    import json as _json

    tp = run_cli(["pim", "expert", "--model", "qwen3-30b-a3b", "--json"])
    ch = run_cli(["pim", "expert", "--model", "qwen3-30b-a3b", "--unit", "channel", "--json"])
    assert tp.rc == ch.rc == 0, tp.err + ch.err
    assert _json.loads(tp.out) != _json.loads(ch.out)          # --unit is honoured (ep placement in a channel)
    assert_refused(run_cli(["pim", "expert", "--model", "qwen3-30b-a3b", "--placement", "tp", "--unit", "channel"]),
                   "--unit", "--placement ep")
    assert_refused(run_cli(["pim", "gemv", "--d-in", "64", "--d-out", "64", "--placement", "tp", "--unit", "stack"]),
                   "--unit")
    g1 = run_cli(["pim", "gemv", "--d-in", "256", "--d-out", "256", "--unit", "pseudo_channel", "--json"])
    g2 = run_cli(["pim", "gemv", "--d-in", "256", "--d-out", "256", "--placement", "ep", "--unit",
                  "pseudo_channel", "--json"])
    assert g1.rc == 0 and g1.out == g2.out
    counts = _write(tmp_path / "c.json", '{"1_0": 3}')
    assert_refused(run_cli(["policy", "decide", "--model", "mixtral-8x7b", "--counts", str(counts)]),
                   "expert id", "1_0")
    assert_refused(run_cli(["policy", "compare", "--model", "qwen3-30b-a3b", "--gpus", "8", "--batch", "4"]),
                   "--batch = 4", "multiple of --gpus 8")
    assert_refused(run_cli(["sweep", "--model", "qwen3-30b-a3b", "--batch", "4", "--dask", "", "--out",
                            str(tmp_path / "o")]), "--dask")
    assert_refused(run_cli(["reproduce", "overhead", "--quick", "--trace", str(counts), "--out", str(tmp_path / "r")]),
                   "--trace", "fig3", "fig5")


# ------------------------------------------------------------------------------------------
# issue 26, 10. degenerate data: bounds for every rate, no inf/nan printed as a result

def test_degenerate_routing_files(tmp_path):
    import json as _json

    import numpy as np

    for name, key, shape in (("zero.npz", "pass_counts", (4, 3, 8)), ("none.npz", "pass_counts", (0, 3, 8)),
                             ("noexp.npz", "logical_count", (4, 3, 0))):
        f = tmp_path / name
        np.savez(f, **{key: np.zeros(shape, np.int32)}, meta=np.array(_json.dumps({"top_k": 2, "num_experts": 8})))
        assert_refused(run_cli(["trace-stats", str(f)]), str(f), key)


@pytest.mark.parametrize("section, field, value", [
    ("gpu", "peak_flops_bf16", "1e-300"), ("gpu", "hbm_bandwidth_bytes_per_s", "1e-300"),
    ("gpu", "compute_efficiency", "1e-300"), ("gpu", "memory_efficiency", "1e-300"),
    ("interconnect", "bandwidth_bytes_per_s_per_direction", "1e-300"),
    ("pim", "internal_bandwidth_ratio", "1e-300"), ("pim", "operand_bytes", "1e-300"),
])
def test_absurd_rates_are_refused_with_their_physical_range(tmp_path, section, field, value):
    f = _write(tmp_path / "h.toml", f'base = "b200"\nname = "x"\n[{section}]\n{field} = {value}\n')
    line = assert_refused(run_cli(["run", "--model", "qwen3-30b-a3b", "--hardware", str(f), "--batch", "4",
                                   "--warmup", "0"]), f"{section}.{field}")
    assert "from" in line or "[0.001" in line          # the range is stated


def test_no_inf_or_nan_is_printed_as_a_result():
    from sievesim._outputs import check_finite
    from sievesim.errors import ConfigError

    check_finite({"a": [1.0, 2, {"b": 3.5}], "c": "inf"})     # strings are names, not numbers
    for bad in (float("inf"), float("nan"), -float("inf")):
        with pytest.raises(ConfigError, match=r"result\.x\[1\]\.t_s"):
            check_finite({"x": [{}, {"t_s": bad}]})
    import numpy as np
    with pytest.raises(ConfigError, match="finite"):
        check_finite([np.float64("nan")])


# ------------------------------------------------------------------------------------------
# issue 26, 6. the environment: non-UTF-8 paths, Ctrl-C, MPLBACKEND, NUL bytes, base chains

def _env(**extra):
    import os
    return subprocess_env(**extra)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_during_a_sweep_is_one_line_and_exit_130(tmp_path, jobs):
    import os
    import signal
    import time

    out = tmp_path / "o"
    argv = [sys.executable, "-m", "sievesim", "sweep", "--model", "qwen3-30b-a3b", "--context-len", "16",
            "--batch", ",".join(str(b) for b in range(1024, 1024 + 16 * 32, 32)), "--steps", "2", "--out", str(out),
            "--jobs", jobs, "--quiet"]
    def as_from_a_terminal() -> None:
        # a Ctrl-C from a shell: default disposition, not blocked (a child inherits both from this test
        # process, where the suite's earlier tests may have left SIGINT ignored or blocked)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                         preexec_fn=as_from_a_terminal)
    t0 = time.monotonic()
    while not ((out / "results.jsonl").exists() and (out / "results.jsonl").read_bytes().count(b"\n") >= 1):
        assert p.poll() is None and time.monotonic() - t0 < 120, p.communicate()
        time.sleep(0.05)
    os.kill(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "interrupted" in lines[0] and "rerun the same command to resume" in lines[0] and str(out) in lines[0]
    again = subprocess.run(argv[:-3] + ["--jobs", "1", "--quiet", "--point", "estimate", "--force"],
                           capture_output=True, text=True, env=_env(), timeout=120)
    assert again.returncode == 0, again.stderr


def test_non_utf8_paths_are_printed_with_escapes(tmp_path):
    import os

    folder = os.path.join(os.fsencode(tmp_path), b"bad\xff-dir")
    os.mkdir(folder)
    target = os.fsdecode(os.path.join(folder, b"h.toml"))
    for enc in ("ascii", "utf-8"):
        p = subprocess.run([sys.executable, "-m", "sievesim", "hardware", "save", "b200", target],
                           capture_output=True, text=True, env=_env(PYTHONIOENCODING=enc), errors="replace")
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
        assert "bad\\udcff-dir" in p.stdout or "bad\\xff-dir" in p.stdout, p.stdout
        p = subprocess.run([sys.executable, "-m", "sievesim", "hardware", "show", target + "x"],
                           capture_output=True, text=True, env=_env(PYTHONIOENCODING=enc), errors="replace")
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_nonsense_mplbackend_falls_back_to_agg_with_a_warning(tmp_path):
    p = subprocess.run([sys.executable, "-m", "sievesim", "reproduce", "fig5", "--quick", "--out", str(tmp_path)],
                       capture_output=True, text=True, env=_env(MPLBACKEND="nonsense"), timeout=120)
    assert p.returncode == 0, p.stderr
    assert "MPLBACKEND = 'nonsense' is not a matplotlib backend" in p.stderr and "Traceback" not in p.stderr
    assert (tmp_path / "fig5.png").stat().st_size > 0


def test_nul_bytes_in_paths_inside_files(tmp_path):
    hw = _write(tmp_path / "h.toml", 'name = "x"\nbase = "a\\u0000b.toml"\n')
    assert_refused(run_cli(["hardware", "show", str(hw)]), "base", "NUL")
    grid = _write(tmp_path / "g.toml", 'model = "qwen3-30b-a3b\\u0000"\nbatch = 4\n')
    assert_refused(run_cli(["sweep", "--grid", str(grid), "--out", str(tmp_path / "o"), "--point", "estimate"]),
                   "model", "NUL")
