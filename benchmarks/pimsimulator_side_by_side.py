"""sievesim's GEMV on the `aquabolt-xl` preset beside Samsung's PIMSimulator (SAITPublic/PIMSimulator),
shape by shape (docs/validation.md, "PIM against silicon").

Ours (:func:`sievesim.pim.silicon.gemv_table`): one GEMV ``y = W x`` (W of OUT x IN, FP16, one
input vector) on the 64 PIM pseudo-channels of four Aquabolt-XL cubes, tiled as Samsung's kernel
tiles it (outputs only across the pseudo-channels), at the expected refresh phase; its cycles
(command clock), row openings (ACTAB per pseudo-channel) and MAC commands. Theirs, when you give a
PIMSimulator you built (this script builds nothing): its ``PIMBenchFixture`` GEMV tests, run from
that directory::

    python benchmarks/pimsimulator_side_by_side.py                           # ours only
    python benchmarks/pimsimulator_side_by_side.py --pimsim ~/PIMSimulator   # beside ./sim's tests
    python benchmarks/pimsimulator_side_by_side.py --reference 4096x4096=NNNN

PIMSimulator's ``PIMBenchFixture.gemv`` is 4096 x 4096 (OUT x IN; src/tests/PIMBenchTestCases.cpp,
64 PIM channels). For another shape, add to that file a test ``gemv_OUTxIN`` of the fixture
``PIMBenchFixture`` that does what its ``gemv`` test does with ``OUT, IN`` in place of ``4096, 4096``
(``setPIMBenchTestCase(KernelType::GEMV, OUT, IN)``, then the runs without and with PIM), and rebuild
it (scons; g++ 12 also needs ``#include <iterator>`` in its ``lib/npy.h``).

The script runs every ``PIMBenchFixture.gemv`` / ``gemv_OUTxIN`` test ``./sim --gtest_list_tests``
lists and reads the PIM run's ``> Cycle :`` line (the second; the first is the run without PIM).
Its cycles count the whole kernel (park-in, mode changes, CRF programming, every output tile's
result write-back, park-out); ours the GEMV's program (``mode_switch_cycles`` adds a kernel's).
Its kernel also rounds OUT up to whole output tiles of 4096 (8 outputs per PU, 64 channels of 8
PUs), so an OUT below 4096 takes its 4096-row time; ours runs the outputs asked for. The cycles
measured at PIMSimulator b464dde, and where they differ from ours: docs/validation.md.
"""
from __future__ import annotations

import argparse
import pathlib
import re
import subprocess
import sys

from sievesim.pim.silicon import SHAPES, gemv_table

_TEST = re.compile(r"^gemv(?:_(\d+)x(\d+))?$")


def pimsimulator_cycles(root: pathlib.Path, timeout_s: float = 3600) -> dict[tuple[int, int], int]:
    """PIM cycles of every GEMV bench test of the PIMSimulator built in ``root`` (its ``./sim``)."""
    sim = root / "sim"
    if not sim.is_file():
        raise SystemExit(f"--pimsim = {str(root)!r}: expected a PIMSimulator checkout built with scons "
                         f"(no file {sim})")
    listing = subprocess.run([str(sim), "--gtest_list_tests"], cwd=root, capture_output=True, text=True,
                             timeout=timeout_s, check=True).stdout
    fixture, names = None, []
    for line in listing.splitlines():
        if not line.startswith(" "):
            fixture = line.strip().rstrip(".")
        elif fixture == "PIMBenchFixture" and _TEST.match(line.strip()):
            names.append(line.strip())
    out = {}
    for name in names:
        m = _TEST.match(name)
        shape = (4096, 4096) if m.group(1) is None else (int(m.group(1)), int(m.group(2)))
        run = subprocess.run([str(sim), f"--gtest_filter=PIMBenchFixture.{name}"], cwd=root, capture_output=True,
                             text=True, timeout=timeout_s)
        cycles = [int(c) for c in re.findall(r"> Cycle : (\d+)", run.stdout)]
        if len(cycles) < 2:
            print(f"PIMBenchFixture.{name}: no PIM '> Cycle :' line in its output (exit {run.returncode})",
                  file=sys.stderr)
            continue
        out[shape] = cycles[1]
    return out


def _reference(text: str) -> tuple[tuple[int, int], int]:
    m = re.fullmatch(r"(\d+)x(\d+)=(\d+)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"--reference = {text!r}: expected OUTxIN=CYCLES, e.g. 4096x4096=30000")
    return (int(m.group(1)), int(m.group(2))), int(m.group(3))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pimsim", type=pathlib.Path, help="a PIMSimulator checkout you built (scons): runs its ./sim")
    ap.add_argument("--reference", type=_reference, action="append", default=[],
                    help="OUTxIN=CYCLES measured elsewhere (repeatable)")
    ap.add_argument("--hardware", default="aquabolt-xl", help="hardware preset or TOML (default aquabolt-xl)")
    args = ap.parse_args(argv)
    theirs = dict(args.reference)
    if args.pimsim is not None:
        theirs.update(pimsimulator_cycles(args.pimsim.expanduser()))
    shapes = list(SHAPES) + sorted(s for s in theirs if s not in SHAPES)
    print("\n".join(gemv_table(args.hardware, shapes, theirs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
