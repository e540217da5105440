"""Sweeps: grids, executors (serial, process pool, Dask), resuming after a kill, byte-identical
results, bad input."""
from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import pytest
from conftest import subprocess_env

from sievesim.cli import main
from sievesim.errors import SievesimError
from sievesim.sweep import (MANIFEST, RESULTS_CSV, RESULTS_JSONL, WALL_CLOCK_JSONL, estimate_point,
                            expand_grid, load_grid_file, point_id, read_results, run_grid,
                            step_point)

ROOT = pathlib.Path(__file__).resolve().parents[1]
GRID = {"model": ["qwen3-30b-a3b"], "batch": [1, 16, 64], "policy": ["sieve", "pimoe", "noexp"],
        "pimoe_unit": ["stack", "channel"], "context_preset": ["hh-rlhf"], "steps": [2]}


def _files(d: pathlib.Path) -> dict[str, bytes]:
    return {name: (d / name).read_bytes() for name in (RESULTS_JSONL, RESULTS_CSV)}


def test_grid_expands_in_order_and_runs_other_policies_once_over_pimoe_units():
    points = expand_grid([GRID])
    # sieve and noexp once per batch, pimoe once per (batch, unit)
    assert len(points) == 3 * (1 + 2 + 1)
    assert [p["pimoe_unit"] for p in points if p["policy"] == "sieve"] == [None] * 3
    assert {p["pimoe_unit"] for p in points if p["policy"] == "pimoe"} == {"stack", "channel"}
    assert len({point_id(p) for p in points}) == len(points)
    assert [p["batch"] for p in points if p["policy"] == "sieve"] == [1, 16, 64]


def test_grid_file_union_of_tables_and_typo_named(tmp_path):
    f = tmp_path / "g.toml"
    f.write_text('policy = ["sieve", "noexp"]\nsteps = 1\n'
                 '[[grid]]\nmodel = "qwen3-30b-a3b"\ngpus = 1\nbatch = [1, 4]\n'
                 '[[grid]]\nmodel = "gpt-oss-120b"\ngpus = 4\nbatch = [8]\n')
    points = expand_grid(load_grid_file(f))
    assert [(p["model"], p["gpus"], p["batch"], p["policy"]) for p in points] == [
        ("qwen3-30b-a3b", 1, 1, "sieve"), ("qwen3-30b-a3b", 1, 4, "sieve"),
        ("qwen3-30b-a3b", 1, 1, "noexp"), ("qwen3-30b-a3b", 1, 4, "noexp"),
        ("gpt-oss-120b", 4, 8, "sieve"), ("gpt-oss-120b", 4, 8, "noexp")]
    bad = tmp_path / "bad.toml"
    bad.write_text('model = "qwen3-30b-a3b"\nbatchs = [1, 4]\n')
    with pytest.raises(SievesimError, match=r"batchs = '<unknown key>': expected one of the grid keys "
                                            r"\(did you mean 'batch'\?\)"):
        load_grid_file(bad)
    # every problem of the file in one message, tables named by their position
    bad.write_text('modle = "x"\nbatch = ["a", 3]\n[[grid]]\ngpus = true\n')
    with pytest.raises(SievesimError) as exc:
        load_grid_file(bad)
    msg = str(exc.value)
    assert msg.startswith(f"{bad}: 3 problems: ") and len(msg.splitlines()) == 1
    for part in ("modle = '<unknown key>'", "(did you mean 'model'?)", "batch = 'a': expected an integer",
                 "[[grid]] #1 gpus = True: expected an integer"):
        assert part in msg, part


