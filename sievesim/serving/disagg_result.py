"""The result of a disaggregated run (:mod:`sievesim.serving.disagg`): the colocated path's metrics
and JSON, plus the pools, the KV transfers and each pool's busy share.

:class:`DisaggResult` is a :class:`~sievesim.serving.result.ServingResult` whose iteration log
is the decode pool's (so ``batch``, ``running`` and ``kv_use`` are the decode batch, its running
requests and its KV use, as in the colocated JSON), whose Little's law averages the scheduler's
count of requests in the system over the segments between the decisions of either pool, and whose
:meth:`~DisaggResult.to_dict` adds ``mode``, ``pools`` and ``kv_transfer``. Times in seconds.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .disagg import DisaggLog, memo_record, run_disaggregated
from .result import ServingResult
from .workload import Requests

__all__ = ["DisaggResult", "serve_disaggregated"]


@dataclass(repr=False)      # ServingResult's one-line repr, not one of every array
class DisaggResult(ServingResult):
    """A disaggregated run. ``log`` is the decode pool's iterations; ``pools_log`` holds both pools'
    and the KV transfers; ``pool_info`` the pools' GPUs and KV capacity."""

    pools_log: DisaggLog = field(default=None)  # type: ignore[assignment]
    pool_info: dict[str, dict[str, Any]] = field(default_factory=dict)

    def _in_system(self, in_system: np.ndarray) -> tuple[list[float], list[float], np.ndarray]:
        return self.pools_log.in_system()

    def energy_breakdown(self) -> dict[str, float] | None:
        """Both pools' iterations by resource, the KV transfers' link energy (in ``link``) and
        ``idle``: each pool's static power while it runs no iteration [J]; None without an energy model."""
        from ..system.energy import RESOURCE_KINDS

        pl, end = self.pools_log, self.log.end_s
        out = dict.fromkeys(RESOURCE_KINDS + ("idle",), 0.0)
        for name in ("prefill", "decode"):
            lg, power = getattr(pl, name), self.pool_info[name].get("static_power_w")
            if power is None or (lg.energy_parts_j is None and lg.it_time):
                return None
            for k, v in zip(RESOURCE_KINDS, lg.energy_parts_j if lg.energy_parts_j is not None else ()):
                out[k] += float(v)
            out["idle"] += power * max(0.0, end - math.fsum(lg.it_time))
        if math.isnan(pl.transfer_energy_j):
            return None
        out["link"] += pl.transfer_energy_j
        return out

    def _iterations_energy_j(self) -> float:
        return math.fsum(self.pools_log.prefill.it_energy_j) + math.fsum(self.pools_log.decode.it_energy_j)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        pl, dur = self.pools_log, self.log.end_s
        pools: dict[str, Any] = {}
        for name in ("prefill", "decode"):
            lg = getattr(pl, name)
            times = np.asarray(lg.it_time)
            info = self.pool_info[name]
            kv = np.asarray(lg.it_kv_blocks) / info["kv_capacity"]["blocks_per_gpu"]
            tw = times.sum() or 1.0
            pools[name] = {"gpus": info["gpus"], "iterations": len(lg.it_time),
                           "busy_share": float(times.sum() / dur) if dur > 0 else 0.0,
                           "kv_use": {"mean": float((kv * times).sum() / tw) if kv.size else 0.0,
                                      "max": float(kv.max(initial=0))},
                           "kv_capacity": info["kv_capacity"], "pricing": self.memo["pools"][name]}
        out["iterations"] = len(pl.prefill.it_time) + len(pl.decode.it_time)
        if out["energy_j"] is not None:
            out["energy_per_iteration_j"] = self._iterations_energy_j() / out["iterations"] if out["iterations"] else math.nan
        out["pricing"] = {k: v for k, v in out["pricing"].items() if k != "pools"}   # each pool's is in pools
        out.update({"pools": pools, "kv_transfer": pl.transfers()})
        out["wall_s"] = out.pop("wall_s")
        return out

    def request_rows(self) -> list[dict[str, Any]]:
        """One row per request (``--requests-csv``), with the time its last KV transfer took on the
        link (``kv_transfer_s``; NaN for a request that never left the prefill pool)."""
        rows = super().request_rows()
        for row, x in zip(rows, self.pools_log.kv_transfer_s.tolist()):
            row["kv_transfer_s"] = x
        return rows

    def iteration_rows(self) -> list[dict[str, Any]]:
        """One row per iteration of either pool, in start order (``--timeline-csv``): the pool, start,
        duration, decode requests, prefill tokens, waiting, running, KV blocks used on its fullest
        GPU (waiting: the prefill queue / the requests prefilled and not yet in the decode batch)."""
        rows = []
        for name in ("prefill", "decode"):
            lg = getattr(self.pools_log, name)
            rows += [{"pool": name, "start_s": s, "time_s": d, "decode_requests": b, "prefill_tokens": p,
                      "waiting": w, "running": r, "kv_blocks_used": k, "energy_j": e}
                     for s, d, b, p, w, r, k, e in zip(lg.it_start, lg.it_time, lg.it_decode, lg.it_prefill,
                                                       lg.it_waiting, lg.it_running, lg.it_kv_blocks, lg.it_energy_j)]
        rows.sort(key=lambda row: (row["start_s"], row["pool"] != "prefill"))
        return rows


def serve_disaggregated(sim: Any, q: Requests, rate: float, progress: Any = None) -> DisaggResult:
    """Serve ``q`` on the prefill and decode pools of ``sim`` (a
    :class:`~sievesim.serving.simulator.ServingSimulator` with ``prefill_gpus``); ``rate``
    [requests/s] and ``progress`` as for its ``run``."""
    assert sim.pools is not None
    t0 = time.perf_counter()
    pools = sim.pools
    before = [p.pricer.stats() for p in pools]
    log = run_disaggregated(q.arrival_s, q.prompt_tokens, q.output_tokens, sim.cfg, prefill=pools[0], decode=pools[1],
                            link=sim.hw.interconnect, kv_bytes=sim.model.kv_cache_bytes_per_request, exact=sim.exact,
                            samples=sim.error_samples, check=sim.work_guard(q), progress=progress)
    memo = memo_record(pools, before, log, sim.exact)
    dec = dataclasses.replace(log.decode, end_s=log.end_s)
    info = {p.name: {"gpus": p.gpus, "kv_capacity": p.kv.as_dict(), "static_power_w": p.pricer.static_power_w}
            for p in pools}
    return DisaggResult(sim.settings(q, rate), q, dec, sim.slo, rate, pools[1].kv.as_dict(), memo,
                        time.perf_counter() - t0, pools_log=log, pool_info=info)
