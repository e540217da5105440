"""PIM organisation and the PIM cost models a policy sees: the protocol, the roofline, the learned table (times in seconds)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Protocol, Sequence, runtime_checkable

import numpy as np

from .._units import BASE_UNITS, split_unit
from ..errors import ConfigError, field_error

#: Context length [tokens] of every request when a command is given none (one default everywhere).
DEFAULT_CONTEXT_LEN = 4096

#: Placement units of expert-parallel PIM (PIMoE), from the finest to the coarsest. A group of ``S``
#: of them is written ``"BASE*S"`` (``"channel*4"``; :func:`sievesim._units.split_unit`).
UNITS: tuple[str, ...] = BASE_UNITS


# --------------------------------------------------------------------------------------------
# PIM organisation and cost models
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PimOrganisation:
    """How the PIM of one GPU is divided (default: B200, 8 HBM3E stacks x 16 channels x 2 PCs)."""

    stacks: int = 8
    channels_per_stack: int = 16
    pseudo_channels_per_channel: int = 2

    def __post_init__(self) -> None:
        for name in ("stacks", "channels_per_stack", "pseudo_channels_per_channel"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise field_error(f"pim organisation {name}", value, "a positive integer")

    def base_count(self, base: str) -> int:
        """Number of base units (``"pseudo_channel"``, ``"channel"``, ``"stack"``) in one GPU's PIM."""
        if base == "stack":
            return self.stacks
        if base == "channel":
            return self.stacks * self.channels_per_stack
        if base == "pseudo_channel":
            return self.stacks * self.channels_per_stack * self.pseudo_channels_per_channel
        raise field_error("unit", base, f"one of {', '.join(UNITS)}")

    def count(self, unit: str) -> int:
        """Number of placement units of kind ``unit`` in the PIM of one GPU: a base unit, or a group
        ``"BASE*S"`` of ``S`` base units (``count("channel*4")`` = channels / 4; ``S`` must divide
        the number of base units)."""
        base, span = split_unit(unit)
        n = self.base_count(base)
        if n % span:
            raise field_error("unit", unit, f"a group size that divides the GPU's {n} {base}s")
        return n // span


@runtime_checkable
class PimCostModel(Protocol):
    """PIM time estimates of one GPU's HBM-PIM (all its stacks), in seconds."""

    def expert_time_s(self, tokens: int) -> float:
        """One routed expert with ``tokens`` tokens, tensor-parallel across all PIM channels."""
        ...

    def expert_time_on_unit_s(self, tokens: int, unit: str) -> float:
        """One routed expert with ``tokens`` tokens confined to one placement ``unit``
        (``"pseudo_channel"``, ``"channel"``, ``"stack"`` or a group ``"BASE*S"`` of them)."""
        ...

    def attention_time_s(self, batch_context_lens: Sequence[int]) -> float:
        """Decode attention of this GPU's requests (one context length each) at this layer."""
        ...


@dataclass(frozen=True)
class AttentionShape:
    """FLOPs of decode attention of one request at one layer.

    ``flops(L) = flops_per_context_token * min(L, window) + fixed_flops_per_request``;
    ``window=None`` means full attention, linear attention (Gated-DeltaNet) has
    ``flops_per_context_token = 0`` and a fixed state update/readout cost. ``chunk`` (chunked
    attention, Llama 4) replaces ``L`` by the tokens of the current chunk, ``(L - 1) % chunk + 1``.
    ``flops_per_any_context_token`` is paid for every context token, window or not: a DSA
    indexer scoring all ``L`` tokens before attention reads the ``window = index_topk`` it selects.
    """

    flops_per_context_token: float = 0.0
    window: int | None = None
    fixed_flops_per_request: float = 0.0
    chunk: int | None = None
    flops_per_any_context_token: float = 0.0

    def total_flops(self, batch_context_lens: Sequence[int] | np.ndarray | int) -> float:
        """Summed FLOPs over the requests whose context lengths are given (tokens)."""
        lens = np.asarray(batch_context_lens, dtype=np.float64).reshape(-1)
        if lens.size == 0:
            return 0.0
        if np.any(lens < 0):
            raise field_error("context length", int(lens.min()), "a non-negative number of tokens")
        everywhere = self.flops_per_any_context_token * lens.sum() if self.flops_per_any_context_token else 0.0
        if self.window is not None:
            lens = np.minimum(lens, float(self.window))
        if self.chunk:
            lens = np.where(lens > 0, np.mod(lens - 1, float(self.chunk)) + 1, 0.0)
        return float(self.flops_per_context_token * lens.sum()
                     + self.fixed_flops_per_request * lens.size + everywhere)


