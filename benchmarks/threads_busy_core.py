"""Threads that never hurt: `sievesim dram run` with its default threads against `--threads 1`,
whole process, on two free cores and with one other busy single-threaded process.

Writes a random LoadStoreTrace (30 % writes) and a Ramulator 2.0 YAML (HBM3, 16 channels by
default), then for each clock ratio and condition runs the two alternately ``--repeat`` times and
prints the medians, the threads the default used, and whether the cycles agree:

    python benchmarks/threads_busy_core.py --requests 2000000 --clock-ratios 1,8

Goal (issue 22): default <= 1.1x the one-thread time with a busy core; with free cores, the
two-thread speed-up. The busy process is a Python loop bounded by ``--busy-seconds`` and killed
when its condition is done. Builds nothing and needs no Ramulator binary.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _process import busy_core, run_measured, sievesim_program  # noqa: E402
from ramulator_side_by_side import write_inputs  # noqa: E402

from sievesim._core.parallel import available_threads  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2_000_000)
    ap.add_argument("--channels", type=int, default=16)
    ap.add_argument("--clock-ratios", default="1,8")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--conditions", default="free,busy")
    ap.add_argument("--busy-seconds", type=float, default=600.0)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    work = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="sievesim-threads-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"{args.requests} random requests (30 % writes), HBM3 {args.channels} channels, "
          f"{available_threads()} cores available, load average {os.getloadavg()[0]:.2f} at start; "
          f"medians of {args.repeat} alternated runs\n")
    print("| clock ratio | condition | default s | threads used | `--threads 1` s | default / one thread "
          "| cycles identical |")
    print("|---|---|---|---|---|---|---|")
    for cr in map(int, args.clock_ratios.split(",")):
        trace, cfg = write_inputs(work, args.requests, args.channels, cr)
        base = [*sievesim_program(), "dram", "run", str(trace), "--config", str(cfg), "--json"]
        for cond in args.conditions.split(","):
            times: dict[str, list[float]] = {"default": [], "one": []}
            used, cycles = set(), set()
            with (busy_core(args.busy_seconds) if cond == "busy" else _nothing()):
                for _ in range(args.repeat):
                    for mode, extra in (("default", []), ("one", ["--threads", "1"])):
                        m = run_measured(base + extra, cwd=str(work))
                        res = json.loads(m.stdout)
                        times[mode].append(m.wall_s)
                        cycles.add(res["cycles"])
                        if mode == "default":
                            used.add(res["threads"])
            d, o = statistics.median(times["default"]), statistics.median(times["one"])
            print(f"| {cr} | {cond} | {d:.2f} | {','.join(map(str, sorted(used)))} | {o:.2f} | {d / o:.2f}x | "
                  f"{'yes' if len(cycles) == 1 else 'NO'} |", flush=True)
    return 0


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    sys.exit(main())
