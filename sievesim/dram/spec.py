"""Memory-system configurations: a standard, an organisation, timings and a controller.

A :class:`DRAMConfig` is what ``sievesim dram run --config`` names. This module holds what every
reader shares: the dataclass, the checks of its fields (:func:`check_org_level`,
:func:`check_timing`, :func:`check_controller_field`), the built-in configurations
(:data:`BUILTIN_CONFIGS`) and the engine's memory estimate. The readers -- a sievesim TOML file
(:mod:`sievesim.dram.toml_config`), a Ramulator 2.0 YAML file (:mod:`sievesim.dram.ramulator_yaml`)
-- import it, and :func:`sievesim.dram.config.get_config` picks one of them by name or suffix, so
the imports run one way: ``config -> readers -> spec``. :meth:`DRAMConfig.compile` produces the
flat arrays that :mod:`sievesim._core` consumes.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from .._validate import Problems, check_bool, check_int, check_memory, check_number, check_str, check_work, format_bytes
from ..errors import field_error
from .standards import Standard, _r2_finish_timings, eval_latency, get_standard

__all__ = ["DRAMConfig", "ControllerPlugin", "BUILTIN_CONFIGS", "PLUGINS", "MAPPERS", "ROW_POLICIES", "END_CONDITIONS",
           "CONTROLLER_FIELDS", "check_controller_field", "check_org_level", "check_timing", "engine_memory_bytes",
           "check_engine_memory"]

#: Timings that are rates, periods or intervals: zero (or less) makes no sense.
_POSITIVE_TIMINGS = ("rate", "tCK_ps", "nBL", "nCCDAB")
#: Timings in other units than cycles, with their upper bound.
_TIMING_BOUNDS = {"rate": (1 << 20, "MT/s"), "tCK_ps": (1 << 20, "ps")}
# Bytes the engine and the trace arrays hold per request (`sievesim dram run synthetic:random:N
# --threads 1` on hbm3e-8000: peak RSS 101 MB higher for N = 1e6 than for N = 10), with a margin.
_BYTES_PER_REQUEST = 128
# Per logged command: cycle, address vector, command id, and the text of its CSV line (`sievesim dram
# run synthetic:random:200000 --threads 1 --log-commands F`: peak RSS 510 MB above the run without
# the log, for 562,741 commands, 907 B each); about 3 commands per request.
_BYTES_PER_LOGGED_COMMAND = 1024
_SLOT_BYTES = 192  # one request slot: the engine's Slot struct plus its per-slot arrays

MAPPERS = ("RoBaRaCoCh", "ChRaBaRoCo", "MOP4CLXOR")
ROW_POLICIES = ("open", "closed")
END_CONDITIONS = ("completed", "accepted")

# Command flag bits shared with the engine (sievesim/_core/_engine.pyx).
FLAG_OPENING, FLAG_CLOSING, FLAG_ACCESSING, FLAG_REFRESHING = 1, 2, 4, 8
ACTION_CODES = {None: 0, "open": 1, "close": 2, "close_all": 3, "pim_open": 4, "pim_close": 5}
PREREQ_CODES = {None: 0, "row_open": 1, "all_closed": 2, "pim_row_open": 3}
PIM_COMMANDS = ("ACTAB", "PREAB", "MACAB", "GWRITE", "RDRES")


def check_org_level(std: Standard, level: str, n: Any, *, source: str | None = None) -> int:
    """The count of one organisation level: an integer in bounds, a power of two where the
    standard's address bits need it; ``None`` (not given) is an error too."""
    if n is None:
        raise field_error(f"org.{level}", None, "a positive power of two", source=source)
    check_int(f"org.{level}", n, "org_level", source=source)
    if (std.prefetch > 1 or level in ("row", "column")) and n & (n - 1):
        raise field_error(f"org.{level}", n, "a positive power of two", source=source)
    return int(n)


def check_timing(name: str, v: Any, *, source: str | None = None) -> int:
    """One timing in cycles (``rate`` in MT/s, ``tCK_ps`` in ps) within its bounds; ``None`` is an error."""
    if v is None:
        raise field_error(f"timing.{name}", None, "an integer number of cycles", source=source)
    if name in _TIMING_BOUNDS:
        return check_int(f"timing.{name}", v, "cycles", lo=1, hi=_TIMING_BOUNDS[name][0], source=source)
    lo = -1 if name in ("nRFCSB", "nREFISB", "nRFC") else (1 if name in _POSITIVE_TIMINGS else 0)
    return check_int(f"timing.{name}", v, "cycles", lo=lo, source=source)


