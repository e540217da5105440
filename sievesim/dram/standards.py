"""DRAM standards declared as data.

A :class:`Standard` lists the organisation levels, the commands (with their scope, their effect on
bank state and the prerequisite rule that turns a request into its next command) and the timing
constraints as rows of ``level / preceding commands / following commands / latency / window``, in
the manner of Ramulator 2's declarative standards. :func:`sievesim.dram.compile.compile_standard`
turns a standard plus an organisation and timing values into the flat arrays that the Cython
engine consumes; the engine knows nothing else about DRAM. Adding a standard is adding data.

Latencies are expressions over timing names (``"nCWL + nBL + nWR"``), evaluated in cycles of the
command clock (CK).
"""
from __future__ import annotations

import ast
import dataclasses
import operator
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..errors import ConfigError, field_error

__all__ = [
    "TimingConstraint", "Command", "Standard", "STANDARDS", "get_standard", "eval_latency",
]


@dataclass(frozen=True)
class TimingConstraint:
    """``following`` may not issue until ``latency`` cycles after ``preceding`` at ``level``.

    With ``window = w > 1`` the latency counts from the w-th most recent ``preceding`` command
    (tFAW: window 4). ``sibling`` rows apply to the *other* nodes of the same parent (tCCDR:
    a column command to a different SID).
    """

    level: str
    preceding: tuple[str, ...]
    following: tuple[str, ...]
    latency: str
    window: int = 1
    sibling: bool = False
    single_buffer_only: bool = False   # PIM: applies only when PIM and normal rows share one buffer


@dataclass(frozen=True)
class Command:
    """A DRAM command.

    ``scope``: the level it addresses (``row`` for ACT, ``column`` for RD/WR, ``bank`` for PRE).
    ``action``: effect on bank state: ``open`` (open the addressed row), ``close`` (close the
    addressed bank), ``close_all`` (close every bank below the scope node), or ``None``.
    ``prereq``: how a request whose final command is this one finds its next command:
    ``row_open`` (ACT if the bank is closed, PRE if another row is open), ``all_closed``
    (PREA if any bank below the scope node is open), or ``None``.
    ``check_level``: deepest level whose ready times are checked before issue (default: the
    scope, clipped to the bank level).
    PIM commands (``pim=True``) act on every bank of their scope node at once: ``pim_open`` /
    ``pim_close`` open and close the PIM row buffer, ``pim_row_open`` is the prerequisite of an
    all-bank MAC (ACTAB if the PIM row is closed, PREAB if another row is open).
    """

    name: str
    scope: str
    opening: bool = False
    closing: bool = False
    accessing: bool = False
    refreshing: bool = False
    action: str | None = None
    prereq: str | None = None
    check_level: str | None = None
    pim: bool = False


@dataclass(frozen=True)
class Standard:
    """A DRAM standard: organisation levels, commands, timing rules and presets.

    ``controller_level``: one memory controller per node of this level (Ramulator 2.0: channel;
    JEDEC HBM: pseudo-channel). ``refresh``: whether the all-bank refresh manager issues REFab
    (Ramulator 2.0's never does on HBM: it looks for a ``rank`` level). ``prefetch`` and
    ``channel_width_bits`` set the transaction size ``prefetch * channel_width_bits / 8`` bytes
    and drop ``log2(prefetch)`` column address bits, as Ramulator 2.0's linear mappers do.
    """

    name: str
    description: str
    levels: tuple[str, ...]
    commands: tuple[Command, ...]
    timing_names: tuple[str, ...]
    constraints: tuple[TimingConstraint, ...]
    org_presets: Mapping[str, Mapping[str, int]]
    timing_presets: Mapping[str, Mapping[str, int]]
    controller_level: str
    refresh: bool
    prefetch: int
    channel_width_bits: int
    read_latency: str = "nCL + nBL"
    write_latency: str = "nCWL + nBL"
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def node_levels(self) -> tuple[str, ...]:
        """Levels that hold state (everything above ``row``)."""
        return self.levels[: self.levels.index("row")]

    def command(self, name: str) -> Command:
        for cmd in self.commands:
            if cmd.name == name:
                return cmd
        raise KeyError(name)


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.FloorDiv: operator.floordiv}


