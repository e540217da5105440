"""The floor of a whole `sievesim dram run` process: what it costs before the trace's length counts.

Runs, alternately ``--repeat`` times, each as its own process (``_process.run_measured``: user +
system CPU and wall of the child): ``python -c pass``, ``python -c "import numpy"``, ``python -c
"import numpy, yaml"``, ``sievesim dram run`` on a 1000-request LoadStoreTrace with a Ramulator
2.0 YAML (HBM3, 16 channels, as the whole-process side-by-side; the installed program, see
``_process.sievesim_program``), the same run as ``python -m sievesim`` and through
``sievesim.cli.main`` ending with the interpreter's teardown (the program skips it after a
``dram`` command: ``sievesim.cli.console``), and prints the fastest of each:

    python benchmarks/process_floor.py --repeat 7

A whole process at least costs the `sievesim dram run` row; against Ramulator 2.0's time (docs/dram.md, "Whole
process") it bounds the ratio any engine speed-up can reach. CPU is the column to read on a shared
machine (wall times grow with the load). Writes its two files to a temporary directory.
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _process import run_measured, sievesim_program  # noqa: E402
from ramulator_side_by_side import write_inputs  # noqa: E402



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace, cfg_path = write_inputs(pathlib.Path(tmp), 1000, 16, 1)
        py = sys.executable
        cmds = {"python -c pass": [py, "-c", "pass"],
                "python -c 'import numpy'": [py, "-c", "import numpy"],
                "python -c 'import numpy, yaml'": [py, "-c", "import numpy, yaml"],
                "sievesim dram run, 1000 requests, --threads 1": [
                    *sievesim_program(), "dram", "run", str(trace), "--config", str(cfg_path), "--json",
                    "--threads", "1"],
                "the same, as python -m sievesim": [
                    py, "-m", "sievesim", "dram", "run", str(trace), "--config", str(cfg_path), "--json",
                    "--threads", "1"],
                # the same through sievesim.cli.main, ending with the interpreter's teardown
                "the same, with the interpreter's teardown": [
                    py, "-c", "import sys\nfrom sievesim.cli import main\nsys.exit(main())", "dram", "run",
                    str(trace), "--config", str(cfg_path), "--json", "--threads", "1"]}
        runs: dict[str, list] = {k: [] for k in cmds}
        for _ in range(args.repeat):
            for k, c in cmds.items():
                runs[k].append(run_measured(c, cwd=tmp))
    print(f"| process | CPU ms (fastest of {args.repeat}) | wall ms (fastest) | peak MB |\n|---|---|---|---|")
    for k, ms in runs.items():
        print(f"| {k} | {min(m.cpu_s for m in ms) * 1e3:.0f} | {min(m.wall_s for m in ms) * 1e3:.0f} "
              f"| {max(m.peak_mb for m in ms):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
