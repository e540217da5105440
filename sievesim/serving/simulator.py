"""Serving a workload on the simulated system: :class:`ServingSimulator`, :func:`simulate_serving` and
the largest rate that meets the SLOs (:func:`max_rate_under_slos`).

One :class:`ServingSimulator` holds the model on its G GPUs under one policy, its KV capacity and
its :class:`~sievesim.serving.pricing.IterationPricer` (whose memo is kept between workloads, so a
sweep over rates prices each batch shape once). :meth:`ServingSimulator.run` serves a
:class:`~sievesim.serving.workload.Requests` with the loop of :mod:`sievesim.serving.scheduler`
and returns a :class:`ServingResult` (:mod:`sievesim.serving.result`). With ``prefill_gpus`` it
holds a prefill pool and a decode pool instead (:mod:`sievesim.serving.disagg`), and ``run``
returns a :class:`~sievesim.serving.disagg_result.DisaggResult`. Times are in seconds.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np

from .. import __version__
from ..errors import ConfigError, field_error
from .kv import BlockCounter, kv_capacity
from .metrics import SloTargets
from .pricing import IterationPricer, MemoError
from .disagg_result import serve_disaggregated
from .result import ServingResult
from .scheduler import SchedulerConfig, run_schedule
from .search import next_probe
from .workload import Requests, poisson_requests, read_trace

__all__ = ["ServingSimulator", "ServingResult", "simulate_serving", "max_rate_under_slos", "requests_for",
           "DEFAULT_MAX_MODEL_LEN"]

#: Longest request (prompt + output tokens) accepted by default; the model files carry no context
#: limit, so this is vLLM's ``--max-model-len``, an option.
DEFAULT_MAX_MODEL_LEN = 32768


def _positive(name: str, value: Any, *, allow_none: bool = False, what: str = "a positive number of seconds") -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value) or value <= 0:
        raise field_error(name, value, what + (" or none" if allow_none else ""))


def _check_api(model: Any, hardware: Any, gpus: Any, policy: Any, scheduler: Any, slo: Any, exact: Any, seed: Any,
               prefill_gpus: Any, step_options: dict[str, Any], model_type: type, hardware_type: type) -> None:
    """The types of :class:`ServingSimulator`'s arguments, each named with what it should have been
    (a float GPU count, a string seed or a bool given as text would otherwise run, or fail deep inside)."""
    import os

    for name, value, kind in (("model", model, model_type), ("hardware", hardware, hardware_type)):
        if not isinstance(value, (str, os.PathLike, kind)):
            raise TypeError(f"{name} = {value!r:.60}: expected a preset name, a path or a {kind.__name__}, "
                            f"got {type(value).__name__}")
    _int("gpus", gpus, 1, 1 << 12, "GPUs in one system")
    _int("seed", seed, 0, (1 << 63) - 1, "a random seed")
    if prefill_gpus is not None:
        _int("prefill_gpus", prefill_gpus, 1, 1 << 12, "GPUs of the prefill pool")
    if not isinstance(policy, str) or not policy:
        raise field_error("policy", policy, "a policy name")
    if not isinstance(exact, bool):
        raise field_error("exact", exact, "true or false")
    if scheduler is not None and not isinstance(scheduler, SchedulerConfig):
        raise TypeError(f"scheduler = {scheduler!r:.60}: expected a SchedulerConfig or None, got {type(scheduler).__name__}")
    if slo is not None and not isinstance(slo, SloTargets):
        raise TypeError(f"slo = {slo!r:.60}: expected a SloTargets or None, got {type(slo).__name__}")
    if step_options.get("top_k") is not None:
        _int("top_k", step_options["top_k"], 1, 1 << 16, "routed experts per token")


def _int(name: str, value: Any, lo: int, hi: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
        raise field_error(name, value, f"an integer from {lo} to {hi} ({what})")
    return int(value)


class ServingSimulator:
    """``model`` served on ``gpus`` GPUs of ``hardware`` under ``policy``.

    Parameters
    ----------
    scheduler:
        :class:`~sievesim.serving.scheduler.SchedulerConfig` (max batch, token budget, horizon).
    slo:
        :class:`~sievesim.serving.metrics.SloTargets` (TTFT <= 2 s, TPOT <= 50 ms by default).
    block_size, memory_utilization:
        KV blocks (:mod:`sievesim.serving.kv`): tokens per block (16) and the share of HBM the
        server may use (0.9).
    max_model_len:
        The longest request accepted (prompt + output tokens).
    exact:
        Price every iteration by the step of its exact batch instead of the memo.
    error_samples:
        Iterations (every 25th) priced both ways to measure the memo (0: none; ignored with ``exact``).
    seed:
        Seeds the routing draws of the priced steps.
    prefill_gpus:
        ``None`` (default): prefill colocated with decode on all ``gpus`` GPUs (chunked prefill).
        An integer Gp from 1 to ``gpus - 1``: disaggregated prefill, Gp GPUs prefill and the other
        ``gpus - Gp`` decode, the KV cache moved over the interconnect (:mod:`sievesim.serving.disagg`).
    step_options:
        Further arguments of :class:`~sievesim.system.step.StepSimulator` (``pimoe_unit``,
        ``early_loads``, ``contention``, ``policy_options``, ``scheduler_latency_s``, ``top_k``).
    """

    def __init__(self, model: Any, hardware: Any = "b200", *, gpus: int = 1, policy: str = "sieve",
                 scheduler: SchedulerConfig | None = None, slo: SloTargets | None = None, block_size: int = 16,
                 memory_utilization: float = 0.9, max_model_len: int = DEFAULT_MAX_MODEL_LEN, exact: bool = False,
                 error_samples: int = 20, seed: int = 0, prefill_gpus: int | None = None,
                 **step_options: Any) -> None:
        from ..hardware import HardwareSpec, get_hardware
        from ..models import ModelSpec, get_model

        _check_api(model, hardware, gpus, policy, scheduler, slo, exact, seed, prefill_gpus, step_options,
                   ModelSpec, HardwareSpec)
        self.model = get_model(model) if isinstance(model, str) or hasattr(model, "__fspath__") else model
        if step_options.get("top_k") is not None:
            self.model = self.model.with_top_k(int(step_options.pop("top_k")))
        step_options.pop("top_k", None)
        weight_format = step_options.pop("weight_format", None)
        if weight_format is not None:   # on the model itself, so that KV capacity follows the formats too
            from ..formats import parse_weight_formats
            self.model = self.model.with_formats(weight_format if isinstance(weight_format, dict)
                                                 else parse_weight_formats(weight_format, "weight_format"))
        for key, only in (("attention", "dp"), ("experts", "ep")):
            if step_options.get(key, only) != only:
                raise field_error(key, step_options[key], f"{only!r}: serving prices its iterations with data-parallel "
                                  "attention and expert parallelism (tensor-parallel serving is not modelled; "
                                  "sievesim run --attention tp prices single steps)")
        if step_options.get("attention_on", "pim") != "pim":
            raise field_error("attention_on", step_options["attention_on"], "'pim': serving's memo corrects the "
                              "attention with the engine's PIM times (sievesim run --attention-on gpu prices steps)")
        mtp = step_options.get("mtp_tokens", self.model.mtp_tokens)
        if mtp:
            raise field_error("mtp_tokens", mtp, "0: serving prices one token per request per iteration (sievesim "
                              "run --mtp-tokens K prices MTP decoding's steps)")
        self.hw = get_hardware(hardware) if isinstance(hardware, str) or hasattr(hardware, "__fspath__") else hardware
        self.cfg = scheduler or SchedulerConfig()
        self.slo = slo or SloTargets()
        self._check(block_size, memory_utilization, max_model_len, error_samples)
        self.gpus, self.policy, self.seed, self.exact = int(gpus), str(policy), int(seed), bool(exact)
        self.block_size, self.memory_utilization = int(block_size), float(memory_utilization)
        self.max_model_len, self.error_samples = int(max_model_len), int(error_samples)
        self.step_options = step_options
        self.pools: tuple[Any, Any] | None = None
        if prefill_gpus is not None:
            from .disagg import build_pools, pool_sizes
            gp, gd = pool_sizes(self.gpus, prefill_gpus)
            self.pools = build_pools(self.model, self.hw, prefill_gpus=gp, decode_gpus=gd, policy=self.policy,
                                     cfg=self.cfg, block_size=self.block_size,
                                     memory_utilization=self.memory_utilization, max_model_len=self.max_model_len,
                                     seed=self.seed, **step_options)
            self.kv, self.blocks_for, self.pricer = self.pools[1].kv, self.pools[1].blocks_for, self.pools[1].pricer
            return
        self.kv = kv_capacity(self.model, self.hw, self.gpus, max_batch=self.cfg.max_batch,
                              token_budget=self.cfg.token_budget, block_size=self.block_size,
                              memory_utilization=self.memory_utilization,
                              redundant_experts=step_options.get("redundant_experts", "auto"))
        self.blocks_for = BlockCounter(self.model, self.kv)
        self.pricer = IterationPricer(self.model, self.hw, gpus=self.gpus, policy=self.policy,
                                      max_batch=self.cfg.max_batch, max_prefill_tokens=self.cfg.token_budget,
                                      max_context=self.max_model_len, seed=self.seed, **step_options)

    def _check(self, block_size: int, memory_utilization: float, max_model_len: int, error_samples: int) -> None:
        c, s = self.cfg, self.slo
        _int("max_batch", c.max_batch, 1, 1 << 14, "running requests")
        _int("token_budget", c.token_budget, 1, 1 << 20, "tokens per iteration")
        _positive("horizon_s", c.horizon_s, allow_none=True)
        for name in ("ttft_s", "tpot_s", "e2e_s"):
            _positive(f"slo {name}", getattr(s, name), allow_none=True)
        if isinstance(s.attainment, bool) or not isinstance(s.attainment, (int, float)) or not 0 < s.attainment <= 1:
            raise field_error("slo attainment", s.attainment, "a share in (0, 1]")
        _int("block_size", block_size, 1, 4096, "tokens per KV block")
        _positive("memory_utilization", memory_utilization, what="a share of the HBM in (0, 1]")
        if memory_utilization > 1:
            raise field_error("memory_utilization", memory_utilization, "a share of the HBM in (0, 1]")
        _int("max_model_len", max_model_len, 2, 1 << 24, "tokens of prompt + output")
        _int("error_samples", error_samples, 0, 100_000, "iterations priced exactly to measure the memo")

    def check_requests(self, q: Requests) -> None:
        """Refuse a request longer than ``max_model_len`` or than one GPU's KV capacity."""
        total = q.prompt_tokens + q.output_tokens
        i = int(np.argmax(total))
        if total[i] > self.max_model_len:
            bad = int(np.flatnonzero(total > self.max_model_len)[0])
            raise field_error(f"{q.where(bad)}: prompt + output tokens", int(total[bad]),
                              f"at most max_model_len = {self.max_model_len} (--max-model-len)")
        for where, kv, blocks_for in ([("", self.kv, self.blocks_for)] if self.pools is None else
                                      [(f" of the {p.name} pool", p.kv, p.blocks_for) for p in self.pools]):
            need = blocks_for(int(total[i]))
            if need > kv.blocks_per_gpu:
                raise field_error(f"{q.where(i)}: prompt + output tokens", int(total[i]),
                                  f"a request whose KV cache fits one GPU{where}: it needs {need} blocks of "
                                  f"{self.block_size} tokens, a GPU holds {kv.blocks_per_gpu}")

    def settings(self, q: Requests, rate: float) -> dict[str, Any]:
        c = self.cfg
        out: dict[str, Any] = {
            "model": self.model.name, "top_k": self.model.top_k, "hardware": self.hw.name, "gpus": self.gpus,
            "policy": self.pricer.sim.policy_name, "pimoe_unit": self.pricer.sim.pimoe_unit,
            "workload": q.description, "rate": rate, "requests": len(q),
            "seed": self.seed, "max_batch": c.max_batch, "token_budget": c.token_budget,
            "horizon_s": c.horizon_s, "block_size": self.block_size,
            "memory_utilization": self.memory_utilization, "max_model_len": self.max_model_len,
            "slo": self.slo.as_dict(), "iteration_pricing": "exact" if self.exact else "memo",
            "gpu_model": self.pricer.sim.gpu_model.name, "expert_format": self.model.expert_format or "bf16",
            "weight_format": self.model.weight_format or "bf16", "kv_format": self.model.kv_format or "bf16",
            "sievesim_version": __version__}
        if self.pools is not None:
            link = self.hw.interconnect
            out.update({"mode": "disaggregated", "prefill_gpus": self.pools[0].gpus, "decode_gpus": self.pools[1].gpus,
                        "kv_link": {"bandwidth_bytes_per_s": link.bandwidth_bytes_per_s_per_direction,
                                    "latency_s": link.latency_s, "contention": "one transfer at a time per "
                                    "sending and per receiving GPU"}})
        return out

    def work_guard(self, q: Requests) -> Callable[[float, int], None]:
        """The work limit (``--max-work``, :func:`sievesim._validate.work_limit`) kept while ``q`` is
        served: a serving run has no estimate before it starts (its time grows with the requests,
        their lengths and how many distinct batches the memo prices), so its loop calls this every
        few iterations, and it stops the run with an error naming ``requests`` once the run has
        taken longer than the limit. Returns ``check(t, arrived)`` (simulated seconds, requests
        arrived so far)."""
        from .._validate import format_seconds, max_work_s

        limit, t0, n = max_work_s(), time.perf_counter(), len(q)
        last = float(q.arrival_s[-1]) if n else 0.0

        def check(t: float, arrived: int) -> None:
            spent = time.perf_counter() - t0
            if spent > limit:
                raise field_error("requests", n, f"fewer requests, or a higher limit: serving them on "
                                  f"{self.model.name} passed the work limit of {format_seconds(limit)} after "
                                  f"{format_seconds(spent)}, with {arrived} of {n} arrived ({t:.4g} s simulated "
                                  f"of {last:.4g} s of arrivals); raise it with --max-work, e.g. --max-work 2h",
                                  cls=ConfigError)
        return check

    def run(self, q: Requests, rate: float | None = None,
            progress: Callable[[int, float], None] | None = None) -> ServingResult:
        """Serve ``q``; ``rate`` [requests/s] is the workload's, for Little's law and the result's
        settings. Default: the rate ``q`` was drawn at (``q.rate``, set by
        :func:`~sievesim.serving.workload.poisson_requests`), else (a trace) the observed rate,
        (requests - 1) / last arrival; so ``sim.run(poisson_requests(100.0, 1000))`` needs no
        rate. ``progress(finished, t)``, when given, is called every few iterations and at the end
        with the requests finished and the simulated time [s]."""
        if not isinstance(q, Requests):
            raise TypeError(f"requests = {q!r:.60}: expected a Requests (sievesim.serving.poisson_requests, "
                            f"read_trace or make_requests), got {type(q).__name__}")
        if rate is not None:
            _positive("rate", rate, what="a positive rate in requests per second")
        self.check_requests(q)
        if rate is None and q.rate is not None:
            rate = q.rate
        _warn_coarse_clock(float(q.arrival_s[-1]))
        horizon = self.cfg.horizon_s
        if horizon is not None and q.arrival_s[0] >= horizon:
            raise field_error("horizon_s (--horizon)", horizon, f"a time after the first arrival "
                              f"({float(q.arrival_s[0]):.6g} s): no request arrives before it, so nothing is served")
        if rate is None:
            rate = (len(q) - 1) / float(q.arrival_s[-1]) if len(q) > 1 and q.arrival_s[-1] > 0 else math.nan
        if self.pools is not None:
            return serve_disaggregated(self, q, float(rate), progress)
        t0 = time.perf_counter()
        p = self.pricer
        before = p.stats()
        price = p.exact_priced if self.exact else p.memo_priced
        log = run_schedule(q.arrival_s, q.prompt_tokens, q.output_tokens, self.cfg, gpus=self.gpus,
                           blocks_per_gpu=self.kv.blocks_per_gpu, blocks_for=self.blocks_for, price=price,
                           exact=None if self.exact else p.exact_priced,
                           samples=0 if self.exact else self.error_samples, check=self.work_guard(q),
                           progress=progress)
        after = p.stats()
        memo = {"mode": "exact" if self.exact else "memo",
                "steps_priced": after["grid_points_priced"] - before["grid_points_priced"]
                + after["exact_steps"] - before["exact_steps"],
                "lookups": after["lookups"] - before["lookups"],
                "outside_grid_exact": after["outside_grid_exact"] - before["outside_grid_exact"],
                "grid_points_total": after["grid_points_priced"], "corner_hit_rate": after["corner_hit_rate"],
                "error_vs_exact": MemoError.from_pairs(log.sample_memo, log.sample_exact).as_dict(),
                "energy_error_vs_exact": MemoError.from_pairs(log.sample_memo_energy,
                                                              log.sample_exact_energy).as_dict()}
        return ServingResult(self.settings(q, float(rate)), q, log, self.slo, float(rate), self.kv.as_dict(), memo,
                             time.perf_counter() - t0, p.static_power_w)


