"""Where the time of ``sievesim dram run TRACE --config YAML`` goes, phase by phase, in fresh processes.

Each repeat runs the command in a new interpreter (as a user's process: the read-ahead starts
before numpy is imported) with timers around the command's own functions, and prints the medians
(ms, from the first line of the command's code, after the interpreter started):

- ``imports``: until the command's work starts (numpy, the DRAM modules);
- ``set-up``: the configuration, the split's balance and engines, until the runs start;
- ``runs``: the runs of the split, until the last one ends;
- per run, ``taking pieces``: its time waiting for, reading, parsing and mapping its next piece
  (a shared reading: whichever run needs a piece first maps it), and ``the rest``: feeding the
  pieces to its engine and the engine itself;
- ``total``: until the command returns (the output printed).

    python benchmarks/split_phases.py TRACE --config YAML [--repeat 5] [--threads N]

Only for a trace that streams on threads (a LoadStoreTrace file, ``--threads`` not 1; by default
the command picks its threads, one below 50 000 requests).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import collections, json, sys, threading, time
T0 = time.perf_counter()
import sievesim.cli as cli
import sievesim.commands.dram as command

marks, taking, alive = {}, collections.defaultdict(float), {}


def ms():
    return (time.perf_counter() - T0) * 1e3


def run_with(args, prefetch, _run_with=command._run_with):
    import sievesim._core.parallel as parallel
    import sievesim.dram.engine as engine

    marks["imports"] = ms()
    runs = engine._SharedWindows.runs

    def timed_runs(self, k):
        pieces = runs(self, k)
        while True:
            t = ms()
            window = next(pieces, None)
            taking[k] += ms() - t
            if window is None:
                return
            yield window

    def timed_on_threads(work, n, _on_threads=parallel._on_threads):
        marks["set-up"] = ms()
        out = _on_threads(work, n)
        marks["runs"] = ms()
        return out

    engine._SharedWindows.runs = timed_runs
    parallel._on_threads = timed_on_threads
    return _run_with(args, prefetch)


command._run_with = run_with
with open("/dev/null", "w") as sink:
    stdout, sys.stdout = sys.stdout, sink
    try:
        cli.main(sys.argv[1:])
    finally:
        sys.stdout = stdout
marks["total"] = ms()
print(json.dumps({"marks": marks, "taking": {str(k): v for k, v in taking.items()}}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--config", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", default=None, help="passed on to the command (default: its own choice)")
    args = ap.parse_args()
    threads = ["--threads", args.threads] if args.threads else []
    rows = []
    for _ in range(args.repeat):
        done = subprocess.run([sys.executable, "-c", CHILD, "dram", "run", args.trace, "--config", args.config,
                               "--json", *threads], capture_output=True, text=True, check=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    if any("runs" not in r["marks"] for r in rows):
        print("the command did not run a split on threads (one thread, or a trace that does not stream)")
        return 1

    def med(f) -> float:
        return statistics.median(f(r) for r in rows)

    print(f"medians of {args.repeat} fresh processes, ms from the command's first line\n")
    print("| phase | ms |\n|---|---|")
    print(f"| imports | {med(lambda r: r['marks']['imports']):.1f} |")
    print(f"| set-up | {med(lambda r: r['marks']['set-up'] - r['marks']['imports']):.1f} |")
    print(f"| runs | {med(lambda r: r['marks']['runs'] - r['marks']['set-up']):.1f} |")
    for k in sorted({k for r in rows for k in r["taking"]}):
        print(f"| run {k}: taking pieces | {med(lambda r: r['taking'].get(k, 0.0)):.1f} |")
        print(f"| run {k}: the rest | "
              f"{med(lambda r: r['marks']['runs'] - r['marks']['set-up'] - r['taking'].get(k, 0.0)):.1f} |")
    print(f"| total | {med(lambda r: r['marks']['total']):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
