"""docs/reproduction.md cannot go stale: its command blocks (the judged claims of Figures 9 and 11,
full runs) run and print what the page shows (tests/docblocks.py says how; `python
tests/docblocks.py --update docs/reproduction.md` regenerates the shown outputs)."""
from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

_path = pathlib.Path(__file__).with_name("docblocks.py")
if "docblocks" in sys.modules:
    docblocks = sys.modules["docblocks"]
else:
    _spec = importlib.util.spec_from_file_location("docblocks", _path)
    docblocks = importlib.util.module_from_spec(_spec)
    sys.modules["docblocks"] = docblocks
    _spec.loader.exec_module(docblocks)

PAGE = docblocks.ROOT / "docs" / "reproduction.md"


@pytest.mark.slow
@pytest.mark.xdist_group("reproduction")   # shares reproduction_dir: one worker
def test_reproduction_page_blocks_print_what_the_page_shows(reproduction_dir):
    results = docblocks.check_file(PAGE, work=reproduction_dir)
    ran = [r for r in results if r.kind.startswith("run")]
    assert len(ran) >= 4, "the four judged figures (fig9, fig9-matching, fig9-mb2, fig11) must run"
    bad = [f"{r.file}:{r.line} {r.kind}\n    " + "\n    ".join(r.problems) for r in results if r.problems]
    assert not bad, "docs out of date (python tests/docblocks.py --update docs/reproduction.md):\n" + "\n".join(bad)


def test_system_page_decision_sentence_shows_the_measured_activated_experts(capsys):
    """docs/system.md: the Qwen3-30B-A3B decision at B = 256 and the experts it sorts, as the command the
    sentence names measures them (not "all 128 active")."""
    import json
    import re

    from sievesim.cli import main

    command = "run --model qwen3-30b-a3b --batch 256 --policy sieve --json"
    assert main(command.split()) == 0
    row = json.loads(capsys.readouterr().out)
    row = row[0] if isinstance(row, list) else row
    layers = len(row["experts_on_gpu_per_layer"])
    activated = (row["experts_on_gpu"] + row["experts_on_pim"]) / layers
    text = re.sub(r"\s+", " ", (docblocks.ROOT / "docs" / "system.md").read_text())
    sentence = (f"at B = 256 ({activated:.1f} of its 128 experts activated per layer on average, `sievesim {command}`: "
                f"`experts_on_gpu` + `experts_on_pim` over its {layers} MoE layers, and `scheduler_us`) "
                f"{row['scheduler_us']:.1f} us")
    assert sentence in text
    assert "all 128 active" not in text