#: The coarsest step of the simulated clock [s] a run is served without a warning: a thousandth of a
#: millisecond iteration. Double precision resolves a time t to about t x 2.2e-16, so past about
#: 8.6e9 s (2^33 s) of arrivals an iteration's time is rounded by more than this.
CLOCK_RESOLUTION_S = 1e-6


def _warn_coarse_clock(last_arrival_s: float) -> None:
    """A warning when the clock at the last arrival moves in steps coarser than CLOCK_RESOLUTION_S
    (a trace with an idle gap of years: TTFT, TPOT and e2e come out rounded)."""
    step = float(np.spacing(last_arrival_s))
    if step > CLOCK_RESOLUTION_S:
        import warnings

        warnings.warn(f"the last request arrives at {last_arrival_s:.4g} s, where the simulated clock moves in steps "
                      f"of {step:.2g} s ({step / 1e-3:.1%} of a 1 ms iteration): TTFT, TPOT and e2e there are rounded "
                      "to that step; cut the trace's idle gaps to keep them exact", stacklevel=3)


def make_requests(*, rate: float | None = None, requests: int | None = None, trace: str | None = None,
                  cv: float = 1.0, lengths: str | None = "hh-rlhf", prompt_tokens: int | None = None,
                  output_tokens: int | None = None, seed: int = 0) -> tuple[Requests, float | None]:
    """The workload of :func:`simulate_serving` and its rate (None for a trace: the observed rate)."""
    if trace is not None:
        if rate is not None:
            raise field_error("rate", rate, "no rate with a request trace (the trace sets the arrivals)")
        q = read_trace(trace)
        if requests is not None:
            q = q.head(_int("requests", requests, 1, 10_000_000, "requests"))
        return q, None
    if rate is None:
        raise field_error("rate", rate, "a positive number of requests per second (or a request trace)")
    return poisson_requests(rate, 100 if requests is None else requests, seed=seed, cv=cv, lengths=lengths,
                            prompt_tokens=prompt_tokens, output_tokens=output_tokens), float(rate)


