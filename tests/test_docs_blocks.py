"""Docs that cannot go stale: every command block of README.md and docs/usage.md runs, and what it
prints agrees with what the page shows (tests/docblocks.py says how; `python tests/docblocks.py
--update FILE` regenerates the shown outputs)."""
from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

_spec = importlib.util.spec_from_file_location("docblocks", pathlib.Path(__file__).with_name("docblocks.py"))
docblocks = importlib.util.module_from_spec(_spec)
sys.modules["docblocks"] = docblocks
_spec.loader.exec_module(docblocks)


@pytest.mark.slow
@pytest.mark.parametrize("name", docblocks.CHECKED)
def test_every_block_runs_and_prints_what_the_page_shows(name):
    results = docblocks.check_file(docblocks.ROOT / name)
    assert results, f"{name}: no block ran"
    bad = [f"{r.file}:{r.line} {r.kind}\n    " + "\n    ".join(r.problems) for r in results if r.problems]
    assert not bad, "docs out of date (python tests/docblocks.py --update FILE regenerates outputs):\n" \
        + "\n".join(bad)


def test_a_drifted_number_fails_and_a_rounded_one_passes():
    shown = "policy  executed_ms\nsieve        3.163\nnoexp  4.390 (x1.00)\n"
    assert docblocks.compare(shown, "policy  executed_ms\nsieve        3.163\nnoexp  4.390 (x1.00)\n", 0.01) == []
    assert docblocks.compare(shown, "policy executed_ms\nsieve  3.1649\nnoexp   4.3901 (x1.00)\n", 0.01) == []
    drift = docblocks.compare(shown, "policy  executed_ms\nsieve        3.250\nnoexp  4.390 (x1.00)\n", 0.01)
    assert len(drift) == 1 and "3.163 shown, 3.250 now" in drift[0]
    assert docblocks.compare("a 10\n", "b 10\n", 0.01)[0].startswith("text differs")
    assert docblocks.compare("a 10\n", "a 10\nb 11\n", 0.01)[0].startswith("printed now but not shown")
    assert docblocks.compare("a 10\nb 2\n", "a 10\n", 0.01)[0].startswith("shown line not printed now")


def test_dots_skip_lines_and_update_keeps_them():
    shown = "head 1\n...\ntail 3.0\n"
    got = "head 1\nx\ny 2\ntail 3.1\n"
    assert docblocks.compare(shown, got, 0.05) == []
    assert docblocks.compare(shown, got, 0.01)[0].startswith("3.0 shown, 3.1 now")
    assert docblocks.updated(shown, got) == "head 1\n...\ntail 3.1\n"
    assert docblocks.updated("a 1\n", "a 2\nb 3\n") == "a 2\nb 3\n"


def test_an_unmarked_command_block_is_reported_and_markers_are_honoured(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# t\n\n```bash\nsievesim --version\n```\n\n"
                    "<!-- docs-test: file a.toml -->\n```toml\nx = 1\n```\n\n"
                    "<!-- docs-test: run+output -->\n```bash\ncat a.toml\n```\n\n```\nx = 2\n```\n\n"
                    "<!-- docs-test: skip -->\n```bash\nexit 1\n```\n")
    results = docblocks.check_file(page)
    kinds = {r.kind: r.problems for r in results}
    assert kinds["unmarked"] == ["a bash block without a docs-test marker"]
    assert kinds["run+output"] and kinds["run+output"][0].startswith("2 shown, 1 now")
    assert kinds["skip"] == ["skip without a reason"]
    docblocks.check_file(page, update=True)
    assert "```\nx = 1\n```\n\n<!-- docs-test: skip" in page.read_text()
