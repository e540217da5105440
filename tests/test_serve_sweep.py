"""Serving points in sweeps (``sweep --kind serve``) and the resumable max-rate search: resuming
after an interrupt, ids keyed by the content of every input, executors giving the same bytes, the
bisection resuming without serving a recorded probe again, bad input refused in one line."""
from __future__ import annotations

import json
import pathlib
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest
from conftest import subprocess_env

from sievesim.cli import main
from sievesim.grid import SERVE, expand_grid, read_grid_file
from sievesim.results import read_results
from sievesim.serve_sweep import MAX_RATE_JSON, flatten_result, max_rate_search, serve_point, simulator_for
from sievesim.serving.simulator import max_rate_under_slos, simulate_serving
from sievesim.sweep import RESULTS_CSV, RESULTS_JSONL, WALL_CLOCK_JSONL, run_grid

#: A small serving setup: short fixed requests, a small batch, two memo error samples; the TPOT
#: target is tight enough that 20 requests/s meets it and 200 requests/s does not.
SMALL = {"model": "qwen3-30b-a3b", "requests": 30, "prompt_tokens": 64, "output_tokens": 16, "max_batch": 16,
         "token_budget": 256, "max_model_len": 512, "error_samples": 2, "tpot_slo_s": 0.0012,
         "gpu_model": "roofline"}     # the SLO sits between the two rates' TPOT under the paper's GPU
SMALL_FLAGS = ["--model", "qwen3-30b-a3b", "--requests", "30", "--prompt-tokens", "64", "--output-tokens", "16",
               "--max-batch", "16", "--token-budget", "256", "--max-model-len", "512", "--error-samples", "2",
               "--tpot-slo", "0.0012", "--gpu-model", "roofline"]


def _points(**axes: Any) -> list[dict[str, Any]]:
    return expand_grid([{**{k: [v] for k, v in SMALL.items()}, **axes}], SERVE)


def _files(d: pathlib.Path) -> dict[str, bytes]:
    return {name: (d / name).read_bytes() for name in (RESULTS_JSONL, RESULTS_CSV)}


def test_a_serve_point_is_serve_json_flattened_and_pool_gives_the_serial_bytes(tmp_path):
    points = _points(policy=["sieve", "pimoe"], rate=[20, 200])
    assert [(p["policy"], p["rate"]) for p in points] == [("sieve", 20.0), ("sieve", 200.0), ("pimoe", 20.0),
                                                          ("pimoe", 200.0)]
    a, b = tmp_path / "serial", tmp_path / "pool"
    s1 = run_grid(points, a, point_fn=serve_point, kind=SERVE, progress=None)
    with ProcessPoolExecutor(max_workers=2) as pool:
        s2 = run_grid(points, b, point_fn=serve_point, kind=SERVE, executor=pool, progress=None)
    assert (s1.ran, s2.ran) == (4, 4)
    assert _files(a) == _files(b)
    rows = read_results(a)
    # the row is `serve --json` of that policy and rate, flattened, with the settings in front
    ref = simulate_serving("qwen3-30b-a3b", rate=200.0, requests=30, prompt_tokens=64, output_tokens=16,
                           lengths=None, max_batch=16, token_budget=256, max_model_len=512, error_samples=2,
                           tpot_slo_s=0.0012, gpu_model="roofline").to_dict()
    flat = flatten_result(ref)
    row = rows[1]
    for key, value in flat.items():
        if not key.startswith("wall_"):
            assert row[key] == value, key
    assert row["ttft_p99_s"] == ref["ttft_s"]["p99"] and row["memo_error_mean_abs_rel"] == \
        ref["pricing"]["error_vs_exact"]["mean_abs_rel"]
    assert [r["meets_slos"] for r in rows[:2]] == [True, False]
    assert "wall_s" not in row and len((a / WALL_CLOCK_JSONL).read_text().splitlines()) == 4
    assert row["model_digest"] and row["hardware_digest"] and row["sievesim_version"]
    # a rerun skips every point; a line cut short by a kill is dropped and its point served again
    assert run_grid(points, a, point_fn=serve_point, kind=SERVE, progress=None).ran == 0
    lines = (a / RESULTS_JSONL).read_bytes().splitlines(keepends=True)
    (a / RESULTS_JSONL).write_bytes(b"".join(lines[:3]) + lines[3][:40])
    again = run_grid(points, a, point_fn=serve_point, kind=SERVE, progress=None)
    assert (again.skipped, again.ran) == (3, 1)
    assert _files(a) == _files(b)


