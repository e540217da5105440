"""``sievesim dram``: run request traces on the cycle-accurate DRAM engine."""
from __future__ import annotations

import argparse
import os
import stat
import json

from .._validate import int_arg, number_arg
from ..errors import field_error


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("dram", help="cycle-accurate DRAM engine (request mode)")
    sub = p.add_subparsers(dest="dram_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

    run = sub.add_parser("run", help="run a request trace; print cycles, row hits, latency, bandwidth")
    run.add_argument("trace", metavar="TRACE",
                     help="LoadStoreTrace (LD/ST addr) or ReadWriteTrace (R/W a0,a1,..) file, "
                          "or synthetic:stream|random|hotrow[:N]")
    run.add_argument("--config", default="hbm3e-8000",
                     help="built-in name (hbm3-6400, hbm3e-8000, hbm2-2000, ramulator2-hbm3, ramulator2-hbm2), "
                          "a sievesim .toml or a Ramulator 2.0 .yaml (default: hbm3e-8000)")
    run.add_argument("--clock-ratio", type=int_arg("clock_ratio"), default=None,
                     help="frontend ticks per memory tick (default: the config's, usually 1)")
    run.add_argument("--seed", type=int_arg("seed"), default=0, help="seed for synthetic traces")
    run.add_argument("--json", action="store_true", help="print one JSON object")
    run.add_argument("--log-commands", metavar="FILE", help="write the command log as CSV")
    run.add_argument("--no-energy", action="store_true",
                     help="leave out energy_j, its breakdown and average_power_w (docs/energy.md)")
    run.add_argument("--address-overflow", choices=["error", "wrap"], default="error",
                     help="an address at or beyond the capacity: error (default) or wrap, as Ramulator 2.0's "
                          "mappers do (the output counts the wrapped requests)")
    run.add_argument("--threads", type=int_arg("threads"), default=None,
                     help="split the controllers between N threads; the result is the same "
                          "(default: the cores available, for traces of 50 000 requests or more)")
    run.add_argument("--stream", action="store_true",
                     help="read a LoadStoreTrace file a block at a time: memory stays flat as the trace grows, "
                          "the same results, on the default threads (such a file streams anyway unless "
                          "--log-commands or the configuration's plugins need the command log)")
    run.set_defaults(func=_run)

    lst = sub.add_parser("configs", help="list built-in memory configurations")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=_configs)

    gen = sub.add_parser("gen-trace", help="write a synthetic LoadStoreTrace")
    gen.add_argument("kind", choices=["stream", "random", "hotrow"])
    gen.add_argument("--requests", type=int_arg("requests"), default=100_000)
    gen.add_argument("--config", default="hbm3e-8000", help="sets the address range (capacity)")
    gen.add_argument("--write-fraction", type=number_arg(lo=0, hi=1, what="a fraction of the requests"), default=0.2)
    gen.add_argument("--seed", type=int_arg("seed"), default=0)
    gen.add_argument("-o", "--output", required=True)
    gen.set_defaults(func=_gen)


def _run(args: argparse.Namespace) -> int:
    # before numpy is imported (the first tenth of a second, on one core): the trace's first
    # pieces read and parsed on another core meanwhile
    prefetch = _start_prefetch(args)
    # numpy here, a few calls deep: imported deep in the command's call stack (under the imports of
    # sievesim.dram), its typing modules' thousands of calls straddled a 16 KiB chunk of CPython
    # 3.11's frame stack, which mapped and unmapped a chunk at each of them (616 pairs of system
    # calls in a run, `strace -f -e trace=mmap`); each unmapping also interrupts the reader's core
    import numpy  # noqa: F401, PLC0415
    try:
        return _run_with(args, prefetch)
    finally:
        if prefetch is not None:
            prefetch.finish()           # stopped, if the run did not take it (the array path, an error)


def _start_prefetch(args: argparse.Namespace):
    """A reader of the trace's first pieces on a thread of its own (sievesim._core._prefetch),
    where the trace may stream on more than one thread: a file, no command log, ``--threads`` not 1,
    and two cores or more for this process (on one core it would only take turns with start-up)."""
    from .._core import available_threads

    if args.trace.startswith("synthetic:") or args.log_commands or args.threads is not None and args.threads < 2:
        return None
    if available_threads() < 2:
        return None
    from .._core._prefetch import open_prefetch

    return open_prefetch(args.trace)


