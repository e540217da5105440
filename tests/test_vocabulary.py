"""One vocabulary across run, sweep and the Python API: defaults, spellings, messages."""
from __future__ import annotations

import dataclasses
import io
import json

import pytest

from sievesim.cli import main
from sievesim.models import get_model
from sievesim.sweep import estimate_point, expand_grid, load_grid_file, read_results, run_grid
from sievesim.system import simulate_step


@pytest.mark.parametrize("argv, message", [
    (["run", "--model", "qwen3-30b-a3b", "--policy", "seive"],
     "policy = 'seive': expected one of allexp, naive, noexp, oracle, overlap, pimoe, sieve, gpu-only, all (did you mean 'sieve'?)"),
    (["run", "--model", "qwen3-30b-a3b", "--policy", "gpuonly"], "(did you mean 'gpu-only'?)"),
    (["sweep", "--model", "qwen3-30b-a3b", "--batch", "1", "--policy", "siev"],
     "expected one of allexp, naive, noexp, oracle, overlap, pimoe, sieve, gpu-only (did you mean 'sieve'?)"),
    (["run", "--model", "my.toml"], "file not found: my.toml (model:"),
    (["run", "--model", "cfg/config.json"], "file not found: cfg/config.json (model:"),
    (["run", "--model", "qwen3-30b-a3b", "--hardware", "hw/my.toml"], "file not found: hw/my.toml (hardware:"),
    (["sweep", "--model", "qwen3-30b-a3b", "--batch", "1", "--trace", "x.npz"], "file not found: x.npz (trace:"),
    (["sweep", "--grid", "nope.toml"], "file not found: nope.toml (--grid)"),
    (["plot", "nope.jsonl"], "file not found: nope.jsonl"),
])
def test_messages(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_estimate_point_defaults_to_the_context_of_run_and_fills_context_len_tokens(tmp_path):
    points = expand_grid([{"model": ["qwen3-30b-a3b"], "batch": [16]}])
    run_grid(points, tmp_path, point_fn=estimate_point, progress=None)
    row = read_results(tmp_path)[0]
    assert row["context_mean_tokens"] == 4096 == row["context_len_tokens"]
    assert simulate_step("qwen3-30b-a3b", batch=4, warmup=0).settings["context"] == "4096"


def test_early_loads_and_policy_option_spelled_as_run_does(tmp_path):
    grid = tmp_path / "g.toml"
    grid.write_text('model = "qwen3-30b-a3b"\nbatch = 4\nearly_loads = ["paper", "off", true]\n')
    assert [p["early_loads"] for p in expand_grid(load_grid_file(grid))] == ["paper", "off", True]
    base = ["sweep", "--model", "qwen3-30b-a3b", "--batch", "4", "--point", "estimate", "--jobs", "1", "--quiet"]
    assert main(base + ["--early-loads", "cheaper,off", "--out", str(tmp_path / "a")]) == 0
    assert main(base + ["--policy-option", "include_attention=false", "--out", str(tmp_path / "b")]) == 0
    assert main(base + ["--policy-options", "include_attention=false", "--out", str(tmp_path / "c")]) == 0
    ids = lambda d: [r["point_id"] for r in read_results(tmp_path / d)]  # noqa: E731
    assert len(ids("a")) == 2 and ids("b") == ids("c")


def test_progress_lines_name_model_policy_and_batch_even_at_their_defaults(tmp_path):
    points = expand_grid([{"model": ["qwen3-30b-a3b"], "batch": [1]}])
    lines = io.StringIO()
    run_grid(points, tmp_path, point_fn=estimate_point, progress=lines)
    assert lines.getvalue().startswith("sweep: 1/1 model=qwen3-30b-a3b policy=sieve batch=1 (")


def test_hardware_save_names_the_spec_after_its_file(tmp_path, capsys):
    out = tmp_path / "my-b200.toml"
    assert main(["hardware", "save", "b200", str(out)]) == 0
    assert 'name = "my-b200"' in out.read_text()


def test_the_routing_a_step_prints_is_a_routing_it_accepts(capsys):
    mine = dataclasses.replace(get_model("qwen3-30b-a3b"), name="mine")
    a = simulate_step(mine, batch=8, warmup=0)
    assert a.settings["routing"].startswith("synthetic:like-")
    b = simulate_step(mine, batch=8, warmup=0, trace=a.settings["routing"])
    assert a.step_time_s == b.step_time_s
    assert main(["trace-stats", "synthetic:like-deepseek-v3", "--batch-sizes", "1,16"]) == 0
