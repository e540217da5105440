"""``sievesim reproduce``: the registry, files written, --json, no-matplotlib path, figures 3-5."""
from __future__ import annotations

import csv
import json
import pathlib

import pytest

from sievesim import reproduce as rp
from sievesim.cli import main

TRACES = pathlib.Path(__file__).resolve().parents[2] / "shared" / "traces"
MIXTRAL_TRACE = TRACES / "mixtral_8x7b_humaneval_gsm8k_decode.npz"


def test_unknown_figure_exits_2_with_the_closest_name(tmp_path, capsys):
    assert main(["reproduce", "fig33", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "figure = 'fig33'" in err and "fig3" in err and err.count("\n") == 1


def test_registry_lists_figures_in_order_and_refuses_a_duplicate():
    assert rp.figure_names()[:3] == ["fig3", "fig4", "fig5"] and rp.figure_names()[-1] == "all"
    with pytest.raises(ValueError):
        rp.register_figure("fig3", "again")(lambda opts: rp.FigureData([]))


def test_fig3_and_fig5_quick_write_csv_png_and_json(tmp_path, capsys):
    assert main(["reproduce", "fig5", "--quick", "--out", str(tmp_path), "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert {r["series"] for r in records} == set(rp.PAPER_MODELS)
    for r in records:
        total = r["frac_n1"] + r["frac_n2"] + r["frac_n3_4"] + r["frac_gt4"]
        assert total == pytest.approx(1.0)
        assert r["frac_memory_bound"] == pytest.approx(r["frac_n1"] + r["frac_n2"] + r["frac_n3_4"])
    # B = 1: every activated expert has one token
    assert all(r["frac_n1"] == 1.0 for r in records if r["batch"] == 1)
    assert (tmp_path / "fig5.png").stat().st_size > 10_000
    with open(tmp_path / "fig5.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(records) and rows[0]["figure"] == "fig5"

    assert main(["reproduce", "fig3", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "GPT-OSS act-ratio at B=256" in out and "47.9 %" in out
    with open(tmp_path / "fig3.csv") as fh:
        rows = list(csv.DictReader(fh))
    for model in rp.PAPER_MODELS:
        ratios = [float(r["act_param_ratio"]) for r in rows if r["series"] == model]
        assert ratios == sorted(ratios) and 0 < ratios[0] < ratios[-1] <= 1  # grows with B
    # Mixtral (8 experts, top-2) at B = 1 activates exactly 2/8 of its routed experts
    mixtral_b1 = next(r for r in rows if r["series"] == "mixtral-8x22b" and r["batch"] == "1")
    assert float(mixtral_b1["activated_expert_ratio"]) == 0.25


def test_fig4_places_by_the_rooflines(tmp_path):
    (rep,) = rp.reproduce("fig4", tmp_path, quick=True)
    rows = rep.data.records
    for r in rows:
        assert r["placed_on"] == ("pim" if r["pim_time_s"] < r["gpu_time_s"] else "gpu")
        ai = r["arithmetic_intensity_flop_per_byte"]
        assert r["gpu_attained_flop_per_s"] == pytest.approx(
            min(r["gpu_peak_flop_per_s"], ai * r["gpu_bandwidth_bytes_per_s"]))
    b200 = {(r["op"], r["tokens"]): r["placed_on"] for r in rows if r["hardware"] == "b200"}
    assert b200[("attention", 1)] == "pim"
    assert b200[("expert", 1)] == "pim" and b200[("expert", 256)] == "gpu"
    # the weaker (Samsung-like) PIM hands experts to the GPU at fewer tokens
    claim = next(c for c in rep.data.claims if "few tokens" in c.what)
    n16x, n4x = [int(x) for x in claim.ours.replace(",", " ").split() if x.isdigit()]
    assert n4x < n16x


def test_without_matplotlib_the_csv_is_written_and_the_message_says_how(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(rp.registry, "_have_matplotlib", lambda: False)
    assert main(["reproduce", "fig4", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "pip install 'sievesim[plot]'" in out
    assert (tmp_path / "fig4.csv").exists() and not (tmp_path / "fig4.png").exists()


@pytest.mark.skipif(not MIXTRAL_TRACE.exists(), reason="routing traces not available")
def test_a_trace_recorded_on_a_preset_model_joins_fig3(tmp_path):
    (rep,) = rp.reproduce("fig3", tmp_path, quick=True, traces=[str(MIXTRAL_TRACE)])
    rows = [r for r in rep.data.records if r["routing"] == str(MIXTRAL_TRACE)]
    assert rows and rows[0]["model"] == "mixtral-8x7b"
    assert rows[0]["activated_expert_ratio"] == 0.25  # top-2 of 8 at B = 1


def test_missing_trace_file_exits_2(tmp_path, capsys):
    assert main(["reproduce", "fig5", "--quick", "--trace", "nope.npz", "--out", str(tmp_path)]) == 2
    assert "--trace = 'nope.npz'" in capsys.readouterr().err


def test_step_records_run_the_step_once_and_resume(tmp_path):
    from sievesim.sweep import step_point

    points = [{"model": "qwen3-30b-a3b", "batch": b, "policy": "sieve", "warmup": 1} for b in (1, 8)]
    opts = rp.FigureOptions(quick=True, out_dir=str(tmp_path))
    rows = rp.step_records("figx", points, opts)
    assert [r["batch"] for r in rows] == [1, 8]
    # reproduce runs the paper's roofline GPU
    assert rows[1]["step_time_s"] == step_point({**points[1], "steps": 1, "gpu_model": "roofline"})["step_time_s"]
    assert rows[1]["gpu_model"] == "roofline"
    wall = tmp_path / "figx-points" / "wall_clock.jsonl"   # one line per point run
    assert len(wall.read_text().splitlines()) == 2
    assert rp.step_records("figx", points, opts) == rows      # read back, nothing rerun
    assert len(wall.read_text().splitlines()) == 2
    # other points (e.g. a different --quick) start the directory over instead of refusing it
    again = rp.step_records("figx", points[:1], rp.FigureOptions(out_dir=str(tmp_path), jobs=2))
    assert again == rows[:1]
