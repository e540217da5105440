"""PIM times inside the step: what the engine executes and what the policy believes.

:class:`EngineTimes` prices PIM nodes on the cycle-accurate engine (cached per token count and per
context lengths); :class:`LearnedPimCost` is the paper's runtime cost table that the policy
decides on, which learns the engine's times after every step (an exponential moving average).
Times are in seconds.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..costs import PimCostTable, RooflinePimCost
from ..errors import ConfigError

__all__ = ["LearnedPimCost", "EngineTimes", "per_count"]


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


def per_count(arrays: dict[Any, np.ndarray], key: Any, counts: np.ndarray, fn: Any) -> np.ndarray:
    """``fn(n)`` for each token count ``n`` of ``counts`` (integers >= 0), from an array per ``key``
    in ``arrays`` indexed by the count; a count seen for the first time is computed once."""
    arr = arrays.get(key)
    if arr is not None and counts.size and np.maximum.reduce(counts) < arr.size:
        out = arr[counts]
        if not np.isnan(np.add.reduce(out)):    # every count seen before (times are finite)
            return out
    top = int(counts.max())
    if arr is None or arr.size <= top:
        old = arr
        arr = np.full(max(top + 1, 2 * (0 if old is None else old.size)), np.nan)
        if old is not None:
            arr[:old.size] = old
        arrays[key] = arr
    out = arr[counts]
    missing = np.isnan(out)
    if missing.any():
        for n in np.unique(counts[missing]).tolist():
            arr[n] = fn(n)
        out = arr[counts]
    return out


class EngineTimes:
    """Engine-executed PIM times [s] of one model on one hardware, cached.

    ``engines`` maps each attention kind of the model to its :class:`~sievesim.pim.expert.EnginePimCost`
    (expert programs are the same for every kind; the first engine prices them). Experts with up to
    ``exact_tokens`` tokens are simulated; larger (prefill-sized) counts are extended linearly.
    """

    def __init__(self, engines: dict[str, Any], exact_tokens: int) -> None:
        self.engines = engines
        self.exact_tokens = exact_tokens
        self.expert: dict[tuple[str | None, int], float] = {}      # (unit, tokens) -> s
        self.attention: dict[tuple[str, tuple[int, ...]], float] = {}   # (kind, context lengths) -> s
        self._expert_arrays: dict[str | None, np.ndarray] = {}

    @property
    def device(self) -> Any:
        """The PIM device the engines simulate."""
        return next(iter(self.engines.values())).device

    def expert_s(self, tokens: int, unit: str | None) -> float:
        """Engine time [s] of one expert with ``tokens`` tokens (cached). Above ``exact_tokens``
        (prefill-sized counts) the time is extended linearly from the engine's times at
        ``exact_tokens`` and half of it: with one GEMV per token the program is that many
        single-token passes back to back (docs/system.md measures the error)."""
        key = (unit, tokens)
        t = self.expert.get(key)
        if t is None:
            top = self.exact_tokens
            if tokens > top:
                hi, lo = self.expert_s(top, unit), self.expert_s(top // 2, unit)
                t = hi + (tokens - top) * (hi - lo) / (top - top // 2)
            else:
                eng = next(iter(self.engines.values()))
                t = eng.expert_time_s(tokens) if unit is None else eng.expert_time_on_unit_s(tokens, unit)
            self.expert[key] = t
        return t

    def experts_s(self, counts: np.ndarray, unit: str | None) -> np.ndarray:
        """Engine time [s] of one expert for each token count in ``counts`` (cached per count)."""
        return per_count(self._expert_arrays, unit, counts, lambda n: self.expert_s(n, unit))

    def attention_s(self, kind: str, lens: np.ndarray) -> float:
        """Engine time [s] of decode attention of one GPU's requests at context lengths ``lens``."""
        key = (kind, tuple(np.asarray(lens, dtype=np.int64).tolist()))
        t = self.attention.get(key)
        if t is None:
            t = self.engines[kind].attention_time_s(list(key[1]))
            self.attention[key] = t
        return t