def test_serve_sweep_and_search_on_a_dask_cluster_give_the_serial_bytes(tmp_path, capsys):
    distributed = pytest.importorskip("distributed")
    args = ["sweep", "--kind", "serve", *SMALL_FLAGS, "--rate", "20,200", "--quiet"]
    search = ["sweep", "--kind", "serve", *SMALL_FLAGS, "--policy", "sieve,noexp", "--max-rate", "20:200",
              "--bisect-steps", "1", "--quiet"]
    assert main([*args, "--jobs", "1", "--out", str(tmp_path / "serial")]) == 0
    assert main([*search, "--jobs", "1", "--out", str(tmp_path / "serial-search")]) == 0
    serial_out = capsys.readouterr().out
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None, protocol="tcp://", host="127.0.0.1") as cluster:
        rc = main([*args, "--dask", cluster.scheduler_address, "--out", str(tmp_path / "dask")])
        rc_search = main([*search, "--dask", cluster.scheduler_address, "--out", str(tmp_path / "dask-search")])
    assert (rc, rc_search) == (0, 0)
    out = capsys.readouterr().out
    assert "2/2 points" in out
    assert _files(tmp_path / "dask") == _files(tmp_path / "serial")
    assert _files(tmp_path / "dask-search") == _files(tmp_path / "serial-search")
    assert (tmp_path / "dask-search" / MAX_RATE_JSON).read_bytes() == \
        (tmp_path / "serial-search" / MAX_RATE_JSON).read_bytes()
    assert "policy=sieve: max rate meeting the SLOs" in out and out.count("max rate") == 2
    assert out.replace("dask-search", "serial-search").splitlines()[1:] == serial_out.splitlines()[1:]


def test_ids_follow_the_content_of_the_trace_and_hardware_files(tmp_path, capsys):
    trace = tmp_path / "reqs.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,64,8\n0.05,32,8\n0.1,48,8\n")
    hw = tmp_path / "hw.toml"
    hw.write_text('base = "b200"\n[gpu]\nmemory_efficiency = 0.9\n')
    out = tmp_path / "out"
    args = ["sweep", "--kind", "serve", *SMALL_FLAGS, "--trace", str(trace), "--hardware", f"b200,{hw}",
            "--jobs", "1", "--out", str(out)]
    assert main(args) == 0
    first = {r["hardware"]: r for r in read_results(out)}
    assert "2 run now, 0 already done" in capsys.readouterr().out
    assert first["b200"]["trace_digest"] and first["b200"]["requests_served"] == 3
    assert main(args) == 0
    assert "0 run now, 2 already done" in capsys.readouterr().out
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,64,8\n0.05,32,8\n0.1,48,12\n")   # the edit
    assert main(args) == 0
    out_text, err = capsys.readouterr()
    assert "2 run now, 0 already done" in out_text
    assert "2 point(s) read input files that changed since the last run (" in err and "reqs.csv" in err
    second = {r["hardware"]: r for r in read_results(out)}
    for name in ("b200", str(hw)):
        assert second[name]["point_id"] != first[name]["point_id"]
        assert second[name]["trace_digest"] != first[name]["trace_digest"]
        assert second[name]["generated_tokens"] == first[name]["generated_tokens"] + 4     # the edit took effect
    hw.write_text('base = "b200"\n[gpu]\nmemory_efficiency = 0.5\n')
    assert main(args) == 0
    assert "1 run now, 1 already done" in capsys.readouterr().out
    third = {r["hardware"]: r for r in read_results(out)}
    assert third["b200"] == second["b200"]
    assert third[str(hw)]["hardware_digest"] != second[str(hw)]["hardware_digest"]
    assert third[str(hw)]["duration_s"] > second[str(hw)]["duration_s"]           # slower memory


