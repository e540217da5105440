"""The cost context the policies see (Equation 1) and how it is built from the specs (times in seconds)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..errors import ConfigError, field_error
from .gpu import (CommBreakdown, GpuWork, attention_shape, comm_time_s, dispatch_pairs_from_routing, non_moe_work,
                  shared_expert_work)
from .pim_cost import PimCostModel, PimOrganisation, RooflinePimCost, _expert_time_array


# --------------------------------------------------------------------------------------------
# The cost context the policies see
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CostBreakdown:
    """Estimated times of one partition [s]; ``unit_busy_s`` only for expert-parallel PIM."""

    t_total_s: float
    t_comm_s: float
    t_gpu_s: float
    t_offchip_s: float
    t_comp_s: float
    t_pim_s: float
    t_attention_s: float
    unit_busy_s: np.ndarray | None = None

    def as_dict(self) -> dict[str, Any]:
        d = {k: float(getattr(self, k)) for k in ("t_total_s", "t_comm_s", "t_gpu_s", "t_offchip_s",
                                                    "t_comp_s", "t_pim_s", "t_attention_s")}
        if self.unit_busy_s is not None:
            d["unit_busy_s"] = [float(x) for x in self.unit_busy_s]
        return d


@dataclass
class CostContext:
    """Everything a policy needs to price a partition of one GPU's experts at one layer.

    Times in seconds, bytes, FLOPs; ``gpu_flops_per_s`` and ``gpu_bytes_per_s`` are effective
    (peak times the efficiency factors). ``batch`` is the global batch ``B`` (tokens of this
    step), so a valid count vector has every count <= ``batch`` and sums to at most
    ``batch * top_k``. ``num_experts`` is the number of experts this GPU holds (valid local ids
    are ``0..num_experts-1``).
    """

    t_comm_s: float
    t_attention_s: float
    gpu_fixed: GpuWork
    gpu_flops_per_s: float
    gpu_bytes_per_s: float
    expert_bytes: float
    expert_flops_per_token: float
    expert_io_bytes_per_token: float
    pim: PimCostModel
    batch: int
    top_k: int
    num_experts: int
    organisation: PimOrganisation = field(default_factory=PimOrganisation)
    comm: CommBreakdown | None = None
    #: Index of this layer among the model's MoE layers (0 = the first). Only PIMoE's static
    #: placement depends on it (its round robin continues from layer to layer).
    moe_layer: int = 0
    #: GPUs the batch is spread over (``batch / gpus`` requests per GPU).
    gpus: int = 1
    #: GPU work of the layer that runs beside its routed experts in the executed graph (the shared
    #: experts' weights and GEMMs, issued right after the router); part of ``gpu_fixed`` as well.
    gpu_beside: GpuWork = field(default_factory=GpuWork)
    #: The executed layer's time [s] of a partition (its experts' phase on this GPU, from the router
    #: to its last expert output), where the step offers it to an oracle; None elsewhere.
    executed_s: Any = None
    #: Micro-batches of the step (``batch`` is one micro-batch's tokens): with more than one, another
    #: micro-batch's attention and non-MoE work run beside this one's experts.
    microbatches: int = 1

    def __post_init__(self) -> None:
        for name in ("t_comm_s", "t_attention_s", "expert_bytes", "expert_flops_per_token",
                     "expert_io_bytes_per_token"):
            v = getattr(self, name)
            if not (v >= 0 and math.isfinite(v)):
                raise field_error(name, v, "a finite number >= 0")
        for name in ("gpu_flops_per_s", "gpu_bytes_per_s"):
            v = getattr(self, name)
            if not (v > 0 and math.isfinite(v)):
                raise field_error(name, v, "a finite number > 0")
        for name in ("gpus", "microbatches"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise field_error(name, v, "a positive integer")
        for name in ("batch", "top_k", "num_experts", "moe_layer"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 0:
                raise field_error(name, v, "a non-negative integer")
        self._tables: dict[str | None, np.ndarray] = {}
        self._tables_version = getattr(self.pim, "version", None)
        # Constants of T_GPU(k experts, x tokens) = max(off0 + off_e*k + off_t*x, comp0 + comp_t*x).
        self._off0 = self.gpu_fixed.bytes / self.gpu_bytes_per_s
        self._off_e = self.expert_bytes / self.gpu_bytes_per_s
        self._off_t = self.expert_io_bytes_per_token / self.gpu_bytes_per_s
        self._comp0 = self.gpu_fixed.flops / self.gpu_flops_per_s
        self._comp_t = self.expert_flops_per_token / self.gpu_flops_per_s
        # off0 + off_e * k for k = 1..num_experts, the same expression the scalar walk evaluates
        self._offbase = self._off0 + self._off_e * np.arange(1, max(self.num_experts, 1) + 1, dtype=np.float64)

    def for_layer(self, t_comm_s: float, moe_layer: int) -> "CostContext":
        """A copy with another communication time [s] and MoE layer index, everything else (and
        the constants derived from it) as here: a step prices every layer of a GPU with the same
        fixed work, attention estimate and rates, so it builds the context once and copies it.
        The copies share the PIM time tables (:meth:`pim_times`: a function of the cost model's
        version, the batch and the unit, none of which a copy changes)."""
        if not (t_comm_s >= 0 and math.isfinite(t_comm_s)):
            raise field_error("t_comm_s", t_comm_s, "a finite number >= 0")
        new = object.__new__(CostContext)
        new.__dict__.update(self.__dict__)
        new.t_comm_s = t_comm_s
        new.moe_layer = moe_layer
        return new

    # -- tables --------------------------------------------------------------------------------
    def pim_times(self, unit: str | None = None) -> np.ndarray:
        """``t(n)`` for ``n = 0..batch`` [s]: tensor-parallel (``unit=None``) or on one unit.

        Cached; rebuilt when the cost model is a :class:`PimCostTable` that was updated since.
        """
        version = getattr(self.pim, "version", None)
        if version != self._tables_version:
            self._tables.clear()
            self._tables_version = version
        arr = self._tables.get(unit)
        if arr is None:
            if unit is not None:
                self.organisation.count(unit)  # validates the name
            arr = _expert_time_array(self.pim, self.batch, unit)
            self._tables[unit] = arr
        return arr

    def gpu_cheaper_alone(self, unit: str | None = None) -> np.ndarray:
        """For every token count ``n = 0..batch``: True where an expert with ``n`` tokens costs the GPU
        less by itself (its weights, activations and FLOPs, ``max(off_e + off_t n, comp_t n)``, no
        fixed work) than PIM (:meth:`pim_times` on ``unit``), and ``n > 0``: the early-load rule
        ("cheaper") of the executed step and Overlap's. Cached with the PIM time tables."""
        pim = self.pim_times(unit)      # (drops every cached table when the cost model changed)
        key = ("gpu-cheaper-alone", unit)
        out = self._tables.get(key)
        if out is None:
            n = np.arange(pim.size)
            gpu_s = np.maximum(self._off_e + self._off_t * n, self._comp_t * n)
            out = self._tables[key] = (n > 0) & (gpu_s < pim)
        return out

    # -- the terms of Equation 1 -----------------------------------------------------------------
    def gpu_time_s(self, n_gpu_experts: int, gpu_tokens: float) -> tuple[float, float, float]:
        """``(T_GPU, T_offchip, T_comp)`` [s] with ``n_gpu_experts`` experts and ``gpu_tokens``
        (token, expert) pairs on the GPU, non-MoE work included."""
        off = self._off0 + self._off_e * n_gpu_experts + self._off_t * gpu_tokens
        comp = self._comp0 + self._comp_t * gpu_tokens
        return max(off, comp), off, comp

    def moe_gpu_time_s(self, n_gpu_experts: int, gpu_tokens: float) -> float:
        """GPU time of the routed experts alone (no non-MoE work) [s] (what PIMoE balances)."""
        return max(self._off_e * n_gpu_experts + self._off_t * gpu_tokens, self._comp_t * gpu_tokens)

    def evaluate(self, counts: Sequence[int] | np.ndarray, on_pim: Sequence[bool] | np.ndarray,
                 unit: str | None = None, unit_of: np.ndarray | None = None) -> CostBreakdown:
        """Estimated times of a partition.

        ``counts[i]`` tokens of expert ``i``; ``on_pim[i]`` True when it runs on PIM (inactive
        experts, count 0, cost nothing either way). With ``unit`` and ``unit_of`` (unit index of
        each expert) the PIM runs expert-parallel: ``T_PIM = T_attention + max_u busy_u``.
        """
        c = np.asarray(counts, dtype=np.int64).reshape(-1)
        pim = np.asarray(on_pim, dtype=bool).reshape(-1)
        if pim.shape != c.shape:
            raise field_error("partition length", pim.size, f"{c.size} (one flag per expert)")
        gpu = (~pim) & (c > 0)
        t_gpu, t_off, t_comp = self.gpu_time_s(int(gpu.sum()), float(c[gpu].sum()))
        busy = None
        if unit is None:
            t_pim = self.t_attention_s + float(self.pim_times()[c[pim]].sum())
        else:
            if unit_of is None:
                raise ConfigError("expert-parallel evaluation needs unit_of (the unit of each expert)")
            table = self.pim_times(unit)
            busy = np.bincount(np.asarray(unit_of)[pim], weights=table[c[pim]],
                               minlength=self.organisation.count(unit))
            t_pim = self.t_attention_s + (float(busy.max()) if busy.size else 0.0)
        total = max(self.t_comm_s, t_gpu, t_pim)
        return CostBreakdown(total, self.t_comm_s, t_gpu, t_off, t_comp, t_pim, self.t_attention_s, busy)

    def prefix_totals(self, sorted_desc: np.ndarray, pim_desc: np.ndarray | None = None,
                      p_all: float | None = None) -> np.ndarray:
        """``T_total`` of every prefix cut of counts sorted in descending order [s].

        Element ``k`` (``0..m``) is the estimate with the ``k`` most popular experts on the GPU
        and the rest on PIM (tensor-parallel). ``T_PIM(k) = P_all - cumsum_k`` with
        ``P_all = T_attention + sum(t(n))`` summed once, so every policy that walks the sorted list
        (Sieve, Oracle) sees bit-identical values. ``pim_desc`` (``t(n)`` of ``sorted_desc``) and
        ``p_all`` may be passed when the caller has them.
        """
        s = np.asarray(sorted_desc, dtype=np.int64)
        m = s.size
        pt = self.pim_times()[s] if pim_desc is None else pim_desc
        if p_all is None:
            p_all = self.t_attention_s + float(np.add.reduce(pt))
        out = np.empty(m + 1, dtype=np.float64)
        out[0] = max(self.t_comm_s, self._off0, self._comp0, p_all)
        if m:
            tok = np.cumsum(s)
            off = self._offbase[:m] + self._off_t * tok
            comp = self._comp0 + self._comp_t * tok
            np.maximum(off, comp, out=off)
            p = p_all - np.cumsum(pt)
            np.maximum(off, p, out=off)
            np.maximum(off, self.t_comm_s, out=out[1:])
        return out


