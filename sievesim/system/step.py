"""One decode step of a real MoE model on G GPUs with HBM-PIM, executed as a dependency graph.

:func:`simulate_step` (and :class:`StepSimulator` behind it) builds, for every step, the graph of
the Sieve paper's Figure 8 for every layer and GPU (one function per node in
:mod:`sievesim.system.figure8`), asks the policy for each GPU's partition at each MoE layer (on the
policy's own estimates: Equation 1 with the EMA cost table), prices every node (GPU and link nodes
by the roofline and interconnect models, every PIM node by the cycle-accurate engine), executes the
graph with :func:`sievesim.system.dag.execute`, and then lets the cost table learn the engine's
times (the paper's warm-up). docs/system.md describes the graph, every duration's source and what
Equation 1 leaves out.

Parallelism: expert parallelism over the G GPUs (GPU ``g`` holds experts
``[g E/G, (g+1) E/G)`` and its PIM holds the same experts' weights), data-parallel attention with
``B / G`` decode requests per GPU (request ``i`` on GPU ``i // (B/G)``), prefill request ``j`` on
GPU ``j mod G``. Times are in seconds.
"""
from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from .. import __version__
from .._units import split_unit
from ..costs import DEFAULT_CONTEXT_LEN, PimCostTable, RooflinePimCost, attention_shape, pim_organisation, pim_peak_flops
from ..errors import ConfigError, field_error
from . import figure8 as f8
from .dag import Contention, Graph, Schedule, cyclic_gc_paused, execute
from .options import parse_policy_options, parse_prefill
from .parallelism import check_parallelism, check_pim_formats, check_redundant, sample_loads, with_nodes
from .pim_costs import EngineTimes, LearnedPimCost, _Ema
from .budget import _BYTES_PER_GPU_LAYER, StepBudget
from .result import StepResult

if TYPE_CHECKING:
    from ..hardware import HardwareSpec
    from ..models import ModelSpec

#: What names a model: a preset name, a path (``.toml`` or a Hugging Face ``config.json`` or its folder), a spec.
ModelLike = Union[str, "os.PathLike[str]", "ModelSpec"]
#: What names hardware: a preset name, a ``.toml`` path, or a spec.
HardwareLike = Union[str, "os.PathLike[str]", "HardwareSpec"]

__all__ = ["StepSimulator", "StepResult", "simulate_step", "GPU_ONLY", "parse_prefill", "parse_policy_options",
           "LearnedPimCost"]

#: Policy name of the reference without PIM: attention and every expert on the GPU.
GPU_ONLY = "gpu-only"
_RESOURCE_KINDS = ("gpu", "hbm", "pim", "tx", "rx")
#: Early-load rules (see :func:`sievesim.system.figure8.add_early_load`); True means the default.
EARLY_LOAD_RULES = ("cheaper", "paper", "policy", "off")


def _early_load_rule(value: Any) -> str:
    if value is True:
        return "cheaper"
    if value is False:
        return "off"
    if isinstance(value, str) and value in EARLY_LOAD_RULES:
        return value
    raise field_error("early_loads", value, f"true, false or one of {', '.join(EARLY_LOAD_RULES)}")