#: Fields of the controller and the engine's run, each checked by :func:`check_controller_field`.
CONTROLLER_FIELDS = ("refresh", "dual_row_buffer", "mapper", "row_policy", "end", "read_queue_size",
                     "write_queue_size", "active_queue_size", "priority_queue_size", "clock_ratio",
                     "memory_clock_ratio", "row_policy_cap", "wr_low_watermark", "wr_high_watermark")


def check_controller_field(fname: str, v: Any, *, field: str | None = None, source: str | None = None) -> Any:
    """Type and range of one of :data:`CONTROLLER_FIELDS` (``field``: the name to report, e.g.
    ``controller.refresh``)."""
    field = field or fname
    if fname in ("refresh", "dual_row_buffer"):
        return check_bool(field, v, source=source)
    allowed = {"mapper": MAPPERS, "row_policy": ROW_POLICIES, "end": END_CONDITIONS}.get(fname)
    if allowed is not None:
        if not isinstance(v, str) or v not in allowed:
            raise field_error(field, v, f"one of {list(allowed)}", source=source)
        return v
    if fname.endswith("_queue_size"):
        return check_int(field, v, "queue", source=source)
    if fname.endswith("clock_ratio"):
        return check_int(field, v, "clock_ratio", source=source)
    if fname == "row_policy_cap":
        return check_int(field, v, "requests", source=source)
    if fname in ("wr_low_watermark", "wr_high_watermark"):
        check_number(field, float(v) if isinstance(v, np.floating) else v, lo=0, hi=1, source=source,
                     what="a fraction of the write queue")
        return v
    raise field_error(field, v, f"one of {list(CONTROLLER_FIELDS)}", source=source)


#: Ramulator 2.0 controller plugins sievesim carries out (others are refused by name).
PLUGINS = ("TraceRecorder", "CommandCounter")


@dataclass(frozen=True)
class ControllerPlugin:
    """One Ramulator 2.0 controller plugin. ``TraceRecorder``: sievesim's command log (CSV, as
    ``--log-commands`` writes it) goes to ``path``. ``CommandCounter``: the issued commands named in
    ``commands_to_count`` are counted into the result and written to ``path`` as Ramulator does
    (``NAME, count`` per line)."""

    impl: str
    path: str
    commands_to_count: tuple[str, ...] = ()


