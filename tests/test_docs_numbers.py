"""The fidelity tables of docs/system.md are what `python -m sievesim.benchmarks system-fidelity` prints:
rows recomputed here must match the doc's rows (a change of the model that moves them fails here)."""
from __future__ import annotations

import pathlib

import pytest

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "system.md"


def _doc_row(prefix: str) -> list[str]:
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith(prefix):
            return [c.strip() for c in line.strip("|").split("|")]
    raise AssertionError(f"docs/system.md has no row starting {prefix!r}")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip("|").split("|")]


def _close(doc: list[str], ours: list[str]) -> None:
    assert doc[:2] == ours[:2]
    for d, o in zip(doc[2:], ours[2:]):
        try:
            dv, ov = float(d), float(o)
        except ValueError:
            assert d == o
            continue
        assert ov == pytest.approx(dv, rel=0.01, abs=0.002), (doc, ours)


@pytest.mark.slow
def test_the_policy_table_row_of_gpt_oss_at_b64():
    from sievesim.benchmarks.system_fidelity import policy_table
    ours = _cells(policy_table([64], {"gpt-oss-120b": 4})[-1])
    _close(_doc_row("| gpt-oss-120b | 64 | 3."), ours)


@pytest.mark.slow
def test_the_gemm_table_rows_of_gpt_oss_at_b64():
    from sievesim.benchmarks.system_fidelity import gemm_table
    rows = gemm_table([64], {"gpt-oss-120b": 4})[2:]
    for row in rows:
        cells = _cells(row)
        _close(_doc_row(f"| gpt-oss-120b | 64 | {cells[2]} |"), cells)
