"""Side by side with Ramulator 2.0 (CMU-SAFARI/ramulator2 @ 5e58d25), built outside this repository.

Runs the same LoadStoreTrace through Ramulator 2.0 and through sievesim's mirror standard, and prints
one markdown row per (config, trace, clock ratio): cycles of both, whether they are identical, wall
times (whole processes: trace parsing included; and sievesim's engine alone, on one thread and on
the threads ``simulate`` picks by default), and (with --commands) whether the issued command streams
are identical (Ramulator's TraceRecorder plugin vs sievesim's command log).

    python benchmarks/ramulator_side_by_side.py --ramulator /path/to/ramulator2 \
        --requests 1000000 --kinds stream,random,hotrow --clock-ratios 1,8 --devices HBM3,HBM2

Nothing of Ramulator is part of sievesim; this script only runs a binary you built.

``--whole-process`` measures whole processes only, in one run of this script (issue 22): Ramulator
2.0 (when ``--ramulator`` names a binary; its columns are ``-`` otherwise), ``sievesim dram run
TRACE --config YAML --json`` (the installed program beside this Python, as a user runs it;
``python -m sievesim`` where there is none) with its default threads and with ``--threads 1``, alternated
``--repeat`` times, medians of the wall times (and of the CPU times of Ramulator and of the
one-thread run: user + system, the measure to read on a shared machine), the default's
simulation (the median ``wall_s`` of its JSON output: from the engine's start to its result, with
the reading and parsing it overlaps; without imports, set-up and exit), peak resident memory of
each (the command's own, see ``_process.run_measured``), the ratios (Ramulator's time over the
default's whole process, over one thread's, and over the default's simulation), and whether the cycles agree
(sievesim's modules are byte-compiled first, as ``pip install`` does: where
PYTHONDONTWRITEBYTECODE is set, a checkout would otherwise compile them from source in every
process); ``--busy`` repeats every row with one other busy single-threaded process on the machine
(bounded, killed afterwards); ``--stream`` adds ``sievesim dram
run --stream`` (the trace read a block at a time: flat memory, one thread)::

    python benchmarks/ramulator_side_by_side.py --whole-process --ramulator /path/to/ramulator2 \
        --requests 2000000 --kinds random --clock-ratios 1,8 --devices HBM3 --channels 16 \
        --write-fraction 0.3 --busy --stream
"""
from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _process import busy_core, run_measured, sievesim_program  # noqa: E402

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


def write_inputs(work: pathlib.Path, requests: int, channels: int, clock_ratio: int,
                 write_fraction: float = 0.3) -> tuple[pathlib.Path, pathlib.Path]:
    """The whole-process inputs in ``work``: a random LoadStoreTrace of ``requests`` requests
    (written once per size) and the Ramulator 2.0 YAML of one clock ratio (HBM3, ``channels``
    channels, RoBaRaCoCh). Returns ``(trace, yaml)``."""
    trace = work / f"random_{requests}_{channels}ch.trace"
    cfg = ramulator_config("HBM3", str(trace), clock_ratio, "RoBaRaCoCh", None)
    cfg["MemorySystem"]["DRAM"]["org"]["channel"] = channels
    path = work / f"HBM3_{channels}ch_cr{clock_ratio}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    if not trace.exists():
        t = make_trace("random", requests, get_config(path), seed=1, write_fraction=write_fraction)
        write_loadstore_trace(trace, t.addresses, t.is_write)
    return trace, path


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


