"""AttAcc's PIM energy of attention heads beside sievesim's, with AttAcc's own trace generator
(scale-snu/attacc_simulator @ c600051, checked out outside this repository; docs/validation.md, section 5).

Runs AttAcc's ``pim_ramulator_src/trace_gen/gen_trace_attacc_bank.py`` (Python only) for each
sequence length, counts the commands of the trace it writes, checks them against
:func:`sievesim.benchmarks._attacc_energy.attacc_counts`, and prints AttAcc's energy per useful MAC
by component (its source's formulas on those counts) beside sievesim's for the same heads::

    python benchmarks/attacc_energy_side_by_side.py --attacc /path/to/attacc_simulator --seqlens 512,2048

Nothing of AttAcc is part of sievesim; this script only runs a script of a checkout you provide.
"""
from __future__ import annotations

import argparse
import collections
import pathlib
import subprocess
import sys
import tempfile

from sievesim.benchmarks import _attacc_energy as aa

GENERATOR = pathlib.Path("pim_ramulator_src") / "trace_gen" / "gen_trace_attacc_bank.py"
_NAMES = {"PIM_MAC_AB": "mac", "PIM_WR_GB": "wrgb", "PIM_MV_SB": "mvsb", "PIM_MV_GB": "mvgb", "PIM_SFM": "sfm"}


def generator_counts(attacc: pathlib.Path, seqlen: int, dhead: int, heads: int) -> dict[str, int]:
    """Commands in the trace AttAcc's generator writes for ``heads`` heads of ``dhead`` at ``seqlen``."""
    script = attacc / GENERATOR
    if not script.is_file():
        raise SystemExit(f"--attacc = {str(attacc)!r}: expected an attacc_simulator checkout with {GENERATOR}")
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "attacc.trace"
        subprocess.run([sys.executable, str(script), "--dhead", str(dhead), "--nhead", str(heads), "--seqlen",
                        str(seqlen), "--dbyte", "2", "--output", str(out)], check=True, capture_output=True)
        seen = collections.Counter(line.split()[0] for line in out.read_text().splitlines() if line.strip())
    return {name: int(seen.get(cmd, 0)) for cmd, name in _NAMES.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attacc", required=True, type=pathlib.Path, help="attacc_simulator checkout")
    ap.add_argument("--seqlens", default="512,2048", help="comma-separated sequence lengths")
    ap.add_argument("--heads", type=int, default=16, help="heads on one HBM (16: one per channel)")
    ap.add_argument("--dhead", type=int, default=128)
    args = ap.parse_args(argv)
    print("| L, component | AttAcc (pJ per useful MAC) | sievesim (pJ per useful MAC) | sievesim / AttAcc |")
    print("|---|---|---|---|")
    for seqlen in (int(x) for x in args.seqlens.split(",")):
        counts = generator_counts(args.attacc, seqlen, args.dhead, args.heads)
        want = aa.attacc_counts(seqlen, args.dhead, args.heads)
        if counts != want:
            print(f"L = {seqlen}: the generator's counts {counts} differ from attacc_counts {want}", file=sys.stderr)
            return 1
        theirs = aa.attacc_energy(counts, seqlen, args.dhead, args.heads)
        ours = aa.sievesim_energy(seqlen, args.dhead, args.heads)
        useful = 2 * seqlen * args.dhead * args.heads
        for k in aa.COMPONENTS + ("total",):
            t, o = theirs[k] / useful * 1e12, ours[k] / useful * 1e12
            print(f"| L = {seqlen}, {k} | {t:.3f} | {o:.3f} | {f'{o / t:.2f}x' if t else '-'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
