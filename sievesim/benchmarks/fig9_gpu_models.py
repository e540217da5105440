"""Figure 9's claims under the paper's roofline GPU and under the calibrated GPU, side by side.

``python -m sievesim.benchmarks fig9-gpu-models [--full] [--out DIR]`` runs ``sievesim reproduce
fig9`` (``--quick`` unless ``--full``) under both GPU models and prints one markdown table: each claim
of the paper, our number and the verdict under each model (docs/reproduction.md, "Figure 9 on a
calibrated GPU"). The executed schedules only change in how the GPU's own kernels and links are
priced; the PIM side is the same engine.
"""
from __future__ import annotations

import argparse
import tempfile
from typing import Any


def claims_under(gpu_model: str, quick: bool, out_dir: str) -> list[Any]:
    """The claims of Figure 9 under ``gpu_model``."""
    from ..reproduce import reproduce

    (report,) = reproduce("fig9", out_dir, quick=quick, plot=False, gpu_model=gpu_model)
    return list(report.data.claims)


def side_by_side(roof: list[Any], cal: list[Any]) -> list[str]:
    """The markdown table of the two runs' claims (matched by their wording)."""
    by_what = {c.what: c for c in cal}
    lines = ["| claim | paper | roofline: ours | verdict | calibrated: ours | verdict |", "|---|---|---|---|---|---|"]
    for r in roof:
        c = by_what.get(r.what)
        ours_c, verdict_c = (c.ours, c.verdict) if c is not None else ("-", "not run")
        lines.append(f"| {r.what} | {r.paper} | {r.ours} | {r.verdict or '-'} | {ours_c} | {verdict_c or '-'} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sievesim.benchmarks fig9-gpu-models",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--full", action="store_true", help="the full figure (default: --quick)")
    ap.add_argument("--out", default=None, metavar="DIR", help="where the figures' points go (default: a temporary "
                                                                  "directory)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or tmp
        roof = claims_under("roofline", not args.full, out)
        cal = claims_under("calibrated", not args.full, out)
    for line in side_by_side(roof, cal):
        print(line)
    return 0