class _Counted:
    """serve_point, counting its calls; after ``stop_after`` calls it raises KeyboardInterrupt (Ctrl-C)."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.calls: list[float] = []
        self.stop_after = stop_after
        self.__qualname__ = self.__name__ = "serve_point"
        self.__module__ = serve_point.__module__

    def __call__(self, settings: dict[str, Any]) -> dict[str, Any]:
        if self.stop_after is not None and len(self.calls) >= self.stop_after:
            raise KeyboardInterrupt
        self.calls.append(settings["rate"])
        return serve_point(settings)


def test_max_rate_search_resumes_after_ctrl_c_without_serving_a_recorded_probe_again(tmp_path):
    groups = _points()
    whole = tmp_path / "whole"
    ref_fn = _Counted()
    ref = max_rate_search(groups, whole, lo=20, hi=200, steps=2, point_fn=ref_fn)
    assert ref_fn.calls == [20.0, 200.0, 110.0, 155.0]
    assert (ref[0]["max_rate"], ref[0]["bracket"]) == (155.0, [155.0, 200.0])
    # the same bisection as serve --max-rate (one simulator, probes one after the other)
    direct = max_rate_under_slos(simulator_for(groups[0]), requests=30, lo=20, hi=200, steps=2, lengths=None,
                                 prompt_tokens=64, output_tokens=16)
    assert direct["max_rate"] == ref[0]["max_rate"] and direct["bracket"] == ref[0]["bracket"]
    assert [{k: v for k, v in t.items() if k != "point_id"} for t in ref[0]["tried"]] == direct["tried"]
    # interrupted after two probes, then resumed: the two are not served again
    out = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        max_rate_search(groups, out, lo=20, hi=200, steps=2, point_fn=_Counted(stop_after=2))
    assert len(read_results(out)) == 2
    again = _Counted()
    records = max_rate_search(groups, out, lo=20, hi=200, steps=2, point_fn=again)
    assert again.calls == [110.0, 155.0]
    assert records == ref
    assert (out / MAX_RATE_JSON).read_bytes() == (whole / MAX_RATE_JSON).read_bytes()
    assert _files(out) == _files(whole)
    # done: a rerun serves nothing; another bracket in the same directory is refused
    idle = _Counted()
    assert max_rate_search(groups, out, lo=20, hi=200, steps=2, point_fn=idle) == ref and idle.calls == []
    with pytest.raises(Exception, match="holds another grid"):
        max_rate_search(groups, out, lo=20, hi=300, steps=2, point_fn=idle)


def test_an_edited_hardware_file_starts_the_search_over_and_drops_its_old_probes(tmp_path):
    hw = tmp_path / "hw.toml"
    hw.write_text('base = "b200"\n[gpu]\nmemory_efficiency = 0.9\n')
    groups = _points(hardware=[str(hw)])
    out = tmp_path / "out"
    first = max_rate_search(groups, out, lo=20, hi=200, steps=1)
    hw.write_text('base = "b200"\n[gpu]\nmemory_efficiency = 0.3\n')        # the edit
    fn = _Counted()
    second = max_rate_search(groups, out, lo=20, hi=200, steps=1, point_fn=fn)
    ids = [t["point_id"] for t in second[0]["tried"]]
    assert len(fn.calls) == len(ids) >= 1                  # every probe served again
    assert len(first[0]["tried"]) == 3                     # the old probes, now left out of the files
    assert not set(ids) & {t["point_id"] for t in first[0]["tried"]}
    assert [r["point_id"] for r in read_results(out)] == ids
    assert [r["point_id"] for r in read_results(out / RESULTS_CSV)] == ids
    assert second[0]["tried"][0]["goodput_requests_per_s"] != first[0]["tried"][0]["goodput_requests_per_s"]


def _search_cmd(out: pathlib.Path) -> list[str]:
    return [sys.executable, "-m", "sievesim", "serve", *SMALL_FLAGS, "--policy", "sieve,pimoe", "--max-rate",
            "20:200", "--bisect-steps", "2", "--out", str(out)]


@pytest.mark.slow
def test_sigkill_mid_search_then_the_same_serve_command_resumes_it(tmp_path):
    out = tmp_path / "killed"
    env = subprocess_env()
    proc = subprocess.Popen(_search_cmd(out), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    jsonl = out / RESULTS_JSONL
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if jsonl.exists() and jsonl.read_bytes().count(b"\n") >= 2:
            break
        time.sleep(0.005)
    still_running = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert still_running, "the search finished before it could be killed"
    done_before = len(read_results(out))
    rerun = subprocess.run(_search_cmd(out), env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{done_before}/" in rerun.stderr and "already done, skipped" in rerun.stderr
    # the plain command (no --out) finds the same rates; the resumed search served each probe once
    plain = subprocess.run(_search_cmd(out)[:-2], env=env, capture_output=True, text=True, timeout=300)
    assert rerun.stdout == plain.stdout
    found = json.loads((out / MAX_RATE_JSON).read_text())
    probes = sum(len(r["tried"]) for r in found)
    assert len(read_results(out)) == probes
    executed = len((out / WALL_CLOCK_JSONL).read_text().splitlines())
    assert probes - 1 <= executed <= probes          # a kill between the two appends loses one wall line


def test_serve_grid_file(tmp_path, capsys):
    grid = tmp_path / "serve.toml"
    grid.write_text('kind = "serve"\nmodel = "qwen3-30b-a3b"\nrequests = 30\nprompt_tokens = 64\noutput_tokens = 16\n'
                    'max_batch = 16\ntoken_budget = 256\nmax_model_len = 512\nerror_samples = 2\n'
                    'tpot_slo_s = 0.0012\ngpu_model = "roofline"\n[[grid]]\npolicy = "sieve"\nrate = [20, 200]\n'
                    '[[grid]]\npolicy = "noexp"\nrate = 20\n')
    kind, products = read_grid_file(grid)
    assert kind is SERVE
    assert [(p["policy"], p["rate"]) for p in expand_grid(products, SERVE)] == [
        ("sieve", 20.0), ("sieve", 200.0), ("noexp", 20.0)]
    out = tmp_path / "out"
    assert main(["sweep", "--grid", str(grid), "--jobs", "1", "--quiet", "--out", str(out)]) == 0
    assert "3/3 points" in capsys.readouterr().out
    # the flags give the same points, hence the same ids: the grid file's rows equal the flags'
    flags = tmp_path / "flags"
    assert main(["sweep", "--kind", "serve", *SMALL_FLAGS, "--policy", "sieve", "--rate", "20,200", "--jobs", "1",
                 "--quiet", "--out", str(flags)]) == 0
    by_flag = {r["point_id"]: r for r in read_results(flags)}
    assert [by_flag[r["point_id"]] for r in read_results(out)[:2]] == read_results(out)[:2]


def test_plot_of_a_serve_sweep_defaults_to_goodput_against_rate(tmp_path):
    pytest.importorskip("matplotlib")
    from sievesim.plotting import plot_results

    rows = [{"point_id": f"p{i}", "model": "m", "policy": pol, "pimoe_unit": None, "rate": rate,
             "goodput_requests_per_s": good} for i, (pol, rate, good) in
            enumerate([("sieve", 20.0, 17.0), ("sieve", 200.0, 110.0), ("noexp", 20.0, 12.0)])]
    fig = plot_results(rows)
    ax = fig.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("rate", "goodput_requests_per_s")
    assert sorted(line.get_label() for line in ax.get_lines()) == ["noexp", "sieve"]
    sieve = next(line for line in ax.get_lines() if line.get_label() == "sieve")
    assert list(sieve.get_xdata()) == [20.0, 200.0] and list(sieve.get_ydata()) == [17.0, 110.0]


@pytest.mark.parametrize(("argv", "message"), [
    (["sweep", "--kind", "serve", "--model", "qwen3-30b-a3b", "--rate", "0"],
     "--rate = 0.0: expected a number in [0.001, 1e+09] (requests per second)"),
    (["sweep", "--kind", "serve", "--model", "qwen3-30b-a3b", "--rate", "-5"], "--rate = -5.0: expected a number in [0.001"),
    (["sweep", "--kind", "serve", "--model", "qwen3-30b-a3b", "--attainment", "1.5"],
     "--attainment = 1.5: expected a number in (0, 1] (a share of the requests)"),
    (["sweep", "--kind", "serve", "--model", "qwen3-30b-a3b", "--max-rate", "50:10"],
     "--max-rate = '50:10': expected LO:HI, two rates in requests/s with 0.001 <= LO < HI"),
    (["sweep", "--kind", "serve", "--model", "qwen3-30b-a3b", "--max-rate", "10:10"], "0.001 <= LO < HI"),
    (["sweep", "--kind", "serve", "--model", "qwen3-30b-a3b", "--rate", "5", "--max-rate", "1:9"],
     "rate = 5.0: expected none with --max-rate (the search picks the rates)"),
    (["sweep", "--kind", "serve", "--model", "qwen3-30b-a3b", "--rate", "5", "--bisect-steps", "3"],
     "--bisect-steps = 3: expected only with --max-rate LO:HI"),
    (["sweep", "--kind", "serve", "--model", "qwen3-30b-a3b", "--rate", "5", "--batch", "4"],
     "--batch = '4': expected only in a decode-step sweep (not with --kind serve)"),
    (["sweep", "--kind", "serve", "--model", "qwen3-30b-a3b", "--rate", "5", "--point", "estimate"],
     "--point = 'estimate': expected only in a decode-step sweep"),
    (["sweep", "--model", "qwen3-30b-a3b", "--batch", "4", "--rate", "5"],
     "--rate = '5.0': expected only in a serving sweep (--kind serve"),
    (["sweep", "--model", "qwen3-30b-a3b", "--batch", "4", "--max-rate", "1:5"],
     "--max-rate = '1:5': expected only in a serving sweep"),
    (["sweep", "--kind", "serve", "--model", "qwen3-30b-a3b"],
     "rate = None: expected a rate (requests/s), a request trace, or --max-rate LO:HI"),
    (["sweep", "--kind", "serve", "--model", "qwen3-30b-a3b", "--rate", "5", "--policy", "sievee"], "sievee"),
    (["sweep", "--kind", "serve", "--model", "qwen3-30b-a3b", "--rate", "5", "--gpus", "0"],
     "--gpus = 0: expected an integer from 1 to 4096"),
    (["serve", "--model", "qwen3-30b-a3b", "--rate", "5", "--out", "d"],
     "--out = 'd': expected only with --max-rate LO:HI"),
])
def test_bad_input_exits_2_naming_the_field(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--out", str(tmp_path / "o")] if argv[0] == "sweep" else argv) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("text", "message"), [
    ('kind = "serve"\nmodel = "qwen3-30b-a3b"\nbatch = 4\n',
     "batch = '<unknown key>': expected one of the serve grid keys: batch is a setting of step points"),
    ('model = "qwen3-30b-a3b"\nbatch = 4\nrate = 5\n',
     "rate = '<unknown key>': expected one of the step grid keys: rate is a setting of serve points "
     '(kind = "serve")'),
    ('kind = "serving"\nmodel = "qwen3-30b-a3b"\n', "kind = 'serving': expected one of \"step\", \"serve\""),
    ('kind = "serve"\nmodel = "qwen3-30b-a3b"\nrate = [5, -1]\ncv = 0\n',
     "2 problems: rate = -1: expected a number in [0.001, 1e+09]"),
])
def test_bad_serve_grid_file_exits_2_naming_the_key(tmp_path, capsys, text, message):
    grid = tmp_path / "g.toml"
    grid.write_text(text)
    assert main(["sweep", "--grid", str(grid), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert len(err.strip().splitlines()) == 1


def test_kind_flag_against_the_grid_files_kind(tmp_path, capsys):
    grid = tmp_path / "g.toml"
    grid.write_text('kind = "serve"\nmodel = "qwen3-30b-a3b"\nrate = 5\n')
    assert main(["sweep", "--grid", str(grid), "--kind", "step", "--out", str(tmp_path / "o")]) == 2
    assert "--kind = 'step': expected the kind of the grid file" in capsys.readouterr().err


def test_every_serve_option_is_a_point_setting_or_named_as_none():
    """A new `serve` option must reach the resumable search (`--max-rate --out`) as a setting of its
    sweep points, or be named as none: else `serve --max-rate --out` would serve without it."""
    import argparse

    from sievesim.cli import build_parser
    from sievesim.commands.serve import NOT_POINT_SETTINGS, POINT_SETTINGS
    from sievesim.grid import SERVE_KEYS

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    top = {a.dest for a in parser._actions}           # --max-memory, --max-work: every command's  # noqa: SLF001
    dests = {a.dest for a in sub.choices["serve"]._actions} - top  # noqa: SLF001
    assert dests - set(POINT_SETTINGS) - set(NOT_POINT_SETTINGS) == set()
    assert set(POINT_SETTINGS.values()) <= set(SERVE_KEYS)
    assert set(SERVE_KEYS) - set(POINT_SETTINGS.values()) == {"policy", "pimoe_unit", "policy_options", "trace",
                                                               "rate"}


def test_a_disaggregated_search_with_out_prints_what_the_plain_one_prints(tmp_path, capsys):
    """--prefill-gpus reaches the resumable search as a point setting: the split is served, named and
    gives the in-memory command's answer."""
    flags = ["serve", "--model", "qwen3-30b-a3b", "--gpus", "2", "--prefill-gpus", "1", "--requests", "20",
             "--prompt-tokens", "64", "--output-tokens", "8", "--error-samples", "2", "--max-rate", "5:50",
             "--bisect-steps", "1", "--tpot-slo", "0.0015"]
    assert main(flags) == 0
    plain = capsys.readouterr().out
    assert main(flags + ["--out", str(tmp_path / "s")]) == 0
    assert capsys.readouterr().out == plain
    assert "(1 prefill + 1 decode, disaggregated)" in plain
    rows = read_results(tmp_path / "s")
    assert rows and all(r["prefill_gpus"] == 1 and r["mode"] == "disaggregated" for r in rows)