def test_serial_and_process_pool_give_byte_identical_files(tmp_path):
    points = expand_grid([GRID])
    a, b = tmp_path / "serial", tmp_path / "pool"
    s1 = run_grid(points, a, point_fn=estimate_point, progress=None)
    with ProcessPoolExecutor(max_workers=2) as pool:
        s2 = run_grid(points, b, point_fn=estimate_point, executor=pool, progress=None)
    assert (s1.ran, s2.ran) == (len(points), len(points))
    assert _files(a) == _files(b)
    rows = read_results(a)
    assert [r["point_id"] for r in rows] == [point_id(p) for p in points]
    # every row carries its settings and reproduces itself through the point function
    r = rows[4]
    settings = {k: r[k] for k in ("model", "hardware", "gpus", "policy", "pimoe_unit", "batch", "trace",
                                  "context_preset", "prefill", "steps", "warmup", "seed")}
    settings["context_len"] = r["context_len_tokens"]
    again = estimate_point(settings)
    assert again["estimated_layer_time_s"] == r["estimated_layer_time_s"]
    assert r["sievesim_version"]
    # the wall clock is kept out of the result files
    assert "wall_point_s" not in r
    assert len((a / WALL_CLOCK_JSONL).read_text().splitlines()) == len(points)
    # Sieve's estimate is never worse than AllExp-like all-on-PIM or NoExp at the same point
    by = {(x["policy"], x["pimoe_unit"], x["batch"]): x["estimated_layer_time_s"] for x in rows}
    for bsz in (1, 16, 64):
        assert by[("sieve", None, bsz)] <= by[("noexp", None, bsz)] * (1 + 1e-12)


def test_dask_local_cluster_through_the_cli(tmp_path, capsys):
    distributed = pytest.importorskip("distributed")
    points = expand_grid([GRID])
    ref = tmp_path / "ref"
    run_grid(points, ref, point_fn=estimate_point, progress=None)
    out = tmp_path / "dask"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None, protocol="tcp://", host="127.0.0.1") as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        rc = main(["sweep", "--model", "qwen3-30b-a3b", "--batch", "1,16,64", "--policy", "sieve,pimoe,noexp",
                   "--pimoe-unit", "stack,channel", "--context-preset", "hh-rlhf", "--steps", "2",
                   "--point", "estimate", "--dask", cluster.scheduler_address, "--out", str(out), "--quiet"])
    assert rc == 0
    assert f"{len(points)}/{len(points)} points" in capsys.readouterr().out
    assert _files(out) == _files(ref)


def _sweep_cmd(out: pathlib.Path) -> list[str]:
    return [sys.executable, "-m", "sievesim", "sweep", "--model", "qwen3-30b-a3b", "--batch",
            ",".join(str(b) for b in range(1, 41)), "--steps", "12", "--point", "estimate",
            "--jobs", "1", "--out", str(out)]