class RooflinePimCost:
    """Roofline PIM estimate: ``ops / PIM peak`` (paper Section 5, the cost table's fallback).

    An expert with ``n`` tokens runs as ``n`` GEMVs over its weights: ``n * expert_flops_per_token``
    FLOPs at ``pim_peak_flops`` (all stacks of one GPU). Confined to one placement unit it gets
    that unit's share of the peak (``pim_peak_flops / organisation.count(unit)``).

    Parameters
    ----------
    expert_flops_per_token:
        ``2 * params_per_expert`` [FLOP].
    pim_peak_flops:
        Peak PIM throughput of one GPU's stacks [FLOP/s].
    attention:
        Decode-attention FLOPs per request at this layer.
    organisation:
        Units of the PIM (for expert-parallel placement).
    """

    def __init__(self, expert_flops_per_token: float, pim_peak_flops: float,
                 attention: AttentionShape | None = None,
                 organisation: PimOrganisation | None = None) -> None:
        if not (expert_flops_per_token >= 0 and math.isfinite(expert_flops_per_token)):
            raise field_error("expert_flops_per_token", expert_flops_per_token, "a finite number >= 0")
        if not (pim_peak_flops > 0 and math.isfinite(pim_peak_flops)):
            raise field_error("pim_peak_flops", pim_peak_flops, "a finite number > 0 [FLOP/s]")
        self.expert_flops_per_token = float(expert_flops_per_token)
        self.pim_peak_flops = float(pim_peak_flops)
        self.attention = attention or AttentionShape()
        self.organisation = organisation or PimOrganisation()

    def expert_time_s(self, tokens: int) -> float:
        return tokens * self.expert_flops_per_token / self.pim_peak_flops

    def expert_time_on_unit_s(self, tokens: int, unit: str) -> float:
        return tokens * self.expert_flops_per_token * self.organisation.count(unit) / self.pim_peak_flops

    def attention_time_s(self, batch_context_lens: Sequence[int]) -> float:
        return self.attention.total_flops(batch_context_lens) / self.pim_peak_flops

    def expert_times_s(self, max_tokens: int) -> np.ndarray:
        """``expert_time_s(n)`` for ``n = 0..max_tokens`` as one array (fast path)."""
        return np.arange(max_tokens + 1, dtype=np.float64) * (self.expert_flops_per_token / self.pim_peak_flops)


class PimCostTable:
    """Runtime PIM cost table (paper Section 5): key ``(shape, token count)``, value = time [s].

    ``update(key, observed_s)`` folds an observed engine time into the entry by an exponential
    moving average ``new = (1 - alpha) * old + alpha * observed``; the first observation of a key
    replaces the fallback outright (the roofline is only a one-time fallback). Unseen keys fall
    back to ``fallback`` (e.g. :class:`RooflinePimCost`).

    As a :class:`PimCostModel` it looks up ``(expert_shape, n)`` for tensor-parallel experts,
    ``((expert_shape, unit), n)`` for an expert on one unit, and
    ``(attention_shape, sum of context lengths)`` for attention (then falls back).
    """

    def __init__(self, fallback: PimCostModel, alpha: float = 0.5,
                 expert_shape: Hashable = "expert", attention_shape: Hashable = "attention") -> None:
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)) \
                or not (0.0 < alpha <= 1.0):
            raise field_error("alpha", alpha, "a smoothing factor (a number) in (0, 1]")
        self.fallback = fallback
        self.alpha = float(alpha)
        self.expert_shape = expert_shape
        self.attention_shape = attention_shape
        self._table: dict[tuple[Hashable, int], float] = {}
        #: Incremented by every update, so that callers can cache derived arrays.
        self.version = 0

    def __len__(self) -> int:
        return len(self._table)

    def __contains__(self, key: object) -> bool:
        return key in self._table

    def get(self, key: tuple[Hashable, int]) -> float | None:
        """The observed (smoothed) time of ``key``, or ``None`` when it was never observed."""
        return self._table.get(key)

    def update(self, key: tuple[Hashable, int], observed_s: float) -> float:
        """Fold one observed time [s] into ``key``; returns the new entry."""
        if not (observed_s >= 0 and math.isfinite(observed_s)):
            raise field_error("observed_s", observed_s, "a finite time >= 0 [s]")
        old = self._table.get(key)
        new = float(observed_s) if old is None else (1.0 - self.alpha) * old + self.alpha * float(observed_s)
        self._table[key] = new
        self.version += 1
        return new

    def items(self) -> list[tuple[tuple[Hashable, int], float]]:
        return sorted(self._table.items(), key=lambda kv: repr(kv[0]))

    def expert_time_s(self, tokens: int) -> float:
        value = self._table.get((self.expert_shape, int(tokens)))
        return self.fallback.expert_time_s(tokens) if value is None else value

    def expert_time_on_unit_s(self, tokens: int, unit: str) -> float:
        value = self._table.get(((self.expert_shape, unit), int(tokens)))
        return self.fallback.expert_time_on_unit_s(tokens, unit) if value is None else value

    def attention_time_s(self, batch_context_lens: Sequence[int]) -> float:
        lens = np.asarray(batch_context_lens, dtype=np.int64).reshape(-1)
        value = self._table.get((self.attention_shape, int(lens.sum())))
        return self.fallback.attention_time_s(lens) if value is None else value


def _expert_time_array(pim: PimCostModel, max_tokens: int, unit: str | None = None) -> np.ndarray:
    """``t(n)`` for ``n = 0..max_tokens`` (``t(0) = 0``), using a vectorised method when the cost
    model offers one (``expert_times_s(max_tokens)``, ``expert_times_on_unit_s(max_tokens, unit)``)."""
    if unit is None and hasattr(pim, "expert_times_s"):
        arr = np.asarray(pim.expert_times_s(max_tokens), dtype=np.float64)
    elif unit is not None and hasattr(pim, "expert_times_on_unit_s"):
        arr = np.asarray(pim.expert_times_on_unit_s(max_tokens, unit), dtype=np.float64)
    elif unit is None:
        arr = np.array([0.0] + [pim.expert_time_s(n) for n in range(1, max_tokens + 1)], dtype=np.float64)
    else:
        arr = np.array([0.0] + [pim.expert_time_on_unit_s(n, unit) for n in range(1, max_tokens + 1)],
                       dtype=np.float64)
    if getattr(pim, "arrays_checked", False):   # the model checked its own arrays when it built them
        return arr
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ConfigError("PIM cost model returned a negative or non-finite time")
    return arr