def eval_latency(expr: str, timings: Mapping[str, int]) -> int:
    """Evaluate a latency expression (names, integers, + - * //) with ``timings`` in cycles."""

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in timings:
                raise field_error(f"timing.{node.id}", None, f"a value (used in '{expr}')")
            return int(timings[node.id])
        raise ConfigError(f"latency expression '{expr}': unsupported syntax")

    return ev(ast.parse(expr, mode="eval"))


def _rows(level: str, rows: Sequence[tuple], single_buffer_only: bool = False) -> list[TimingConstraint]:
    out = []
    for row in rows:
        pre, fol, lat, *rest = row
        window = rest[0] if rest else 1
        sibling = rest[1] if len(rest) > 1 else False
        out.append(TimingConstraint(level, tuple(pre.split()), tuple(fol.split()), lat, window, sibling,
                                    single_buffer_only))
    return out


# --------------------------------------------------------------------------------------------
# Ramulator 2.0 mirrors (CMU-SAFARI/ramulator2 @ 5e58d25, src/dram/impl/HBM3.cpp and HBM2.cpp).
# Same rows, same order, same quirks (see docs/dram.md, "Ramulator 2.0 mirror standards").
# --------------------------------------------------------------------------------------------

_R2_TIMINGS = ("rate", "nBL", "nCL", "nRCDRD", "nRCDWR", "nRP", "nRAS", "nRC", "nWR", "nRTPS",
               "nRTPL", "nCWL", "nCCDS", "nCCDL", "nRRDS", "nRRDL", "nWTRS", "nWTRL", "nRTW",
               "nFAW", "nRFC", "nRFCSB", "nREFI", "nREFISB", "nRREFD", "tCK_ps")

_R2_COMMANDS = (
    Command("ACT", "row", opening=True, action="open"),
    Command("PRE", "bank", closing=True, action="close"),
    Command("PREA", "channel", closing=True, action="close_all"),
    Command("RD", "column", accessing=True, prereq="row_open"),
    Command("WR", "column", accessing=True, prereq="row_open"),
    Command("RDA", "column", closing=True, accessing=True, action="close"),
    Command("WRA", "column", closing=True, accessing=True, action="close"),
    Command("REFab", "channel", refreshing=True, prereq="all_closed"),
)


def _r2_constraints() -> tuple[TimingConstraint, ...]:
    rows: list[TimingConstraint] = []
    rows += _rows("channel", [("ACT", "ACT PRE PREA REFab", "2")])
    rows += _rows("pseudochannel", [
        ("ACT", "ACT", "nRRDS"),
        ("ACT", "ACT", "nFAW", 4),
        ("RD RDA", "RD RDA", "nBL"),
        ("WR WRA", "WR WRA", "nBL"),
        ("RD RDA", "RD RDA", "nCCDS"),
        ("WR WRA", "WR WRA", "nCCDS"),
        ("RD RDA", "WR WRA", "nCL + nBL + 2 - nCWL"),
        ("WR WRA", "RD RDA", "nCWL + nBL + nWTRS"),
        ("RD", "PREA", "nRTPS"),
        ("WR", "PREA", "nCWL + nBL + nWR"),
        ("ACT", "ACT", "nRRDS"),
        ("ACT", "ACT", "nFAW", 4),
        ("ACT", "PREA", "nRAS"),
        ("PREA", "ACT", "nRP"),
        ("ACT", "REFab", "nRC"),
        ("PRE PREA", "REFab", "nRP"),
        ("RDA", "REFab", "nRP + nRTPS"),
        ("WRA", "REFab", "nCWL + nBL + nWR + nRP"),
        ("REFab", "ACT", "nRFC"),
    ])
    rows += _rows("bankgroup", [
        ("RD RDA", "RD RDA", "nCCDL"),
        ("WR WRA", "WR WRA", "nCCDL"),
        ("WR WRA", "RD RDA", "nCWL + nBL + nWTRL"),
        ("ACT", "ACT", "nRRDL"),
    ])
    rows += _rows("bank", [
        ("RD", "PRE", "nRTPS"),
        ("ACT", "ACT", "nRC"),
        ("ACT", "RD RDA", "nRCDRD"),
        ("ACT", "WR WRA", "nRCDWR"),
        ("ACT", "PRE", "nRAS"),
        ("PRE", "ACT", "nRP"),
        ("RD", "PRE", "nRTPL"),
        ("WR", "PRE", "nCWL + nBL + nWR"),
        ("RDA", "ACT", "nRTPL + nRP"),
        ("WRA", "ACT", "nCWL + nBL + nWR + nRP"),
    ])
    return tuple(rows)


