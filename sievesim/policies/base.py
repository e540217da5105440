"""The policy interface and the registry.

A policy maps the token counts of one GPU's experts at one layer, plus a
:class:`~sievesim.costs.CostContext`, to the set of experts that run on PIM. Write one class::

    from sievesim.policies import Policy, register_policy

    @register_policy
    class Threshold(Policy):
        name = "threshold"
        def __init__(self, min_tokens: int = 4) -> None:
            self.min_tokens = min_tokens
        def _decide(self, counts, ctx, expert_ids):
            return counts < self.min_tokens          # on PIM: experts with few tokens

and ``get_policy("threshold", min_tokens=8)`` (or ``sievesim policy decide --policy threshold``)
finds it. Policies never import the engine; they see costs only.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar, Mapping, Sequence, TypeVar

import numpy as np

from ..costs import CostBreakdown, CostContext, default_ids, validate_counts
from ..errors import ConfigError, field_error
from .options import Option, check_policy_options

__all__ = ["Partition", "Policy", "register_policy", "get_policy", "available_policies", "policy_class"]


class Partition:
    """The decision of a policy for one GPU at one layer.

    ``counts[i]`` tokens of the expert with id ``expert_ids[i]``; ``on_pim[i]`` True when it runs on
    PIM. Experts with no tokens are neither on PIM nor on the GPU. Expert-parallel placements
    (PIMoE) also give ``unit`` and ``unit_of[i]`` (the unit index holding expert ``i``).
    """

    __slots__ = ("counts", "expert_ids", "on_pim", "unit", "unit_of", "info")

    def __init__(self, counts: np.ndarray, expert_ids: np.ndarray, on_pim: np.ndarray,
                 unit: str | None = None, unit_of: np.ndarray | None = None,
                 info: dict[str, Any] | None = None) -> None:
        self.counts = counts
        self.expert_ids = expert_ids
        self.on_pim = on_pim
        self.unit = unit
        self.unit_of = unit_of
        self.info = info if info is not None else {}

    @property
    def pim_experts(self) -> np.ndarray:
        """Ids of the experts run on PIM (ascending)."""
        return np.sort(self.expert_ids[self.on_pim & (self.counts > 0)])

    @property
    def gpu_experts(self) -> np.ndarray:
        """Ids of the activated experts run on the GPU (ascending)."""
        return np.sort(self.expert_ids[~self.on_pim & (self.counts > 0)])

    @property
    def placement(self) -> str:
        """``"tensor"`` (each PIM expert across all channels) or ``"expert"`` (one unit each)."""
        return "tensor" if self.unit is None else "expert"

    def evaluate(self, ctx: CostContext) -> CostBreakdown:
        """Estimated times of this partition under ``ctx``."""
        return ctx.evaluate(self.counts, self.on_pim, self.unit, self.unit_of)

    def __repr__(self) -> str:
        return (f"Partition(pim={self.pim_experts.tolist()}, gpu={self.gpu_experts.tolist()}"
                + (f", unit={self.unit!r}" if self.unit else "") + ")")


class Policy(ABC):
    """Base class of the expert-partitioning policies.

    Subclasses set ``name`` and implement :meth:`_decide`, which receives validated counts
    (``int64``, one per expert), the context and the expert ids, and returns a boolean array
    ``on_pim`` (or a finished :class:`Partition`).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: ``"gpu"`` or ``"pim"`` when the policy places every expert on one side whatever the counts
    #: (it then needs no decision at run time), ``None`` when it decides per layer and step.
    static_placement: ClassVar[str | None] = None
    #: Early weight loads the executed step gives this policy by default (``"cheaper"``: experts
    #: whose local tokens alone make the GPU the cheaper side on the policy's cost table; ``"off"``
    #: for a policy whose rule does not follow that, so early loads would be wasted; ``"policy"``: the
    #: policy names them, :meth:`early_experts`, and keeps them on the GPU).
    early_loads: ClassVar[str] = "cheaper"
    #: The constructor's options: name -> :class:`~sievesim.policies.options.Option` (type, default,
    #: bounds). Every door (``get_policy``, ``run --policy-option``, sweeps) checks options against
    #: it; a policy that takes none declares ``{}``. ``None`` (a policy registered without a table):
    #: the constructor's keyword names are accepted, their values unchecked.
    options: ClassVar[Mapping[str, Option] | None] = None

    def decide(self, counts: Any, ctx: CostContext, expert_ids: Any = None, *,
               validate: bool = True, preloaded: Any = None) -> Partition:
        """Which experts run on PIM.

        Parameters
        ----------
        counts:
            Tokens routed to each expert of this GPU at this layer (index = local expert id,
            unless ``expert_ids`` gives the ids).
        ctx:
            The cost context of this GPU and layer.
        expert_ids:
            Optional ids of the experts whose counts are given (unique, in ``[0, num_experts)``).
        validate:
            Check the input (negative counts, counts above ``B`` or summing above ``B x top_k``,
            bad ids). The hot path of a simulator that built the counts itself may skip it.
        preloaded:
            Bool per expert: weights already loaded to the GPU before the decision (the experts
            this policy's :meth:`early_experts` named). Only a policy with ``early_loads =
            "policy"`` takes it; it keeps those experts on the GPU.
        """
        if validate:
            c, ids = validate_counts(counts, ctx, expert_ids)
        else:
            c = counts if isinstance(counts, np.ndarray) else np.asarray(counts, dtype=np.int64)
            ids = default_ids(c.size) if expert_ids is None else np.asarray(expert_ids, dtype=np.int64)
        if preloaded is None:
            out = self._decide(c, ctx, ids)
        else:
            pre = np.asarray(preloaded, dtype=bool)
            if pre.shape != c.shape:
                raise field_error("preloaded", f"{pre.size} flags", f"{c.size} (one per expert)")
            out = self._decide_preloaded(c, ctx, ids, pre)
        if isinstance(out, Partition):
            return out
        return Partition(c, ids, np.asarray(out, dtype=bool))

    def decide_rows(self, counts: np.ndarray, ctxs: Sequence[CostContext]) -> np.ndarray | None:
        """Every GPU's decision of one layer at once: ``counts`` (GPUs x local experts, int64, the
        local ids in order, every count checked by the caller) and one context per row; returns
        ``on_pim`` (same shape, bool), exactly what :meth:`decide` gives row by row with
        ``validate=False``, or None where this policy decides row by row only (the default)."""
        return None

    @abstractmethod
    def _decide(self, counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray) -> np.ndarray | Partition:
        """Return ``on_pim`` (bool per expert) or a :class:`Partition`."""

    def early_experts(self, local_counts: np.ndarray, ctx: CostContext) -> np.ndarray:
        """Experts whose weights the GPU loads right after its router, from its own requests' tokens
        alone (``local_counts``); used when ``early_loads = "policy"``, and :meth:`decide` then gets
        them as ``preloaded``. A policy that sets that rule overrides this and :meth:`_decide_preloaded`."""
        raise ConfigError(f"policy {self.name!r} names no early experts (its early_loads is {self.early_loads!r})")

    def _decide_preloaded(self, counts: np.ndarray, ctx: CostContext, expert_ids: np.ndarray,
                          preloaded: np.ndarray) -> np.ndarray | Partition:
        """As :meth:`_decide`, with ``preloaded`` experts' weights already on their way to the GPU."""
        raise ConfigError(f"policy {self.name!r} takes no preloaded experts")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