@pytest.mark.slow
def test_sigkill_mid_sweep_then_rerun_loses_nothing_and_repeats_nothing(tmp_path):
    out = tmp_path / "killed"
    env = subprocess_env()
    proc = subprocess.Popen(_sweep_cmd(out), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    jsonl = out / RESULTS_JSONL
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if jsonl.exists() and jsonl.read_bytes().count(b"\n") >= 3:
            break
        time.sleep(0.005)
    still_running = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert still_running, "the sweep finished before it could be killed; make its points slower"
    done_before = len(read_results(out))
    assert 3 <= done_before < 40
    rerun = subprocess.run(_sweep_cmd(out), env=env, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{40 - done_before} run now" in rerun.stdout or done_before == 40
    data = jsonl.read_bytes()
    assert data.endswith(b"\n")
    rows = [json.loads(line) for line in data.splitlines()]
    ids = [r["point_id"] for r in rows]
    assert sorted(r["batch"] for r in rows) == list(range(1, 41))
    assert len(ids) == len(set(ids)) == 40
    csv_lines = (out / RESULTS_CSV).read_text().splitlines()
    assert len(csv_lines) == 41
    # the same grid run in one go gives the same bytes
    whole = tmp_path / "whole"
    subprocess.run(_sweep_cmd(whole), env=env, capture_output=True, check=True, timeout=120)
    assert _files(out) == _files(whole)


def test_partial_last_line_is_dropped_and_the_point_rerun(tmp_path):
    points = expand_grid([{"model": ["qwen3-30b-a3b"], "batch": [1, 2, 3]}])
    run_grid(points, tmp_path, point_fn=estimate_point, progress=None)
    full = _files(tmp_path)
    lines = full[RESULTS_JSONL].splitlines(keepends=True)
    (tmp_path / RESULTS_JSONL).write_bytes(lines[0] + lines[1] + lines[2][:25])  # a write cut short
    summary = run_grid(points, tmp_path, point_fn=estimate_point, progress=None)
    assert (summary.skipped, summary.ran) == (2, 1)
    assert _files(tmp_path) == full


def test_other_grid_refused_unless_force(tmp_path, capsys):
    args = ["sweep", "--model", "qwen3-30b-a3b", "--point", "estimate", "--jobs", "1", "--quiet",
            "--out", str(tmp_path)]
    assert main(args + ["--batch", "1,2"]) == 0
    assert main(args + ["--batch", "1,4"]) == 2
    assert "holds another grid" in capsys.readouterr().err
    assert main(args + ["--batch", "1,4", "--force"]) == 0
    assert sorted(r["batch"] for r in read_results(tmp_path)) == [1, 4]
    assert json.loads((tmp_path / MANIFEST).read_text())["points"][1]["batch"] == 4
    # a directory with results but no grid.json is someone else's
    other = tmp_path / "other"
    other.mkdir()
    (other / RESULTS_CSV).write_text("a,b\n1,2\n")
    assert main(args[:-1] + [str(other), "--batch", "1"]) == 2
    assert "unknown grid" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--model", "qwen3-31b", "--batch", "1"], "model = 'qwen3-31b'"),
    (["--model", "qwen3-30b-a3b", "--batch", "1", "--gpus", "3"], "gpus = 3"),
    (["--model", "qwen3-30b-a3b", "--batch", "1", "--policy", "sieeve"], "policy = 'sieeve'"),
    (["--model", "qwen3-30b-a3b", "--batch", "0"], "batch = 0"),
    (["--model", "qwen3-30b-a3b", "--batch", "1", "--context-preset", "hh"], "lengths preset = 'hh'"),
    (["--model", "qwen3-30b-a3b", "--batch", "1", "--trace", "missing.npz"], "file not found: missing.npz"),
    (["--model", "qwen3-30b-a3b", "--batch", "1", "--prefill", "2:1024", "--point", "estimate"], "prefill = '2:1024'"),
    (["--model", "qwen3-30b-a3b", "--batch", "1", "--prefill", "2"], "prefill = '2'"),
    (["--model", "qwen3-30b-a3b"], "batch = None"),
    (["--model", "qwen3-30b-a3b", "--batch", "1", "--jobs", "0"], "--jobs = 0"),
    (["--model", "qwen3-30b-a3b", "--batch", "1", "--warmup", "-1"], "--warmup = -1"),
    (["--model", "qwen3-30b-a3b", "--batch", "\u0663"], "--batch = '\u0663': expected an integer written in ASCII"),
    (["--model", "qwen3-30b-a3b", "--batch", "1", "--steps", "1000000000"], "--steps = 1000000000"),
    (["--model", "qwen3-30b-a3b", "--batch", "1", "--top-k", "200"], "top_k = 200: expected at most num_experts"),
])
def test_bad_input_exits_2_naming_the_field(tmp_path, capsys, argv, message):
    assert main(["sweep", "--jobs", "1", "--quiet", "--out", str(tmp_path / "o")] + argv
                if "--jobs" not in argv else ["sweep", "--quiet", "--out", str(tmp_path / "o")] + argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_the_executed_step_through_a_process_pool_twice_gives_byte_identical_files(tmp_path):
    points = expand_grid([{"model": ["qwen3-30b-a3b"], "batch": [1, 8], "policy": ["sieve", "gpu-only"],
                           "warmup": [1]}])
    a, b = tmp_path / "a", tmp_path / "b"
    run_grid(points, a, point_fn=step_point, progress=None)
    with ProcessPoolExecutor(max_workers=2) as pool:
        run_grid(points, b, point_fn=step_point, executor=pool, progress=None)
    assert _files(a) == _files(b)
    rows = read_results(a)
    assert all(r["routing"] == "synthetic:qwen3-30b-a3b" and r["step_time_s"] > 0 for r in rows)
    assert not any(k.startswith("wall_") for r in rows for k in r)
    assert all(r["warmup"] == 1 and r["hardware"] == "b200" for r in rows)
    walls = [json.loads(x) for x in (a / WALL_CLOCK_JSONL).read_text().splitlines()]
    assert all("wall_step_s" in w and "wall_decision_us" in w for w in walls)
    # throughput per GPU = B / T_step / G, and a row carries what reproduces it
    r = rows[1]
    assert r["throughput_tokens_per_s_per_gpu"] == pytest.approx(r["batch"] / r["step_time_s"] / r["gpus"])
    assert step_point({k: r.get(k) for k in ("model", "hardware", "gpus", "policy", "batch", "seed",
                                             "steps", "warmup")})["step_time_s"] == r["step_time_s"]


def test_grid_file_typo_through_the_cli(tmp_path, capsys):
    f = tmp_path / "g.toml"
    f.write_text('model = "qwen3-30b-a3b"\nbatch = [1]\npolicys = ["sieve"]\n')
    assert main(["sweep", "--grid", str(f), "--out", str(tmp_path / "o")]) == 2
    assert "policys = '<unknown key>': expected one of the grid keys (did you mean 'policy'?)" in capsys.readouterr().err


def test_bad_dask_address_exits_2(tmp_path, capsys):
    pytest.importorskip("distributed")
    assert main(["sweep", "--model", "qwen3-30b-a3b", "--batch", "1", "--point", "estimate",
                 "--dask", "nonsense", "--out", str(tmp_path / "o")]) == 2
    assert "--dask = 'nonsense'" in capsys.readouterr().err


def test_progress_bar_on_a_terminal_and_lines_otherwise(tmp_path):
    import io
    pytest.importorskip("tqdm")
    points = expand_grid([{"model": ["qwen3-30b-a3b"], "batch": [1, 2]}])
    bar = io.StringIO()
    run_grid(points, tmp_path / "bar", point_fn=estimate_point, progress=bar, bar=True)
    assert "2/2" in bar.getvalue() and "point" in bar.getvalue()
    lines = io.StringIO()
    run_grid(points, tmp_path / "lines", point_fn=estimate_point, progress=lines)  # not a TTY
    text = lines.getvalue().splitlines()
    assert len(text) == 2 and text[1].startswith("sweep: 2/2 model=qwen3-30b-a3b policy=sieve batch=2")


def test_top_k_is_a_setting_and_old_sweeps_keep_their_point_ids(tmp_path):
    """A point without top_k (or weight_format) has the id it would have without the setting, so that
    such a sweep resumes; with it, the model draws that many experts per token. The GPU model is
    always part of the id: a sweep begun under the roofline is not resumed under the calibrated GPU."""
    import hashlib

    settings = expand_grid([{"model": ["qwen3-30b-a3b"], "batch": [16]}])[0]
    assert settings["top_k"] is None
    assert settings["gpu_model"] == "calibrated"
    before = {k: settings[k] for k in settings if k not in ("top_k", "weight_format")}
    assert point_id(settings) == hashlib.sha1(json.dumps(before, sort_keys=True).encode()).hexdigest()[:12]
    points = expand_grid([{"model": ["qwen3-30b-a3b"], "batch": [16], "top_k": [4, 8]}])
    assert len({point_id(p) for p in points}) == 2
    rows = [estimate_point(p) for p in points]
    assert [r["top_k"] for r in rows] == [4, 8]
    assert rows[0]["estimated_layer_time_s"] < rows[1]["estimated_layer_time_s"]   # half the routed tokens