@dataclass(frozen=True)
class DRAMConfig:
    """One memory system: ``standard`` + ``org`` (count per level) + ``timings`` (cycles) + controller.

    Units: every timing is in cycles of the command clock (tCK = ``timings['tCK_ps']`` ps);
    queue sizes in requests; watermarks as fractions of the write queue size.
    ``clock_ratio``: frontend ticks per memory tick (Ramulator 2.0's frontend ``clock_ratio``).
    ``end``: ``completed`` (run until every request is served) or ``accepted`` (stop when the last
    request enters a queue, as Ramulator 2.0's LoadStoreTrace does).
    ``row_policy_cap``: with the closed-row policy, column accesses to a bank before it is closed.
    ``dual_row_buffer``: PIM rows have their own row buffer (NeuPIMs); False makes PIM and normal
    rows share one, so each closes the other's.
    """

    name: str
    standard: Standard
    org: Mapping[str, int]
    timings: Mapping[str, int]
    mapper: str = "RoBaRaCoCh"
    row_policy: str = "open"
    row_policy_cap: int = 1
    refresh: bool = True
    read_queue_size: int = 32
    write_queue_size: int = 32
    active_queue_size: int = 32
    priority_queue_size: int = 512 * 3 + 32
    wr_low_watermark: float = 0.2
    wr_high_watermark: float = 0.8
    clock_ratio: int = 1
    memory_clock_ratio: int = 1
    end: str = "completed"
    dual_row_buffer: bool = True
    source: str = "built-in"
    #: Ramulator 2.0 controller plugins of the configuration (``TraceRecorder``, ``CommandCounter``),
    #: applied by :func:`sievesim.dram.engine.simulate`; they change no timing.
    plugins: tuple["ControllerPlugin", ...] = dataclasses.field(default=(), compare=False)
    #: Energy figures that override the standard's built-in ones (a DRAM TOML's ``[energy]`` table;
    #: :func:`sievesim.dram.energy.energy_params`); they change no timing.
    energy: Mapping[str, float] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.validate()

    # ---------------------------------------------------------------- validation
    def validate(self) -> None:
        """Types and ranges of every field first (all problems in one message), then meaning."""
        src = self.source
        std = self.standard
        problems = Problems(src)
        with problems.check():
            check_str("name", self.name, source=src)
        for level in std.levels:
            with problems.check():
                check_org_level(std, level, self.org.get(level), source=src)
        for name in std.timing_names:
            with problems.check():
                check_timing(name, self.timings.get(name), source=src)
        for fname in CONTROLLER_FIELDS:
            with problems.check():
                check_controller_field(fname, getattr(self, fname), source=src)
        problems.raise_if_any()

        # meaning: every rule that fails, in one message
        for c in std.constraints:
            lat = eval_latency(c.latency, self.timings)
            if lat < 0:
                with problems.check():
                    raise field_error(f"timing constraint {c.preceding}->{c.following} at {c.level}", lat,
                                      f"a non-negative latency ({c.latency})", source=src)
        with problems.check():
            if self.refresh and std.refresh:
                if self.timings.get("nREFI", 0) <= 0:
                    raise field_error("timing.nREFI", self.timings.get("nREFI"), "a positive number of cycles",
                                      source=src)
                # a refresh closes every bank (nRP) and then takes nRFC; the next must not be due before
                busy = self.timings.get("nRFC", 0) + self.timings.get("nRP", 0)
                if self.timings["nREFI"] <= busy:
                    raise field_error("timing.nREFI", self.timings["nREFI"],
                                      f"more than nRFC + nRP = {busy} cycles (one refresh must end before the "
                                      "next is due)", source=src)
        with problems.check():
            if self.mapper == "MOP4CLXOR" and any(r & (r - 1) for r in self.address_radix):
                raise field_error("mapper", self.mapper, "RoBaRaCoCh or ChRaBaRoCo: MOP4CLXOR needs "
                                  f"power-of-two counts at every level, got {dict(self.org)}", source=src)
        with problems.check():
            if self.clock_ratio * self.memory_clock_ratio > 64:
                raise field_error("clock_ratio x memory_clock_ratio", self.clock_ratio * self.memory_clock_ratio,
                                  "at most 64 (the engine tracks one period of frontend and memory ticks)",
                                  source=src)
        with problems.check():
            if not (0.0 <= self.wr_low_watermark <= self.wr_high_watermark <= 1.0):
                raise field_error("wr_low_watermark/wr_high_watermark",
                                  (self.wr_low_watermark, self.wr_high_watermark),
                                  "0 < low <= high <= 1", source=src)
            if np.float32(self.wr_low_watermark) <= 0:
                # the controller leaves write mode when fewer than low x size writes wait: never at 0
                # (the engine compares in float32, where 1e-50 is 0 too)
                raise field_error("wr_low_watermark", self.wr_low_watermark, "more than 0 (at 0 a controller "
                                  "never leaves write mode and reads wait forever)", source=src)
        with problems.check():
            nodes = int(np.sum(np.cumprod([int(self.org[l]) for l in std.node_levels], dtype=object)))
            if nodes * len(std.commands) >= 2**31:
                raise field_error("org", dict(self.org), f"fewer units: {nodes:,} DRAM nodes x "
                                  f"{len(std.commands)} commands exceed the engine's 32-bit node offsets",
                                  source=src)
        problems.raise_if_any()

    def replace(self, **changes: Any) -> "DRAMConfig":
        return dataclasses.replace(self, **changes)

    # ---------------------------------------------------------------- derived figures
    @property
    def tck_ns(self) -> float:
        """Command clock period in ns."""
        return self.timings["tCK_ps"] / 1000.0

    @property
    def tx_bytes(self) -> int:
        """Bytes moved by one RD or WR."""
        return self.standard.prefetch * self.standard.channel_width_bits // 8

    @property
    def address_radix(self) -> list[int]:
        """Values each level's address field takes (columns counted in transactions).

        For power-of-two counts this is ``2**bits`` of Ramulator 2.0's linear mappers; other
        counts (3 SIDs in a 12-high HBM3E stack) are mapped in mixed radix.
        """
        radix = [int(self.org[lv]) for lv in self.standard.levels]
        radix[-1] //= self.standard.prefetch
        return radix

    @property
    def capacity_bytes(self) -> int:
        """Bytes addressable through the mapper."""
        return int(np.prod(self.address_radix, dtype=object)) * self.tx_bytes

    @property
    def peak_bandwidth_gbps(self) -> float:
        """Data-bus peak: one transaction per nBL cycles on every pseudo-channel (GB/s)."""
        pcs = self.org["channel"] * self.org["pseudochannel"]
        return pcs * self.tx_bytes / (self.timings["nBL"] * self.tck_ns)

    @property
    def num_controllers(self) -> int:
        lv = self.standard.levels
        return int(np.prod([self.org[l] for l in lv[: lv.index(self.standard.controller_level) + 1]]))

    def timing_values(self) -> dict[str, int]:
        """Every timing value in cycles, named as Ramulator 2.0 names them (for the command log)."""
        return {k: int(v) for k, v in self.timings.items() if k not in ("rate", "tCK_ps")} | {
            "tCK_ps": int(self.timings["tCK_ps"])}

    # ---------------------------------------------------------------- compilation
    def compile(self) -> dict[str, Any]:
        """Flatten standard + organisation + timings into arrays for the engine."""
        std = self.standard
        levels = std.levels
        node_levels = std.node_levels
        n_lv = len(node_levels)
        lidx = {name: i for i, name in enumerate(levels)}
        counts = np.array([self.org[l] for l in levels], dtype=np.int64)
        names = [c.name for c in std.commands]
        cidx = {n: i for i, n in enumerate(names)}
        n_cmd = len(names)

        def node_level_of(level_name: str) -> int:
            return min(lidx[level_name], n_lv - 1)

        cmd_scope = np.array([lidx[c.scope] for c in std.commands], dtype=np.int32)
        cmd_check = np.array([node_level_of(c.check_level or c.scope) for c in std.commands], dtype=np.int32)
        cmd_flags = np.array([FLAG_OPENING * c.opening | FLAG_CLOSING * c.closing |
                              FLAG_ACCESSING * c.accessing | FLAG_REFRESHING * c.refreshing
                              for c in std.commands], dtype=np.int32)
        cmd_action = np.array([ACTION_CODES[c.action] for c in std.commands], dtype=np.int32)
        cmd_prereq = np.array([PREREQ_CODES[c.prereq] for c in std.commands], dtype=np.int32)

        # Timing rows grouped by (level, preceding command), in declaration order.
        # Rows with the same (level, preceding, following, window, sibling) collapse to the largest
        # latency: the engine takes the max anyway, so this changes no cycle and saves work.
        buckets: list[dict[tuple[int, int, int], int]] = [{} for _ in range(n_lv * n_cmd)]
        for c in std.constraints:
            if c.single_buffer_only and self.dual_row_buffer:
                continue
            lv = lidx[c.level]
            lat = eval_latency(c.latency, self.timings)
            for p in c.preceding:
                for f in c.following:
                    bucket = buckets[lv * n_cmd + cidx[p]]
                    key = (cidx[f], c.window, int(c.sibling))
                    bucket[key] = max(lat, bucket.get(key, lat))
        buckets = [[(f, lat, w, sib) for (f, w, sib), lat in b.items()] for b in buckets]
        starts = np.zeros(n_lv * n_cmd + 1, dtype=np.int32)
        rows: list[tuple[int, int, int, int]] = []
        for k, b in enumerate(buckets):
            starts[k] = len(rows)
            rows.extend(b)
        starts[-1] = len(rows)
        rows_arr = np.array(rows, dtype=np.int64).reshape(-1, 4)
        hist_window = np.array([max([r[2] for r in b if not r[3]], default=0) for b in buckets], dtype=np.int32)

        def split(select) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
            """Rows of one kind per (level, command): starts, following command, latency, window."""
            st = np.zeros(len(buckets) + 1, dtype=np.int32)
            out: list[tuple[int, int, int, int]] = []
            for k, b in enumerate(buckets):
                st[k] = len(out)
                out.extend(r for r in b if select(r))
            st[-1] = len(out)
            a = np.array(out, dtype=np.int64).reshape(-1, 4)
            return st, a[:, 0].astype(np.int32), np.ascontiguousarray(a[:, 1]), a[:, 2].astype(np.int32)

        simple = split(lambda r: r[2] == 1 and not r[3])
        windowed = split(lambda r: r[2] > 1 and not r[3])
        sibling = split(lambda r: bool(r[3]))

        # Node bookkeeping: nodes per node level, flat offsets.
        nodes_per_level = np.cumprod(counts[:n_lv])
        node_offset = np.concatenate([[0], np.cumsum(nodes_per_level)[:-1]]).astype(np.int64)
        refresh_on = bool(self.refresh and std.refresh)
        return dict(
            n_levels=n_lv,
            addr_len=len(levels),
            counts=counts,
            node_offset=node_offset,
            n_nodes=int(nodes_per_level.sum()),
            n_banks=int(nodes_per_level[-1]),
            n_cmd=n_cmd,
            cmd_scope=cmd_scope,
            cmd_check=cmd_check,
            cmd_flags=cmd_flags,
            cmd_action=cmd_action,
            cmd_prereq=cmd_prereq,
            cmd_act=cidx["ACT"], cmd_pre=cidx["PRE"], cmd_prea=cidx["PREA"],
            cmd_rd=cidx["RD"], cmd_wr=cidx["WR"], cmd_ref=cidx["REFab"],
            **{f"cmd_{n.lower()}": cidx.get(n, -1) for n in PIM_COMMANDS},
            dual_row_buffer=self.dual_row_buffer,
            cons_start=starts,
            cons_follow=np.ascontiguousarray(rows_arr[:, 0]).astype(np.int32),
            cons_latency=np.ascontiguousarray(rows_arr[:, 1]),
            cons_window=np.ascontiguousarray(rows_arr[:, 2]).astype(np.int32),
            cons_sibling=np.ascontiguousarray(rows_arr[:, 3]).astype(np.int32),
            hist_window=hist_window,
            simple_rows=simple, window_rows=windowed, sibling_rows=sibling,
            ctrl_level=lidx[std.controller_level],
            # bank-state residency (energy's background): per pseudo-channel where the standard
            # has one (HBM's unit of standby power), else per controller; a refresh keeps its
            # banks busy nRFC cycles
            residency_level=max(lidx[std.controller_level], lidx.get("pseudochannel", -1)),
            refresh_busy_cycles=max(0, int(self.timings.get("nRFC", 0))) if refresh_on else 0,
            read_latency=eval_latency(std.read_latency, self.timings),
            write_latency=eval_latency(std.write_latency, self.timings),
            refresh_interval=int(self.timings["nREFI"]) if refresh_on else 0,
            read_queue_size=self.read_queue_size,
            write_queue_size=self.write_queue_size,
            active_queue_size=self.active_queue_size,
            priority_queue_size=self.priority_queue_size,
            wr_low=float(np.float32(self.wr_low_watermark)),
            wr_high=float(np.float32(self.wr_high_watermark)),
            closed_row=self.row_policy == "closed",
            row_policy_cap=self.row_policy_cap,
            clock_ratio=self.clock_ratio,
            memory_clock_ratio=self.memory_clock_ratio,
            end_on_accept=self.end == "accepted",
            command_names=names,
        )


