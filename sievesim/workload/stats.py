"""Figure 3 / Figure 5 statistics of routing.

For a batch size B, over ``batches`` steps and every MoE layer, an expert is *activated* in a
(layer, step) when it receives at least one token. Reported (all as fractions in [0, 1]):

* ``frac_1``, ``frac_2``, ``frac_3_4``, ``frac_gt4``: share of activated (layer, step, expert)
  triples that received N = 1, 2, 3-4 and > 4 tokens (the paper's Figure 5 bins; N <= 4 is what
  the paper calls memory-bound, N = 1 a GEMV expert);
* ``activated_ratio``: activated experts / routed experts, averaged over layers and steps;
* ``act_param_ratio``: the paper's Figure 3 "activated parameter ratio" = activated parameter size
  / total parameter size, where every non-routed parameter (attention, embeddings, router, norms,
  shared experts: "parameters in non-MoE layers are always activated") counts as activated, plus
  ``params_per_expert`` for every activated routed expert of every MoE layer. Mean (and median) over
  steps; needs a model (:func:`sievesim.models.get_model`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from ..errors import ConfigError
from .routing import RoutingSource, RoutingStep

__all__ = ["BatchStats", "StatsAccumulator", "routing_stats", "act_param_ratio",
           "model_param_split", "BIN_NAMES"]

BIN_NAMES = ("frac_1", "frac_2", "frac_3_4", "frac_gt4")


@dataclass(frozen=True)
class BatchStats:
    """Statistics of one batch size (see the module docstring). Fractions are in [0, 1]."""

    batch_size: int
    batches: int
    frac_1: float
    frac_2: float
    frac_3_4: float
    frac_gt4: float
    activated_ratio: float
    activated_ratio_median: float
    tokens_per_active: float
    act_param_ratio: float | None = None
    act_param_ratio_median: float | None = None

    @property
    def frac_memory_bound(self) -> float:
        """N <= 4 share (the paper's memory-bound experts)."""
        return self.frac_1 + self.frac_2 + self.frac_3_4

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["frac_memory_bound"] = self.frac_memory_bound
        return d


def model_param_split(model: Any) -> tuple[float, float, int]:
    """(always-active parameters, parameters per routed expert, MoE layers) of a ModelSpec-like
    object with ``total_params``, ``params_per_expert``, ``num_experts``, ``num_moe_layers``."""
    routed = float(model.params_per_expert) * model.num_experts * model.num_moe_layers
    always = float(model.total_params) - routed
    if always < 0:
        raise ConfigError(f"model {getattr(model, 'name', '?')}: total_params is smaller than the "
                          "routed experts' parameters")
    return always, float(model.params_per_expert), int(model.num_moe_layers)


def act_param_ratio(active_per_layer: np.ndarray, model: Any) -> float:
    """Figure 3 activated-parameter ratio of one step.

    ``active_per_layer``: (L,) activated routed experts per MoE layer of the routing; when L differs
    from the model's MoE layer count, the mean over layers is used for every model layer.
    """
    always, ppe, num_layers = model_param_split(model)
    total = always + ppe * model.num_experts * num_layers
    active = np.asarray(active_per_layer, dtype=np.float64)
    if active.size == num_layers:
        routed_active = ppe * float(active.sum())
    else:
        routed_active = ppe * float(active.mean()) * num_layers
    return (always + routed_active) / total


class StatsAccumulator:
    """Accumulates per-step counts into :class:`BatchStats`."""

    def __init__(self, num_experts: int, model: Any = None) -> None:
        self.num_experts = num_experts
        self.model = model
        self.bins = np.zeros(4, dtype=np.int64)
        self.ratios: list[np.ndarray] = []
        self.tokens = 0
        self.param_ratios: list[float] = []
        self.batch_sizes: list[int] = []

    def add(self, counts: np.ndarray) -> None:
        """Add one step's (L, E) counts."""
        c = np.asarray(counts)
        act = c[c > 0]
        self.bins += np.array([(act == 1).sum(), (act == 2).sum(), ((act >= 3) & (act <= 4)).sum(),
                               (act > 4).sum()])
        self.tokens += int(act.sum())
        active = (c > 0).sum(axis=1)
        self.ratios.append(active / self.num_experts)
        if self.model is not None:
            self.param_ratios.append(act_param_ratio(active, self.model))

    def result(self, batch_size: int) -> BatchStats:
        n_act = int(self.bins.sum())
        f = self.bins / n_act if n_act else np.zeros(4)
        r = np.concatenate(self.ratios) if self.ratios else np.zeros(1)
        pr = np.array(self.param_ratios)
        return BatchStats(batch_size=batch_size, batches=len(self.ratios), frac_1=float(f[0]),
                          frac_2=float(f[1]), frac_3_4=float(f[2]), frac_gt4=float(f[3]),
                          activated_ratio=float(r.mean()), activated_ratio_median=float(np.median(r)),
                          tokens_per_active=self.tokens / n_act if n_act else 0.0,
                          act_param_ratio=float(pr.mean()) if pr.size else None,
                          act_param_ratio_median=float(np.median(pr)) if pr.size else None)


def stats_of_steps(steps: Iterable[RoutingStep], num_experts: int, batch_size: int,
                   model: Any = None) -> BatchStats:
    """:class:`BatchStats` of given steps."""
    acc = StatsAccumulator(num_experts, model)
    for st in steps:
        acc.add(st.counts)
    return acc.result(batch_size)


def routing_stats(source: RoutingSource, batch_sizes: Sequence[int], *, batches: int = 64,
                  seed: int = 0, mode: str | None = None, model: Any = None,
                  **stream_options: Any) -> list[BatchStats]:
    """Figure 3/5 statistics of ``source`` for each batch size.

    For each B, a stream is opened with seed ``[seed, B]`` and ``batches`` consecutive steps are
    measured (for ``distinct`` batches: one continuous batch advancing ``batches`` steps).
    ``mode=None`` uses the source's default mode. ``model`` (a ModelSpec) adds ``act_param_ratio``.
    """
    if batches < 1:
        raise ConfigError(f"batches = {batches!r}: expected an integer >= 1")
    out = []
    for b in batch_sizes:
        opts = dict(stream_options)
        if mode is not None:
            opts["mode"] = mode
        stream = source.stream(int(b), seed=[seed, int(b)], **opts)  # type: ignore[arg-type]
        out.append(stats_of_steps((stream.step() for _ in range(batches)), source.num_experts,
                                  int(b), model))
    return out