_R2_TIMING_2GBPS = dict(zip(_R2_TIMINGS, (2000, 4, 7, 7, 7, 7, 17, 19, 8, 2, 3, 2, 1, 2, 2, 3, 3, 4, 3,
                                          15, -1, 160, 3900, -1, 8, 1000)))


def _r2_finish_timings(preset: dict[str, int], density_mb: int) -> dict[str, int]:
    """Ramulator 2.0's set_timing_vals(): tCK from rate, nRFC/nREFISB from the density table."""
    t = dict(preset)
    tck_ps = int(1e6 / (t["rate"] / 2))
    t["tCK_ps"] = tck_ps
    trfc_ns = {2048: 160, 4096: 260, 8192: 350, 16384: 450}[density_mb]
    t["nRFC"] = _jedec_rounding(trfc_ns, tck_ps)
    t["nREFISB"] = _jedec_rounding(trfc_ns, tck_ps)
    return t


def _jedec_rounding(t_ns: float, tck_ps: int) -> int:
    """Ramulator 2.0's JEDEC_rounding (src/base/utils.cpp): ``(t_ps * 1000 / tCK_ps + 974) / 1000``."""
    t_ps = int(t_ns * 1000)
    return (t_ps * 1000 // tck_ps + 974) // 1000


R2_HBM3 = Standard(
    name="ramulator2-hbm3",
    description="Ramulator 2.0's HBM3 model (commit 5e58d25), rule for rule",
    levels=("channel", "pseudochannel", "bankgroup", "bank", "row", "column"),
    commands=_R2_COMMANDS,
    timing_names=_R2_TIMINGS,
    constraints=_r2_constraints(),
    org_presets={
        "HBM3_2Gb": dict(density=2 << 10, dq=128, channel=1, pseudochannel=2, bankgroup=4, bank=4, row=1 << 13, column=1 << 6),
        "HBM3_4Gb": dict(density=4 << 10, dq=128, channel=1, pseudochannel=2, bankgroup=4, bank=4, row=1 << 14, column=1 << 6),
        "HBM3_8Gb": dict(density=8 << 10, dq=128, channel=1, pseudochannel=2, bankgroup=4, bank=4, row=1 << 15, column=1 << 6),
    },
    timing_presets={"HBM3_2Gbps": _R2_TIMING_2GBPS},
    controller_level="channel",
    refresh=False,
    prefetch=2,
    channel_width_bits=64,
    notes=(
        "no refresh is ever issued: AllBankRefresh looks for a 'rank' level, which HBM3 lacks",
        "nBL (data bus) and nCCDS are enforced per pseudo-channel, one controller per channel",
        "PREA and REFab check only channel-level ready times (their scope); their pseudo-channel rows are recorded but never checked",
        "a LoadStoreTrace run ends when the last request is accepted, not completed",
    ),
)

# HBM2.cpp differs from HBM3.cpp only in its presets (and lacks the RFM commands, which never issue).
R2_HBM2 = dataclasses.replace(
    R2_HBM3,
    name="ramulator2-hbm2",
    description="Ramulator 2.0's HBM2 model (commit 5e58d25), rule for rule",
    org_presets={
        "HBM2_2Gb": dict(density=2 << 10, dq=128, channel=1, pseudochannel=2, bankgroup=4, bank=2, row=1 << 14, column=1 << 6),
        "HBM2_4Gb": dict(density=4 << 10, dq=128, channel=1, pseudochannel=2, bankgroup=4, bank=4, row=1 << 14, column=1 << 6),
        "HBM2_8Gb": dict(density=8 << 10, dq=128, channel=1, pseudochannel=2, bankgroup=4, bank=4, row=1 << 15, column=1 << 6),
    },
    timing_presets={"HBM2_2Gbps": _R2_TIMING_2GBPS},
)


# --------------------------------------------------------------------------------------------
# JEDEC standards (sievesim's own): HBM3 per JESD238 with SIDs, HBM2 per JESD235.
# One controller per pseudo-channel, all-bank refresh every nREFI, PREA/REFab checked on
# every bank they close or refresh.
# --------------------------------------------------------------------------------------------

_JEDEC_COMMANDS = (
    Command("ACT", "row", opening=True, action="open"),
    Command("PRE", "bank", closing=True, action="close"),
    Command("PREA", "pseudochannel", closing=True, action="close_all", check_level="bank"),
    Command("RD", "column", accessing=True, prereq="row_open"),
    Command("WR", "column", accessing=True, prereq="row_open"),
    Command("RDA", "column", closing=True, accessing=True, action="close"),
    Command("WRA", "column", closing=True, accessing=True, action="close"),
    Command("REFab", "pseudochannel", refreshing=True, prereq="all_closed", check_level="bank"),
)

# Bank-level PIM (AttAcc / NeuPIMs / Duplex style): all-bank commands on one pseudo-channel.
_PIM_COMMANDS = (
    Command("ACTAB", "pseudochannel", action="pim_open", pim=True),      # same row, every bank
    Command("PREAB", "pseudochannel", action="pim_close", pim=True),     # close the PIM rows
    Command("MACAB", "pseudochannel", prereq="pim_row_open", pim=True),  # one column per bank, 16 MACs per PU
    Command("GWRITE", "pseudochannel", pim=True),                        # 32 B of input into the global buffer
    Command("RDRES", "pseudochannel", pim=True),                         # 32 B of accumulators to the GPU
)

_JEDEC_TIMINGS = ("rate", "tCK_ps", "nBL", "nCL", "nCWL", "nRCDRD", "nRCDWR", "nRP", "nRAS", "nRC",
                  "nWR", "nRTPS", "nRTPL", "nCCDS", "nCCDL", "nCCDR", "nRRDS", "nRRDL", "nWTRS",
                  "nWTRL", "nRTW", "nFAW", "nPPD", "nRFC", "nREFI")


def _pim_constraints() -> list[TimingConstraint]:
    """PIM rows, all at the pseudo-channel (every bank moves in lockstep). See docs/pim.md."""
    rows = _rows("pseudochannel", [
        ("ACTAB", "MACAB", "nRCDRD"),
        ("ACTAB", "PREAB", "nRAS"),
        ("ACTAB", "ACTAB", "nRC"),
        ("PREAB", "ACTAB", "nRP"),
        ("MACAB", "MACAB", "nCCDAB"),
        ("MACAB", "PREAB", "nRTPL"),
        ("MACAB", "RDRES", "nCCDAB"),                 # last MAC retired before its result is read
        ("ACT", "ACTAB", "nRRDS"), ("ACTAB", "ACT", "nRRDS"),
        ("ACTAB", "ACT PRE PREA REFab PREAB", "2"),   # row command bus, as ACT
        # data bus: GWRITE is a write burst, RDRES a read burst
        ("GWRITE", "GWRITE", "nBL"),
        ("GWRITE", "MACAB", "nCWL + nBL"),            # input must be in the global buffer
        ("WR WRA", "GWRITE", "nBL"), ("GWRITE", "WR WRA", "nBL"),
        ("RD RDA RDRES", "GWRITE", "nRTW"),
        ("GWRITE", "RD RDA RDRES", "nCWL + nBL + nWTRS"),
        ("RDRES", "RDRES", "nBL"), ("RD RDA", "RDRES", "nBL"), ("RDRES", "RD RDA", "nBL"),
        ("RDRES", "WR WRA", "nRTW"),
        ("WR WRA", "RDRES", "nCWL + nBL + nWTRS"),
        # refresh closes PIM rows too
        ("ACTAB", "REFab", "nRC"),
        ("PREAB", "REFab", "nRP"),
        ("REFab", "ACTAB", "nRFC"),
    ])
    # one row buffer per bank: normal and PIM rows exclude each other
    rows += _rows("pseudochannel", [
        ("PREAB", "ACT", "nRP"),
        ("PRE PREA", "ACTAB", "nRP"),
        ("RD", "ACTAB", "nRTPL + nRP"),
        ("WR", "ACTAB", "nCWL + nBL + nWR + nRP"),
    ], single_buffer_only=True)
    return rows


def _jedec_constraints(with_sid: bool) -> tuple[TimingConstraint, ...]:
    rows: list[TimingConstraint] = _pim_constraints() if with_sid else []
    rows += _rows("pseudochannel", [
        ("ACT", "ACT PRE PREA REFab", "2"),          # ACT occupies the row command bus 2 CK
        ("ACT", "ACT", "nRRDS"),
        ("ACT", "ACT", "nFAW", 4),
        ("RD RDA", "RD RDA", "nBL"),                 # data bus, per pseudo-channel
        ("WR WRA", "WR WRA", "nBL"),
        ("RD RDA", "WR WRA", "nRTW"),
        ("WR WRA", "RD RDA", "nCWL + nBL + nWTRS"),
        ("PRE PREA", "PRE PREA", "nPPD"),
        ("REFab", "ACT PREA REFab", "nRFC"),
    ])
    column_level = "sid" if with_sid else "pseudochannel"
    rows += _rows(column_level, [
        ("RD RDA", "RD RDA", "nCCDS"),
        ("WR WRA", "WR WRA", "nCCDS"),
    ])
    if with_sid:
        rows += _rows("sid", [("RD RDA", "RD RDA", "nCCDR", 1, True)])
    rows += _rows("bankgroup", [
        ("RD RDA", "RD RDA", "nCCDL"),
        ("WR WRA", "WR WRA", "nCCDL"),
        ("WR WRA", "RD RDA", "nCWL + nBL + nWTRL"),
        ("ACT", "ACT", "nRRDL"),
    ])
    rows += _rows("bank", [
        ("ACT", "ACT", "nRC"),
        ("ACT", "RD RDA", "nRCDRD"),
        ("ACT", "WR WRA", "nRCDWR"),
        ("ACT", "PRE PREA", "nRAS"),
        ("PRE PREA", "ACT", "nRP"),
        ("RD", "PRE PREA", "nRTPL"),
        ("WR", "PRE PREA", "nCWL + nBL + nWR"),
        ("RDA", "ACT", "nRTPL + nRP"),
        ("WRA", "ACT", "nCWL + nBL + nWR + nRP"),
        ("ACT", "REFab", "nRC"),
        ("PRE PREA", "REFab", "nRP"),
        ("RDA", "REFab", "nRTPL + nRP"),
        ("WRA", "REFab", "nCWL + nBL + nWR + nRP"),
    ])
    return tuple(rows)


HBM3 = Standard(
    name="hbm3",
    description="HBM3 per JEDEC JESD238: 16 channels x 2 pseudo-channels, SIDs, all-bank refresh, bank-level PIM",
    levels=("channel", "pseudochannel", "sid", "bankgroup", "bank", "row", "column"),
    commands=_JEDEC_COMMANDS + _PIM_COMMANDS,
    timing_names=_JEDEC_TIMINGS + ("nCCDAB",),
    constraints=_jedec_constraints(with_sid=True),
    org_presets={
        # per stack: 16 channels x 2 PCs; 32 columns of 32 B (DQ 32 x BL8) = 1 KB row per PC
        "HBM3_16Gb_8hi": dict(channel=16, pseudochannel=2, sid=2, bankgroup=4, bank=4, row=1 << 14, column=1 << 5),
        # HBM3E 24 Gb, 12-high (3 SIDs): 24 GB per stack (facts.md section 3, LLMSimulator hbm3e_192GB)
        "HBM3E_24Gb_12hi": dict(channel=16, pseudochannel=2, sid=3, bankgroup=4, bank=4, row=1 << 14, column=1 << 5),
    },
    timing_presets={
        # JESD238 Table 4 values as collected in Ramulator 2.1 (facts.md section 3); tCK 625 ps.
        # nRTPS = nRTPL = tRTP; nRFC: tRFC 450 ns (8-16 Gb channel) / 0.625 ns; nREFI: 3.9 us.
        "HBM3_6400": dict(rate=6400, tCK_ps=625, nBL=2, nCL=20, nCWL=10, nRCDRD=31, nRCDWR=15, nRP=26,
                          nRAS=45, nRC=72, nWR=33, nRTPS=9, nRTPL=9, nCCDS=2, nCCDL=4, nCCDR=3,
                          nRRDS=4, nRRDL=5, nWTRS=7, nWTRL=10, nRTW=20, nFAW=24, nPPD=2, nRFC=720,
                          nREFI=6240, nCCDAB=6),
        # HBM3E 8.0 Gb/s (facts.md section 3: LLMSimulator/Duplex HBM3_8.0Gbps), tCK 500 ps.
        # nRTW = nCL + nBL + 2 - nCWL (the patch's nRTW 3 is unused by its rules); nCCDR = nCCDS + 1;
        # nRFC: tRFC 450 ns (12 Gb channel) / 0.5 ns; nREFI 7800 = 3.9 us.
        "HBM3E_8000": dict(rate=8000, tCK_ps=500, nBL=2, nCL=28, nCWL=8, nRCDRD=28, nRCDWR=28, nRP=28,
                           nRAS=68, nRC=96, nWR=32, nRTPS=8, nRTPL=12, nCCDS=2, nCCDL=4, nCCDR=3,
                           nRRDS=2, nRRDL=4, nWTRS=12, nWTRL=16, nRTW=24, nFAW=60, nPPD=2, nRFC=900,
                           nREFI=7800, nCCDAB=6),
    },
    controller_level="pseudochannel",
    refresh=True,
    prefetch=1,
    channel_width_bits=256,   # one column = one 32-byte burst (DQ 32 x BL8)
)

HBM2 = Standard(
    name="hbm2",
    description="HBM2 per JEDEC JESD235 (pseudo-channel mode): 8 channels x 2 pseudo-channels",
    levels=("channel", "pseudochannel", "bankgroup", "bank", "row", "column"),
    commands=_JEDEC_COMMANDS,
    timing_names=tuple(n for n in _JEDEC_TIMINGS if n != "nCCDR"),
    constraints=_jedec_constraints(with_sid=False),
    org_presets={
        # 8 Gb per channel: 2 PCs x 16 banks x 16384 rows x 32 columns of 32 B (DQ 64 x BL4)
        "HBM2_8Gb": dict(channel=8, pseudochannel=2, bankgroup=4, bank=4, row=1 << 14, column=1 << 5),
    },
    timing_presets={
        # 2.0 Gb/s, tCK 1 ns. CL/tRCD/tRP/tRAS/tFAW from NeuPIMs' HBM2 config (facts.md section 4);
        # the rest in the JESD235 ranges used by DRAMsim3's HBM2 config. nRFC 350 ns, nREFI 3.9 us.
        "HBM2_2000": dict(rate=2000, tCK_ps=1000, nBL=2, nCL=14, nCWL=4, nRCDRD=14, nRCDWR=10, nRP=14,
                          nRAS=34, nRC=48, nWR=16, nRTPS=4, nRTPL=5, nCCDS=2, nCCDL=4, nRRDS=4,
                          nRRDL=6, nWTRS=3, nWTRL=8, nRTW=14, nFAW=30, nPPD=2, nRFC=350, nREFI=3900),
    },
    controller_level="pseudochannel",
    refresh=True,
    prefetch=1,
    channel_width_bits=256,
)

HBM2_PIM = Standard(
    name="hbm2-pim",
    description="HBM2 (JESD235, pseudo-channel mode) with bank-level PIM commands, as Samsung's HBM2-PIM "
                "(Aquabolt-XL) drives them in all-bank mode",
    levels=HBM2.levels,
    commands=_JEDEC_COMMANDS + _PIM_COMMANDS,
    timing_names=HBM2.timing_names + ("nCCDAB",),
    constraints=tuple(_pim_constraints()) + _jedec_constraints(with_sid=False),
    org_presets={
        # the PIM dies' 16 pseudo-channels per cube: 16 banks x 16384 rows x 32 columns of 32 B
        # (SAITPublic/PIMSimulator ini/HBM2_samsung_2M_16B_x64.ini: NUM_BANKS 16, NUM_ROWS 16384,
        # NUM_COLS 128 of 64 bits at BL4 = 32 bursts of 32 B per 1 KB row)
        "HBM2_PIM_32Gb": dict(channel=8, pseudochannel=2, bankgroup=4, bank=4, row=1 << 14, column=1 << 5),
    },
    timing_presets={
        # Aquabolt-XL at 2.4 Gb/s (ISSCC 2021, Kwon et al.: tCK 833 ps), cycle counts of Samsung's
        # PIMSimulator (ini/HBM2_samsung_2M_16B_x64.ini): RL 20, WL 8, BL4 (2 CK), tRCDRD 14,
        # tRCDWR 10, tRP 14, tRAS 33, tRC 47, tWR 16, tRTPS 4, tRTPL 5, tCCDS 2, tCCDL 4, tRRDS 4,
        # tRRDL 6, tWTRS 4, tWTRL 9, tXAW 16, tRFC 350, tREFI 3900. nRTW = RL + BL/2 + tRTRS - WL
        # = 15 (DRAMSim2's READ_TO_WRITE_DELAY, tRTRS 1); nPPD 2 as hbm2-2000. nCCDAB = tCCDL = 4:
        # PIMSimulator's MAC column commands go to one bank group (PIMKernel::computeGemv).
        "HBM2_PIM_2400": dict(rate=2400, tCK_ps=833, nBL=2, nCL=20, nCWL=8, nRCDRD=14, nRCDWR=10, nRP=14,
                              nRAS=33, nRC=47, nWR=16, nRTPS=4, nRTPL=5, nCCDS=2, nCCDL=4, nRRDS=4,
                              nRRDL=6, nWTRS=4, nWTRL=9, nRTW=15, nFAW=16, nPPD=2, nRFC=350, nREFI=3900,
                              nCCDAB=4),
    },
    controller_level="pseudochannel",
    refresh=True,
    prefetch=1,
    channel_width_bits=256,
)

STANDARDS: dict[str, Standard] = {s.name: s for s in (HBM3, HBM2, HBM2_PIM, R2_HBM3, R2_HBM2)}


def get_standard(name: str) -> Standard:
    """Look up a standard by name (``hbm3``, ``hbm2``, ``hbm2-pim``, ``ramulator2-hbm3``, ``ramulator2-hbm2``)."""
    if not isinstance(name, str) or name not in STANDARDS:
        raise field_error("standard", name, f"one of {sorted(STANDARDS)}")
    return STANDARDS[name]
