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
- ``refresh``: a refresh running at the release, the PREAB that closes a row for a refresh
  (its nRP), the REFab (nRFC) and the ACTAB that re-opens a row after it (its nRCDRD);
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


def copy_breakdown(cycles: np.ndarray, names: list[str], release: int, end: int,
                   timings: dict) -> dict[str, int]:
    """Cycles per component of one program copy whose commands were issued at ``cycles`` (in
    order, names ``names``), released at ``release`` and done at ``end`` [cycles]."""
    out = dict.fromkeys(COMPONENTS, 0)
    n_ccdab, n_rfc = int(timings["nCCDAB"]), int(timings["nRFC"])
    inside = cycles >= release
    before = cycles[~inside]
    refs_before = [c for c, n in zip(before, [n for n, i in zip(names, inside) if not i]) if n == "REFab"]
    cyc = cycles[inside]
    nm = [n for n, i in zip(names, inside) if i]
    if not len(cyc):
        out["other"] = end - release
        return out
    head = int(cyc[0]) - release
    refreshing = bool(refs_before) and release < refs_before[-1] + n_rfc
    out["refresh" if refreshing else "other"] += head
    for i, name in enumerate(nm):
        gap = (int(cyc[i + 1]) if i + 1 < len(nm) else end) - int(cyc[i])
        nxt = nm[i + 1] if i + 1 < len(nm) else None
        prev = nm[i - 1] if i > 0 else None
        if name == "MACAB":
            mac = min(gap, n_ccdab)
            out["mac"] += mac
            rest = gap - mac
            if nxt == "PREAB":
                after = nm[i + 2] if i + 2 < len(nm) else None
                out["refresh" if after == "REFab" else "row"] += rest
            elif nxt == "GWRITE":
                out["gwrite"] += rest
            elif nxt == "RDRES" or nxt is None:
                out["readout"] += rest
            elif nxt == "REFab":
                out["refresh"] += rest
            else:
                out["other"] += rest
        elif name == "ACTAB":
            out["refresh" if prev == "REFab" else "row"] += gap
        elif name == "PREAB":
            out["refresh" if nxt == "REFab" else "row"] += gap
        elif name == "REFab":
            out["refresh"] += gap
        elif name == "GWRITE":
            out["gwrite"] += gap
        elif name == "RDRES":
            out["readout"] += gap
        else:
            out["other"] += gap
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