def whole_process(args: argparse.Namespace, work: pathlib.Path) -> int:
    """The ``--whole-process`` table: one row per (device, trace, clock ratio, condition)."""
    import json
    import shutil
    import statistics

    import compileall

    import sievesim

    compileall.compile_dir(str(pathlib.Path(sievesim.__file__).parent), quiet=1)
    binary = shutil.which(args.ramulator) or (args.ramulator if pathlib.Path(args.ramulator).is_file() else None)
    print(f"Ramulator 2.0: {binary or 'not given (its columns are -)'}; {available_threads()} cores available, "
          f"load average {os.getloadavg()[0]:.2f} at start; medians of {args.repeat} alternated runs\n")
    print("| device | channels | trace | requests | clock ratio | condition | Ramulator s | Ramulator MB "
          "| sievesim default s (threads) | of it simulating s | sievesim default MB "
          "| sievesim `--threads 1` s | sievesim 1 thread MB "
          "| Ramulator / sievesim default | Ramulator / sievesim 1 thread | Ramulator / simulating "
          "| cycles identical |"
          + (" sievesim `--stream` s | sievesim `--stream` MB | Ramulator / sievesim `--stream` |" if args.stream else "")
          + " Ramulator CPU s | sievesim 1 thread CPU s | CPU ratio, 1 thread |")
    print("|---" * (20 + 3 * args.stream) + "|")
    conditions = ["free"] + (["busy"] if args.busy else [])
    for device in args.devices.split(","):
        for kind in args.kinds.split(","):
            tpath = work / f"{kind}_{args.requests}_{device}_{args.channels}ch_w{args.write_fraction}.trace"
            for cr in map(int, args.clock_ratios.split(",")):
                cfg = ramulator_config(device, str(tpath), cr, args.mappers.split(",")[0], None)
                if args.channels:
                    cfg["MemorySystem"]["DRAM"]["org"]["channel"] = args.channels
                cfg_path = work / f"{device}_{args.channels}ch_{cr}_whole.yaml"
                cfg_path.write_text(yaml.safe_dump(cfg))
                if not tpath.exists():
                    t = make_trace(kind, args.requests, get_config(cfg_path), seed=1,
                                   write_fraction=args.write_fraction)
                    write_loadstore_trace(tpath, t.addresses, t.is_write)
                    del t
                ours = sievesim_program() + ["dram", "run", str(tpath), "--config", str(cfg_path), "--json"]
                for cond in conditions:
                    runs: dict[str, list] = {"ram": [], "def": [], "one": [], "stream": []}
                    modes = [("def", []), ("one", ["--threads", "1"])] + ([("stream", ["--stream"])] if args.stream else [])
                    cycles, used, simulated = set(), set(), []
                    with (busy_core(args.busy_seconds) if cond == "busy" else contextlib.nullcontext()):
                        for _ in range(args.repeat):
                            if binary:
                                m = run_measured([binary, "-f", str(cfg_path)], cwd=str(work))
                                runs["ram"].append(m)
                                cycles.add(int(re.search(r"memory_system_cycles:\s*(\d+)", m.stdout).group(1)))
                            for key, extra in modes:
                                m = run_measured(ours + extra, cwd=str(work))
                                res = json.loads(m.stdout)
                                runs[key].append(m)
                                cycles.add(int(res["cycles"]))
                                if key == "def":
                                    used.add(int(res["threads"]))
                                    simulated.append(float(res["wall_s"]))

                    def wall(key: str) -> float | None:
                        return statistics.median(m.wall_s for m in runs[key]) if runs[key] else None

                    def peak(key: str) -> str:
                        return f"{max(m.peak_mb for m in runs[key]):.1f}" if runs[key] else "-"

                    def cpu(key: str) -> float | None:
                        return statistics.median(m.cpu_s for m in runs[key]) if runs[key] else None

                    def ratio(ram: float | None, ours: float) -> str:
                        """Ramulator's time over ours, '-' without a Ramulator binary."""
                        return f"{ram / ours:.1f}x" if ram else "-"

                    r, d, o, st = wall("ram"), wall("def"), wall("one"), wall("stream")
                    rc, oc = cpu("ram"), cpu("one")
                    tail_cpu = f" {f'{rc:.2f}' if rc else '-'} | {oc:.2f} | {ratio(rc, oc)} |"
                    sim = statistics.median(simulated)
                    tail = (f" {st:.2f} | {peak('stream')} | {ratio(r, st)} |" if args.stream else "")
                    print(f"| {device} | {args.channels or '-'} | {kind} | {args.requests} | {cr} | {cond} | "
                          f"{f'{r:.2f}' if r else '-'} | {peak('ram')} | {d:.2f} ({','.join(map(str, sorted(used)))}) | "
                          f"{sim:.3f} | {peak('def')} | {o:.2f} | {peak('one')} | {ratio(r, d)} | "
                          f"{ratio(r, o)} | {ratio(r, sim)} | "
                          f"{'yes' if len(cycles) == 1 else 'NO'} |" + tail + tail_cpu, flush=True)
    return 0


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
    ap.add_argument("--whole-process", action="store_true", help="whole processes only (see above)")
    ap.add_argument("--channels", type=int, default=0, help="channels of the YAML (default: the preset's)")
    ap.add_argument("--write-fraction", type=float, default=0.2, help="of the synthetic traces (default 0.2)")
    ap.add_argument("--busy", action="store_true", help="--whole-process: also with one busy process")
    ap.add_argument("--stream", action="store_true", help="--whole-process: also `sievesim dram run --stream`")
    ap.add_argument("--busy-seconds", type=float, default=900.0, help="the busy process's time limit")
    args = ap.parse_args()
    work = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="sievesim-vs-ramulator-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.whole_process:
        return whole_process(args, work)
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
