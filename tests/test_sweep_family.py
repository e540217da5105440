"""The sweep family as one package (sievesim/sweeps/) with its former module paths kept, and what
sweeps gained with it: every grid problem at once, decode rows' number mappings as columns (so
``plot`` draws them), colocated and disaggregated serving points in one command line, and
``serve --requests-csv`` / ``--timeline-csv`` over several policies."""
from __future__ import annotations

import csv
import importlib
import json

import pytest

from sievesim.cli import main
from sievesim.errors import ConfigError, SievesimError
from sievesim.sweeps import grid, run

FORMER = {"sweep": "run", "serve_sweep": "serve_points", "grid": "grid", "results": "results",
          "provenance": "provenance", "workers": "workers", "plotting": "plotting"}


@pytest.mark.parametrize("old, new", sorted(FORMER.items()))
def test_the_former_module_paths_are_the_same_modules(old, new):
    former = importlib.import_module(f"sievesim.{old}")
    assert former is importlib.import_module(f"sievesim.sweeps.{new}")
    assert former.__name__ == f"sievesim.sweeps.{new}"


def test_grid_json_keeps_the_point_functions_former_names():
    """Directories written before the move hold these names: they resume, not refuse."""
    from sievesim.sweeps.serve_points import serve_point

    assert run._function_name(run.step_point) == "sievesim.sweep.step_point"            # noqa: SLF001
    assert run._function_name(run.estimate_point) == "sievesim.sweep.estimate_point"    # noqa: SLF001
    assert run._function_name(serve_point) == "sievesim.serve_sweep.serve_point"        # noqa: SLF001
    assert run._function_name(test_the_former_module_paths_are_the_same_modules).startswith(__name__)  # noqa: SLF001


# ------------------------------------------------------------------------------------------------
# every problem of a grid at once


def test_a_grid_file_reports_every_problem_at_once(tmp_path):
    f = tmp_path / "g.toml"
    f.write_text('model = ["qwen3-30b-a3b", "nosuchmodel"]\npolicy = ["sieve", "nosuchpolicy"]\n'
                 'batch = [16, -3]\nhardware = "nosuchhw"\n')
    with pytest.raises(ConfigError) as err:
        grid.read_grid_file(f)
    text = str(err.value)
    assert text.startswith(f"{f}: 4 problems: ")
    for needle in ("batch = -3", "model = 'nosuchmodel'", "policy = 'nosuchpolicy'", "hardware = 'nosuchhw'"):
        assert text.count(needle) == 1, (needle, text)


def test_the_points_report_every_problem_once():
    points = grid.expand_grid([{"model": ["qwen3-30b-a3b", "nosuchmodel"], "policy": ["sieve", "nosuchpolicy"],
                                "gpus": [1, 3], "batch": [16], "hardware": ["nosuchhw"]}])
    with pytest.raises(ConfigError) as err:
        grid.check_points(points)
    text = str(err.value)
    assert text.startswith("3 problems: ")      # 3 GPUs take a redundant expert (auto): no problem
    for needle in ("hardware = 'nosuchhw'", "policy = 'nosuchpolicy'", "model = 'nosuchmodel'"):
        assert text.count(needle) == 1, (needle, text)


def test_one_problem_is_raised_as_it_was():
    with pytest.raises(SievesimError) as err:
        grid.check_points(grid.expand_grid([{"model": ["qwen3-30b-a3b"], "batch": [4], "policy": ["nosuch"]}]))
    assert str(err.value).startswith("policy = 'nosuch': expected one of allexp, ")


def test_the_list_of_problems_is_cut_after_twenty():
    problems = grid.AllProblems()
    for i in range(25):
        with problems.check():
            raise ConfigError(f"problem {i}")
    with pytest.raises(ConfigError, match=r"^25 problems: problem 0; .*; problem 19; and 5 more$"):
        problems.raise_if_any()


