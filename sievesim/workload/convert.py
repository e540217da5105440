"""Convert an SGLang expert-distribution dump (.pt, needs torch) to a torch-free .npz.

Usage: ``python -m sievesim.workload.convert DUMP.pt OUT.npz [--top-k K] [--num-experts E]``
"""
from __future__ import annotations

import argparse
import sys

from ..errors import TraceError
from .traces import convert_sglang_dump


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sievesim.workload.convert", description=__doc__.split("\n")[0])
    ap.add_argument("dump", help="SGLang dump written by torch.save (.pt)")
    ap.add_argument("out", help="output .npz")
    ap.add_argument("--top-k", type=int, help="the model's top-k (per_pass/stat dumps do not record it)")
    ap.add_argument("--num-experts", type=int, help="logical experts (default: from the dump)")
    args = ap.parse_args(argv)
    try:
        r = convert_sglang_dump(args.dump, args.out, top_k=args.top_k, num_experts=args.num_experts)
    except TraceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}: {type(r).__name__}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
