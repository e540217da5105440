"""PIMoE's static placement of one GPU's experts on its PIM units, and the capacity it needs.

Expert parallelism on PIM (PIMoE, the Sieve paper's Sections 6.2 and 7.2): each expert's weights
live in one placement unit, and the expert runs there. With ``U`` base units of the chosen kind
(``"channel"``: 128 on a B200 with 8 HBM3E stacks) and ``E_l`` experts per GPU:

* ``E_l >= U``: every unit holds experts of every layer. The experts of all MoE layers are laid
  out one round robin, layer after layer: local expert ``i`` of MoE layer ``l`` sits on unit
  ``(l * E_l + i) mod U``. Within a layer that is ``i mod U`` relabelled, so every layer spreads
  over all units alike, and over the layers every unit holds ``floor`` or ``ceil`` of
  ``L * E_l / U`` experts (``L`` MoE layers), the most even fill there is.
* ``E_l < U``: one expert per unit would leave ``U - E_l`` units idle in every layer. Each
  expert spans instead a group of ``S`` units, ``S`` the largest divisor of ``U`` with
  ``S * E_l <= U``; it is sharded over the group's units (the same row and column indices in
  each, as Sieve shards over all channels) and runs tensor-parallel inside the group. The unit is
  then written ``"BASE*S"`` (``"channel*4"``), ``U / S`` groups take the round robin above.
  GPT-OSS-120B on 4 GPUs: 32 experts x 4 channels = 128 channels; Qwen3.5-397B-A17B on 8: 64 x 2;
  Qwen3-30B-A3B on 1: 128 x 1. When ``E_l`` does not divide ``U`` some groups stay idle in a layer
  (e.g. 48 experts on 64 groups of 2 channels), and the round robin rotates which.

A unit given with a group already (``PIMoE(unit="channel*4")``) is taken as it is.
Times of a group come from the cost model's ``expert_time_on_unit_s(n, "channel*4")`` (the share
``S / U`` of the PIM); :class:`sievesim.costs.PimOrganisation` counts groups
(``count("channel*4") = U / 4``) and the engine gives a group ``S`` times the pseudo-channels
of its base unit (:meth:`sievesim.pim.expert.PIMDevice.unit_pcs`).

Capacity (:func:`check_pimoe_capacity`): a base unit holds ``HBM capacity / U`` bytes; the
experts placed on it over all MoE layers (a spanning expert: ``1 / S`` of its bytes) must fit.
Only routed-expert weights are counted (attention weights, the KV cache and the rest of the model
share the HBM too), so a layout that passes may still not leave room for them.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._units import join_unit, split_unit
from ..costs import PimOrganisation, pim_organisation
from ..errors import ConfigError, field_error

__all__ = ["DEFAULT_PIMOE_UNIT", "resolve_unit", "expert_placement", "unit_span", "expand_to_base_units",
           "PimoeLayout", "pimoe_layout", "check_pimoe_capacity"]

#: PIMoE's default placement unit: channel-level expert parallelism, the Sieve paper's text
#: (Sections 6.2 and 7.2, Figure 10); experts span several channels when a GPU has fewer experts
#: than channels (see the module docstring and docs/policies.md).
DEFAULT_PIMOE_UNIT = "channel"


def resolve_unit(local_experts: int, org: PimOrganisation, unit: str = DEFAULT_PIMOE_UNIT) -> str:
    """The unit PIMoE places ``local_experts`` experts on: ``unit`` itself when it names a group
    (``"channel*4"``) or when the GPU has at least as many experts as units of that kind, else
    the group of ``S`` of them (``S`` the largest divisor of the unit count with
    ``S * local_experts <= units``), e.g. ``resolve_unit(32, PimOrganisation(), "channel")`` is
    ``"channel*4"``."""
    base, span = split_unit(unit)
    units = org.count(unit)              # checks that a given group size divides the count
    if "*" in unit or local_experts <= 0 or local_experts >= units:
        return join_unit(base, span)
    span = max(d for d in range(1, units // local_experts + 1) if units % d == 0)
    return join_unit(base, span)


@functools.lru_cache(maxsize=4096)
def _placement(local_experts: int, org: PimOrganisation, unit: str, moe_layer: int) -> tuple[str, np.ndarray]:
    name = resolve_unit(local_experts, org, unit)
    groups = org.count(name)
    unit_of = (moe_layer * local_experts + np.arange(local_experts, dtype=np.int64)) % groups
    unit_of.flags.writeable = False
    return name, unit_of


def expert_placement(local_experts: int, org: PimOrganisation, unit: str = DEFAULT_PIMOE_UNIT,
                     moe_layer: int = 0) -> tuple[str, np.ndarray]:
    """``(unit name, unit_of)``: the unit PIMoE uses (:func:`resolve_unit`) and the index of the
    unit (or group) holding each local expert ``0..local_experts-1`` at MoE layer ``moe_layer``
    (0 = the model's first MoE layer): ``(moe_layer * local_experts + i) mod count(unit name)``.
    Cached; the array is read-only."""
    if not isinstance(local_experts, (int, np.integer)) or local_experts < 0:
        raise field_error("local experts", local_experts, "a non-negative integer")
    if not isinstance(moe_layer, (int, np.integer)) or moe_layer < 0:
        raise field_error("moe_layer", moe_layer, "a non-negative MoE-layer index")
    return _placement(int(local_experts), org, unit, int(moe_layer))


def unit_span(unit: str) -> int:
    """Base units in one unit: 4 for ``"channel*4"``, 1 for ``"channel"``."""
    return split_unit(unit)[1]


def expand_to_base_units(per_unit: np.ndarray, unit: str) -> np.ndarray:
    """A value per unit of ``unit`` (e.g. busy time per group of ``"channel*4"``) repeated onto each
    base unit of the group (per channel), for per-channel utilisation (the paper's Figure 10)."""
    return np.repeat(np.asarray(per_unit), unit_span(unit))


@dataclass(frozen=True)
class PimoeLayout:
    """PIMoE's placement of one GPU's experts over all MoE layers, and what it needs per base unit.

    ``unit``: the unit used (``"channel*4"``); ``base``/``span``: its base unit and group size;
    ``groups``: units of that kind per GPU; ``max_experts_per_group``: experts on the fullest group
    over all ``moe_layers`` MoE layers; ``need_bytes``: their weights on one base unit
    (``max_experts_per_group * expert_bytes / span``); ``capacity_bytes``: what one base unit holds
    (HBM capacity / base units); ``hbm_capacity_bytes``: one GPU's HBM.
    """

    unit: str
    base: str
    span: int
    groups: int
    local_experts: int
    moe_layers: int
    expert_bytes: float
    max_experts_per_group: int
    need_bytes: float
    capacity_bytes: float
    hbm_capacity_bytes: float

    @property
    def fits(self) -> bool:
        return self.need_bytes <= self.capacity_bytes

    def experts_per_group(self) -> np.ndarray:
        """Experts held by each group over all MoE layers (``floor`` or ``ceil`` of the mean)."""
        total = self.local_experts * self.moe_layers
        per = np.full(self.groups, total // self.groups, dtype=np.int64)
        per[: total % self.groups] += 1
        return per


def pimoe_layout(model: Any, hardware: Any, num_gpus: int, unit: str = DEFAULT_PIMOE_UNIT,
                 redundant_experts: int = 0) -> PimoeLayout:
    """The layout of :func:`expert_placement` for ``model`` (a ``ModelSpec``) on ``num_gpus`` GPUs
    of ``hardware`` (a ``HardwareSpec``): every MoE layer's ``(E + redundant_experts) / G`` expert
    replicas of one GPU."""
    slots = int(model.num_experts) + int(redundant_experts)
    if not isinstance(num_gpus, (int, np.integer)) or num_gpus < 1 or slots % num_gpus:
        extra = f" + {redundant_experts} redundant" if redundant_experts else ""
        raise field_error("gpus", num_gpus, f"a positive divisor of the model's {model.num_experts} experts{extra}")
    org = pim_organisation(hardware)
    local = slots // int(num_gpus)
    name = resolve_unit(local, org, unit)
    base, span = split_unit(name)
    groups = org.count(name)
    layers = int(model.num_moe_layers)
    fullest = -(-(local * layers) // groups)     # the round robin over all layers: ceil of the mean
    expert_bytes = float(model.bytes_per_expert)
    hbm = float(hardware.gpu.hbm_capacity_bytes)
    return PimoeLayout(unit=name, base=base, span=span, groups=groups, local_experts=local, moe_layers=layers,
                       expert_bytes=expert_bytes, max_experts_per_group=fullest,
                       need_bytes=fullest * expert_bytes / span, capacity_bytes=hbm / org.base_count(base),
                       hbm_capacity_bytes=hbm)


def check_pimoe_capacity(model: Any, hardware: Any, num_gpus: int, unit: str = DEFAULT_PIMOE_UNIT,
                         redundant_experts: int = 0) -> PimoeLayout:
    """:func:`pimoe_layout`, raising :class:`~sievesim.errors.ConfigError` (exit 2 on the CLI) that
    names the need and the capacity when the experts placed on one base unit do not fit in its
    share of the HBM."""
    lay = pimoe_layout(model, hardware, num_gpus, unit, redundant_experts)
    if lay.fits:
        return lay
    gib = 2.0 ** 30
    where = f"each {lay.base}" if lay.span == 1 else f"each group of {lay.span} {lay.base}s (unit {lay.unit})"
    raise ConfigError(
        f"pimoe unit = {unit!r}: {getattr(model, 'name', 'the model')} on {num_gpus} GPU{'s' if num_gpus > 1 else ''} places "
        f"{lay.local_experts} experts per GPU in each of {lay.moe_layers} MoE layers, up to "
        f"{lay.max_experts_per_group} experts of {lay.expert_bytes / 1e6:.1f} MB on {where}: it needs {lay.need_bytes / gib:.2f} GiB of expert weights per {lay.base}, "
        f"but a {lay.base} holds {lay.capacity_bytes / gib:.2f} GiB ({lay.hbm_capacity_bytes / gib:.0f} GiB of "
        f"HBM / {lay.groups * lay.span} {lay.base}s); use more GPUs")


def unit_queues(counts: np.ndarray, expert_ids: np.ndarray, ctx: Any, unit: str
                ) -> tuple[str, np.ndarray, list[list[int]], np.ndarray, list[float]]:
    """The activated experts of one GPU on PIMoE's placement, as the unit-by-unit policies walk them.

    Returns ``(unit, unit_of, queues, load, times)``: the resolved unit (a group such as
    ``"channel*4"`` where experts span units), the unit of each expert (by position in ``counts``),
    each unit's experts most popular first (ties: lower id), each unit's PIM time [s] as a correctly
    rounded sum (``math.fsum``, so that equal loads are equal whatever the listing order), and each
    expert's PIM time [s] on its unit."""
    import math

    resolved, placed = expert_placement(ctx.num_experts, ctx.organisation, unit, ctx.moe_layer)
    n_units = ctx.organisation.count(resolved)
    unit_of = placed[expert_ids]
    times = ctx.pim_times(resolved)[counts].tolist()
    act = np.flatnonzero(counts > 0)
    order = act[np.lexsort((expert_ids[act], -counts[act]))]
    queues: list[list[int]] = [[] for _ in range(n_units)]
    for i, u in zip(order.tolist(), unit_of[order].tolist()):
        queues[u].append(i)
    load = np.array([math.fsum(times[i] for i in q) for q in queues], dtype=np.float64)
    return resolved, unit_of, queues, load, times