_REGISTRY: dict[str, type[Policy]] = {}
P = TypeVar("P", bound=type[Policy])


def register_policy(cls: P) -> P:
    """Class decorator: make ``cls`` findable by ``cls.name`` (lower case, unique)."""
    name = getattr(cls, "name", "")
    if not isinstance(name, str) or not name or name != name.lower():
        raise ConfigError(f"policy class {cls.__name__} needs a lower-case `name`")
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise ConfigError(f"policy name {name!r} is already taken by {_REGISTRY[name].__name__}")
    _REGISTRY[name] = cls
    return cls


def available_policies() -> list[str]:
    """Names of the registered policies, sorted."""
    return sorted(_REGISTRY)


def policy_class(name: str, *, also: tuple[str, ...] = ()) -> type[Policy]:
    """The class registered under ``name`` (case-insensitive). An unknown name is a
    :class:`~sievesim.errors.ConfigError` with the closest name and the full list (``also``: names
    the caller accepts besides the registered ones, e.g. ``gpu-only``, listed too)."""
    key = str(name).lower()
    if key not in _REGISTRY:
        import difflib

        names = available_policies() + [a for a in also if a not in _REGISTRY]
        close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise field_error("policy", name, f"one of {', '.join(names)}{hint}")
    return _REGISTRY[key]


def get_policy(name: str, **kwargs: Any) -> Policy:
    """An instance of the policy registered under ``name``, built with ``kwargs``, which are checked
    against the policy's ``options`` table first (unknown names, types, bounds: a
    :class:`~sievesim.errors.ConfigError` naming the option, the value and what was expected)."""
    if not isinstance(name, str):
        raise TypeError(f"policy = {name!r:.80}: expected a policy name (str), got {type(name).__name__}")
    cls = policy_class(name)
    kwargs = check_policy_options(cls, kwargs)
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"policy {name!r}: {exc}") from None


Verify = Callable[[Partition], float]
