"""The result of a served workload: :class:`ServingResult` (what ``sievesim serve --json`` prints).

Per-request latencies (TTFT, TPOT, end-to-end), their aggregates, goodput under the SLOs, Little's
law, energy and the iteration log of :mod:`sievesim.serving.scheduler`. Times are in seconds,
energies in joules.

Energy (docs/energy.md, "Serving"): every iteration's executed step has its energy by resource
(GPU compute, HBM, PIM, links, static power over the step); the run's energy adds the static power
of the GPUs while no iteration runs (``idle``) and, disaggregated, the KV transfers' link energy.
A request's energy is its share of every iteration it took part in, by the tokens it computed
there (a decode request 1, a prefill chunk its length), plus its KV transfers: the requests'
energies sum to the run's energy less ``idle``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .metrics import (SloTargets, littles_law_ratio, meets_slos, per_request_rows, request_latencies, steady_window,
                      summary)
from .scheduler import ScheduleLog
from .workload import Requests

__all__ = ["ServingResult"]


@dataclass
class ServingResult:
    """A served workload: the settings, per-request latencies, aggregates and the iteration log.
    :meth:`to_dict` is what ``sievesim serve --json`` prints."""

    settings: dict[str, Any]
    requests: Requests
    log: ScheduleLog
    slo: SloTargets
    rate: float
    kv: dict[str, float]
    memo: dict[str, Any]
    wall_s: float
    static_power_w: float | None = None
    met: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        q, lg = self.requests, self.log
        self.ttft, self.tpot, self.e2e = request_latencies(q.arrival_s, q.output_tokens, lg.first_token_s, lg.finish_s)
        self.met = meets_slos(self.slo, self.ttft, self.tpot, self.e2e)
        parts = self.energy_breakdown()
        #: The run's energy [J] (None: the hardware has no energy model).
        self.energy_j: float | None = None if parts is None else math.fsum(parts.values())
        #: Each request's energy [J] (NaN without an energy model; see the module docstring).
        self.request_energy_j: np.ndarray = (np.full(len(q), np.nan) if parts is None
                                             else np.asarray(lg.request_energy_j, dtype=float))
        #: Each iteration's energy [J] (NaN without an energy model), as ``log.it_time`` [s].
        self.iteration_energy_j: np.ndarray = np.asarray(lg.it_energy_j, dtype=float)

    def energy_breakdown(self) -> dict[str, float] | None:
        """The run's energy by resource [J]: the iterations' (``RESOURCE_KINDS``) and ``idle`` (the
        GPUs' static power while no iteration runs); None without an energy model."""
        from ..system.energy import RESOURCE_KINDS

        lg = self.log
        if lg.energy_parts_j is None or self.static_power_w is None:
            return None
        out = dict(zip(RESOURCE_KINDS, (float(x) for x in lg.energy_parts_j)))
        out["idle"] = self.static_power_w * max(0.0, lg.end_s - math.fsum(lg.it_time))
        return out

    def _iterations_energy_j(self) -> float:
        """The energy of every iteration together [J]."""
        return math.fsum(self.log.it_energy_j)

    def _energy_fields(self, finished: np.ndarray, dur: float, iterations: int) -> dict[str, Any]:
        """``energy_j``, its breakdown, per request (summary over the finished ones), per output token,
        per iteration, tokens per joule, average power per GPU and goodput per joule (None each
        without an energy model)."""
        total, tokens = self.energy_j, int(self.log.generated.sum())
        parts = self.energy_breakdown()
        if total is None or parts is None:
            names = ("energy_j", "energy_breakdown_j", "energy_per_request_j", "energy_per_output_token_j",
                     "energy_per_iteration_j", "tokens_per_joule", "power_per_gpu_w", "goodput_requests_per_joule")
            return dict.fromkeys(names)
        return {"energy_j": total, "energy_breakdown_j": parts,
                "energy_per_request_j": summary(self.request_energy_j[finished]),
                "energy_per_output_token_j": total / tokens if tokens else math.nan,
                "energy_per_iteration_j": self._iterations_energy_j() / iterations if iterations else math.nan,
                "tokens_per_joule": tokens / total if total > 0 else math.nan,
                "power_per_gpu_w": total / dur / int(self.settings["gpus"]) if dur > 0 else math.nan,
                "goodput_requests_per_joule": float(self.met.sum()) / total if total > 0 else math.nan}

    def __repr__(self) -> str:
        """One line (the arrays stay in the fields: ``to_dict()`` for everything)."""
        s, done = self.settings, int(np.count_nonzero(~np.isnan(self.log.finish_s)))
        unit = f"({s['pimoe_unit']})" if s.get("pimoe_unit") else ""
        return (f"<{type(self).__name__} {s.get('model')} on {s.get('gpus')} x {s.get('hardware')}, "
                f"policy {s.get('policy')}{unit}, rate {s.get('rate'):.4g}/s, "
                f"{done}/{len(self.requests)} requests finished, SLOs met by {float(np.mean(self.met)) if self.met.size else 0.0:.0%}, "
                + (f"{self.energy_j:.4g} J, " if self.energy_j is not None else "")
                + f"GPU model {s.get('gpu_model')}>")

    def to_dict(self) -> dict[str, Any]:
        q, lg = self.requests, self.log
        horizon = self.settings.get("horizon_s")
        arrived = int(np.count_nonzero(q.arrival_s < horizon)) if horizon else len(q)
        finished = int(np.count_nonzero(~np.isnan(lg.finish_s)))
        dur = lg.end_s
        decode = np.asarray(lg.it_decode)
        running = np.asarray(lg.it_running) + 0
        in_system = np.asarray(lg.it_waiting) + running
        kv = np.asarray(lg.it_kv_blocks) / self.kv["blocks_per_gpu"]
        weights = np.asarray(lg.it_time)
        tw = weights.sum() or 1.0

        def tw_stats(x: np.ndarray) -> dict[str, float]:
            return {"mean": float((x * weights).sum() / tw) if x.size else 0.0, "max": float(x.max(initial=0))}

        whole = self._request_figures(slice(None), dur, arrived)
        win = steady_window(q.arrival_s[:arrived], lg.scheduled_s[:arrived], lg.finish_s[:arrived])
        window = {k: win[k] for k in ("rule", "requests", "start_s", "end_s", "warmup_s", "service_s", "reached")}
        window["measured_on"] = "whole run" if win["empty"] else "window"
        window["suggested_arrival_window_s"] = win["arrival_window_s"]
        shown = whole if win["empty"] else self._request_figures(slice(win["first"], win["stop"]),
                                                                 win["end_s"] - win["start_s"], win["stop"] - win["first"])
        out = dict(self.settings)
        out.update({
            "arrived_requests": arrived, "finished_requests": finished, "unfinished_requests": arrived - finished,
            **{k: shown[k] for k in ("ttft_s", "tpot_s", "e2e_s", "queue_s")},
            "output_tokens": int(lg.generated.sum()),
            "throughput_tokens_per_s": float(lg.generated.sum() / dur) if dur > 0 else 0.0,
            "throughput_requests_per_s": finished / dur if dur > 0 else 0.0,
            **{k: shown[k] for k in ("goodput_requests_per_s", "slo_attainment", "meets_slos")},
            "window": window, "whole_run": whole,
            "littles_law_ratio": littles_law_ratio(q.arrival_s[:arrived], lg.finish_s[:arrived], dur,
                                                   *self._in_system(in_system)),
            "preemptions": int(lg.preemptions.sum()),
            **self._energy_fields(~np.isnan(lg.finish_s), dur, len(lg.it_time)),
            "duration_s": dur, "iterations": len(lg.it_time),
            "batch": tw_stats(decode), "running": tw_stats(running), "kv_use": tw_stats(kv),
            "kv_capacity": dict(self.kv), "pricing": dict(self.memo), "wall_s": self.wall_s,
        })
        return out

    def _request_figures(self, sel: slice, span_s: float, count: int) -> dict[str, Any]:
        """Latencies (over the finished requests of ``sel``), goodput (those meeting every SLO per
        second of ``span_s``), SLO attainment (of ``count`` requests) and whether it meets the target."""
        q, lg = self.requests, self.log
        done = ~np.isnan(lg.finish_s[sel])
        met = int(self.met[sel].sum())
        return {"ttft_s": summary(self.ttft[sel][done]), "tpot_s": summary(self.tpot[sel][done]),
                "e2e_s": summary(self.e2e[sel]), "queue_s": summary((lg.scheduled_s - q.arrival_s)[sel][done]),
                "goodput_requests_per_s": met / span_s if span_s > 0 else 0.0,
                "slo_attainment": met / count if count else math.nan,
                "meets_slos": bool(count and met >= self.slo.attainment * count)}

    def _in_system(self, in_system: np.ndarray) -> tuple[list[float], list[float], np.ndarray]:
        """(start [s], duration [s], requests in the system) of the segments Little's law averages
        over: the iterations, each with waiting + running at its start."""
        return self.log.it_start, self.log.it_time, in_system

    def request_rows(self) -> list[dict[str, Any]]:
        """One row per request (``--requests-csv``)."""
        q, lg = self.requests, self.log
        rows = per_request_rows(q.arrival_s, q.prompt_tokens, q.output_tokens, lg.scheduled_s, lg.first_token_s,
                                lg.finish_s, lg.preemptions, self.met)
        for row, e in zip(rows, self.request_energy_j.tolist()):
            row["energy_j"] = e
        return rows

    def to_pandas(self, table: str = "requests") -> Any:
        """A ``pandas.DataFrame`` of :meth:`request_rows` (``table="requests"``: one row per request,
        times in seconds, energy in joules) or of :meth:`iteration_rows` (``"iterations"``). pandas
        is not a dependency of sievesim: without it this raises :class:`ImportError` saying how to
        install it (the ``*_rows`` methods give the same rows as lists of dicts)."""
        tables = {"requests": self.request_rows, "iterations": self.iteration_rows}
        if not isinstance(table, str) or table not in tables:
            from ..errors import field_error
            raise field_error("table", table, "'requests' or 'iterations'")
        try:
            import pandas as pd
        except ImportError:
            raise ImportError(f"{type(self).__name__}.to_pandas needs pandas: pip install pandas (or pip install "
                              f"'sievesim[pandas]'); without it, {table[:-1]}_rows() gives the same rows as a list "
                              f"of dicts") from None
        return pd.DataFrame(tables[table]())

    def iteration_rows(self) -> list[dict[str, Any]]:
        """One row per iteration (``--timeline-csv``): start, duration, batch, prefill, queue, KV, energy [J]."""
        lg = self.log
        return [{"start_s": s, "time_s": d, "decode_requests": b, "prefill_tokens": p, "waiting": w,
                 "running": r, "kv_blocks_used": k, "energy_j": e}
                for s, d, b, p, w, r, k, e in zip(lg.it_start, lg.it_time, lg.it_decode, lg.it_prefill, lg.it_waiting,
                                                  lg.it_running, lg.it_kv_blocks, lg.it_energy_j)]