def engine_memory_bytes(spec: Mapping[str, Any], requests: int = 0, *, logged_commands: int = 0) -> dict[str, int]:
    """Estimated bytes the engine holds for a compiled configuration ``spec`` (see
    :meth:`DRAMConfig.compile`), per part: node timing state, controller queues and request slots,
    the requests, the command log."""
    n_ctrl = int(np.prod(spec["counts"][:spec["ctrl_level"] + 1], dtype=object))
    qcap = [spec[k] + 1 for k in ("read_queue_size", "write_queue_size", "active_queue_size", "priority_queue_size")]
    hist_w = max(1, int(np.max(spec["hist_window"])) if len(spec["hist_window"]) else 1)
    write_hash = 1 << max(4, (4 * n_ctrl * qcap[1] - 1).bit_length())
    return {
        "organisation": spec["n_nodes"] * spec["n_cmd"] * 8 * (1 + hist_w) + spec["n_banks"] * 12 + spec["n_nodes"] * 4,
        "controller queues": n_ctrl * (4 * max(qcap) * 4 + sum(qcap) * (_SLOT_BYTES + 4 * spec["addr_len"]))
        + write_hash * 12,
        "requests": requests * _BYTES_PER_REQUEST,
        "command log": logged_commands * _BYTES_PER_LOGGED_COMMAND,
    }


