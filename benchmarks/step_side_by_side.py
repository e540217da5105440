"""Warm step time of two source trees, side by side (docs/performance-todo.md, "Rack scale").

Runs the RackStep cases of ``benchmarks/benchmarks_system.py`` in a fresh process per tree, the trees
alternated round after round, and prints each round's median warm ``run_step`` [s] and the ratio::

    python benchmarks/step_side_by_side.py OLD_TREE NEW_TREE box|rack|rack144 [--steps 15] [--rounds 3]

A tree is a checkout of sievesim with its compiled extensions in place (``git worktree add DIR REV``,
then copy or build the ``.so`` files); ``box``: Qwen3.5-397B-A17B on 8 GPUs at B = 256 under Sieve;
``rack``: DeepSeek-V3 in FP8 GPU-only on one GB200 NVL72 (72 GPUs, B = 72 x 64, 32 redundant experts);
``rack144``: DeepSeek-V3 under Sieve on two racks (144 GPUs, B = 144 x 64).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

_CASES = {
    "box": 'StepSimulator("qwen3.5-397b-a17b", gpus=8, policy="sieve", batch=256)',
    "rack": 'StepSimulator("deepseek-v3", "gb200-nvl72", gpus=72, policy="gpu-only", batch=72 * 64, '
            'weight_format="fp8-block", redundant_experts=32, energy=False)',
    "rack144": 'StepSimulator("deepseek-v3", "gb200-nvl72", gpus=144, nodes=2, policy="sieve", batch=144 * 64)',
}

_RUN = """
import json, sys, time
sys.path.insert(0, {tree!r})
from sievesim.system.step import StepSimulator
sim = {case}
sim.run_step(grow_contexts=False)
times = []
for _ in range({steps}):
    t0 = time.perf_counter()
    sim.run_step(grow_contexts=False)
    times.append(time.perf_counter() - t0)
print(json.dumps(times))
"""


def one_run(tree: str, case: str, steps: int) -> float:
    """Median warm step [s] of ``case`` in a fresh process on the sources of ``tree``."""
    code = _RUN.format(tree=os.path.abspath(tree), case=_CASES[case], steps=steps)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH="")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd="/",
                         check=False)
    if out.returncode:
        raise SystemExit(f"{tree}: {out.stderr.strip()[-2000:]}")
    return statistics.median(json.loads(out.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("case", choices=sorted(_CASES))
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    old, new = [], []
    for _ in range(args.rounds):
        old.append(one_run(args.old, args.case, args.steps))
        new.append(one_run(args.new, args.case, args.steps))
    print(f"{args.case} old  " + " ".join(f"{t:.4f}" for t in old))
    print(f"{args.case} new  " + " ".join(f"{t:.4f}" for t in new))
    print(f"{args.case} old/new " + " ".join(f"{o / n:.2f}" for o, n in zip(old, new)))


if __name__ == "__main__":
    main()