def test_serving_points_report_every_problem_at_once():
    from sievesim.sweeps.serve_points import check_serve_points

    points = grid.expand_grid([{"model": ["qwen3-30b-a3b"], "policy": ["sieve", "nosuchpolicy"], "gpus": [3],
                                "lengths": ["nosuchpreset"], "rate": [5.0], "hardware": ["nosuchhw"]}], grid.SERVE)
    with pytest.raises(ConfigError) as err:
        check_serve_points(points)
    text = str(err.value)
    assert text.startswith("3 problems: ") and "policy = 'nosuchpolicy'" in text and "hardware = 'nosuchhw'" in text
    assert "nosuchpreset" in text


def test_the_command_line_reports_every_problem(tmp_path, capsys):
    argv = ["sweep", "--model", "qwen3-30b-a3b,nosuchmodel", "--policy", "sieve,nosuchpolicy", "--batch", "4",
            "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "2 problems" in err and "nosuchmodel" in err and "nosuchpolicy" in err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


# ------------------------------------------------------------------------------------------------
# decode rows: number mappings as columns


def _fake_step(settings):
    return {"energy_j": 2.0 * settings["batch"], "energy_breakdown_j": {"pim": 0.5 * settings["batch"],
                                                                         "static": 1.5 * settings["batch"]},
            "memory_per_gpu_bytes": {"kv_cache": 10, "total": 30}, "busy_s": {"gpu": [0.1, 0.2]},
            "policy_options": {}}


def test_decode_rows_flatten_their_mappings_of_numbers(tmp_path):
    from sievesim.sweeps.plotting import plot_results
    from sievesim.sweeps.results import read_results

    points = grid.expand_grid([{"model": ["qwen3-30b-a3b"], "batch": [4, 8], "policy": ["sieve"]}])
    run.run_grid(points, tmp_path, point_fn=_fake_step, progress=None)
    rows = read_results(tmp_path)
    assert [r["energy_breakdown_pim_j"] for r in rows] == [2.0, 4.0]
    assert [r["energy_breakdown_static_j"] for r in rows] == [6.0, 12.0]
    assert rows[0]["memory_per_gpu_kv_cache_bytes"] == 10 and rows[0]["memory_per_gpu_total_bytes"] == 30
    assert "energy_breakdown_j" not in rows[0] and "memory_per_gpu_bytes" not in rows[0]
    assert rows[0]["busy_s"] == {"gpu": [0.1, 0.2]}              # not numbers: kept as it is
    header = (tmp_path / run.RESULTS_CSV).read_text().splitlines()[0].split(",")
    assert "energy_breakdown_pim_j" in header and "energy_breakdown_j" not in header
    fig = plot_results(tmp_path, x="batch", y="energy_breakdown_pim_j")
    assert fig.axes[0].get_ylabel().startswith("energy_breakdown_pim_j")


def test_a_real_decode_row_has_the_energy_columns_serve_rows_have(tmp_path):
    from sievesim.system.energy import RESOURCE_KINDS
    from sievesim.sweeps.results import read_results

    points = grid.expand_grid([{"model": ["qwen3-30b-a3b"], "batch": [4], "policy": ["noexp"], "warmup": [0],
                                "steps": [1]}])
    run.run_grid(points, tmp_path, point_fn=run.step_point, progress=None)
    row, = read_results(tmp_path)
    parts = [row[f"energy_breakdown_{k}_j"] for k in RESOURCE_KINDS]
    assert sum(parts) == pytest.approx(row["energy_j"], rel=1e-12)


# ------------------------------------------------------------------------------------------------
# colocated and disaggregated points in one command line


SERVE_SMALL = ["--model", "qwen3-30b-a3b", "--rate", "5", "--requests", "6", "--prompt-tokens", "32",
               "--output-tokens", "4", "--max-batch", "4", "--token-budget", "64", "--max-model-len", "256",
               "--error-samples", "0", "--gpu-model", "roofline"]


def test_zero_prefill_gpus_is_the_colocated_point():
    base = {"model": ["qwen3-30b-a3b"], "gpus": [2], "rate": [5.0]}
    mixed = grid.expand_grid([{**base, "prefill_gpus": [0, 1]}], grid.SERVE)
    colocated, = grid.expand_grid([base], grid.SERVE)
    assert [p["prefill_gpus"] for p in mixed] == [None, 1]
    assert grid.point_id(mixed[0], kind=grid.SERVE) == grid.point_id(colocated, kind=grid.SERVE)
    assert len(grid.expand_grid([{**base, "prefill_gpus": [0, None, 1]}], grid.SERVE)) == 2


def test_a_serve_sweep_mixes_colocated_and_disaggregated_points(tmp_path, capsys):
    from sievesim.sweeps.results import read_results

    assert main(["sweep", "--kind", "serve", "--gpus", "2", "--prefill-gpus", "0,1", "--jobs", "1",
                 "--out", str(tmp_path), *SERVE_SMALL]) == 0
    rows = read_results(tmp_path)
    assert [r["prefill_gpus"] for r in rows] == [None, 1]
    assert [r.get("mode") for r in rows] == [None, "disaggregated"]
    capsys.readouterr()
    assert main(["sweep", "--kind", "serve", "--gpus", "2", "--prefill-gpus", "none,1", "--jobs", "1",
                 "--out", str(tmp_path), *SERVE_SMALL]) == 0        # the same points: nothing runs again
    assert "0 run now, 2 already done" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------
# serve --requests-csv / --timeline-csv over several policies


def test_several_policies_write_one_csv_with_a_policy_column(tmp_path, capsys):
    req, tl = tmp_path / "r.csv", tmp_path / "t.csv"
    assert main(["serve", "--policy", "sieve,pimoe", "--requests-csv", str(req), "--timeline-csv", str(tl),
                 "--json", *SERVE_SMALL]) == 0
    records = json.loads(capsys.readouterr().out)
    rows = list(csv.DictReader(req.open()))
    assert list(rows[0])[:2] == ["policy", "request"]
    assert [r["policy"] for r in rows] == ["sieve"] * 6 + ["pimoe(channel)"] * 6
    assert [int(r["request"]) for r in rows] == list(range(6)) * 2
    for policy, record in zip(("sieve", "pimoe(channel)"), records):
        ttft = sorted(float(r["ttft_s"]) for r in rows if r["policy"] == policy)
        assert ttft[len(ttft) // 2] == pytest.approx(record["whole_run"]["ttft_s"]["p50"], rel=0.5)
        its = [r for r in csv.DictReader(tl.open()) if r["policy"] == policy]
        assert len(its) == record["iterations"]


def test_one_policy_keeps_its_csv_as_it_was(tmp_path, capsys):
    req = tmp_path / "r.csv"
    assert main(["serve", "--requests-csv", str(req), "--quiet", *SERVE_SMALL]) == 0
    assert req.read_text().splitlines()[0].startswith("request,arrival_s,prompt_tokens")


@pytest.mark.parametrize("option", ["--requests-csv", "--timeline-csv", "--plot"])
def test_an_output_of_one_rate_is_refused_with_max_rate_before_anything_runs(tmp_path, capsys, option):
    target = tmp_path / ("x.png" if option == "--plot" else "x.csv")
    argv = ["serve", "--model", "qwen3-30b-a3b", "--max-rate", "1:4", option, str(target)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{option} = " in err and f"no {option} with --max-rate" in err and "Traceback" not in err
    assert not target.exists()


def test_a_gpu_count_that_does_not_divide_the_experts_runs_as_a_step_and_is_refused_as_an_estimate(tmp_path, capsys):
    from sievesim.cli import main
    argv = ["sweep", "--model", "qwen3-30b-a3b", "--gpus", "3", "--batch", "6", "--policy", "noexp", "--quiet"]
    assert main(argv + ["--point", "estimate", "--out", str(tmp_path / "e")]) == 2
    assert ("gpus = 3: expected a divisor of qwen3-30b-a3b's 128 experts with --point estimate"
            in capsys.readouterr().err)
    assert main(argv + ["--warmup", "0", "--out", str(tmp_path / "s")]) == 0
    rows = (tmp_path / "s" / "results.csv").read_text().splitlines()
    header = rows[0].split(",")
    assert len(rows) == 2 and rows[1].split(",")[header.index("redundant_experts")] == "1"