def check_engine_memory(config: "DRAMConfig", spec: Mapping[str, Any], requests: int = 0, *,
                        logged_commands: int = 0) -> None:
    """Refuse a run whose estimated memory is above the limit, naming its largest part."""
    parts = engine_memory_bytes(spec, requests, logged_commands=logged_commands)
    total = sum(parts.values())
    part = max(parts, key=parts.__getitem__)
    field, value = {
        "organisation": ("org", dict(config.org)),
        "controller queues": ("controllers x read/write/active/priority_queue_size",
                              f"{config.num_controllers} x " + str((config.read_queue_size, config.write_queue_size,
                                                                    config.active_queue_size,
                                                                    config.priority_queue_size))),
        "requests": ("requests", requests),
        "command log": ("--log-commands (logged commands)", logged_commands),
    }[part]
    check_memory(total, f"the DRAM engine ({part}: {format_bytes(parts[part])})", field, value, source=config.source)


#: Measured cost of the engine (2-core x86-64, Python 3.11): one refresh of one unit about 0.1 us
#: (``dram run`` of 2 requests 1e8 cycles apart on hbm3-6400: 512,800 refreshes in 0.051 s), one
#: request about 1 us (1,000,000 random requests in about 1 s), taken 3x for a margin.
_SECONDS_PER_REFRESH = 3e-7
_SECONDS_PER_REQUEST = 3e-6