class StepSimulator(StepBudget):
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
        Which experts' weights start loading right after a GPU's router, before the decision (the
        paper's optimisation), for policies that may run experts on the GPU: ``"cheaper"`` (or
        True) those whose local tokens alone make the GPU the cheaper side on the policy's cost
        table, ``"paper"`` those with >= 2 local tokens, ``"off"`` (or False) none; ``None``: the
        policy's default (``Policy.early_loads``: ``"cheaper"``, ``"off"`` for PIMoE).
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
    pipelined_gemm:
        True (default): the grouped GEMM streams the next expert's weights while it computes (about
        max(loads, compute) plus one expert's tail); False: all weights, then the GEMM (their sum),
        for comparison.
    attention, experts:
        How the GPUs split the work: attention ``"dp"`` (data-parallel, the paper's: B/G requests
        per GPU, each with every head) or ``"tp"`` (tensor-parallel: every GPU sees every request
        and holds 1/G of the heads, :meth:`~sievesim.models.ModelSpec.tensor_shard`, with an
        all-reduce after the attention and after the MoE); experts ``"ep"`` (expert parallelism,
        E/G experts per GPU) or ``"tp"`` (every expert split over the GPUs by its intermediate
        size; only with tensor-parallel attention).
    redundant_experts:
        R extra replicas of the hottest experts (DeepSeek's EPLB; :mod:`sievesim.system.eplb`): the
        E + R replicas placed over the GPUs from the routing's loads so that the busiest GPU's load
        falls, a replicated expert's tokens split over its replicas. E + R must be a multiple of G;
        ``"auto"`` (default) takes the fewest that make it one (0 when G divides E).
    nodes:
        NVLink domains the G GPUs span (``None``: the hardware's ``interconnect.gpus_per_node``, one
        domain without it); GPUs of other nodes are reached over the scale-out network.
    dispatch:
        DeepEP's kernels across nodes: ``"low-latency"`` (default, pure RDMA: a token once to every GPU
        of another node that needs it) or ``"normal"`` (once per node, forwarded there over NVLink).
    gpu_model:
        ``"roofline"`` (the Sieve paper's: every GPU op at ``max(flops / peak, bytes / bw)``, links at
        ``latency + bytes / bw``) or ``"calibrated"`` (the default: kernels priced from their shape
        on a real GPU with fixed costs, format peaks and measured collective curves;
        :mod:`sievesim.costs.gpu_model`, docs/hardware.md).
    weight_format:
        Storage formats overriding the model's: ``"fp8"`` (every linear weight) or parts such as
        ``"experts=mxfp4"``, ``"experts=nvfp4,weights=fp8,kv=fp8"`` (:mod:`sievesim.formats`), or a
        dict of parts. Capacity and HBM traffic follow the bytes, GEMMs the format's tensor cores.
    top_k:
        Routed experts per token, overriding the model's (``None``: the model's). The Sieve paper
        evaluates Qwen3-30B-A3B with 4 where its ``config.json`` says 8; the calibrated synthetic
        routing of a preset draws this many experts per token with the preset's fitted shape.
    mtp_tokens, mtp_acceptance:
        Multi-token-prediction decoding (:mod:`sievesim.system.mtp`): k draft tokens per request per
        step (``None``: the model's ``mtp_tokens``; only a model with MTP layers takes k > 0) and the
        acceptance rate of a draft token (default 0.85, the DeepSeek-V3 report's low end).
    """

    def __init__(self, model: ModelLike, hardware: HardwareLike = "b200", *, gpus: int = 1, policy: str = "sieve",
                 batch: int = 1, trace: Any = None, context_len: int | None = None,
                 context_preset: str | None = None, prefill: Any = None, seed: int = 0,
                 pimoe_unit: str | None = None, early_loads: bool | str | None = None, microbatches: int = 1,
                 contention: bool = True, alpha: float = 0.5,
                 policy_options: dict[str, Any] | None = None,
                 scheduler_latency_s: float | None = None, exact_tokens: int = 256,
                 top_k: int | None = None, pipelined_gemm: bool = True, energy: bool = True,
                 gpu_model: str | None = None, weight_format: Any = None, attention: str = "dp",
                 experts: str = "ep", nodes: int | None = None, redundant_experts: int | str = "auto",
                 dispatch: str = "low-latency", attention_on: str = "pim", mtp_tokens: int | None = None,
                 mtp_acceptance: float | None = None) -> None:
        from ..hardware import get_hardware
        from ..models import get_model

        from .._validate import check_optional_str, check_strict_bool

        self.model = get_model(model)      # a ModelSpec, a preset name or a path; anything else: TypeError
        if top_k is not None:  # the paper's setting where it differs from the config (Qwen3-30B-A3B: 4 vs 8)
            from .._validate import check_int
            check_int("top_k", top_k, "experts", hi=self.model.num_experts)
            self.model = self.model.with_top_k(int(top_k))
        if weight_format is not None:
            from ..formats import parse_weight_formats
            parts = weight_format if isinstance(weight_format, dict) else parse_weight_formats(weight_format,
                                                                                               "weight_format")
            self.model = self.model.with_formats(parts)
        from .mtp import check_mtp
        self.model, self.mtp_tokens, self.mtp_acceptance = check_mtp(self.model, mtp_tokens, mtp_acceptance)
        self.mtp_queries = 1 + self.mtp_tokens     # token rows per decode request (its own + the drafts)
        self.hw = get_hardware(hardware)   # a HardwareSpec, a preset name or a path
        check_optional_str("context_preset", context_preset, "a request-length preset name")
        contention = check_strict_bool("contention", contention)
        if scheduler_latency_s is not None:
            import dataclasses
            if isinstance(scheduler_latency_s, (bool, np.bool_)) or not isinstance(scheduler_latency_s,
                                                                                   (int, float, np.integer, np.floating)):
                raise TypeError(f"scheduler_latency_s = {scheduler_latency_s!r:.60}: expected a latency in seconds "
                                f"(a number), got {type(scheduler_latency_s).__name__}")
            if not (0 <= scheduler_latency_s < 1):
                raise field_error("scheduler_latency_s", scheduler_latency_s, "a latency in seconds, >= 0 and < 1")
            self.hw = dataclasses.replace(self.hw, gpu=dataclasses.replace(
                self.hw.gpu, scheduler_latency_s=float(scheduler_latency_s)))
        self.attention_mode, self.expert_mode = check_parallelism(attention, experts)
        self.redundant_experts = check_redundant(redundant_experts, self.expert_mode)
        self.tp_attention = self.attention_mode == "tp"
        self._check_sizes(gpus, batch, microbatches, seed, exact_tokens)
        #: The whole model (routing, settings); ``self.model`` is one GPU's share of it under
        #: tensor parallelism (the same object otherwise).
        self.full_model = self.model
        if self.tp_attention:
            self.model = self.full_model.tensor_shard(self.gpus, experts=self.expert_mode == "tp")
        if not isinstance(pipelined_gemm, bool):
            raise field_error("pipelined_gemm", pipelined_gemm, "true or false")
        self.pipelined_gemm = pipelined_gemm
        self.hw, self.nodes = with_nodes(self.hw, self.gpus, nodes)
        self._choose_policy(policy, pimoe_unit, policy_options, early_loads, contention)
        if attention_on not in ("pim", "gpu"):
            raise field_error("attention_on", attention_on, "'pim' (the paper's: decode attention on PIM) or 'gpu'")
        #: Decode attention runs on the GPU (the GPU-only reference, or ``attention_on="gpu"``: the
        #: experts are still split between GPU and PIM).
        self.attention_on_gpu = self.gpu_only or attention_on == "gpu"
        from ..costs.gpu_model import DEFAULT_GPU_MODEL, gpu_model as _gpu_model
        self.gpu_model = _gpu_model(DEFAULT_GPU_MODEL if gpu_model is None else gpu_model, self.hw,
                                    self.model.expert_tensor_core, dispatch)
        self.dispatch = self.gpu_model.dispatch
        check_pim_formats(self.model, self.hw, self.gpu_only)
        self._open_routing(trace)
        self.placement = None
        if self.redundant_experts:     # from the routing's loads over a few steps of their own
            from .eplb import place
            self.placement = place(sample_loads(self.source, self.batch, self.seed), self.gpus,
                                   self.redundant_experts)
        self._request_lengths(context_len, context_preset, prefill)
        self._step_index = 0
        self.check_capacity(0)
        self._pim_costs(alpha)
        if not isinstance(energy, bool):
            raise field_error("energy", energy, "true or false")
        from .energy import StepEnergy
        model_energy = StepEnergy(self.hw, self.engine_times) if energy else None
        #: The energy model (None: switched off, or the hardware gives no energy fields).
        self.energy = model_energy if model_energy is not None and model_energy.available else None
        self._resource_names: dict[tuple[int, tuple[str, ...]], tuple[str, ...]] = {}
        self._moe_index = {layer: i for i, layer in enumerate(self.model.moe_layer_indices)}
        self._step_index = 0

    # ------------------------------------------------------------------ construction
    def expert_offset(self, g: int) -> int:
        """Global id of GPU ``g``'s first local expert (every GPU holds every expert's shard under
        tensor-parallel experts)."""
        return 0 if self.expert_mode == "tp" else g * self.local_experts

    def _choose_policy(self, policy: str, pimoe_unit: str | None, policy_options: dict[str, Any] | None,
                       early_loads: bool | str | None, contention: bool) -> None:
        """The policy (or the GPU-only reference), its options and what it implies for the step."""
        from ..policies import get_policy, policy_class

        hw = self.hw
        self.gpu_only = str(policy).lower() == GPU_ONLY
        pol_name = "noexp" if self.gpu_only else str(policy).lower()
        cls = policy_class(pol_name)
        if pimoe_unit is not None and pol_name != "pimoe":
            raise field_error("pimoe_unit", pimoe_unit, "only with policy pimoe")
        from ..policies.options import check_policy_options

        options = check_policy_options(cls, policy_options, prefix="policy_options ")
        if pimoe_unit is not None:
            check_policy_options(cls, {"unit": pimoe_unit}, prefix="pimoe_")
            if options.get("unit", pimoe_unit) != pimoe_unit:
                raise field_error("policy_options unit", options["unit"], f"the same unit as pimoe_unit = "
                                  f"{pimoe_unit!r}, or only one of them")
            options["unit"] = pimoe_unit
        self.policy_options = {k: v for k, v in options.items() if k != "unit"}
        self.policy = get_policy(pol_name, **options)
        self.policy_name = GPU_ONLY if self.gpu_only else cls.name
        self.pimoe_unit = getattr(self.policy, "unit", None) if cls.name == "pimoe" else None
        if self.pimoe_unit is not None:   # PIMoE's static placement must fit the PIM units
            from ..policies.placement import check_pimoe_capacity
            check_pimoe_capacity(self.model, hw, self.gpus, self.pimoe_unit, self.redundant_experts)
        if not self.gpu_only and getattr(hw, "pim", None) is None:
            raise field_error("hardware", hw.name, f"hardware with PIM for policy {self.policy_name!r} "
                                                   f"(or policy {GPU_ONLY!r})")
        self.dynamic = cls.static_placement is None
        self.static_placement = cls.static_placement
        rule = self.policy.early_loads if early_loads is None else _early_load_rule(early_loads)
        if rule == "policy" and self.policy.early_loads != "policy":
            raise field_error("early_loads", early_loads, f"true, false, cheaper, paper or off (policy "
                                                          f"{self.policy.name!r} names no early experts)")
        self.early_loads = rule if cls.static_placement != "pim" else "off"
        self.contention_on = bool(contention) and not self.gpu_only

    def _open_routing(self, trace: Any) -> None:
        """The routing stream of the step (see the ``trace`` parameter), checked against the model."""
        m = self.model
        from ..workload.batches import open_source
        from ..workload.routing import RoutingSource
        if trace is None:
            from ..workload.synthetic import source_for_model
            self.source, spec = source_for_model(m)   # with the model's routing groups: docs/workloads.md
        elif isinstance(trace, RoutingSource):
            spec, self.source = getattr(trace, "name", "source"), trace
        else:
            spec = str(trace)
            like = {"num_layers": m.num_moe_layers} if spec.startswith("synthetic:like-") else {}   # as printed
            self.source = open_source(spec, num_experts=m.num_experts, top_k=m.top_k, **like)
        self.routing = spec
        src = self.source
        for fld, have, want in (("experts", src.num_experts, m.num_experts), ("top_k", src.top_k, m.top_k),
                                ("MoE layers", src.num_layers, m.num_moe_layers)):
            if have != want:
                raise field_error(f"routing {fld}", have, f"{want}, as model {m.name!r} has (routing {spec!r})")
        self.stream = src.stream(self.batch * self.mtp_queries, seed=self.seed)

    def _request_lengths(self, context_len: int | None, context_preset: str | None, prefill: Any) -> None:
        """Decode context lengths (fixed or drawn from a preset) and the colocated prefill requests."""
        from .._validate import check_int

        src = self.source
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

    def _pim_costs(self, alpha: float) -> None:
        """The engine that prices PIM nodes (per attention kind) and the policy's learned cost table."""
        m, hw = self.model, self.hw
        self.org = pim_organisation(hw)
        self.contention: tuple[Contention, ...] = ()
        self._no_pim = RooflinePimCost(2.0 * m.params_per_expert, 1.0, None, self.org)
        kinds = tuple(dict.fromkeys(m.layer_attention))
        self._layer_of_kind = {k: m.layer_attention.index(k) for k in kinds}
        engines: dict[str, Any] = {}
        if not self.gpu_only:
            from ..pim.expert import EnginePimCost
            for k, layer in self._layer_of_kind.items():
                engines[k] = EnginePimCost.for_model(m, hw, layer=layer)
        self.engine_times = EngineTimes(engines, self.exact_tokens)
        if self.gpu_only:
            return
        # one GPU-PIM hand-over per layer's PIM experts (each expert's own time leaves it out)
        self._hand_over_s = float(self.engine_times.device.sync_latency_s)
        peak = pim_peak_flops(hw)
        self.table = PimCostTable(RooflinePimCost(2.0 * m.params_per_expert, peak, None, self.org), alpha=alpha)
        self._attn_factor = {k: _Ema(1.0, alpha) for k in kinds}
        self._roof = {k: RooflinePimCost(2.0 * m.params_per_expert, peak, attention_shape(m, layer), self.org)
                      for k, layer in self._layer_of_kind.items()}
        self._learned = {k: LearnedPimCost(self.table, self._roof[k], self._attn_factor[k]) for k in kinds}
        if self.contention_on:
            from ..pim.contention import measure_contention
            f = measure_contention(self.engine_times.device, m.hidden_size, 2 * m.moe_intermediate_size, 1)
            self.contention_factors = f
            self.contention = tuple(Contention(f"g{g}.pim", f"g{g}.hbm", f.pim_slowdown, f.hbm_slowdown)
                                    for g in range(self.gpus))

    # ------------------------------------------------------------------ settings
    def settings(self, steps: int, warmup: int) -> dict[str, Any]:
        return {
            "model": self.full_model.name, "top_k": self.model.top_k, "hardware": self.hw.name, "gpus": self.gpus,
            "policy": self.policy_name,
            "pimoe_unit": self.pimoe_unit, "policy_options": dict(self.policy_options), "batch": self.batch, "prefill_requests": self.prefill_requests,
            "prefill_len": self.prefill_len, "context": self.context_desc, "routing": self.routing,
            "seed": self.seed, "steps": steps, "warmup": warmup, "microbatches": self.microbatches,
            "early_loads": self.early_loads, "contention": self.contention_on,
            "pipelined_gemm": self.pipelined_gemm,
            "attention": self.attention_mode, "experts": self.expert_mode, "nodes": self.nodes,
            "redundant_experts": self.redundant_experts, "dispatch": self.dispatch,
            "attention_on": "gpu" if self.attention_on_gpu else "pim",
            "gpu_model": self.gpu_model.name,
            "expert_format": self.model.expert_format or "bf16",
            "weight_format": self.model.weight_format or "bf16",
            "kv_format": self.model.kv_format or "bf16",
            "scheduler_latency_us_per_256_experts": self.hw.gpu.scheduler_latency_s * 1e6,
            "sievesim_version": __version__,
            **({"mtp_tokens": self.mtp_tokens, "mtp_acceptance": self.mtp_acceptance} if self.mtp_tokens else {}),
        }

    # ------------------------------------------------------------------ one step
    def _step_tokens(self) -> tuple[np.ndarray | None, np.ndarray, np.ndarray, list[np.ndarray]]:
        """Routing ids (T, L_moe, K) or None, counts (L_moe, E) of the whole step, the owner GPU
        of each row, and the rows of each micro-batch."""
        step = self.stream.step()
        ids = step.topk_ids
        b, g = self.batch, self.gpus
        draft_ids = ids[b:] if ids is not None and self.mtp_tokens else None
        ids = ids[:b] if draft_ids is not None else ids
        local = b if self.tp_attention else b // g
        owner = np.arange(b, dtype=np.int64) // local     # tensor-parallel attention: every row "on GPU 0"
        mb = (np.arange(b) % local) * self.microbatches // local
        if self.prefill_requests:
            n_pf = self.prefill_requests * self.prefill_len
            pf_ids = self.source.sample_tokens(self._prefill_rng, n_pf)
            ids = np.concatenate([ids, pf_ids]) if ids is not None else None
            req = np.repeat(np.arange(self.prefill_requests), self.prefill_len)
            owner = np.concatenate([owner, req % g if not self.tp_attention else np.zeros_like(req)])
            mb = np.concatenate([mb, req % self.microbatches])
        if self.mtp_tokens:    # the k B verification rows, after the decode and prefill rows
            from .mtp import append_draft_rows
            ids, owner, mb = append_draft_rows(ids, draft_ids, owner, mb, owner[:b], mb[:b], self.mtp_tokens)
        if ids is None:
            if self.microbatches > 1:
                raise field_error("microbatches", self.microbatches, "1 with a count-only routing source")
            counts = np.asarray(step.counts, dtype=np.int64)
            if counts.max(initial=0) > self.batch * self.mtp_queries:
                raise field_error("routing count", int(counts.max()), f"at most the step's rows "
                                  f"B (1 + mtp_tokens) = {self.batch * self.mtp_queries}")
        else:
            ids, counts = self._on_slots(ids)
        if ids is None and self.placement is not None:
            counts = self.placement.split_counts(counts)
        rows = [np.flatnonzero(mb == k) for k in range(self.microbatches)]
        return ids, counts, owner, rows

    def _on_slots(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Routing ids of experts ``(T, L_moe, K)`` -> ids of the slots the GPUs hold (a replicated
        expert's tokens over its replicas) and the tokens per slot ``(L_moe, slots)``."""
        if self.placement is not None:
            return self.placement.slots_and_counts(ids)
        from ..workload.routing import counts_from_ids
        return ids, counts_from_ids(ids, self.num_slots)

    def run_step(self, *, grow_contexts: bool = True) -> dict[str, Any]:
        """Simulate one step; returns its raw results. The routing stream advances; the contexts
        grow by one token afterwards unless ``grow_contexts`` is False (benchmarks use that to time
        a step whose PIM programs were all simulated before).

        The graph is built layer by layer in Figure 8's order, one :mod:`~sievesim.system.figure8`
        function per node, then executed, with the cyclic garbage collector paused
        (:func:`~sievesim.system.dag.cyclic_gc_paused`)."""
        with cyclic_gc_paused():
            return self._run_step(grow_contexts)

    def _run_step(self, grow_contexts: bool) -> dict[str, Any]:
        t_wall0 = time.perf_counter()
        b = self._new_build()
        G = self.gpus
        for mb in range(self.microbatches):
            f8.add_embedding(b, mb)
            if self.mtp_tokens:
                from .mtp import add_draft_passes
                add_draft_passes(b, mb)
        for lb in self._layer_batches(b):
            post = f8.add_attention(b, lb)
            if not lb.is_moe:
                f8.add_dense_mlp(b, lb, post)
                continue
            r = f8.route(b, lb)
            meta = f8.add_metadata(b, lb, r, f8.add_allgather(b, lb, post) or post)
            disp = f8.add_dispatch(b, lb, r, meta)
            outs, shared_out = f8.add_experts(b, lb, r, post, meta, disp)
            f8.add_combine_aggregate(b, lb, r, outs, shared_out)
        decode_owner = b.owner[:self.batch]
        pf_owner = np.arange(self.prefill_requests) % G
        if self.tp_attention:
            decode_owner, pf_owner = np.zeros_like(decode_owner), np.zeros_like(pf_owner)
        f8.add_lm_head(b, np.tile(decode_owner, self.mtp_queries), pf_owner)   # logits of every verified row
        schedule = execute(b.graph, self.contention)
        out = self._step_results(b, schedule, decode_owner)
        self._learn(b)
        if grow_contexts:
            self._step_index += 1
        out["wall_step_s"] = time.perf_counter() - t_wall0
        return out

    def _new_build(self) -> f8.StepBuild:
        """The shared state of one step's graph: this step's routing and contexts, the hardware rates."""
        hw = self.hw
        ids, counts_all, owner, mb_rows = self._step_tokens()
        if counts_all.shape[-1] != self.num_slots:     # a routing of experts where the GPUs hold slots
            raise ConfigError(f"the step's routing counts {counts_all.shape[-1]} experts per layer, its GPUs "
                              f"hold {self.num_slots} slots (num_experts + redundant_experts): map the experts "
                              "to their replicas' slots (Placement.to_slots) first")
        return f8.StepBuild(
            sim=self, graph=Graph(), ids=ids, counts_all=counts_all, owner=owner, mb_rows=mb_rows,
            ctx_lens=self.context + self._step_index,
            flops_s=self.gpu_model.expert_flops_s, bytes_s=self.gpu_model.stream_bytes_s,
            link_bw=float(hw.interconnect.bandwidth_bytes_per_s_per_direction),
            link_lat=float(hw.interconnect.latency_s),
            dynamic=self.dynamic, gm=self.gpu_model)

    def _layer_batches(self, b: f8.StepBuild):
        """Every (layer, micro-batch) of the step in execution order, with its per-GPU tokens and lengths."""
        m, G = self.model, self.gpus
        decode_owner = b.owner[:self.batch]
        pf_owner = np.arange(self.prefill_requests) % G
        pf_mb = np.arange(self.prefill_requests) % self.microbatches
        per_mb = []
        for mb in range(self.microbatches):
            rows = b.mb_rows[mb]
            dec_rows = rows[rows < self.batch]
            if self.tp_attention:   # every GPU sees every request (with its share of the heads)
                lens_g = [b.ctx_lens[dec_rows]] * G
                pf_g = [[self.prefill_len] * int(np.count_nonzero(pf_mb == mb))] * G
            else:
                lens_g = [b.ctx_lens[dec_rows[decode_owner[dec_rows] == g]] for g in range(G)]
                pf_g = [[self.prefill_len] * int(np.count_nonzero((pf_owner == g) & (pf_mb == mb))) for g in range(G)]
            tokens_g = [int(lens_g[g].size) * self.mtp_queries + sum(pf_g[g]) for g in range(G)]
            per_mb.append((rows, b.owner[rows], tokens_g, lens_g, pf_g))
        for layer in range(m.num_layers):
            kind, is_moe = m.layer_attention[layer], m.layer_mlp[layer] == "moe"
            for mb, (rows, own, tokens_g, lens_g, pf_g) in enumerate(per_mb):
                yield f8.LayerBatch(layer, kind, is_moe, mb, rows, own, tokens_g, lens_g, pf_g)

    def _step_results(self, b: f8.StepBuild, schedule: Schedule, decode_owner: np.ndarray) -> dict[str, Any]:
        """Executed and estimated times of one step, busy times per resource and per PIM unit."""
        m, G, graph = self.model, self.gpus, b.graph
        ends = schedule.end
        t_prev = max((ends[i] for i in b.embedding_nodes), default=0.0)
        layer_time = []
        for layer in range(m.num_layers):
            t_end = max(ends[i] for i in b.agg_nodes[layer])
            layer_time.append(t_end - t_prev)
            t_prev = t_end
        head_est = max(b.roof(f8.gpu_ops.lm_head(m, int(np.count_nonzero(decode_owner == g)) * self.mtp_queries))
                       for g in range(G))
        emb_est = b.roof(f8.gpu_ops.embedding(m, self.batch // G))
        busy = {k: [schedule.busy.get(f"g{g}.{k}", 0.0) for g in range(G)] for k in _RESOURCE_KINDS}
        pim_unit = split_unit(self.pimoe_unit)[0] if self.pimoe_unit else "channel"   # per base unit
        unit_busy = np.zeros((G, self.org.count(pim_unit)))
        for g, node in b.unit_attention_nodes:
            unit_busy[g] += ends[node] - schedule.start[node]
        unit_expert_busy = np.zeros_like(unit_busy)
        for g, node, share in b.unit_expert_nodes:
            executed = ends[node] - schedule.start[node]
            # a PIMoE group of S base units ("channel*4"): its busy time on each of its S units
            unit_expert_busy[g] += executed if share is None else executed * np.repeat(share, unit_busy.shape[1] // share.size)
        unit_busy += unit_expert_busy
        energy = self.energy.step(graph, schedule.makespan, G) if self.energy is not None else None
        return {
            "energy_j": energy,
            "step_time_s": schedule.makespan,
            "estimated_step_time_s": float(b.layer_est.sum() + head_est + emb_est),
            "layer_time_s": layer_time,
            "estimated_layer_time_s": b.layer_est.tolist(),
            "experts_on_gpu": b.n_gpu_exp.tolist(),
            "experts_on_pim": b.n_pim_exp.tolist(),
            "busy_s": busy,
            "pim_unit": pim_unit,
            "pim_unit_busy_s": unit_busy.ravel().tolist(),
            "pim_unit_expert_busy_s": unit_expert_busy.ravel().tolist(),
            "decisions": b.decisions,
            "decision_s": b.decision_s,
            "early_load_bytes": b.early_load_bytes,
            "early_load_wasted_bytes": b.early_load_wasted_bytes,
            "wall_decide_s": b.wall_decide,
            "schedule": schedule,
        }

    def _learn(self, b: f8.StepBuild) -> None:
        """The cost table learns the engine's times of this step (the paper's warm-up)."""
        if self.gpu_only:
            return
        for unit, arrays in b.observed.items():
            if not arrays:
                continue
            for n in np.unique(np.concatenate(arrays)).tolist():
                key = ("expert", n) if unit is None else (("expert", unit), n)
                self.table.update(key, self.engine_times.expert_s(n, unit))
        for k, ratios in b.attn_ratio.items():
            self._attn_factor[k].update(float(np.mean(ratios)))

    def run(self, steps: int = 1, warmup: int = 2, *, on_step: Any = None) -> StepResult:
        """Run ``warmup`` steps (the cost table learns; not reported), then ``steps`` measured steps;
        ``on_step()`` is called after each (a progress bar's ``update``)."""
        from .._validate import check_memory

        for name, value, low in (("steps", steps, 1), ("warmup", warmup, 0)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not low <= value <= 10_000:
                raise field_error(name, value, f"an integer in [{low}, 10000]")
        from .._validate import check_work
        check_work(self.work_estimate_s(steps + warmup), f"{steps + warmup} steps of {self.model.name} on "
                   f"{self.gpus} GPUs at batch {self.batch}", "steps + warmup", steps + warmup)
        self.check_capacity(steps + warmup)
        need = self.memory_estimate_bytes(steps + warmup)
        graphs = _BYTES_PER_GPU_LAYER * self.gpus * self.model.num_layers
        if graphs > need / 2:
            check_memory(need, f"the layer graphs of {self.gpus} GPUs x {self.model.num_layers} layers", "gpus",
                         self.gpus)
        check_memory(need, "a step with these contexts and this batch", "batch x context",
                     f"{self.batch} x {int(self.context.max(initial=0))}")
        raws = []
        for i in range(warmup + steps):
            raw = self.run_step()
            if i >= warmup:
                raws.append(raw)
            if on_step is not None:
                on_step()

        def mean(key: str) -> list[float]:
            return np.mean([r[key] for r in raws], axis=0).tolist()

        decisions = sum(r["decisions"] for r in raws)
        from .mtp import tokens_per_request
        return StepResult(
            settings=self.settings(steps, warmup),
            step_times_s=[r["step_time_s"] for r in raws],
            estimated_step_times_s=[r["estimated_step_time_s"] for r in raws],
            layer_time_s=mean("layer_time_s"), estimated_layer_time_s=mean("estimated_layer_time_s"),
            experts_on_gpu=mean("experts_on_gpu"), experts_on_pim=mean("experts_on_pim"),
            busy_s={k: np.mean([r["busy_s"][k] for r in raws], axis=0).tolist() for k in _RESOURCE_KINDS},
            pim_unit=raws[0]["pim_unit"], pim_unit_busy_s=mean("pim_unit_busy_s"),
            pim_unit_expert_busy_s=mean("pim_unit_expert_busy_s"),
            scheduler_us=(sum(r["decision_s"] for r in raws) / decisions * 1e6) if decisions and self.dynamic else 0.0,
            early_load_bytes=float(np.mean([r["early_load_bytes"] for r in raws])),
            early_load_wasted_bytes=float(np.mean([r["early_load_wasted_bytes"] for r in raws])),
            memory_per_gpu_bytes=self.memory_use(steps + warmup).as_dict(),
            wall_decision_us=(sum(r["wall_decide_s"] for r in raws) / decisions * 1e6) if decisions else 0.0,
            wall_step_s=float(np.mean([r["wall_step_s"] for r in raws])),
            schedule=raws[-1]["schedule"],
            tokens_per_request_per_step=tokens_per_request(self.mtp_tokens, self.mtp_acceptance),
            energy_j=({k: float(np.mean([r["energy_j"][k] for r in raws])) for k in raws[0]["energy_j"]}
                      if raws[0]["energy_j"] is not None else None),
        )


def simulate_step(model: ModelLike, hardware: HardwareLike = "b200", *, gpus: int = 1, policy: str = "sieve", batch: int = 1,
                  trace: Any = None, context_len: int | None = None, context_preset: str | None = None,
                  prefill: Any = None, steps: int = 1, warmup: int = 2, seed: int = 0,
                  pimoe_unit: str | None = None, **options: Any) -> StepResult:
    """Simulate decode steps of ``model`` on ``gpus`` GPUs under ``policy``; see :class:`StepSimulator`
    for the parameters (``options``: ``early_loads``, ``microbatches``, ``contention``, ``alpha``,
    ``policy_options``, ``scheduler_latency_s``, ``exact_tokens``, ``top_k``, ``pipelined_gemm``,
    ``energy``: False leaves the energy model out).

    ``model``: a preset name, a ``.toml`` or Hugging Face ``config.json`` path (str or
    ``os.PathLike``), or a :class:`~sievesim.models.ModelSpec`; ``hardware`` likewise (preset,
    ``.toml`` path, :class:`~sievesim.hardware.HardwareSpec`). ``batch``: decode requests over all
    GPUs; ``context_len``: tokens per request (default 4096). Returns a :class:`StepResult`
    (times in seconds; ``nodes()`` for the executed graph of the last step).

    ``warmup`` steps run first so that the policy's cost table has learned the engine's times; the
    result averages the ``steps`` steps after them.
    """
    sim = StepSimulator(model, hardware, gpus=gpus, policy=policy, batch=batch, trace=trace,
                        context_len=context_len, context_preset=context_preset, prefill=prefill, seed=seed,
                        pimoe_unit=pimoe_unit, **options)
    return sim.run(steps=steps, warmup=warmup)
