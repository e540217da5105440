"""Latency and throughput of a served workload: TTFT, TPOT, end-to-end, goodput, Little's law.

Per request: TTFT = first output token - arrival; TPOT = (finish - first token) / (output - 1)
(requests of one output token have no TPOT and meet any TPOT target); end-to-end = finish - arrival;
queueing = first admission - arrival. Aggregates over the finished requests: mean, p50, p90, p99
(linear interpolation between order statistics). Times in seconds.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["SloTargets", "summary", "per_request_rows", "littles_law_ratio", "write_csv", "steady_window",
           "WINDOW_EDGE", "WINDOW_RULE"]

#: Share of the arrivals left out at each end of the steady-state window: the first (warm-up, the
#: batch filling) and the last (drain, the batch emptying once arrivals stop).
WINDOW_EDGE = 0.1
#: The steady-state window in words (``serve``'s output and JSON).
WINDOW_RULE = ("the requests arriving after the first 10 % and before the last 10 % of the arrivals; goodput = "
               "those meeting every SLO / the time between the first and the first after them arriving")
#: Runs whose arrivals span fewer than this many median service times are too short to reach a
#: steady state (the first 10 % of the arrivals, left out as warm-up, last less than one service time).
WINDOW_SERVICE_TIMES = 10.0


@dataclass(frozen=True)
class SloTargets:
    """Service-level objectives [s] (``None``: no target) and the share of requests that must meet
    all of them for a rate to count as meeting the SLOs (DistServe's SLO attainment)."""

    ttft_s: float | None = 2.0
    tpot_s: float | None = 0.05
    e2e_s: float | None = None
    attainment: float = 0.9

    def as_dict(self) -> dict[str, Any]:
        return {"ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "e2e_s": self.e2e_s, "attainment": self.attainment}


def summary(x: np.ndarray) -> dict[str, float]:
    """mean, p50, p90, p99 of ``x`` (NaN for no values)."""
    x = np.asarray(x, dtype=float)
    x = x[~np.isnan(x)]
    if not x.size:
        return {"mean": math.nan, "p50": math.nan, "p90": math.nan, "p99": math.nan}
    p50, p90, p99 = np.percentile(x, [50, 90, 99])
    return {"mean": float(x.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99)}


def request_latencies(arrival: np.ndarray, output: np.ndarray, first: np.ndarray, finish: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TTFT, TPOT and end-to-end latency of every request (NaN where not reached)."""
    ttft = first - arrival
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(output > 1, (finish - first) / np.maximum(output - 1, 1), np.nan)
    return ttft, tpot, finish - arrival


def meets_slos(slo: SloTargets, ttft: np.ndarray, tpot: np.ndarray, e2e: np.ndarray) -> np.ndarray:
    """Finished requests that meet every target (bool per request)."""
    ok = ~np.isnan(e2e)
    for target, x, nan_ok in ((slo.ttft_s, ttft, False), (slo.tpot_s, tpot, True), (slo.e2e_s, e2e, False)):
        if target is not None:
            ok &= (x <= target) | (nan_ok & np.isnan(x))
    return ok


def littles_law_ratio(arrival: np.ndarray, finish: np.ndarray, end_s: float,
                      it_start: list[float], it_time: list[float], in_system: np.ndarray) -> float:
    """(mean requests in the system) / (arrival rate x mean time in the system) over the arrival
    window ``[0, last arrival]``. The mean in the system is the time average of the scheduler's own
    count (waiting + running at each iteration's start, 0 while idle); the time in the system is
    finish - arrival (the end of the run for unfinished requests) of the requests that arrived in
    the window; the arrival rate is theirs (arrivals / window), not the workload's nominal rate, so
    that the ratio checks the simulator's bookkeeping rather than the sampling noise of arrivals.
    Near 1 once the window is long against the time in the system."""
    window = float(arrival[-1]) if arrival.size else 0.0
    if window <= 0 or not it_start:
        return math.nan
    s = np.asarray(it_start)
    e = np.minimum(s + np.asarray(it_time), window)
    overlap = np.clip(e - s, 0.0, None)
    mean_n = float((overlap * in_system).sum() / window)
    w = np.where(np.isnan(finish), end_s, finish) - arrival
    return mean_n / (arrival.size / window * float(w.mean()))


def per_request_rows(arrival: np.ndarray, prompt: np.ndarray, output: np.ndarray, scheduled: np.ndarray,
                     first: np.ndarray, finish: np.ndarray, preemptions: np.ndarray,
                     met: np.ndarray) -> list[dict[str, Any]]:
    """One row per request (for ``--requests-csv``)."""
    ttft, tpot, e2e = request_latencies(arrival, output, first, finish)
    return [{"request": i, "arrival_s": float(arrival[i]), "prompt_tokens": int(prompt[i]),
             "output_tokens": int(output[i]), "queue_s": float(scheduled[i] - arrival[i]), "ttft_s": float(ttft[i]),
             "tpot_s": float(tpot[i]), "e2e_s": float(e2e[i]), "preemptions": int(preemptions[i]),
             "meets_slos": bool(met[i])} for i in range(arrival.size)]


def write_csv(path: str, rows: list[dict[str, Any]], what: str = "CSV file") -> None:
    """Rows as CSV with a header (an empty file when there are no rows), written atomically
    (:func:`sievesim._outputs.open_output`: a full disk leaves an earlier file as it was)."""
    import io

    from .._outputs import write_output

    buf = io.StringIO(newline="")
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    write_output(path, buf.getvalue(), what)


def steady_window(arrival: np.ndarray, scheduled: np.ndarray, finish: np.ndarray,
                  edge: float = WINDOW_EDGE) -> dict[str, Any]:
    """The steady-state window of a run's arrived requests (in arrival order; times [s]): requests
    ``first`` to ``stop - 1``, those after the first ``edge`` and before the last ``edge`` of the
    arrivals (:data:`WINDOW_RULE`), over ``start_s`` = the first's arrival to ``end_s`` = the
    arrival of the first after them. ``reached`` says whether the left-out warm-up (``warmup_s``,
    the first arrivals' span) lasts at least the window's median time in service (admission to
    finish, ``service_s``): a shorter run measures a batch still filling. A window of fewer than
    two requests or of no duration (a burst) is ``empty``: the caller reports the whole run.
    ``arrival_window_s`` is the span of arrivals that would reach it (:data:`WINDOW_SERVICE_TIMES`
    median service times; None when no request of the window finished)."""
    n = int(arrival.size)
    k = int(math.ceil(edge * n - 1e-9))
    first, stop = k, n - k
    out: dict[str, Any] = {"rule": WINDOW_RULE, "first": first, "stop": stop, "requests": max(0, stop - first),
                           "start_s": math.nan, "end_s": math.nan, "warmup_s": math.nan, "service_s": math.nan,
                           "empty": True, "reached": False, "arrival_window_s": None}
    if stop - first < 2 or not arrival[stop] > arrival[first]:
        return out
    sel = slice(first, stop)
    service = (finish[sel] - scheduled[sel])[~np.isnan(finish[sel])]
    out.update(start_s=float(arrival[first]), end_s=float(arrival[stop]), empty=False,
               warmup_s=float(arrival[first] - arrival[0]))
    if service.size:
        med = float(np.median(service))
        out.update(service_s=med, reached=bool(out["warmup_s"] >= med),
                   arrival_window_s=float(math.ceil(WINDOW_SERVICE_TIMES * med)))
    return out