def _run_with(args: argparse.Namespace, prefetch) -> int:
    from ..dram.config import get_config
    from ..dram.engine import simulate, write_command_log
    from ..dram.synthetic import parse_synthetic
    from ..dram.traces import read_trace

    if args.threads is not None and args.threads < 1:
        raise field_error("--threads", args.threads, "an integer >= 1")
    config = get_config(args.config)
    if args.clock_ratio is not None:
        if not 1 <= args.clock_ratio <= 64 // config.memory_clock_ratio:
            raise field_error("--clock-ratio", args.clock_ratio,
                              f"an integer from 1 to {64 // config.memory_clock_ratio}")
        config = config.replace(clock_ratio=args.clock_ratio)
    if args.stream or _streams_anyway(args, config):
        result = _run_stream(args, config, prefetch)
    else:
        if args.trace.startswith("synthetic:"):
            trace = parse_synthetic(args.trace, config, seed=args.seed)
        else:
            trace = read_trace(args.trace, len(config.standard.levels))
        result = simulate(config, trace, log_commands=bool(args.log_commands), threads=args.threads,
                          address_overflow=args.address_overflow)
    if args.log_commands:
        write_command_log(result, config, args.log_commands)
    d = result.to_dict()
    if not args.no_energy:
        from ..dram.energy import dram_energy
        d.update(dram_energy(result, config))
    from .._outputs import check_finite
    check_finite(d)
    if args.json:
        print(json.dumps(d, indent=2))
    else:
        width = max(len(k) for k in d)
        for k, v in d.items():
            if isinstance(v, dict):
                v = ", ".join(f"{name} {count:.4g}" if isinstance(count, float) else f"{name} {count}"
                              for name, count in v.items())
            if isinstance(v, float) and k == "energy_j":
                v = f"{v:.4g}"
            print(f"{k:<{width}}  {v:.4f}" if isinstance(v, float) else f"{k:<{width}}  {v}")
    return 0


def _streams_anyway(args: argparse.Namespace, config) -> bool:
    """A LoadStoreTrace file streams without being asked (on any number of threads; the
    same results, flat memory) unless the command log or the configuration's plugins need it."""
    if args.log_commands or args.trace.startswith("synthetic:") or tuple(getattr(config, "plugins", ())):
        return False
    try:
        if not stat.S_ISREG(os.stat(args.trace).st_mode):
            return False                # a FIFO, device or directory: the array path's opener refuses it
        with open(args.trace, "rb") as fh:
            head = fh.read(1 << 20)
    except OSError:
        return False                    # the array path names the file and the reason
    # a first megabyte without a line end is no trace to stream: the array path says why (its size, its line)
    return head[:2] not in (b"R ", b"W ") and (b"\n" in head or len(head) < 1 << 20)


def _run_stream(args: argparse.Namespace, config, prefetch=None):
    """``dram run --stream`` (or a LoadStoreTrace file, see _streams_anyway): the trace file a
    block at a time, through one streaming engine or each run of the held split."""
    from ..dram.engine import simulate_stream
    from ..dram.traces import LoadStoreChunks

    for given, why in ((args.log_commands, "--log-commands keeps every command"),
                       (args.trace.startswith("synthetic:"), "a synthetic trace is made whole"),
                       (tuple(getattr(config, "plugins", ())), "the configuration's plugins need the command log")):
        if given:
            raise field_error("--stream", args.trace, f"a LoadStoreTrace file without this ({why})")
    with open(args.trace, "rb") as fh:
        first = fh.read(2)
    if first in (b"R ", b"W "):
        raise field_error("--stream", args.trace, "a LoadStoreTrace file (LD/ST lines); this is a ReadWriteTrace")
    return simulate_stream(config, LoadStoreChunks(args.trace, prefetch=prefetch), threads=args.threads,
                           address_overflow=args.address_overflow)


def _configs(args: argparse.Namespace) -> int:
    from ..dram.config import BUILTIN_CONFIGS

    rows = []
    for name, make in BUILTIN_CONFIGS.items():
        c = make()
        rows.append(dict(name=name, standard=c.standard.name, controllers=c.num_controllers,
                         capacity_gib=c.capacity_bytes / 2**30, tck_ps=c.timings["tCK_ps"],
                         peak_bandwidth_gbps=c.peak_bandwidth_gbps,
                         refresh=c.refresh and c.standard.refresh, end=c.end,
                         description=c.standard.description))
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            print(f"{r['name']:<16} {r['standard']:<16} {r['controllers']:>3} controllers  "
                  f"{r['capacity_gib']:6.1f} GiB  tCK {r['tck_ps']} ps  "
                  f"peak {r['peak_bandwidth_gbps']:7.1f} GB/s  {r['description']}")
    return 0


def _gen(args: argparse.Namespace) -> int:
    from ..dram.config import get_config
    from ..dram.synthetic import make_trace
    from ..dram.traces import write_loadstore_trace

    config = get_config(args.config)
    t = make_trace(args.kind, args.requests, config, seed=args.seed, write_fraction=args.write_fraction)
    write_loadstore_trace(args.output, t.addresses, t.is_write)
    print(f"wrote {len(t)} requests to {args.output}")
    return 0
