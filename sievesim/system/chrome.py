"""Chrome trace (Perfetto) export of an executed schedule.

* One process per GPU, one thread (track) per kind of resource of that GPU (``gpu``, ``hbm``,
  ``pim``, ``tx``) and a ``decision`` track for the nodes that hold no resource.
* Each node is one complete event (``"ph": "X"``) on **one** track, that of the first resource
  it holds (a GPU kernel that holds ``gpu`` and ``hbm`` is on the ``gpu`` track, a transfer that
  holds ``tx`` and ``rx`` on the ``tx`` track), so that summing a track never counts a node twice.
  Its ``args`` say what it holds (``resources``) and the work it stands for where known:
  ``tokens``, ``context_tokens``, ``experts`` (global ids), ``bytes``, ``flops``,
  ``engine_cycles`` (PIM nodes), with its ``layer``, ``microbatch`` and ``kind``.
* Every dependency is a flow arrow (``"ph": "s"`` on the node it leaves, ``"ph": "f"`` on the
  node it enters), so Perfetto shows why a node waited.
* Counters per GPU: ``HBM GB/s`` (bytes per second of the nodes holding the GPU's HBM, whichever
  track they are on), ``PIM busy`` (1 while a node holds the GPU's PIM) and ``link rx busy``.

Times are microseconds, as the format wants. :meth:`sievesim.system.StepResult.nodes` gives the
same nodes as records.
"""
from __future__ import annotations

import json
import os
from typing import Any

from .dag import Schedule
from .result import schedule_nodes

__all__ = ["chrome_trace", "write_chrome_trace"]

_TRACKS = ("gpu", "hbm", "pim", "tx", "decision")
_WORK = ("tokens", "context_tokens", "bytes", "flops", "engine_cycles", "energy_j")


def _counter(events: list[dict[str, Any]], pid: int, name: str, key: str,
             spans: list[tuple[float, float, float]]) -> None:
    """A step-function counter from (start, end, value) spans that do not overlap."""
    changes: dict[float, float] = {}
    for start, end, value in spans:
        if end <= start:
            continue
        changes[start] = changes.get(start, 0.0) + value
        changes[end] = changes.get(end, 0.0) - value
    level = 0.0
    for t in sorted(changes):
        level += changes[t]
        if abs(level) < 1e-9:
            level = 0.0
        events.append({"ph": "C", "name": name, "pid": pid, "ts": t * 1e6, "args": {key: round(level, 6)}})


def chrome_trace(schedule: Schedule, *, flows: bool = True) -> dict[str, Any]:
    """The schedule as a Chrome trace-event JSON object (``{"traceEvents": [...]}``); ``flows``:
    one flow arrow per dependency (see the module docstring)."""
    nodes = schedule_nodes(schedule)
    events: list[dict[str, Any]] = []
    gpus = sorted({int(n.gpu or 0) for n in nodes})
    for gpu in gpus:
        events.append({"ph": "M", "name": "process_name", "pid": gpu, "args": {"name": f"GPU {gpu}"}})
        for tid, track in enumerate(_TRACKS):
            events.append({"ph": "M", "name": "thread_name", "pid": gpu, "tid": tid, "args": {"name": track}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": gpu, "tid": tid, "args": {"sort_index": tid}})
    where: list[tuple[int, int]] = []
    hbm: dict[int, list[tuple[float, float, float]]] = {g: [] for g in gpus}
    pim: dict[int, list[tuple[float, float, float]]] = {g: [] for g in gpus}
    rx: dict[int, list[tuple[float, float, float]]] = {g: [] for g in gpus}
    for n in nodes:
        gpu = int(n.gpu or 0)
        kinds = [r.split(".", 1)[1] for r in n.resources]
        track = kinds[0] if kinds else "decision"
        tid = _TRACKS.index(track) if track in _TRACKS else len(_TRACKS)
        where.append((gpu, tid))
        args: dict[str, Any] = {"id": n.id, "kind": n.kind, "layer": n.layer, "microbatch": n.microbatch,
                                "resources": list(n.resources)}
        for key in _WORK:
            value = getattr(n, key)
            if value is not None:
                args[key] = value
        if n.experts is not None:
            args["experts"] = list(n.experts)
        events.append({"ph": "X", "name": n.name, "cat": n.kind, "pid": gpu, "tid": tid,
                       "ts": n.start_s * 1e6, "dur": n.duration_s * 1e6, "args": args})
        if "hbm" in kinds and n.bytes is not None and n.duration_s > 0:
            hbm[gpu].append((n.start_s, n.end_s, n.bytes / n.duration_s / 1e9))
        if "pim" in kinds:
            pim[gpu].append((n.start_s, n.end_s, 1.0))
        if "rx" in kinds:
            rx[gpu].append((n.start_s, n.end_s, 1.0))
    if flows:
        flow = 0
        for n in nodes:
            for d in n.depends_on:
                src = nodes[d]
                flow += 1
                events.append({"ph": "s", "name": "dependency", "cat": "dependency", "id": flow,
                               "pid": where[d][0], "tid": where[d][1], "ts": src.start_s * 1e6})
                events.append({"ph": "f", "bp": "e", "name": "dependency", "cat": "dependency", "id": flow,
                               "pid": where[n.id][0], "tid": where[n.id][1], "ts": n.start_s * 1e6})
    for gpu in gpus:
        _counter(events, gpu, "HBM GB/s", "GB/s", hbm[gpu])
        _counter(events, gpu, "PIM busy", "busy", pim[gpu])
        _counter(events, gpu, "link rx busy", "busy", rx[gpu])
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def write_chrome_trace(schedule: Schedule, path: str | os.PathLike[str], *, flows: bool = True) -> None:
    """Write :func:`chrome_trace` to ``path`` (open it at https://ui.perfetto.dev)."""
    from .._outputs import open_output

    with open_output(path, "Chrome trace", text=True) as fh:
        json.dump(chrome_trace(schedule, flows=flows), fh)
