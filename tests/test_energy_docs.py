"""The energy tables of docs/validation.md (section 5) are what
`python -m sievesim.benchmarks energy-validation` prints (per bit, per MAC, DRAMPower's formulas,
AttAcc's formulas)."""
from __future__ import annotations

import pathlib

import pytest

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "validation.md"


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _doc_row(first_cell: str) -> list[str]:
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("|") and _cells(line)[0] == first_cell:
            return _cells(line)
    raise AssertionError(f"docs/validation.md has no row {first_cell!r}")


def _close(doc: list[str], ours: list[str]) -> None:
    assert doc[0] == ours[0] and len(doc) == len(ours)
    for d, o in zip(doc[1:], ours[1:]):
        if d == "-" or o == "-":
            assert d == o, (doc, ours)
            continue
        assert float(o.rstrip("x")) == pytest.approx(float(d.rstrip("x")), rel=0.01, abs=0.011), (doc, ours)


@pytest.mark.parametrize("table", range(4))
def test_rows_match_the_doc(table):
    from sievesim.benchmarks.energy_validation import TABLES
    header, rows = TABLES[table]
    for row in rows():
        cells = _cells(row)
        assert len(cells) == len(header)
        _close(_doc_row(cells[0]), cells)
