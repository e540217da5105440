"""One decode step of a real MoE model on G GPUs with HBM-PIM, executed as a dependency graph.

:func:`simulate_step` (and :class:`StepSimulator` behind it) builds, for every step, the graph of
the Sieve paper's Figure 8 for every layer and GPU, asks the policy for each GPU's partition at
each MoE layer (on the policy's own estimates: Equation 1 with the EMA cost table), prices every
node (GPU and link nodes by the roofline and interconnect models, every PIM node by the
cycle-accurate engine), executes the graph with :func:`sievesim.system.dag.execute`, and then
lets the cost table learn the engine's times (the paper's warm-up). docs/system.md describes the
graph, every duration's source and what Equation 1 leaves out.

Parallelism: expert parallelism over the G GPUs (GPU ``g`` holds experts
``[g E/G, (g+1) E/G)`` and its PIM holds the same experts' weights), data-parallel attention with
``B / G`` decode requests per GPU (request ``i`` on GPU ``i // (B/G)``), prefill request ``j`` on
GPU ``j mod G``. Times are in seconds.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .. import __version__
from ..costs import (DEFAULT_CONTEXT_LEN, CostContext, PimCostTable, RooflinePimCost, _organisation, attention_shape,
                     non_moe_work, pim_peak_flops)
from ..errors import ConfigError, field_error
from . import gpu_ops
from .dag import Contention, Graph, Schedule, execute

__all__ = ["StepSimulator", "StepResult", "simulate_step", "GPU_ONLY", "parse_prefill", "parse_policy_options"]

#: Policy name of the reference without PIM: attention and every expert on the GPU.
GPU_ONLY = "gpu-only"
_RESOURCE_KINDS = ("gpu", "hbm", "pim", "tx", "rx")


def parse_prefill(value: Any) -> tuple[int, int]:
    """``"P:L"`` (or a pair) -> ``(P prefill requests, L prompt tokens each)``."""
    if value is None:
        return 0, 0
    if isinstance(value, str):
        parts = value.split(":")
        if len(parts) != 2 or not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
            raise field_error("prefill", value, "P:L with P prefill requests and L prompt tokens, e.g. 2:1024")
        p, length = int(parts[0]), int(parts[1])
    else:
        try:
            p, length = (int(x) for x in value)
        except (TypeError, ValueError):
            raise field_error("prefill", value, "a pair (P requests, L tokens)") from None
    if p < 0 or p > 4096:
        raise field_error("prefill requests", p, "an integer in [0, 4096]")
    if p and not 1 <= length <= 1_048_576:
        raise field_error("prefill length", length, "an integer in [1, 1048576] tokens")
    return p, (length if p else 0)


def parse_policy_options(text: str) -> dict[str, Any]:
    """``"key=value,key=value"`` -> keyword arguments of a policy's constructor. Values are JSON
    where they parse (``true``, ``3``, ``0.5``; ``True``/``False`` too), else strings."""
    import json

    out: dict[str, Any] = {}
    for item in (x.strip() for x in str(text).split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key.isidentifier():
            raise field_error("policy option", item, "KEY=VALUE with a Python identifier as KEY")
        low = value.lower()
        try:
            out[key] = json.loads(low if low in ("true", "false") else value)
        except json.JSONDecodeError:
            out[key] = value
    return out


class _Ema:
    """An exponential moving average whose first observation replaces the start value."""

    def __init__(self, start: float, alpha: float) -> None:
        self.value, self.alpha, self.seen = start, alpha, False

    def update(self, x: float) -> None:
        self.value = x if not self.seen else (1.0 - self.alpha) * self.value + self.alpha * x
        self.seen = True


class LearnedPimCost:
    """The PIM cost model a policy sees in the system: the paper's runtime cost table.

    Experts: a :class:`PimCostTable` (keys ``("expert", n)`` and ``(("expert", unit), n)``) that
    learns the engine's time of each token count after every step, with the roofline as the
    one-time fallback. Attention: the roofline of this layer's attention times a learned factor
    (EMA of engine time over roofline time per attention kind), since context lengths grow every
    step and a table keyed by them would never hit.
    """

    #: Its time arrays are checked (finite, >= 0) when built, so contexts need not check them again.
    arrays_checked = True

    def __init__(self, table: PimCostTable, roofline: RooflinePimCost, attention_factor: _Ema) -> None:
        self.table, self.roofline, self.attention_factor = table, roofline, attention_factor
        self._arrays: dict[tuple[Any, int], np.ndarray] = {}
        self._version = -1

    @property
    def version(self) -> tuple[int, float]:
        return (self.table.version, self.attention_factor.value)

    def expert_time_s(self, tokens: int) -> float:
        return self.table.expert_time_s(tokens)

    def expert_time_on_unit_s(self, tokens: int, unit: str) -> float:
        return self.table.expert_time_on_unit_s(tokens, unit)

    def attention_time_s(self, batch_context_lens: Sequence[int]) -> float:
        return self.roofline.attention_time_s(batch_context_lens) * self.attention_factor.value

    def _array(self, max_tokens: int, unit: str | None) -> np.ndarray:
        if self._version != self.table.version:
            self._arrays.clear()
            self._version = self.table.version
        key = (unit, max_tokens)
        arr = self._arrays.get(key)
        if arr is None:
            n = np.arange(max_tokens + 1, dtype=np.float64)
            per = self.roofline.expert_flops_per_token / self.roofline.pim_peak_flops
            if unit is not None:
                per *= self.roofline.organisation.count(unit)
            arr = n * per
            shape = self.table.expert_shape if unit is None else (self.table.expert_shape, unit)
            for (s, tokens), value in self.table.items():
                if s == shape and 0 < tokens <= max_tokens:
                    arr[tokens] = value
            if not np.all(np.isfinite(arr)) or np.any(arr < 0):
                raise ConfigError("PIM cost table holds a negative or non-finite time")
            arr.flags.writeable = False
            self._arrays[key] = arr
        return arr

    def expert_times_s(self, max_tokens: int) -> np.ndarray:
        return self._array(max_tokens, None)

    def expert_times_on_unit_s(self, max_tokens: int, unit: str) -> np.ndarray:
        return self._array(max_tokens, unit)


@dataclass
class StepResult:
    """Results of :func:`simulate_step`, averaged over the measured steps (times in seconds).

    ``to_dict()`` gives the flat JSON record that ``sievesim run --json`` prints; fields whose
    names start with ``wall_`` are the simulator's own timings (not deterministic).
    ``pim_unit_busy_s`` lists every PIM unit of every GPU (GPU-major; the unit is PIMoE's, else a
    channel): attention (all units) plus expert work; ``pim_unit_expert_busy_s`` the expert work
    alone (Figure 10's imbalance).
    """

    settings: dict[str, Any]
    step_times_s: list[float]
    estimated_step_times_s: list[float]
    layer_time_s: list[float]
    estimated_layer_time_s: list[float]
    experts_on_gpu: list[float]
    experts_on_pim: list[float]
    busy_s: dict[str, list[float]]
    pim_unit: str
    pim_unit_busy_s: list[float]
    pim_unit_expert_busy_s: list[float]
    scheduler_us: float
    wall_decision_us: float
    wall_step_s: float
    schedule: Schedule | None = field(default=None, repr=False)

    @property
    def step_time_s(self) -> float:
        return float(np.mean(self.step_times_s))

    @property
    def estimated_step_time_s(self) -> float:
        return float(np.mean(self.estimated_step_times_s))

    @property
    def throughput_tokens_per_s_per_gpu(self) -> float:
        """Decode tokens per second per GPU: ``B / T_step / G``."""
        return self.settings["batch"] / self.step_time_s / self.settings["gpus"]

    @property
    def interactivity_tokens_per_s_per_user(self) -> float:
        """Tokens per second each request sees: ``1 / T_step``."""
        return 1.0 / self.step_time_s

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.settings)
        out.update({
            "step_time_s": self.step_time_s,
            "estimated_step_time_s": self.estimated_step_time_s,
            "estimate_over_executed": self.estimated_step_time_s / self.step_time_s,
            "throughput_tokens_per_s_per_gpu": self.throughput_tokens_per_s_per_gpu,
            "interactivity_tokens_per_s_per_user": self.interactivity_tokens_per_s_per_user,
            "step_times_s": list(self.step_times_s),
            "estimated_step_times_s": list(self.estimated_step_times_s),
            "experts_on_gpu": float(sum(self.experts_on_gpu)),
            "experts_on_pim": float(sum(self.experts_on_pim)),
            "experts_on_gpu_per_layer": list(self.experts_on_gpu),
            "experts_on_pim_per_layer": list(self.experts_on_pim),
            "layer_time_s": list(self.layer_time_s),
            "estimated_layer_time_s": list(self.estimated_layer_time_s),
            "busy_s": {k: list(v) for k, v in self.busy_s.items()},
            "pim_unit": self.pim_unit,
            "pim_unit_busy_s": list(self.pim_unit_busy_s),
            "pim_unit_expert_busy_s": list(self.pim_unit_expert_busy_s),
            "scheduler_us": self.scheduler_us,
            "wall_decision_us": self.wall_decision_us,
            "wall_step_s": self.wall_step_s,
        })
        return out


class StepSimulator:
    """Decode steps of ``model`` on ``gpus`` GPUs of ``hardware`` under one policy.

    Parameters
    ----------
    model, hardware:
        Names, paths or specs (``sievesim.models.get_model``, ``sievesim.hardware.get_hardware``).
    gpus:
        G; must divide the routed experts and the batch.
    policy:
        A registered policy name (``sieve``, ``noexp``, ``allexp``, ``pimoe``, ``oracle``, ...) or
        ``"gpu-only"`` (the reference without PIM: attention and experts on the GPU).
    batch:
        B, decode requests of the step over all GPUs.
    trace:
        Routing source: ``None`` (the model's calibrated synthetic routing, ``synthetic:<model>``;
        a model without a preset gets the shape of the closest preset, ``synthetic:like-PRESET``), a spec for :func:`sievesim.workload.batches.open_source`
        (``.npz`` trace, SGLang dump, ``synthetic:NAME``), or a ``RoutingSource``.
    context_len, context_preset:
        Every request at ``context_len`` tokens (default :data:`~sievesim.costs.DEFAULT_CONTEXT_LEN`)
        or lengths drawn from a preset of :mod:`sievesim.workload.lengths` (seeded). Contexts grow
        by one token per step.
    prefill:
        ``"P:L"`` or ``(P, L)``: P prefill requests of L tokens colocated with the decode batch.
    seed:
        Seeds the routing stream, the context lengths and the prefill routing.
    pimoe_unit:
        PIMoE's placement unit (``pseudo_channel``, ``channel``, ``stack``); only with PIMoE.
    early_loads:
        Start loading the weights of experts with >= 2 tokens in a GPU's local routing map right
        after its router (the paper's optimisation), for policies that may run experts on the GPU.
    microbatches:
        1, or 2 for the prior work's interleaving of two halves of the batch (Figure 6a).
    contention:
        Slow PIM and HBM nodes of one GPU while they overlap, by factors measured on the engine.
    alpha:
        Smoothing factor of the cost table's exponential moving average.
    policy_options:
        Keyword arguments of the policy's constructor (e.g. ``{"include_attention": False}`` for
        Sieve's variant that leaves attention out of ``T_PIM``).
    scheduler_latency_s:
        Overrides the hardware's modelled decision latency for 256 experts (``gpu.scheduler_latency_s``).
    exact_tokens:
        Experts with up to this many tokens are simulated on the engine; larger ones (prefill) are
        extended linearly from the engine's times at ``exact_tokens`` and half of it.
    top_k:
        Routed experts per token, overriding the model's (``None``: the model's). The Sieve paper
        evaluates Qwen3-30B-A3B with 4 where its ``config.json`` says 8; the calibrated synthetic
        routing of a preset draws this many experts per token with the preset's fitted shape.
    """

    def __init__(self, model: Any, hardware: Any = "b200", *, gpus: int = 1, policy: str = "sieve",
                 batch: int = 1, trace: Any = None, context_len: int | None = None,
                 context_preset: str | None = None, prefill: Any = None, seed: int = 0,
                 pimoe_unit: str | None = None, early_loads: bool = True, microbatches: int = 1,
                 contention: bool = True, alpha: float = 0.5,
                 policy_options: dict[str, Any] | None = None,
                 scheduler_latency_s: float | None = None, exact_tokens: int = 256,
                 top_k: int | None = None) -> None:
        from ..hardware import get_hardware
        from ..models import get_model
        from ..policies import get_policy, policy_class

        self.model = get_model(model) if isinstance(model, (str, bytes)) or hasattr(model, "__fspath__") else model
        if top_k is not None:  # the paper's setting where it differs from the config (Qwen3-30B-A3B: 4 vs 8)
            from .._validate import check_int
            check_int("top_k", top_k, "experts", hi=self.model.num_experts)
            self.model = self.model.with_top_k(int(top_k))
        self.hw = get_hardware(hardware) if isinstance(hardware, str) or hasattr(hardware, "__fspath__") else hardware
        if scheduler_latency_s is not None:
            import dataclasses
            if isinstance(scheduler_latency_s, bool) or not (0 <= scheduler_latency_s < 1):
                raise field_error("scheduler_latency_s", scheduler_latency_s, "a latency in seconds, >= 0 and < 1")
            self.hw = dataclasses.replace(self.hw, gpu=dataclasses.replace(
                self.hw.gpu, scheduler_latency_s=float(scheduler_latency_s)))
        m, hw = self.model, self.hw
        for name, value, low in (("gpus", gpus, 1), ("batch", batch, 1), ("microbatches", microbatches, 1)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
                raise field_error(name, value, f"an integer >= {low}")
        from .._validate import check_int
        check_int("batch", batch, "batch")
        check_int("gpus", gpus, "gpus")
        if m.num_experts % gpus:
            raise field_error("gpus", gpus, f"a divisor of the model's {m.num_experts} routed experts "
                                            f"(expert parallelism puts E/G experts on each GPU)")
        if batch % gpus:
            raise field_error("batch", batch, f"a multiple of gpus = {gpus} (data-parallel attention "
                                              f"puts B/G requests on each GPU)")
        if microbatches not in (1, 2):
            raise field_error("microbatches", microbatches, "1 or 2")
        if microbatches == 2 and batch // gpus < 2:
            raise field_error("microbatches", microbatches, f"1 when a GPU has fewer than 2 requests (B/G = {batch // gpus})")
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise field_error("seed", seed, "a non-negative integer")
        self.gpus, self.batch, self.seed, self.microbatches = int(gpus), int(batch), int(seed), int(microbatches)
        if not isinstance(exact_tokens, (int, np.integer)) or isinstance(exact_tokens, bool) or exact_tokens < 2:
            raise field_error("exact_tokens", exact_tokens, "an integer >= 2")
        self.exact_tokens = int(exact_tokens)
        self.local_experts = m.num_experts // self.gpus

        self.gpu_only = str(policy).lower() == GPU_ONLY
        pol_name = "noexp" if self.gpu_only else str(policy).lower()
        cls = policy_class(pol_name)
        if pimoe_unit is not None and pol_name != "pimoe":
            raise field_error("pimoe_unit", pimoe_unit, "only with policy pimoe")
        options = dict(policy_options or {})
        if pimoe_unit is not None:
            options["unit"] = pimoe_unit
        self.policy_options = {k: v for k, v in options.items() if k != "unit"}
        self.policy = get_policy(pol_name, **options)
        self.policy_name = GPU_ONLY if self.gpu_only else cls.name
        self.pimoe_unit = getattr(self.policy, "unit", None) if cls.name == "pimoe" else None
        if not self.gpu_only and getattr(hw, "pim", None) is None:
            raise field_error("hardware", hw.name, f"hardware with PIM for policy {self.policy_name!r} "
                                                   f"(or policy {GPU_ONLY!r})")
        self.dynamic = cls.static_placement is None
        self.early_loads = bool(early_loads) and cls.static_placement != "pim"
        self.contention_on = bool(contention) and not self.gpu_only

        # ---- routing
        from ..workload.batches import open_source
        from ..workload.routing import RoutingSource
        if trace is None:
            from ..workload.synthetic import source_for_model
            self.source, spec = source_for_model(m)
        elif isinstance(trace, RoutingSource):
            spec, self.source = getattr(trace, "name", "source"), trace
        else:
            spec = str(trace)
            self.source = open_source(spec, num_experts=m.num_experts, top_k=m.top_k)
        self.routing = spec
        src = self.source
        for fld, have, want in (("experts", src.num_experts, m.num_experts), ("top_k", src.top_k, m.top_k),
                                ("MoE layers", src.num_layers, m.num_moe_layers)):
            if have != want:
                raise field_error(f"routing {fld}", have, f"{want}, as model {m.name!r} has (routing {spec!r})")
        self.stream = src.stream(self.batch, seed=self.seed)

        # ---- request lengths
        if context_len is not None and context_preset is not None:
            raise field_error("context_len", context_len, "not together with context_preset")
        rng = np.random.default_rng([self.seed, 1])
        if context_preset is not None:
            from ..workload.lengths import decode_context_lengths
            self.context = decode_context_lengths(context_preset, self.batch, rng)
            self.context_desc = str(context_preset)
        else:
            length = DEFAULT_CONTEXT_LEN if context_len is None else context_len
            check_int("context_len", length, "context")
            self.context = np.full(self.batch, int(length), dtype=np.int64)
            self.context_desc = str(int(length))
        self.prefill_requests, self.prefill_len = parse_prefill(prefill)
        if self.prefill_requests and not hasattr(src, "sample_tokens"):
            raise field_error("prefill", f"{self.prefill_requests}:{self.prefill_len}",
                              "no prefill with a recorded trace (prefill routing is drawn from the synthetic "
                              "routing; use the default routing or synthetic:PRESET)")
        self._prefill_rng = np.random.default_rng([self.seed, 2])

        # ---- PIM costs: engine-executed (per attention kind) and the policy's learned table
        self.org = _organisation(hw)
        self._engine: dict[str, Any] = {}
        self._t_exec: dict[tuple[str | None, int], float] = {}
        self._attn_exec: dict[tuple[str, tuple[int, ...]], float] = {}
        self._t_exec_arr: dict[str | None, np.ndarray] = {}
        self.contention: tuple[Contention, ...] = ()
        kinds = tuple(dict.fromkeys(m.layer_attention))
        self._layer_of_kind = {k: m.layer_attention.index(k) for k in kinds}
        if not self.gpu_only:
            from ..pim.expert import EnginePimCost
            for k, layer in self._layer_of_kind.items():
                self._engine[k] = EnginePimCost.for_model(m, hw, layer=layer)
            # one GPU-PIM hand-over per layer's PIM experts (each expert's own time leaves it out)
            self._hand_over_s = float(next(iter(self._engine.values())).device.sync_latency_s)
            peak = pim_peak_flops(hw)
            self.table = PimCostTable(RooflinePimCost(2.0 * m.params_per_expert, peak, None, self.org), alpha=alpha)
            self._attn_factor = {k: _Ema(1.0, alpha) for k in kinds}
            self._roof = {k: RooflinePimCost(2.0 * m.params_per_expert, peak, attention_shape(m, layer), self.org)
                          for k, layer in self._layer_of_kind.items()}
            self._learned = {k: LearnedPimCost(self.table, self._roof[k], self._attn_factor[k]) for k in kinds}
            if self.contention_on:
                from ..pim.contention import measure_contention
                dev = next(iter(self._engine.values())).device
                f = measure_contention(dev, m.hidden_size, 2 * m.moe_intermediate_size, 1)
                self.contention_factors = f
                self.contention = tuple(Contention(f"g{g}.pim", f"g{g}.hbm", f.pim_slowdown, f.hbm_slowdown)
                                        for g in range(self.gpus))
        self._resource_names: dict[tuple[int, tuple[str, ...]], tuple[str, ...]] = {}
        self._no_pim = RooflinePimCost(2.0 * m.params_per_expert, 1.0, None, self.org)
        self._step_index = 0

    # ------------------------------------------------------------------ settings
    def settings(self, steps: int, warmup: int) -> dict[str, Any]:
        return {
            "model": self.model.name, "top_k": self.model.top_k, "hardware": self.hw.name, "gpus": self.gpus,
            "policy": self.policy_name,
            "pimoe_unit": self.pimoe_unit, "policy_options": dict(self.policy_options), "batch": self.batch, "prefill_requests": self.prefill_requests,
            "prefill_len": self.prefill_len, "context": self.context_desc, "routing": self.routing,
            "seed": self.seed, "steps": steps, "warmup": warmup, "microbatches": self.microbatches,
            "early_loads": self.early_loads, "contention": self.contention_on,
            "scheduler_latency_us_per_256_experts": self.hw.gpu.scheduler_latency_s * 1e6,
            "sievesim_version": __version__,
        }

    # ------------------------------------------------------------------ engine times
    def _expert_exec_s(self, tokens: int, unit: str | None) -> float:
        """Engine time [s] of one expert with ``tokens`` tokens (cached). Above ``exact_tokens``
        (prefill-sized counts) the time is extended linearly from the engine's times at
        ``exact_tokens`` and half of it: with one GEMV per token the program is that many
        single-token passes back to back (docs/system.md measures the error)."""
        key = (unit, tokens)
        t = self._t_exec.get(key)
        if t is None:
            top = self.exact_tokens
            if tokens > top:
                hi, lo = self._expert_exec_s(top, unit), self._expert_exec_s(top // 2, unit)
                t = hi + (tokens - top) * (hi - lo) / (top - top // 2)
            else:
                eng = next(iter(self._engine.values()))
                t = eng.expert_time_s(tokens) if unit is None else eng.expert_time_on_unit_s(tokens, unit)
            self._t_exec[key] = t
        return t

    def _expert_exec_array(self, counts: np.ndarray, unit: str | None) -> np.ndarray:
        """Engine time [s] of one expert for each token count in ``counts`` (cached per count)."""
        arr = self._t_exec_arr.get(unit)
        top = int(counts.max())
        if arr is None or arr.size <= top:
            old = arr
            arr = np.full(max(top + 1, 2 * (0 if old is None else old.size)), np.nan)
            if old is not None:
                arr[:old.size] = old
            self._t_exec_arr[unit] = arr
        out = arr[counts]
        missing = np.isnan(out)
        if missing.any():
            for n in np.unique(counts[missing]).tolist():
                arr[n] = self._expert_exec_s(n, unit)
            out = arr[counts]
        return out

    def _attention_exec_s(self, kind: str, lens: np.ndarray) -> float:
        key = (kind, tuple(int(x) for x in lens))
        t = self._attn_exec.get(key)
        if t is None:
            t = self._engine[kind].attention_time_s(list(key[1]))
            self._attn_exec[key] = t
        return t

    # ------------------------------------------------------------------ one step
    def _step_tokens(self) -> tuple[np.ndarray | None, np.ndarray, np.ndarray, list[np.ndarray]]:
        """Routing ids (T, L_moe, K) or None, counts (L_moe, E) of the whole step, the owner GPU
        of each row, and the rows of each micro-batch."""
        step = self.stream.step()
        ids = step.topk_ids
        b, g = self.batch, self.gpus
        local = b // g
        owner = np.arange(b, dtype=np.int64) // local
        mb = (np.arange(b) % local) * self.microbatches // local
        if self.prefill_requests:
            n_pf = self.prefill_requests * self.prefill_len
            pf_ids = self.source.sample_tokens(self._prefill_rng, n_pf)
            ids = np.concatenate([ids, pf_ids]) if ids is not None else None
            req = np.repeat(np.arange(self.prefill_requests), self.prefill_len)
            owner = np.concatenate([owner, req % g])
            mb = np.concatenate([mb, req % self.microbatches])
        if ids is None:
            if self.microbatches > 1:
                raise field_error("microbatches", self.microbatches, "1 with a count-only routing source")
            counts = np.asarray(step.counts, dtype=np.int64)
            if counts.max(initial=0) > self.batch:
                raise field_error("routing count", int(counts.max()), f"at most the batch B = {self.batch}")
        else:
            from ..workload.routing import counts_from_ids
            counts = counts_from_ids(ids, self.model.num_experts)
        rows = [np.flatnonzero(mb == k) for k in range(self.microbatches)]
        return ids, counts, owner, rows

    def run_step(self, *, grow_contexts: bool = True) -> dict[str, Any]:
        """Simulate one step; returns its raw results. The routing stream advances; the contexts
        grow by one token afterwards unless ``grow_contexts`` is False (benchmarks use that to time
        a step whose PIM programs were all simulated before)."""
        m, hw, G, El = self.model, self.hw, self.gpus, self.local_experts
        t_wall0 = time.perf_counter()
        ids, counts_all, owner, mb_rows = self._step_tokens()
        E, K, h = m.num_experts, m.top_k, m.hidden_size
        ctx_lens = self.context + self._step_index
        decode_owner = owner[:self.batch]
        pf_owner = np.arange(self.prefill_requests) % G
        pf_mb = np.arange(self.prefill_requests) % self.microbatches
        link_bw = float(hw.interconnect.bandwidth_bytes_per_s_per_direction)
        link_lat = float(hw.interconnect.latency_s)
        vec_bytes = h * m.dtype_bytes
        gpu = hw.gpu
        flops_s = gpu.peak_flops_bf16 * gpu.compute_efficiency
        bytes_s = gpu.hbm_bandwidth_bytes_per_s * gpu.memory_efficiency
        expert_bytes = float(m.bytes_per_expert)
        expert_flops = 2.0 * m.params_per_expert
        expert_io = m.dtype_bytes * (2.0 * h + 2.0 * m.moe_intermediate_size)
        sched_s = gpu.scheduler_time_s(El) if self.dynamic else 0.0

        graph = Graph()

        names = self._resource_names

        def res(g: int, *kinds: str) -> tuple[str, ...]:
            key = (g, kinds)
            out = names.get(key)
            if out is None:
                out = names[key] = tuple(f"g{g}.{k}" for k in kinds)
            return out

        roof = lambda work: gpu_ops.roofline_s(work, hw)  # noqa: E731
        count = np.count_nonzero
        prev: dict[tuple[int, int], int] = {}
        for mb in range(self.microbatches):
            for g in range(G):
                tokens = int(np.count_nonzero(owner[mb_rows[mb]] == g))
                prev[(mb, g)] = graph.add(f"embedding g{g} mb{mb}", roof(gpu_ops.embedding(m, tokens)),
                                          res(g, "gpu", "hbm"), gpu=g, layer=-1, kind="embedding", microbatch=mb)
        layer_est = np.zeros(m.num_layers)
        n_gpu_exp = np.zeros(m.num_layers)
        n_pim_exp = np.zeros(m.num_layers)
        agg_nodes: list[list[int]] = [[] for _ in range(m.num_layers)]
        pim_unit = self.pimoe_unit or "channel"
        n_units = self.org.count(pim_unit)
        unit_busy = np.zeros((G, n_units))
        decisions = 0
        wall_decide = 0.0
        observed: dict[str | None, list[np.ndarray]] = {None: []}   # token counts run on PIM, per unit
        attn_ratio: dict[str, list[float]] = {}
        moe_index = {layer: i for i, layer in enumerate(m.moe_layer_indices)}
        unit_attention_nodes: list[tuple[int, int]] = []   # (gpu, node) of attention on PIM
        unit_expert_nodes: list[tuple[int, int, np.ndarray]] = []   # (gpu, node, share per unit)

        # per (micro-batch, GPU): decode context lengths, prefill prompts, tokens (same at every layer)
        lens_of: dict[tuple[int, int], np.ndarray] = {}
        pf_of: dict[tuple[int, int], list[int]] = {}
        for mb in range(self.microbatches):
            rows = mb_rows[mb]
            dec_rows = rows[rows < self.batch]
            for g in range(G):
                lens_of[(mb, g)] = ctx_lens[dec_rows[decode_owner[dec_rows] == g]]
                pf_of[(mb, g)] = [self.prefill_len] * int(np.count_nonzero((pf_owner == g) & (pf_mb == mb)))
        memo: dict[tuple, float] = {}

        def cached(key: tuple, fn) -> float:   # durations that repeat across layers of one kind
            value = memo.get(key)
            if value is None:
                value = memo[key] = fn()
            return value

        for layer in range(m.num_layers):
            kind = m.layer_attention[layer]
            is_moe = m.layer_mlp[layer] == "moe"
            for mb in range(self.microbatches):
                rows = mb_rows[mb]
                own = owner[rows]
                post: list[int] = []
                tokens_g: list[int] = []
                lens_g: list[np.ndarray] = []
                for g in range(G):
                    lens = lens_of[(mb, g)]
                    pf_lens = pf_of[(mb, g)]
                    tokens = int(lens.size) + sum(pf_lens)
                    tokens_g.append(tokens)
                    lens_g.append(lens)
                    pre = graph.add(f"L{layer} pre-attention g{g}",
                                    cached(("pre", kind, is_moe, tokens),
                                           lambda: roof(gpu_ops.pre_attention(m, layer, tokens))),
                                    res(g, "gpu", "hbm"), [prev[(mb, g)]], gpu=g, layer=layer, kind="pre_attention",
                                    microbatch=mb)
                    deps = [pre]
                    if self.gpu_only:
                        t_att = cached(("gpu-attn", kind, mb, g), lambda: roof(gpu_ops.decode_attention_on_gpu(m, layer, lens)))
                        deps.append(graph.add(f"L{layer} attention g{g}", t_att, res(g, "gpu", "hbm"), [pre],
                                              gpu=g, layer=layer, kind="attention", microbatch=mb))
                    elif lens.size:
                        t_att = cached(("pim-attn", kind, mb, g), lambda: self._attention_exec_s(kind, lens))
                        node = graph.add(f"L{layer} attention (PIM) g{g}", t_att, res(g, "pim"), [pre],
                                         gpu=g, layer=layer, kind="attention", microbatch=mb)
                        unit_attention_nodes.append((g, node))
                        deps.append(node)
                        roof_att = cached(("roof-attn", kind, mb, g), lambda: self._roof[kind].attention_time_s(lens))
                        if roof_att > 0:
                            attn_ratio.setdefault(kind, []).append(t_att / roof_att)
                    if pf_lens:
                        deps.append(graph.add(f"L{layer} prefill attention g{g}",
                                              roof(gpu_ops.prefill_attention(m, layer, pf_lens)), res(g, "gpu"),
                                              [pre], gpu=g, layer=layer, kind="prefill_attention", microbatch=mb))
                    post.append(graph.add(f"L{layer} o-proj+router g{g}",
                                          cached(("post", kind, is_moe, tokens),
                                                 lambda: roof(gpu_ops.post_attention(m, layer, tokens))),
                                          res(g, "gpu", "hbm"),
                                          deps, gpu=g, layer=layer, kind="post_attention", microbatch=mb))
                if not is_moe:
                    for g in range(G):
                        node = graph.add(f"L{layer} dense MLP g{g}", roof(gpu_ops.dense_mlp(m, tokens_g[g])),
                                         res(g, "gpu", "hbm"), [post[g]], gpu=g, layer=layer, kind="dense_mlp",
                                         microbatch=mb)
                        prev[(mb, g)] = node
                        agg_nodes[layer].append(node)
                        work = (gpu_ops.pre_attention(m, layer, tokens_g[g]) + gpu_ops.post_attention(m, layer, tokens_g[g])
                                + gpu_ops.dense_mlp(m, tokens_g[g]))
                        if self.gpu_only:
                            est = roof(work + gpu_ops.decode_attention_on_gpu(m, layer, lens_g[g]))
                        else:
                            est = max(roof(work), self._learned[kind].attention_time_s(lens_g[g]))
                        layer_est[layer] = max(layer_est[layer], est)
                    continue

                # ---------------- MoE layer
                li = moe_index[layer]
                mb_tokens = int(rows.size)
                if ids is not None:
                    lid = ids[rows, li, :]
                    if self.microbatches == 1:
                        counts = counts_all[li]
                    else:
                        counts = np.bincount(lid[lid >= 0].ravel(), minlength=E)
                    dest = np.where(lid >= 0, lid // El, -1)
                    hit = np.zeros((rows.size, G), dtype=bool)
                    r_idx = np.repeat(np.arange(rows.size), K)
                    d = dest.ravel()
                    hit[r_idx[d >= 0], d[d >= 0]] = True
                    hit[np.arange(rows.size), own] = False
                    send = np.bincount(own, weights=hit.sum(axis=1), minlength=G)
                    recv = hit.sum(axis=0).astype(np.float64)
                else:
                    counts = counts_all[li]
                    lid = None
                    pairs = counts.reshape(G, El).sum(axis=1).astype(np.float64)
                    send = recv = pairs * (G - 1) / G
                comm_ag = link_lat + (G - 1) * (mb_tokens / G) * K * 8.0 / link_bw if G > 1 else 0.0
                t_disp = [link_lat + max(send[g], recv[g]) * vec_bytes / link_bw if G > 1 else 0.0 for g in range(G)]

                # each GPU's local routing map: tokens of its own requests per expert (for early loads)
                own_counts = None
                if self.early_loads and lid is not None:
                    flat = (own[:, None] * E + lid)[lid >= 0]
                    own_counts = np.bincount(flat, minlength=G * E).reshape(G, E)
                ag_nodes = []
                if G > 1:
                    for g in range(G):
                        local_map = tokens_g[g] * K * 8.0
                        ag_nodes.append(graph.add(f"L{layer} allgather g{g}", link_lat + (G - 1) * local_map / link_bw,
                                                  res(g, "tx", "rx"), post, gpu=g, layer=layer, kind="allgather",
                                                  microbatch=mb))
                meta = [graph.add(f"L{layer} metadata g{g}", roof(gpu_ops.metadata(m, mb_tokens, El)), res(g, "gpu"),
                                  [ag_nodes[g] if G > 1 else post[g]], gpu=g, layer=layer, kind="metadata",
                                  microbatch=mb) for g in range(G)]
                disp = [graph.add(f"L{layer} dispatch g{g}", t_disp[g], res(g, "tx", "rx"), meta, gpu=g, layer=layer,
                                  kind="dispatch", microbatch=mb) for g in range(G)] if G > 1 else [None] * G
                outs: list[list[int]] = []
                shared_out: list[int | None] = []
                for g in range(G):
                    c = np.asarray(counts[g * El:(g + 1) * El], dtype=np.int64)
                    # the policy decides on its own estimate (Equation 1)
                    fixed = memo.get(("fixed", kind, mb, g))
                    if fixed is None:
                        fixed = non_moe_work(m, layer, tokens_g[g])
                        if self.gpu_only:
                            fixed = fixed + gpu_ops.decode_attention_on_gpu(m, layer, lens_g[g])
                        memo[("fixed", kind, mb, g)] = fixed
                    if self.gpu_only:
                        t_attn_est, pim_model = 0.0, self._no_pim
                    else:
                        pim_model = self._learned[kind]
                        t_attn_est = cached(("est-attn", kind, mb, g), lambda: pim_model.attention_time_s(lens_g[g]))
                    ctx = CostContext(t_comm_s=comm_ag + 2.0 * t_disp[g], t_attention_s=t_attn_est, gpu_fixed=fixed,
                                      gpu_flops_per_s=flops_s, gpu_bytes_per_s=bytes_s, expert_bytes=expert_bytes,
                                      expert_flops_per_token=expert_flops, expert_io_bytes_per_token=expert_io,
                                      pim=pim_model, batch=max(mb_tokens, 1), top_k=K, num_experts=El,
                                      organisation=self.org)
                    t0 = time.perf_counter()
                    part = self.policy.decide(c, ctx, validate=False)
                    wall_decide += time.perf_counter() - t0
                    decisions += 1
                    active = c > 0
                    on_pim = part.on_pim & active
                    on_gpu = ~part.on_pim & active
                    n_gpu, n_pim = count(on_gpu), count(on_pim)
                    gpu_tok = float(c[on_gpu].sum()) if n_gpu else 0.0
                    if part.unit is None:    # Equation 1 of this partition, as CostContext.evaluate computes it
                        est = max(ctx.t_comm_s, ctx.gpu_time_s(n_gpu, gpu_tok)[0],
                                  ctx.t_attention_s + (float(ctx.pim_times()[c[on_pim]].sum()) if n_pim else 0.0))
                    else:
                        est = part.evaluate(ctx).t_total_s
                    layer_est[layer] = max(layer_est[layer], est)
                    n_gpu_exp[layer] += n_gpu
                    n_pim_exp[layer] += n_pim

                    dec = graph.add(f"L{layer} decision g{g}", sched_s, (), [meta[g]], gpu=g, layer=layer,
                                    kind="decision", microbatch=mb)
                    after_dispatch = [dec] + ([disp[g]] if disp[g] is not None else [])
                    # shared experts: weights right after the router
                    shared = None
                    if m.num_shared_experts:
                        sl = graph.add(f"L{layer} shared-expert weights g{g}", m.shared_expert_bytes / bytes_s,
                                       res(g, "hbm"), [post[g]], gpu=g, layer=layer, kind="shared_load", microbatch=mb)
                        shared = graph.add(f"L{layer} shared-expert GEMM g{g}",
                                           roof(gpu_ops.shared_expert_gemm(m, tokens_g[g])), res(g, "gpu"),
                                           [sl], gpu=g, layer=layer, kind="shared_gemm", microbatch=mb)
                    shared_out.append(shared)
                    # early weight loads: experts with >= 2 tokens in this GPU's own routing map
                    early = np.zeros(El, dtype=bool)
                    early_node = None
                    if own_counts is not None:
                        early = own_counts[g, g * El:(g + 1) * El] >= 2
                        n_early = count(early)
                        if n_early:
                            early_node = graph.add(f"L{layer} early weight load g{g}",
                                                   n_early * expert_bytes / bytes_s, res(g, "hbm"),
                                                   [post[g]], gpu=g, layer=layer, kind="early_load",
                                                   experts=early, microbatch=mb)
                    out_nodes = []
                    if n_gpu:
                        late = on_gpu & ~early
                        deps_gemm = list(after_dispatch)
                        n_late = count(late)
                        if n_late:
                            deps_gemm.append(graph.add(f"L{layer} expert weights HBM->GPU g{g}",
                                                       n_late * expert_bytes / bytes_s, res(g, "hbm"), [dec],
                                                       gpu=g, layer=layer, kind="weight_load",
                                                       experts=late, microbatch=mb))
                        if n_late < n_gpu:     # some GPU experts were loaded early
                            deps_gemm.append(early_node)
                        tok = gpu_tok
                        t_gemm = max(expert_flops * tok / flops_s, expert_io * tok / bytes_s)
                        out_nodes.append(graph.add(f"L{layer} grouped GEMM g{g}", t_gemm, res(g, "gpu"), deps_gemm,
                                                   gpu=g, layer=layer, kind="gemm",
                                                   experts=on_gpu, microbatch=mb))
                    if n_pim:
                        n_e = c[on_pim]
                        if part.unit is None:
                            times = self._expert_exec_array(n_e, None)
                            t_pim = float(times.sum()) + self._hand_over_s
                            share = None
                            observed[None].append(n_e)
                        else:
                            times = self._expert_exec_array(n_e, part.unit)
                            busy = np.bincount(np.asarray(part.unit_of)[on_pim], weights=times,
                                               minlength=self.org.count(part.unit))
                            t_pim = float(busy.max()) + self._hand_over_s
                            share = busy / t_pim if t_pim > 0 else busy
                            observed.setdefault(part.unit, []).append(n_e)
                        node = graph.add(f"L{layer} experts on PIM g{g}", t_pim, res(g, "pim"), after_dispatch,
                                         gpu=g, layer=layer, kind="pim_experts",
                                         experts=on_pim, microbatch=mb)
                        unit_expert_nodes.append((g, node, share))
                        out_nodes.append(node)
                    if not out_nodes:     # no expert of this GPU was activated
                        out_nodes = after_dispatch
                    outs.append(out_nodes)
                all_outs = [n for o in outs for n in o]
                for g in range(G):
                    if G > 1:
                        comb = graph.add(f"L{layer} combine g{g}", t_disp[g], res(g, "tx", "rx"), all_outs, gpu=g,
                                         layer=layer, kind="combine", microbatch=mb)
                        deps = [comb]
                    else:
                        deps = list(outs[g])
                    if shared_out[g] is not None:
                        deps.append(shared_out[g])
                    node = graph.add(f"L{layer} aggregate g{g}", roof(gpu_ops.aggregate(m, tokens_g[g])),
                                     res(g, "gpu"), deps, gpu=g, layer=layer, kind="aggregate", microbatch=mb)
                    prev[(mb, g)] = node
                    agg_nodes[layer].append(node)

        head_nodes = []
        for g in range(G):
            logits = int(np.count_nonzero(decode_owner == g)) + int(np.count_nonzero(pf_owner == g))
            head_nodes.append(graph.add(f"LM head g{g}", roof(gpu_ops.lm_head(m, logits)), res(g, "gpu", "hbm"),
                                        [prev[(mb, g)] for mb in range(self.microbatches)], gpu=g, layer=m.num_layers,
                                        kind="lm_head"))
        schedule = execute(graph, self.contention)

        # ---------------- results of the step
        ends = schedule.end
        t_prev = max((ends[i] for i, meta in enumerate(graph.meta) if meta.get("kind") == "embedding"), default=0.0)
        layer_time = []
        for layer in range(m.num_layers):
            t_end = max(ends[i] for i in agg_nodes[layer])
            layer_time.append(t_end - t_prev)
            t_prev = t_end
        step_time = schedule.makespan
        head_est = max(roof(gpu_ops.lm_head(m, int(np.count_nonzero(decode_owner == g)))) for g in range(G))
        emb_est = roof(gpu_ops.embedding(m, self.batch // G))
        busy = {k: [schedule.busy.get(f"g{g}.{k}", 0.0) for g in range(G)] for k in _RESOURCE_KINDS}
        for g, node in unit_attention_nodes:
            unit_busy[g] += ends[node] - schedule.start[node]
        unit_expert_busy = np.zeros_like(unit_busy)
        for g, node, share in unit_expert_nodes:
            executed = ends[node] - schedule.start[node]
            unit_expert_busy[g] += executed if share is None else executed * share
        unit_busy += unit_expert_busy

        # the cost table learns the engine's times (the paper's warm-up)
        if not self.gpu_only:
            for unit, arrays in observed.items():
                if not arrays:
                    continue
                for n in np.unique(np.concatenate(arrays)).tolist():
                    key = ("expert", n) if unit is None else (("expert", unit), n)
                    self.table.update(key, self._t_exec[(unit, n)])
            for k, ratios in attn_ratio.items():
                self._attn_factor[k].update(float(np.mean(ratios)))
        if grow_contexts:
            self._step_index += 1
        return {
            "step_time_s": step_time,
            "estimated_step_time_s": float(layer_est.sum() + head_est + emb_est),
            "layer_time_s": layer_time,
            "estimated_layer_time_s": layer_est.tolist(),
            "experts_on_gpu": n_gpu_exp.tolist(),
            "experts_on_pim": n_pim_exp.tolist(),
            "busy_s": busy,
            "pim_unit": pim_unit,
            "pim_unit_busy_s": unit_busy.ravel().tolist(),
            "pim_unit_expert_busy_s": unit_expert_busy.ravel().tolist(),
            "decisions": decisions,
            "wall_decide_s": wall_decide,
            "wall_step_s": time.perf_counter() - t_wall0,
            "schedule": schedule,
        }

    def memory_estimate_bytes(self, steps: int = 1) -> float:
        """Bytes the largest PIM attention program of a step needs (program arrays and the engine's
        per-command state, about 32 bytes per MAC command), plus the step's routing arrays, with
        contexts ``steps`` tokens longer than now. Checked before running (``--max-memory``)."""
        m = self.model
        per_gpu = self.batch // self.gpus
        longest = float(self.context.max(initial=0)) + self._step_index + steps
        kv = max((m.kv_bytes_per_token(layer) for layer in range(m.num_layers)), default=0.0)
        if m.sliding_window and all(k == "sliding" for k in m.layer_attention):
            longest = min(longest, float(m.sliding_window))
        q_per_kv = max(1, m.num_attention_heads // max(1, m.num_kv_heads))
        macs = per_gpu * longest * kv / m.kv_bytes_per_element * q_per_kv
        pcs = self.org.count("pseudo_channel")
        commands = macs / pcs / (48 * 16) * 2       # 48 bank PUs x 16 MACs per all-bank command
        routing = (self.batch + self.prefill_requests * self.prefill_len) * m.num_moe_layers * m.top_k * 4 * 6
        return 32.0 * commands + routing

    def run(self, steps: int = 1, warmup: int = 2) -> StepResult:
        """Run ``warmup`` steps (the cost table learns; not reported), then ``steps`` measured steps."""
        from .._validate import check_memory

        for name, value, low in (("steps", steps, 1), ("warmup", warmup, 0)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not low <= value <= 10_000:
                raise field_error(name, value, f"an integer in [{low}, 10000]")
        need = self.memory_estimate_bytes(steps + warmup)
        check_memory(need, "a step with these contexts and this batch", "batch x context",
                     f"{self.batch} x {int(self.context.max(initial=0))}")
        for _ in range(warmup):
            self.run_step()
        raws = [self.run_step() for _ in range(steps)]

        def mean(key: str) -> list[float]:
            return np.mean([r[key] for r in raws], axis=0).tolist()

        decisions = sum(r["decisions"] for r in raws)
        return StepResult(
            settings=self.settings(steps, warmup),
            step_times_s=[r["step_time_s"] for r in raws],
            estimated_step_times_s=[r["estimated_step_time_s"] for r in raws],
            layer_time_s=mean("layer_time_s"), estimated_layer_time_s=mean("estimated_layer_time_s"),
            experts_on_gpu=mean("experts_on_gpu"), experts_on_pim=mean("experts_on_pim"),
            busy_s={k: np.mean([r["busy_s"][k] for r in raws], axis=0).tolist() for k in _RESOURCE_KINDS},
            pim_unit=raws[0]["pim_unit"], pim_unit_busy_s=mean("pim_unit_busy_s"),
            pim_unit_expert_busy_s=mean("pim_unit_expert_busy_s"),
            scheduler_us=(self.hw.gpu.scheduler_time_s(self.local_experts) * 1e6 if self.dynamic else 0.0),
            wall_decision_us=(sum(r["wall_decide_s"] for r in raws) / decisions * 1e6) if decisions else 0.0,
            wall_step_s=float(np.mean([r["wall_step_s"] for r in raws])),
            schedule=raws[-1]["schedule"],
        )


def simulate_step(model: Any, hardware: Any = "b200", *, gpus: int = 1, policy: str = "sieve", batch: int = 1,
                  trace: Any = None, context_len: int | None = None, context_preset: str | None = None,
                  prefill: Any = None, steps: int = 1, warmup: int = 2, seed: int = 0,
                  pimoe_unit: str | None = None, **options: Any) -> StepResult:
    """Simulate decode steps of ``model`` on ``gpus`` GPUs under ``policy``; see :class:`StepSimulator`
    for the parameters (``options``: ``early_loads``, ``microbatches``, ``contention``, ``alpha``,
    ``policy_options``, ``scheduler_latency_s``, ``exact_tokens``, ``top_k``).

    ``warmup`` steps run first so that the policy's cost table has learned the engine's times; the
    result averages the ``steps`` steps after them.
    """
    sim = StepSimulator(model, hardware, gpus=gpus, policy=policy, batch=batch, trace=trace,
                        context_len=context_len, context_preset=context_preset, prefill=prefill, seed=seed,
                        pimoe_unit=pimoe_unit, **options)
    return sim.run(steps=steps, warmup=warmup)
