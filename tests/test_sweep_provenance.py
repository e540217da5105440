"""Sweep provenance by content (an edited input file makes its points new) and result files that
never end in a traceback (damaged lines are named, skipped and their points rerun)."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from sievesim import __version__
from sievesim.cli import main
from sievesim.provenance import point_inputs
from sievesim.results import read_results
from sievesim.sweep import MANIFEST, RESULTS_CSV, RESULTS_JSONL, estimate_point, expand_grid, run_grid
from sievesim.sweeps.results import csv_bytes


def _sweep(out: pathlib.Path, *extra: str) -> list[str]:
    return ["sweep", "--model", "qwen3-30b-a3b", "--point", "estimate", "--jobs", "1", "--out", str(out), *extra]


def test_edited_hardware_file_reruns_its_points_and_keeps_the_others(tmp_path, capsys):
    hw = tmp_path / "hw.toml"
    hw.write_text('base = "b200"\n[gpu]\nmemory_efficiency = 0.9\n')
    args = _sweep(tmp_path / "out", "--hardware", f"b200,{hw}", "--batch", "16,64")
    assert main(args) == 0
    first = {(r["hardware"], r["batch"]): r for r in read_results(tmp_path / "out")}
    assert "4 run now, 0 already done" in capsys.readouterr().out
    assert main(args) == 0
    assert "0 run now, 4 already done" in capsys.readouterr().out
    hw.write_text('base = "b200"\n[gpu]\nmemory_efficiency = 0.5\n')     # the edit
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert "2 run now, 2 already done" in out
    assert "2 point(s) read input files that changed since the last run" in err and "hw.toml" in err
    second = {(r["hardware"], r["batch"]): r for r in read_results(tmp_path / "out")}
    assert len(second) == 4 and len(read_results(tmp_path / "out" / RESULTS_CSV)) == 4
    for batch in (16, 64):
        assert second[("b200", batch)] == first[("b200", batch)]      # kept, byte for byte
        new, old = second[(str(hw), batch)], first[(str(hw), batch)]
        assert new["point_id"] != old["point_id"]
        assert new["hardware_digest"] != old["hardware_digest"]
        assert new["t_gpu_s"] > old["t_gpu_s"]                          # the edit took effect
        assert new["sievesim_version"] == __version__ and new["model_digest"] == old["model_digest"]
    manifest = json.loads((tmp_path / "out" / MANIFEST).read_text())
    assert manifest["input_files"][str(hw)] == second[(str(hw), 16)]["hardware_digest"]


def test_an_edited_base_file_or_dram_file_counts_as_an_edit(tmp_path):
    base = tmp_path / "base.toml"
    base.write_text('base = "b200"\n[gpu]\nmemory_efficiency = 0.9\n')
    top = tmp_path / "top.toml"
    top.write_text('base = "base.toml"\nname = "top"\n')
    before = point_inputs({"model": "qwen3-30b-a3b", "hardware": str(top)})
    assert set(before) == {"hardware"}
    base.write_text('base = "b200"\n[gpu]\ncompute_efficiency = 0.8\n')
    assert point_inputs({"model": "qwen3-30b-a3b", "hardware": str(top)}) != before
    assert point_inputs({"model": "qwen3-30b-a3b", "hardware": "b200"}) == {}     # presets: ids unchanged


def test_model_and_trace_files_are_digested_by_content(tmp_path):
    import sievesim

    model = tmp_path / "m.toml"
    preset = pathlib.Path(sievesim.__file__).parent / "data" / "models" / "qwen3-30b-a3b.toml"
    model.write_text(preset.read_text())
    trace = tmp_path / "t.npz"
    np.savez(trace, a=np.arange(3))
    one = point_inputs({"model": str(model), "trace": str(trace)})
    assert set(one) == {"model", "trace"}
    model.write_text(model.read_text().replace("num_layers = 48", "num_layers = 47"))
    np.savez(trace, a=np.arange(4))
    two = point_inputs({"model": str(model), "trace": str(trace)})
    assert one["model"] != two["model"] and one["trace"] != two["trace"]


def test_grid_file_digest_in_grid_json(tmp_path, capsys):
    grid = tmp_path / "g.toml"
    grid.write_text('model = "qwen3-30b-a3b"\nbatch = [1, 2]\n')
    assert main(["sweep", "--grid", str(grid), "--point", "estimate", "--jobs", "1", "--quiet",
                 "--out", str(tmp_path / "o")]) == 0
    files = json.loads((tmp_path / "o" / MANIFEST).read_text())["input_files"]
    assert list(files) == [str(grid)] and len(files[str(grid)]) == 16


DAMAGED = [b"[1, 2]", b"3", b"null", b'"text"', b"NaN", b'{"point_id": [1]}', b'{"point_id": {"a": 1}}',
           b'{"point_id": null}', b'{"batch": 1}', b"\xff\xfe{}", b'{"point_id": "abc"', b"[" * 100_000,
           b"1" * 5000]


@pytest.mark.parametrize("line", DAMAGED, ids=range(len(DAMAGED)))
def test_a_damaged_results_line_is_named_skipped_and_its_point_rerun(tmp_path, capsys, line):
    out = tmp_path / "o"
    args = _sweep(out, "--batch", "1,2,3")
    assert main(args) == 0
    good = (out / RESULTS_JSONL).read_bytes()
    lines = good.splitlines(keepends=True)
    (out / RESULTS_JSONL).write_bytes(lines[0] + line + b"\n" + lines[2])      # point 2's line damaged
    capsys.readouterr()
    assert main(args) == 0
    o, err = capsys.readouterr()
    assert "1 run now, 2 already done" in o
    assert f"sievesim: warning: {out / RESULTS_JSONL}: line 2 is " in err and "its point runs again" in err
    assert "Traceback" not in err
    assert (out / RESULTS_JSONL).read_bytes() == good          # rewritten in grid order, damage gone


def test_read_results_reads_a_directory_a_jsonl_or_a_csv(tmp_path):
    points = expand_grid([{"model": ["qwen3-30b-a3b"], "batch": [1, 4]}])
    run_grid(points, tmp_path, point_fn=estimate_point, progress=None)
    from_dir = read_results(tmp_path)
    assert from_dir == read_results(tmp_path / RESULTS_JSONL)
    from_csv = read_results(tmp_path / RESULTS_CSV)
    assert [r["point_id"] for r in from_csv] == [r["point_id"] for r in from_dir]
    assert from_csv[1]["batch"] == 4 and from_csv[1]["t_gpu_s"] == pytest.approx(from_dir[1]["t_gpu_s"])
    assert from_csv[0]["trace"] is None
    with pytest.raises(Exception, match="file not found: "):
        read_results(tmp_path / "missing.csv")
    (tmp_path / "bad.jsonl").write_bytes(b'{"a": 1}\n[2]\n')
    with pytest.warns(UserWarning, match=r"bad.jsonl: line 2 is JSON but not an object \(a list\)"):
        assert read_results(tmp_path / "bad.jsonl") == [{"a": 1}]


@pytest.mark.parametrize("point_id", ["56619e299086", "123456789012", "000000000001", "1e1000000000"])
def test_a_point_id_that_looks_like_a_number_stays_text_in_a_csv(tmp_path, point_id):
    # 12 hex digits: all digits, or digits around one "e", happen for about 1 id in 250
    (tmp_path / RESULTS_CSV).write_bytes(csv_bytes([{"point_id": point_id, "batch": 4}]))
    assert read_results(tmp_path / RESULTS_CSV) == [{"point_id": point_id, "batch": 4}]