def engine_time_s(config: "DRAMConfig", requests: int, last_arrival: int = 0) -> float:
    """Estimated seconds the engine takes for ``requests`` requests the last of which arrives at
    cycle ``last_arrival``: idle cycles are skipped, but every refresh up to then is simulated
    (one per refresh unit -- controller x rank -- every nREFI cycles)."""
    refresh_on = bool(config.refresh and config.standard.refresh)
    refreshes = 0.0
    if refresh_on and last_arrival > 0:
        units = config.num_controllers * int(config.org.get("rank", 1) or 1)
        refreshes = last_arrival / max(1, int(config.timings["nREFI"])) * units
    return refreshes * _SECONDS_PER_REFRESH + requests * _SECONDS_PER_REQUEST


def check_engine_time(config: "DRAMConfig", requests: int, last_arrival: int = 0) -> None:
    """Refuse a run whose estimated time (:func:`engine_time_s`) is above the work limit."""
    seconds = engine_time_s(config, requests, last_arrival)
    what = ("the DRAM engine (refresh simulated up to the last arrival)" if last_arrival > 0 and
            seconds > requests * _SECONDS_PER_REQUEST * 2 else "the DRAM engine")
    check_work(seconds, what, "last arrival cycle" if "refresh" in what else "requests",
               last_arrival if "refresh" in what else requests, source=config.source)


def _jedec(name: str, std_name: str, org: str, timing: str, **kw: Any) -> DRAMConfig:
    std = get_standard(std_name)
    return DRAMConfig(name=name, standard=std, org=dict(std.org_presets[org]),
                      timings=dict(std.timing_presets[timing]), **kw)


def _ramulator(name: str, std_name: str, org: str, timing: str, channels: int) -> DRAMConfig:
    std = get_standard(std_name)
    org_d = dict(std.org_presets[org])
    density = org_d.pop("density")
    org_d.pop("dq")
    org_d["channel"] = channels
    return DRAMConfig(name=name, standard=std, org=org_d,
                      timings=_r2_finish_timings(dict(std.timing_presets[timing]), density),
                      refresh=True, end="accepted", row_policy_cap=10_000_000)


BUILTIN_CONFIGS: dict[str, callable] = {
    "hbm3-6400": lambda: _jedec("hbm3-6400", "hbm3", "HBM3_16Gb_8hi", "HBM3_6400"),
    "hbm3e-8000": lambda: _jedec("hbm3e-8000", "hbm3", "HBM3E_24Gb_12hi", "HBM3E_8000"),
    "hbm2-2000": lambda: _jedec("hbm2-2000", "hbm2", "HBM2_8Gb", "HBM2_2000"),
    "hbm2-pim-2400": lambda: _jedec("hbm2-pim-2400", "hbm2-pim", "HBM2_PIM_32Gb", "HBM2_PIM_2400"),
    "ramulator2-hbm3": lambda: _ramulator("ramulator2-hbm3", "ramulator2-hbm3", "HBM3_8Gb", "HBM3_2Gbps", 8),
    "ramulator2-hbm2": lambda: _ramulator("ramulator2-hbm2", "ramulator2-hbm2", "HBM2_8Gb", "HBM2_2Gbps", 8),
}
