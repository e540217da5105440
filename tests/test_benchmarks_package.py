"""The measurement scripts the docs cite run from the installed package (python -m sievesim.benchmarks)."""
from __future__ import annotations

import pathlib
import re

from sievesim.benchmarks.__main__ import main, scripts

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_script_the_docs_cite_is_in_the_package(capsys):
    assert {"system-estimates", "system-readings"} <= set(scripts())
    assert main([]) == 2 and "system-readings" in capsys.readouterr().out
    cited = set()
    for path in list((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]:
        cited |= set(re.findall(r"python -m sievesim\.benchmarks ([a-z0-9-]+)", path.read_text()))
    assert cited and cited <= set(scripts())


def test_a_script_runs_and_a_typo_names_the_closest(capsys):
    assert main(["system-estimates", "--batches", "1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\| 1 \| [\d.]+ \| [\d.]+ \|", out)
    assert main(["system-readins"]) == 2
    assert "did you mean 'system-readings'" in capsys.readouterr().err