def simulate_serving(model: Any, hardware: Any = "b200", *, gpus: int = 1, policy: str = "sieve",
                     rate: float | None = None, requests: int | None = None, trace: str | None = None,
                     cv: float = 1.0, lengths: str | None = "hh-rlhf", prompt_tokens: int | None = None,
                     output_tokens: int | None = None, seed: int = 0, max_batch: int = 256,
                     token_budget: int = 2048, horizon_s: float | None = None, ttft_slo_s: float | None = 2.0,
                     tpot_slo_s: float | None = 0.05, e2e_slo_s: float | None = None, attainment: float = 0.9,
                     **options: Any) -> ServingResult:
    """Serve ``requests`` requests arriving at ``rate`` per second (Poisson, or gamma with ``cv``),
    or the requests of a ``trace`` file, on ``model`` on ``gpus`` GPUs under ``policy``; ``options``
    go to :class:`ServingSimulator` (``exact``, ``block_size``, ``memory_utilization``, ...)."""
    q, r = make_requests(rate=rate, requests=requests, trace=trace, cv=cv, lengths=lengths,
                         prompt_tokens=prompt_tokens, output_tokens=output_tokens, seed=seed)
    sim = ServingSimulator(model, hardware, gpus=gpus, policy=policy,
                           scheduler=SchedulerConfig(max_batch, token_budget, horizon_s),
                           slo=SloTargets(ttft_slo_s, tpot_slo_s, e2e_slo_s, attainment), seed=seed, **options)
    return sim.run(q, r)