_DEFAULT_IDS: dict[int, np.ndarray] = {}


def default_ids(n: int) -> np.ndarray:
    """``arange(n)`` (cached, read-only): the ids of counts given without ids."""
    ids = _DEFAULT_IDS.get(n)
    if ids is None:
        ids = np.arange(n, dtype=np.int64)
        ids.flags.writeable = False
        _DEFAULT_IDS[n] = ids
    return ids


def validate_counts(counts: Any, ctx: CostContext, expert_ids: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Check a count vector against the context; returns ``(counts int64, expert_ids int64)``.

    Errors (:class:`ConfigError`): non-integer or negative counts, a count above the batch (a token
    selects an expert at most once), counts summing to more than ``batch * top_k``, expert ids that
    are not unique, out of ``[0, num_experts)`` or not one per count.
    """
    c = np.asarray(counts)
    if c.ndim != 1:
        raise field_error("counts", f"array of shape {c.shape}", "a flat list of token counts, one per expert")
    if c.size and c.dtype.kind not in "iu":
        if c.dtype.kind == "f" and np.all(np.isfinite(c)) and np.all(c == np.round(c)):
            c = c.astype(np.int64)
        elif c.dtype.kind == "b":
            raise field_error("counts", c.tolist()[:8], "integer token counts")
        else:
            bad = [x for x in c.tolist() if not (isinstance(x, (int, float)) and float(x).is_integer())][:1]
            raise field_error("count", bad[0] if bad else c.dtype, "an integer number of tokens")
    c = c.astype(np.int64, copy=False)
    if c.size:
        low = int(c.min())
        if low < 0:
            i = int(np.argmin(c))
            raise field_error(f"counts[{i}]", low, "a non-negative number of tokens")
        high = int(c.max())
        if high > ctx.batch:
            i = int(np.argmax(c))
            raise field_error(f"counts[{i}]", high,
                              f"at most the batch size B = {ctx.batch} (a token picks an expert once)")
        total = int(c.sum())
        if total > ctx.batch * ctx.top_k:
            raise field_error("sum of counts", total,
                              f"at most B x top_k = {ctx.batch} x {ctx.top_k} = {ctx.batch * ctx.top_k}")
    if expert_ids is None:
        if c.size > ctx.num_experts:
            raise field_error("number of counts", c.size,
                              f"at most {ctx.num_experts} (the experts this GPU holds)")
        ids = default_ids(c.size)
    else:
        ids = np.asarray(expert_ids)
        if ids.ndim != 1 or ids.size != c.size:
            raise field_error("expert_ids", f"{ids.size} ids", f"{c.size} ids, one per count")
        if ids.size and ids.dtype.kind not in "iu":
            raise field_error("expert_ids", ids.dtype, "integer expert ids")
        ids = ids.astype(np.int64, copy=False)
        if ids.size:
            if ids.min() < 0 or ids.max() >= ctx.num_experts:
                bad = int(ids.min() if ids.min() < 0 else ids.max())
                raise field_error("expert id", bad, f"an id in [0, {ctx.num_experts})")
            uniq, cnt = np.unique(ids, return_counts=True)
            if np.any(cnt > 1):
                raise field_error("expert id", int(uniq[cnt > 1][0]), "unique ids (this one repeats)")
    return c, ids


# --------------------------------------------------------------------------------------------
# Building a context from the specs
# --------------------------------------------------------------------------------------------
def _get(obj: Any, path: str, default: Any = None) -> Any:
    for part in path.split("."):
        if obj is None:
            return default
        obj = getattr(obj, part, None)
    return default if obj is None else obj


def pim_organisation(hardware: Any) -> PimOrganisation:
    """PIM units of one GPU from the hardware spec (defaults: 16 channels x 2 PCs per stack)."""
    stacks = int(_get(hardware, "gpu.num_hbm_stacks", 8))
    pim = getattr(hardware, "pim", None)
    dram = getattr(hardware, "dram", None)
    ch = None
    pc = None
    for src in (pim, dram):
        ch = ch or getattr(src, "channels_per_stack", None) or getattr(src, "channels", None)
        pc = pc or getattr(src, "pseudo_channels_per_channel", None)
    return PimOrganisation(stacks, int(ch or 16), int(pc or 2))


_organisation = pim_organisation   # the older private name


def pim_peak_flops(hardware: Any) -> float:
    """Peak PIM FLOP/s of one GPU: ``hardware.pim_peak_flops``, else ``ratio x HBM bw x 2 FLOP/MAC
    / dtype bytes`` (op/B = 1 for bf16 at a 16x internal bandwidth)."""
    peak = getattr(hardware, "pim_peak_flops", None)
    if callable(peak):
        peak = peak()
    if peak:
        return float(peak)
    ratio = float(_get(hardware, "pim.internal_bandwidth_ratio", 16.0))
    return ratio * float(hardware.gpu.hbm_bandwidth_bytes_per_s)


def default_layer(model: Any) -> int:
    """The layer a one-layer estimate uses by default: the first MoE layer with full or MLA
    attention (the most expensive attention on PIM), else the first MoE layer."""
    kinds = tuple(getattr(model, "layer_attention", ()) or ())
    mlp = tuple(getattr(model, "layer_mlp", ()) or ("moe",) * len(kinds))
    moe = [i for i in range(len(kinds)) if i < len(mlp) and mlp[i] == "moe"] or list(range(len(kinds)))
    return next((i for i in moe if kinds[i] in ("full", "mla")), moe[0] if moe else 0)


def moe_layer_index(model: Any, layer: int) -> int:
    """Index of ``layer`` among the MoE layers of ``model`` (0 when the model lists none or the
    layer is not one of them)."""
    moe = tuple(getattr(model, "moe_layer_indices", ()) or ())
    return moe.index(layer) if layer in moe else 0


def build_context(model: Any, hardware: Any, num_gpus: int, batch: int, *,
                  layer: int | None = None,
                  context_lens: Sequence[int] | int | None = None,
                  counts: Sequence[int] | np.ndarray | None = None,
                  routing: np.ndarray | None = None,
                  pim: PimCostModel | None = None,
                  gpu_index: int = 0) -> CostContext:
    """A :class:`CostContext` for one MoE layer on one GPU.

    Parameters
    ----------
    model, hardware:
        A ``ModelSpec`` and a ``HardwareSpec`` (``sievesim.models`` / ``sievesim.hardware``).
    num_gpus:
        ``G``; experts are split ``E / G`` per GPU, requests ``B / G`` per GPU.
    batch:
        ``B``, decode tokens of the step over all GPUs.
    layer:
        Layer index for the attention kind; default: the first MoE layer with full or MLA
        attention (the most expensive attention on PIM), else the first MoE layer.
    context_lens:
        Context length of each of this GPU's requests (tokens), or one length for all of them;
        default 0 (no attention cost).
    counts:
        Token counts of this GPU's experts; used for the dispatch volume when ``routing`` is not
        given: ``(G - 1) / G`` of the (token, expert) pairs come from other GPUs, and by symmetry
        as many leave. ``routing`` (``[B, top_k]`` global expert ids) gives the exact volumes.
    pim:
        The PIM cost model; default :class:`RooflinePimCost` from the specs.
    """
    if not isinstance(num_gpus, (int, np.integer)) or num_gpus < 1:
        raise field_error("gpus", num_gpus, "a positive integer")
    if not isinstance(batch, (int, np.integer)) or batch < 0:
        raise field_error("batch", batch, "a non-negative integer")
    e_total = int(model.num_experts)
    if e_total % num_gpus:
        raise field_error("gpus", num_gpus, f"a divisor of the model's {e_total} experts")
    e_local = e_total // num_gpus
    top_k = int(model.top_k)
    h = int(model.hidden_size)
    dtype = float(getattr(model, "dtype_bytes", 2))
    kinds = tuple(getattr(model, "layer_attention", ()) or ())
    if layer is None:
        layer = default_layer(model)
    if kinds and not (0 <= layer < len(kinds)):
        raise field_error("layer", layer, f"a layer index in [0, {len(kinds)})")
    mlp_kinds = tuple(getattr(model, "layer_mlp", ()) or ())
    if mlp_kinds and layer < len(mlp_kinds) and mlp_kinds[layer] != "moe":
        raise field_error("layer", layer, f"a MoE layer (layer {layer} of {getattr(model, 'name', 'the model')} "
                          f"is {mlp_kinds[layer]!r})")
    local = -(-batch // num_gpus)  # ceil: the busiest GPU's requests
    if context_lens is None:
        lens = np.zeros(local, dtype=np.int64)
    elif np.ndim(context_lens) == 0:
        lens = np.full(local, int(context_lens), dtype=np.int64)
    else:
        lens = np.asarray(context_lens, dtype=np.int64).reshape(-1)
    if lens.size and lens.min() < 0:
        raise field_error("context length", int(lens.min()), "a non-negative number of tokens")

    gpu = hardware.gpu
    ceff = float(getattr(gpu, "compute_efficiency", 1.0) or 1.0)
    meff = float(getattr(gpu, "memory_efficiency", 1.0) or 1.0)
    org = pim_organisation(hardware)
    params = float(model.params_per_expert)
    expert_bytes = float(getattr(model, "bytes_per_expert", params * dtype) or params * dtype)
    # (params_per_expert includes GPT-OSS's expert biases; 2 FLOPs per weight per token)
    inter = float(model.moe_intermediate_size)
    if pim is None:
        pim = RooflinePimCost(2.0 * params, pim_peak_flops(hardware), attention_shape(model, layer), org)

    if routing is not None:
        send, recv = dispatch_pairs_from_routing(routing, e_total, num_gpus)
        s_tok, r_tok = float(send[gpu_index]), float(recv[gpu_index])
    else:
        pairs = float(np.sum(counts)) if counts is not None else float(batch * top_k) / num_gpus
        r_tok = s_tok = pairs * (num_gpus - 1) / num_gpus
    comm = comm_time_s(num_gpus=num_gpus, local_tokens=local, top_k=top_k, hidden_size=h,
                       dtype_bytes=dtype, dispatch_send_tokens=s_tok, dispatch_recv_tokens=r_tok,
                       bandwidth_bytes_per_s=float(hardware.interconnect.bandwidth_bytes_per_s_per_direction),
                       latency_s=float(hardware.interconnect.latency_s))
    return CostContext(
        t_comm_s=comm.total_s,
        t_attention_s=float(pim.attention_time_s(lens)),
        gpu_fixed=non_moe_work(model, layer, local),
        gpu_flops_per_s=float(gpu.peak_flops_bf16) * ceff,
        gpu_bytes_per_s=float(gpu.hbm_bandwidth_bytes_per_s) * meff,
        expert_bytes=expert_bytes,
        expert_flops_per_token=2.0 * params,
        expert_io_bytes_per_token=dtype * (2.0 * h + 2.0 * inter),
        pim=pim,
        batch=int(batch),
        top_k=top_k,
        num_experts=e_local,
        organisation=org,
        comm=comm,
        moe_layer=moe_layer_index(model, layer),
        gpus=int(num_gpus),
        gpu_beside=shared_expert_work(model, local),
    )


def context_from_numbers(**kwargs: Any) -> CostContext:
    """A :class:`CostContext` from plain numbers (tests, what-if studies); see its fields."""
    return CostContext(**kwargs)
