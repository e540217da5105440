"""Side by side with Ramulator 2.0 (CMU-SAFARI/ramulator2 @ 5e58d25), built outside this repository.

Runs the same LoadStoreTrace through Ramulator 2.0 and through sievesim's mirror standard, and prints
one markdown row per (config, trace, clock ratio): cycles of both, whether they are identical, wall
times (whole processes: trace parsing included; and sievesim's engine alone, on one thread and on
the threads ``simulate`` picks by default), and (with --commands) whether the issued command streams
are identical (Ramulator's TraceRecorder plugin vs sievesim's command log).

    python benchmarks/ramulator_side_by_side.py --ramulator /path/to/ramulator2 \
        --requests 1000000 --kinds stream,random,hotrow --clock-ratios 1,8 --devices HBM3,HBM2

Nothing of Ramulator is part of sievesim; this script only runs a binary you built.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import yaml

from sievesim.dram.config import get_config
from sievesim._core.parallel import available_threads
from sievesim.dram.engine import simulate
from sievesim.dram.synthetic import make_trace
from sievesim.dram.traces import read_loadstore_trace, write_loadstore_trace

YAML_TEMPLATE = {
    "Frontend": {"impl": "LoadStoreTrace", "clock_ratio": 1, "path": ""},
    "MemorySystem": {
        "impl": "GenericDRAM", "clock_ratio": 1,
        "DRAM": {"impl": "HBM3", "org": {"preset": "HBM3_8Gb", "channel": 8}, "timing": {"preset": "HBM3_2Gbps"}},
        "Controller": {"impl": "Generic", "Scheduler": {"impl": "FRFCFS"}, "RefreshManager": {"impl": "AllBank"},
                       "RowPolicy": {"impl": "OpenRowPolicy"}, "plugins": None},
        "AddrMapper": {"impl": "RoBaRaCoCh"},
    },
}


def ramulator_config(device: str, trace: str, clock_ratio: int, mapper: str, cmd_trace: str | None) -> dict:
    import copy
    cfg = copy.deepcopy(YAML_TEMPLATE)
    cfg["Frontend"]["path"] = trace
    cfg["Frontend"]["clock_ratio"] = clock_ratio
    cfg["MemorySystem"]["DRAM"]["impl"] = device
    cfg["MemorySystem"]["DRAM"]["org"]["preset"] = f"{device}_8Gb"
    cfg["MemorySystem"]["DRAM"]["timing"]["preset"] = f"{device}_2Gbps"
    cfg["MemorySystem"]["AddrMapper"]["impl"] = mapper
    if cmd_trace:
        cfg["MemorySystem"]["Controller"]["plugins"] = [{"ControllerPlugin": {"impl": "TraceRecorder", "path": cmd_trace}}]
    return cfg


def read_ramulator_commands(prefix: str, channels: int) -> list[tuple]:
    rows = []
    for ch in range(channels):
        p = pathlib.Path(f"{prefix}.ch{ch}")
        if not p.exists():
            continue
        for line in p.read_text().splitlines():
            f = [x.strip() for x in line.split(",")]
            rows.append((int(f[0]), f[1], *map(int, f[2:])))
    return sorted(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ramulator", default=os.environ.get("RAMULATOR2", "ramulator2"))
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--kinds", default="stream,random,hotrow")
    ap.add_argument("--clock-ratios", default="1,8")
    ap.add_argument("--devices", default="HBM3,HBM2")
    ap.add_argument("--mappers", default="RoBaRaCoCh")
    ap.add_argument("--commands", action="store_true", help="also compare command streams (slow, large files)")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--repeat", type=int, default=3, help="runs per side; the fastest counts (default 3)")
    args = ap.parse_args()
    work = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="sievesim-vs-ramulator-"))
    work.mkdir(parents=True, exist_ok=True)
    cores = available_threads()
    print(f"| device | mapper | trace | requests | clock ratio | Ramulator cycles | sievesim cycles | identical "
          f"| commands identical | Ramulator process s | sievesim process s | sievesim engine s, 1 thread "
          f"| sievesim engine s, default ({cores} cores): threads used | speed-up (process) "
          f"| speed-up (engine, 1 thread) | speed-up (engine, default) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for device in args.devices.split(","):
        base = get_config(f"ramulator2-{device.lower()}")
        for kind in args.kinds.split(","):
            tpath = work / f"{kind}_{args.requests}.trace"
            if not tpath.exists():
                t = make_trace(kind, args.requests, base, seed=1)
                write_loadstore_trace(tpath, t.addresses, t.is_write)
            trace = read_loadstore_trace(tpath)
            for mapper in args.mappers.split(","):
                for cr in map(int, args.clock_ratios.split(",")):
                    cmd_prefix = str(work / f"cmd_{device}_{kind}_{mapper}_{cr}") if args.commands else None
                    cfg_path = work / f"{device}_{mapper}_{cr}.yaml"
                    cfg_path.write_text(yaml.safe_dump(ramulator_config(device, str(tpath), cr, mapper, cmd_prefix)))
                    r_wall = float("inf")
                    for _ in range(args.repeat):
                        t0 = time.perf_counter()
                        out = subprocess.run([args.ramulator, "-f", str(cfg_path)], capture_output=True, text=True,
                                             check=True)
                        r_wall = min(r_wall, time.perf_counter() - t0)
                    r_cycles = int(re.search(r"memory_system_cycles:\s*(\d+)", out.stdout).group(1))
                    ours_path = work / f"{device}_{mapper}_{cr}_sievesim.yaml"   # same, without the recorder plugin
                    ours_path.write_text(yaml.safe_dump(ramulator_config(device, str(tpath), cr, mapper, None)))
                    config = get_config(ours_path)
                    s_proc = float("inf")
                    for _ in range(args.repeat):
                        t0 = time.perf_counter()
                        subprocess.run([sys.executable, "-m", "sievesim", "dram", "run", str(tpath), "--config",
                                        str(ours_path), "--json"], capture_output=True, check=True)
                        s_proc = min(s_proc, time.perf_counter() - t0)
                    res = simulate(config, trace, log_commands=args.commands)
                    for _ in range(args.repeat - 1):
                        again = simulate(config, trace)
                        res.wall_s = min(res.wall_s, again.wall_s)
                    one = min((simulate(config, trace, threads=1) for _ in range(args.repeat)),
                              key=lambda r: r.wall_s)
                    assert one.cycles == res.cycles
                    same_cmds = "-"
                    if args.commands:
                        names = res.command_log["names"]
                        a = res.command_log["addr"]
                        ours = sorted((int(c), names[k], *map(int, v)) for c, k, v in
                                      zip(res.command_log["cycle"], res.command_log["command"], a))
                        theirs = read_ramulator_commands(cmd_prefix, config.org["channel"])
                        same_cmds = "yes" if ours == theirs else f"no ({len(ours)} vs {len(theirs)})"
                    print(f"| {device} | {mapper} | {kind} | {args.requests} | {cr} | {r_cycles} | {res.cycles} | "
                          f"{'yes' if r_cycles == res.cycles else 'NO'} | {same_cmds} | {r_wall:.2f} | "
                          f"{s_proc:.2f} | {one.wall_s:.2f} | {res.wall_s:.2f}: {res.threads} | {r_wall / s_proc:.1f}x | "
                          f"{r_wall / one.wall_s:.1f}x | {r_wall / res.wall_s:.1f}x |",
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
