"""What a second thread of the process costs the start-up of `sievesim dram run`.

The command reads the trace ahead on another core while it imports numpy and reads its
configuration (docs/dram.md, "Reading ahead during start-up"). This measures, each in a fresh
process, alternately ``--repeat`` times, the time of exactly that start-up step (``import numpy``,
then ``get_config`` of a Ramulator 2.0 YAML) on the main thread:

- ``alone``: nothing else runs in the process;
- ``reader``: the command's reader (``open_prefetch``) reads and parses the trace meanwhile;
- ``hashing``: another thread hashes 64 MiB four times (hashlib lets go of the GIL: pure work on
  the other core, no memory traffic to speak of and no system calls).

and prints the median and fastest (ms) of each::

    python benchmarks/startup_beside.py --repeat 9

It writes a LoadStoreTrace of ``--requests`` random requests (default 2M, the whole-process
side-by-side's size) and the YAML to a temporary directory.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ramulator_side_by_side import write_inputs  # noqa: E402


CHILD = """
import sys, time, threading, hashlib
mode, trace, cfg = sys.argv[1:4]
data = b'x' * (64 << 20)
import sievesim.commands.dram
if mode == 'reader':
    from sievesim._core._prefetch import open_prefetch
    pf = open_prefetch(trace)
elif mode == 'hashing':
    threading.Thread(target=lambda: [hashlib.sha256(data).digest() for _ in range(4)], daemon=True).start()
time.sleep(0.002)
t = time.perf_counter()
import numpy
from sievesim.dram.config import get_config
get_config(cfg)
print((time.perf_counter() - t) * 1e3)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--requests", type=int, default=2_000_000, help="of the trace (default 2000000)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace, cfg_path = write_inputs(pathlib.Path(tmp), args.requests, 16, 1)
        runs: dict[str, list[float]] = {"alone": [], "reader": [], "hashing": []}
        for _ in range(args.repeat):
            for mode, got in runs.items():
                out = subprocess.run([sys.executable, "-c", CHILD, mode, str(trace), str(cfg_path)],
                                     capture_output=True, text=True, check=True, cwd=tmp)
                got.append(float(out.stdout))
    print(f"| beside the start-up | import numpy + config, ms (median of {args.repeat}) | fastest |\n|---|---|---|")
    for mode, got in runs.items():
        print(f"| {mode} | {statistics.median(got):.1f} | {min(got):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
