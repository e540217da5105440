"""Chrome trace (Perfetto) export of an executed schedule.

One process per GPU, one thread (track) per resource of that GPU, one complete event (``"ph":
"X"``) per node with its layer, kind and expert ids in ``args``. Nodes that hold no resource (the
decision) go on a track of their own. Times are microseconds, as the format wants.
"""
from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from .dag import Schedule

__all__ = ["chrome_trace", "write_chrome_trace"]

_TRACKS = ("gpu", "hbm", "pim", "tx", "rx", "decision")


def chrome_trace(schedule: Schedule) -> dict[str, Any]:
    """The schedule as a Chrome trace-event JSON object (``{"traceEvents": [...]}``)."""
    g = schedule.graph
    events: list[dict[str, Any]] = []
    gpus = sorted({int(meta.get("gpu", 0)) for meta in g.meta})
    for gpu in gpus:
        events.append({"ph": "M", "name": "process_name", "pid": gpu, "args": {"name": f"GPU {gpu}"}})
        for tid, track in enumerate(_TRACKS):
            events.append({"ph": "M", "name": "thread_name", "pid": gpu, "tid": tid, "args": {"name": track}})
    for i, name in enumerate(g.names):
        meta = g.meta[i]
        gpu = int(meta.get("gpu", 0))
        tracks = [r.split(".", 1)[1] for r in g.resources[i]] or ["decision"]
        args = {k: (np.flatnonzero(v).tolist() if isinstance(v, np.ndarray) else v)
                for k, v in meta.items() if k != "gpu"}
        for track in tracks:
            tid = _TRACKS.index(track) if track in _TRACKS else len(_TRACKS)
            events.append({"ph": "X", "name": name, "cat": str(meta.get("kind", "")), "pid": gpu, "tid": tid,
                           "ts": schedule.start[i] * 1e6, "dur": (schedule.end[i] - schedule.start[i]) * 1e6,
                           "args": args})
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def write_chrome_trace(schedule: Schedule, path: str | os.PathLike[str]) -> None:
    """Write :func:`chrome_trace` to ``path`` (open it at https://ui.perfetto.dev)."""
    from .._outputs import open_output

    with open_output(path, "Chrome trace", text=True) as fh:
        json.dump(chrome_trace(schedule), fh)