def requests_for(rate: float, requests: int, arrival_window_s: float | None, *,
                 option: str = "arrival_window_s") -> int:
    """Requests served at ``rate``: ``requests``, or at least ``rate x arrival_window_s`` (so that an
    overload lasts long enough to show in the queue). A window that would need more than
    :data:`~sievesim.serving.workload.MAX_REQUESTS` requests at ``rate`` is refused naming ``option``
    (the window and the rate, not the request count the user never gave)."""
    from .workload import MAX_REQUESTS

    if arrival_window_s is None:
        return int(requests)
    _positive(option, arrival_window_s)
    need = rate * arrival_window_s
    if need > MAX_REQUESTS:
        raise field_error(option, arrival_window_s, f"at most {MAX_REQUESTS / rate:.6g} s at {rate:g} requests/s "
                          f"(rate x window = {need:.4g} requests; a run serves at most {MAX_REQUESTS})")
    return max(int(requests), int(math.ceil(need)))


def max_rate_under_slos(sim: ServingSimulator, *, requests: int, lo: float, hi: float, steps: int = 7,
                        seed: int = 0, cv: float = 1.0, lengths: str | None = "hh-rlhf",
                        prompt_tokens: int | None = None, output_tokens: int | None = None,
                        arrival_window_s: float | None = None, window: bool = True) -> dict[str, Any]:
    """The largest rate (requests/s) at which ``sim`` meets its SLOs (``slo.attainment`` of the
    requests meet every target), by bisection between ``lo`` and ``hi`` in ``steps`` halvings, each
    rate served with ``requests`` requests of one seed (at least ``rate x arrival_window_s`` when
    given: a short run hides an overload, whose queue grows with its length). Assumes attainment
    falls with the rate. Each probe is judged on its steady-state window (``window``, the default:
    :func:`~sievesim.serving.metrics.steady_window`) or on the whole run. Returns the bracket (``max_rate`` = the highest rate seen to meet them,
    ``None`` when ``lo`` does not) and every rate tried with its attainment and goodput."""
    _positive("lo", lo, what="a positive rate (requests/s)")
    _positive("hi", hi, what="a positive rate (requests/s)")
    if hi <= lo:
        raise field_error("hi", hi, f"a rate above lo = {lo}")
    _int("steps", steps, 1, 40, "bisection steps")
    requests_for(hi, requests, arrival_window_s)       # a window too long at the top rate, before any probe
    tried: list[dict[str, Any]] = []

    def meets(rate: float) -> bool:
        q = poisson_requests(rate, requests_for(rate, requests, arrival_window_s), seed=seed, cv=cv,
                             lengths=lengths, prompt_tokens=prompt_tokens, output_tokens=output_tokens)
        d = sim.run(q, rate).to_dict()
        if not window:
            d = {**d, **d["whole_run"]}
        tried.append({"rate": rate, "requests": len(q), "slo_attainment": d["slo_attainment"], "meets_slos": d["meets_slos"],
                      "goodput_requests_per_s": d["goodput_requests_per_s"],
                      "ttft_p90_s": d["ttft_s"]["p90"], "tpot_p90_s": d["tpot_s"]["p90"],
                      "window_reached": d["window"]["reached"]})
        return bool(d["meets_slos"])

    outcomes: dict[float, bool] = {}
    while True:
        rate, found = next_probe(lo, hi, steps, outcomes)
        if found is not None:
            return {**found, "tried": tried}
        outcomes[rate] = meets(rate)
