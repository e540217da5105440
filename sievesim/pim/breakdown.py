"""Where a PIM program's cycles go, read from the engine's command log.

Every cycle of a program's duration (from its release to its last result on the GPU) is given to
one component, so the components add up to the duration exactly:

- ``mac``: nCCDAB after every MACAB (its issue slot; less if the next command comes sooner);
- ``row``: the waits after ACTAB (nRCDRD to the first MAC) and after PREAB (nRP), and the part of
  a MACAB's gap beyond nCCDAB before a PREAB (nRTPL): opening and closing rows;
- ``gwrite``: the gaps after GWRITEs (the burst, nBL, and the GWRITE -> MACAB wait nCWL + nBL),
  and the part of a MACAB's gap beyond nCCDAB before a GWRITE;
- ``readout``: the gaps after RDRES (nBL each, the RDRES -> GWRITE turnaround) and from the
  last command to the last result's arrival (nCL + nBL);
- ``refresh``: every cycle inside a refresh's tRFC (a refresh running at the release included;
  GWRITE / RDRES issued in its shadow are hidden by it), the PREAB that closes a row for a
  refresh (its nRP) and the ACTAB that re-opens a row after it (its nRCDRD);
- ``other``: anything else (a MACAB gap beyond nCCDAB before another MACAB, normal traffic).

A run at several refresh phases gives the weighted mean of its copies' breakdowns (the same
weights as :attr:`PIMResult.mean_phase_cycles`), or the slowest copy's (``slowest=True``: the
"staggered" timing of a job over several pseudo-channels).
"""
from __future__ import annotations

import numpy as np

from ..dram.config import DRAMConfig
from ..errors import field_error
from .engine import PIMResult

__all__ = ["COMPONENTS", "COUNTED", "program_breakdown", "copy_breakdown", "command_counts"]

COMPONENTS = ("mac", "row", "gwrite", "readout", "refresh", "other")


def _overlap(a: int, b: int, windows: list[tuple[int, int]]) -> int:
    return sum(max(0, min(b, hi) - max(a, lo)) for lo, hi in windows)


def copy_breakdown(cycles: np.ndarray, names: list[str], release: int, end: int,
                   timings: dict) -> dict[str, int]:
    """Cycles per component of one program copy whose commands were issued at ``cycles`` (in
    order, names ``names``; commands before ``release`` only tell a refresh already running),
    released at ``release`` and done at ``end`` [cycles]."""
    out = dict.fromkeys(COMPONENTS, 0)
    n_ccdab, n_rfc = int(timings["nCCDAB"]), int(timings["nRFC"])
    # every refresh's tRFC: the banks are blocked; data-bus commands in its shadow are hidden by it
    windows = [(int(c), int(c) + n_rfc) for c, n in zip(cycles, names) if n == "REFab"]

    def give(category: str, a: int, b: int) -> None:
        if b <= a:
            return
        hidden = _overlap(a, b, windows)
        out["refresh"] += hidden
        out[category] += b - a - hidden

    inside = (cycles >= release) & (cycles < end)      # the channel refreshes on after the program
    cyc = [int(c) for c in cycles[inside]]
    nm = [n for n, i in zip(names, inside) if i]
    give("other", release, cyc[0] if cyc else end)
    for i, name in enumerate(nm):
        a, b = cyc[i], (cyc[i + 1] if i + 1 < len(nm) else end)
        nxt = nm[i + 1] if i + 1 < len(nm) else None
        prev = nm[i - 1] if i > 0 else None
        if name == "MACAB":
            mac = min(b - a, n_ccdab)
            give("mac", a, a + mac)
            if nxt == "PREAB":
                after = nm[i + 2] if i + 2 < len(nm) else None
                rest = "refresh" if after == "REFab" else "row"
            else:
                rest = {"GWRITE": "gwrite", "RDRES": "readout", None: "readout", "REFab": "refresh"}.get(nxt, "other")
            give(rest, a + mac, b)
        elif name == "ACTAB":
            give("refresh" if prev == "REFab" else "row", a, b)
        elif name == "PREAB":
            give("refresh" if nxt == "REFab" else "row", a, b)
        elif name == "REFab":
            give("refresh", a, b)
        elif name == "GWRITE":
            give("gwrite", a, b)
        elif name == "RDRES":
            give("readout", a, b)
        else:
            give("other", a, b)
    return out


def _copies(result: PIMResult, config: DRAMConfig) -> list[tuple[np.ndarray, list[str], int, int]]:
    """Per program copy: its commands' cycles and names (in issue order), release and end."""
    log = result.command_log
    if log is None:
        raise field_error("result", "a run without a command log", "a run with log_commands=True")
    names_all = np.array(log["names"])[log["command"].astype(np.int64)]
    channel = log["addr"][:, 0]
    durations = result.phase_cycles or [result.cycles]
    interval = int(config.timings["nREFI"])
    releases = [interval + int(p) for p in result.phases] if result.phases else [0] * len(durations)
    out = []
    for k, (rel, dur) in enumerate(zip(releases, durations)):
        sel = channel == k
        order = np.argsort(log["cycle"][sel], kind="stable")
        out.append((log["cycle"][sel][order], [str(n) for n in names_all[sel][order]], rel, rel + int(dur)))
    return out


def _combine(result: PIMResult, parts: list[dict], slowest: bool) -> dict[str, float]:
    keys = list(parts[0])
    if slowest or not result.phase_cycles:
        k = int(np.argmax(result.phase_cycles)) if slowest and result.phase_cycles else 0
        return {c: float(parts[k][c]) for c in keys}
    n = len(parts)
    w = np.asarray(result.phase_weights or [1.0 / n] * n, dtype=float)
    return {c: float(np.dot(w, [p[c] for p in parts])) for c in keys}


def program_breakdown(result: PIMResult, config: DRAMConfig, *, slowest: bool = False) -> dict[str, float]:
    """Cycles per component (:data:`COMPONENTS`) of the program ``result`` ran, from its command
    log (run with ``log_commands=True``); they add up to its duration: the weighted mean over its
    refresh phases (``result.mean_phase_cycles``), the slowest phase (``slowest``), or the one
    run. ``config``: a configuration with the timings it ran with."""
    parts = [copy_breakdown(cyc, names, rel, end, config.timings) for cyc, names, rel, end in _copies(result, config)]
    return _combine(result, parts, slowest)


#: Commands :func:`command_counts` counts.
COUNTED = ("MACAB", "ACTAB", "PREAB", "GWRITE", "RDRES", "REFab")


def command_counts(result: PIMResult, config: DRAMConfig, *, slowest: bool = False) -> dict[str, float]:
    """Commands (:data:`COUNTED`) issued between the program's release and its end, per copy,
    combined over the refresh phases as :func:`program_breakdown` (a refresh that is running at
    the release was issued before it and is not counted)."""
    parts = []
    for cyc, names, rel, end in _copies(result, config):
        inside = [n for c, n in zip(cyc, names) if rel <= c < end]
        parts.append({k: inside.count(k) for k in COUNTED})
    return _combine(result, parts, slowest)
