"""Progress on run and reproduce: a tqdm bar on a terminal, nothing when piped or --quiet;
run --steps N prints the spread of the steps."""
from __future__ import annotations

import io
import sys

import pytest

pytest.importorskip("tqdm")

from sievesim.cli import main
from sievesim.progress import progress_bar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


RUN = ["run", "--model", "qwen3-30b-a3b", "--batch", "4", "--policy", "sieve,allexp", "--warmup", "1",
       "--steps", "3"]


def test_run_shows_a_bar_on_a_terminal_and_the_spread_of_the_steps(monkeypatch, capsys):
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert main(RUN) == 0
    assert "run sieve" in term.getvalue() and "run allexp" in term.getvalue() and "/8 [" in term.getvalue()
    out = capsys.readouterr().out
    assert "std_ms" in out and "min-max_ms" in out and "mean of 3 step(s)" in out
    row = next(line for line in out.splitlines() if line.startswith("sieve "))
    mean, std = (float(x) for x in row.split()[1:3])
    lo, hi = (float(x) for x in row.split()[3].split("-"))
    assert lo <= mean <= hi and 0 <= std <= hi - lo


def test_run_is_quiet_when_piped_or_asked(monkeypatch):
    for argv, stream in ((RUN, io.StringIO()), (RUN + ["--quiet"], _Terminal())):
        monkeypatch.setattr(sys, "stderr", stream)
        assert main(argv) == 0
        assert stream.getvalue() == ""


def test_reproduce_points_show_the_figure_bar(tmp_path):
    from sievesim.reproduce.registry import FigureOptions, step_records
    from sievesim.sweep import estimate_point

    term = _Terminal()
    opts = FigureOptions(out_dir=str(tmp_path), progress=term)
    rows = step_records("figx", [{"model": "qwen3-30b-a3b", "batch": b} for b in (1, 2)], opts,
                        point_fn=estimate_point)
    assert len(rows) == 2 and "figx" in term.getvalue() and "/2 [" in term.getvalue()


def test_the_bar_is_silent_off_a_terminal():
    stream = io.StringIO()
    with progress_bar(3, "x", stream) as bar:
        bar.update()
    assert stream.getvalue() == ""
    with progress_bar(3, "x", _Terminal()) as bar:
        bar.update()
