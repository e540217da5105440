"""The numbers of docs/pim.md (section 8, Aquabolt-XL) and of docs/validation.md's section "PIM
against silicon" are what their marked blocks print now (tests/docblocks.py runs them)."""
from __future__ import annotations

import importlib.util
import pathlib
import sys

_spec = importlib.util.spec_from_file_location("docblocks", pathlib.Path(__file__).with_name("docblocks.py"))
docblocks = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("docblocks", docblocks)
_spec.loader.exec_module(docblocks)

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _problems(name: str, after_heading: str | None = None) -> list[str]:
    path = ROOT / name
    first = 0
    if after_heading is not None:
        lines = path.read_text(encoding="utf-8").splitlines()
        first = lines.index(after_heading) + 1
    results = [r for r in docblocks.check_file(path) if r.line > first]
    assert results, f"{name}: no block ran after line {first}"
    return [f"{r.file}:{r.line} {r.kind}: " + "; ".join(r.problems) for r in results if r.problems]


def test_pim_md_blocks_print_what_the_page_shows():
    assert _problems("docs/pim.md") == []


def _bench(name: str = "pimsim_bench_doc"):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "pimsimulator_side_by_side.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_validation_md_pim_against_silicon_prints_what_the_page_shows(capsys):
    # the section's blocks are marked (its one command block is skipped by docblocks: the benchmark
    # is not in the docs' temporary directory), and its comparison table is what the benchmark
    # prints from the PIMSimulator cycles the page records (--reference), row by row
    import shlex

    from sievesim.pim.silicon import SHAPES

    path = ROOT / "docs" / "validation.md"
    lines = path.read_text(encoding="utf-8").split("\n")
    first = lines.index("## 7. PIM against silicon")
    assert [f"{r.file}:{r.line} {r.kind}: " + "; ".join(r.problems)
            for r in docblocks.check_file(path) if r.line > first and r.problems] == []
    blocks = [b for b in docblocks.parse(lines) if b.start > first]
    n = next(i for i, b in enumerate(blocks) if "pimsimulator_side_by_side.py --reference" in b.text)
    command = next(line for line in blocks[n].text.split("\n") if "--reference" in line)
    argv = shlex.split(command)
    assert argv[:2] == ["python", "benchmarks/pimsimulator_side_by_side.py"]
    bench = _bench()
    recorded = dict(bench._reference(v) for k, v in zip(argv[2:], argv[3:]) if k == "--reference")
    assert set(SHAPES) <= set(recorded)
    assert bench.main(argv[2:]) == 0
    printed = capsys.readouterr().out
    table = blocks[n + 1]
    assert table.mark is None and table.text.startswith("| OUT x IN |")
    assert docblocks.compare(table.text, printed, docblocks.TOLERANCE) == []
    # what the text says of the table: the GEMV asked for within 10 % on the shapes whose OUT is a
    # multiple of 4096 (three of SHAPES), 0.33-0.45 below it; on Samsung's whole tiles, every shape
    ratios, whole = {}, {}
    for row in printed.splitlines()[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        out_dim, in_dim = (int(x) for x in cells[0].split(" x "))
        ratios[(out_dim, in_dim)] = float(cells[-3])
        whole[(out_dim, in_dim)] = float(cells[-1])
    assert set(ratios) == set(recorded)
    close = {s for s, r in ratios.items() if abs(r - 1) <= 0.10}
    assert close == {s for s in recorded if s[0] % 4096 == 0} and len(close) == 6
    assert len(close & set(SHAPES)) == 3
    assert min(r for s, r in ratios.items() if s[0] < 4096) >= 0.33
    assert max(r for s, r in ratios.items() if s[0] < 4096) <= 0.45
    assert all(abs(r - 1) <= 0.10 for r in whole.values()) and set(SHAPES) <= set(whole)
    assert min(whole.values()) >= 0.94 and max(whole.values()) <= 1.06


def test_the_comparison_table_flags_a_reference_and_refuses_a_bad_one():
    from sievesim.pim.silicon import gemv_table
    rows = gemv_table("aquabolt-xl", shapes=((4096, 4096),), theirs={(4096, 4096): 20000})
    cells = [c.strip() for c in rows[-1].strip("|").split("|")]
    assert cells[0] == "4096 x 4096" and cells[-4] == "20000"
    assert float(cells[-3]) == round(float(cells[1]) / 20000, 2)
    assert cells[-2] == cells[1] and cells[-1] == cells[-3]          # 4096 outputs: already whole tiles
    padded = gemv_table("aquabolt-xl", shapes=((128, 1024),), theirs={(128, 1024): 3452})
    cells = [c.strip() for c in padded[-1].strip("|").split("|")]
    assert cells[-2] == gemv_table("aquabolt-xl", shapes=((4096, 1024),))[-1].split("|")[2].strip()
    spec = importlib.util.spec_from_file_location("pimsim_bench", ROOT / "benchmarks" / "pimsimulator_side_by_side.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    import argparse

    import pytest
    with pytest.raises(argparse.ArgumentTypeError, match="OUTxIN=CYCLES"):
        bench._reference("4096x4096=lots")
    with pytest.raises(SystemExit, match="--pimsim"):
        bench.pimsimulator_cycles(ROOT / "no-such-build")


def test_samsungs_row_order_costs_what_section_8_says():
    import dataclasses

    import pytest

    from sievesim.hardware import get_hardware
    from sievesim.pim.device import PIMDevice
    from sievesim.pim.silicon import samsung_tiled_gemv

    preset = PIMDevice.from_hardware(get_hardware("aquabolt-xl"))
    both_banks = dataclasses.replace(preset, banks_per_row_opening=0, input_write_closes_row=False)
    samsung, ours = samsung_tiled_gemv(preset, 4096, 4096), samsung_tiled_gemv(both_banks, 4096, 4096)
    assert (samsung["rows"], ours["rows"]) == (64, 32)
    assert samsung["cycles"] == pytest.approx(13876, rel=0.005)
    assert ours["cycles"] == pytest.approx(10990, rel=0.005)
    assert 1 - ours["cycles"] / samsung["cycles"] == pytest.approx(0.21, abs=0.005)


def test_the_benchmark_reads_the_pim_cycles_of_each_gemv_bench_test(tmp_path, capsys):
    # a stand-in for a PIMSimulator build: ./sim lists its tests and prints gtest's output
    sim = tmp_path / "sim"
    sim.write_text("""#!/bin/sh
case "$1" in
  --gtest_list_tests) printf 'PIMKernelFixture.\\n  gemv\\nPIMBenchFixture.\\n  gemv\\n  gemv_1024x4096\\n  add\\n' ;;
  --gtest_filter=PIMBenchFixture.gemv) printf '> Cycle : 90000\\n> Cycle : 30000\\n> Speed-up : 3\\n' ;;
  --gtest_filter=PIMBenchFixture.gemv_1024x4096) printf '> Cycle : 22000\\n> Cycle : 8000\\n' ;;
  *) exit 1 ;;
esac
""")
    sim.chmod(0o755)
    spec = importlib.util.spec_from_file_location("pimsim_bench2", ROOT / "benchmarks" / "pimsimulator_side_by_side.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.pimsimulator_cycles(tmp_path) == {(4096, 4096): 30000, (1024, 4096): 8000}
    assert bench.main(["--pimsim", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| 1024 x 4096 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[-4] == "8000" and float(cells[-3]) == round(float(cells[1]) / 8000, 2)


def test_the_planner_splits_the_input_of_a_4096_gemv_on_the_aquabolt_preset():
    # docs/pim.md section 8: 32 input splits of 128 inputs (one 256 B tile each), 2 output groups
    from sievesim.hardware import get_hardware
    from sievesim.pim.device import PIMDevice, _plan

    plan = _plan(PIMDevice.from_hardware(get_hardware("aquabolt-xl")), 4096, 4096, 1, 64)
    assert (plan.pcs_in, plan.inputs_per_pc, plan.segments) == (32, 128, 1)
