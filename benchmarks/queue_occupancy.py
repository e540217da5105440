"""How full the controllers are while the engine runs a trace: what a queue scan has to look at.

For each clock ratio, one run (one thread) of the trace, and from its per-request outputs:
commands per request, and the requests a controller holds on average over the run's cycles
(Little's law: each request counts from its arrival to the cycle of its final command, that is
its departure less the read or write latency; a read forwarded from a pending write never
enters a queue). Reads wait in the read queue, writes in the write queue, both in the active
buffer once their row is opened, so the reads' and the writes' columns bound each queue's
average from above. "Served alone": the share of queued requests that arrive at a controller
holding no other request and reach their final command before the next request for that
controller arrives, the most that a path for a lone request (its commands issued back to back,
without the scheduler's scans and wake-ups) could take (refreshes in between would take more
away).

    python benchmarks/queue_occupancy.py --config HBM3_16ch.yaml --trace FILE --requests 300000 --clock-ratios 1,8

Without ``--trace``, a synthetic trace (``--kind random``, 30 % writes, seed 1).
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from sievesim._core.parallel import _n_controllers, controllers_of
from sievesim.dram import simulate
from sievesim.dram.config import get_config
from sievesim.dram.engine import _to_vectors
from sievesim.dram.synthetic import make_trace
from sievesim.dram.traces import RequestTrace, read_loadstore_trace


def occupancy(config, trace: RequestTrace) -> dict[str, float]:
    """One run of ``trace`` on ``config`` (one thread): commands per request, the requests in a
    controller on average over the cycles (all, reads, writes), and the share of queued requests
    served alone in their controller (%)."""
    spec = config.compile()
    res = simulate(config, trace, threads=1)
    arr = res.request_arrays
    arrive, depart = arr["arrive"].astype(np.int64), arr["depart"].astype(np.int64)
    is_write = np.asarray(trace.is_write, dtype=bool)
    queued = (arr["forwarded"] == 0) & (arrive >= 0)
    final = np.where(depart >= 0, depart - np.where(is_write, spec["write_latency"], spec["read_latency"]),
                     res.cycles)
    held = np.clip(final, arrive, res.cycles) - arrive
    n_ctrl = _n_controllers(spec)
    per_cycle = float(res.cycles) * n_ctrl
    ctrl = controllers_of(spec, _to_vectors(config, trace)[0])
    alone = 0
    for c in range(n_ctrl):
        # its queued requests in arrival order (the frontend offers them in trace order)
        mine = np.nonzero(queued & (ctrl == c))[0]
        a, f = arrive[mine], final[mine]
        done_before = np.concatenate(([-1], np.maximum.accumulate(f)[:-1]))   # (requests end out of order)
        next_arrival = np.concatenate((a[1:], [np.iinfo(np.int64).max]))
        alone += int(np.count_nonzero((done_before < a) & (f < next_arrival)))
    return {"commands per request": res.commands / max(res.requests, 1),
            "in a controller": held[queued].sum() / per_cycle,
            "reads": held[queued & ~is_write].sum() / per_cycle,
            "writes": held[queued & is_write].sum() / per_cycle,
            "served alone (%)": 100.0 * alone / max(int(np.count_nonzero(queued)), 1),
            "read queue size": float(spec["read_queue_size"])}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="ramulator2-hbm3")
    ap.add_argument("--trace", help="a LoadStoreTrace file (its first --requests requests)")
    ap.add_argument("--kind", default="random")
    ap.add_argument("--requests", type=int, default=300_000)
    ap.add_argument("--clock-ratios", default="1,8")
    args = ap.parse_args(argv)
    base = get_config(args.config)
    whole = read_loadstore_trace(args.trace) if args.trace else None
    print("| clock ratio | requests | commands per request | requests in a controller | of them reads | "
          "of them writes | read queue size | served alone (%) |")
    print("|---|---|---|---|---|---|---|---|")
    for ratio in (int(x) for x in args.clock_ratios.split(",")):
        config = base.replace(clock_ratio=ratio)
        if whole is not None:
            n = args.requests
            trace = RequestTrace.from_arrays(whole.arrival[:n], whole.addresses[:n], whole.is_write[:n])
        else:
            trace = make_trace(args.kind, args.requests, config, seed=1, write_fraction=0.3)
        o = occupancy(config, trace)
        print(f"| {ratio} | {len(trace)} | {o['commands per request']:.2f} | {o['in a controller']:.2f} | "
              f"{o['reads']:.2f} | {o['writes']:.2f} | {o['read queue size']:.0f} | {o['served alone (%)']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
