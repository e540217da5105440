"""The "why" of a verdict, written from measured quantities only.

Each function here takes the rows a figure ran (or the engine's times of one expert) and returns a
sentence whose every number comes from them, and whose direction words ("fewer", "below", "more")
are chosen by comparing those numbers, so that a reason cannot state what the run did not show.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Mapping

#: Below this, Equation 1's estimate of a step counts as "under" the executed step (relative).
ESTIMATE_GAP = 0.05


@dataclass(frozen=True)
class PlacementTimes:
    """One expert of a model with one token on PIM, per placement, and streaming it to the GPU.

    unit: PIMoE's unit on this system (e.g. ``channel*4``: each expert over four channels);
    channels: the channels it spans; on_unit_us: one expert on that unit; stream_us: its weights
    streamed from HBM to the GPU; weights_mb: its weights; stacks: stacks per GPU;
    tensor_parallel_us: as many one-token experts as stacks, tensor-parallel over the GPU's PIM one
    after another (Sieve's placement); on_stacks_us: the same experts one per stack, side by side
    (PIMoE per stack: one expert's time on a stack)."""

    model: str
    unit: str
    channels: int
    on_unit_us: float
    stream_us: float
    weights_mb: float
    stacks: int
    tensor_parallel_us: float
    on_stacks_us: float


@functools.lru_cache(maxsize=16)
def placement_times(model_name: str, gpus: int, unit: str = "channel", hardware: str = "b200") -> PlacementTimes:
    """:class:`PlacementTimes` of ``model_name`` on ``gpus`` GPUs of ``hardware``, PIMoE placing its
    experts per ``unit`` (resolved as PIMoE resolves it: a GPU with fewer experts than units spans
    each expert over a group), from the cycle-accurate engine."""
    from .._units import split_unit
    from ..costs import pim_organisation
    from ..hardware import get_hardware
    from ..models import get_model
    from ..pim.expert import EnginePimCost
    from ..policies.placement import resolve_unit

    hw, model = get_hardware(hardware), get_model(model_name)
    org = pim_organisation(hw)
    resolved = resolve_unit(model.num_experts // gpus, org, unit)
    base, span = split_unit(resolved)
    channels = span * org.count("channel") // org.count(base) if base != "channel" else span
    cost = EnginePimCost.for_model(model, hw)
    stacks = org.count("stack")
    stream = model.bytes_per_expert / (hw.gpu.hbm_bandwidth_bytes_per_s * hw.gpu.memory_efficiency)
    return PlacementTimes(
        model=model_name, unit=resolved, channels=int(channels),
        on_unit_us=cost.expert_time_on_unit_s(1, resolved) * 1e6, stream_us=stream * 1e6,
        weights_mb=model.bytes_per_expert / 1e6, stacks=stacks,
        tensor_parallel_us=cost.experts_time_s([1] * stacks) * 1e6,
        on_stacks_us=cost.expert_time_on_unit_s(1, "stack") * 1e6)


def pim_share(row: Mapping[str, Any]) -> float:
    """The share of a step's activated experts (all layers) that ran on PIM."""
    total = row["experts_on_gpu"] + row["experts_on_pim"]
    return row["experts_on_pim"] / total if total else 0.0


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def few_on_pim_channel(times: PlacementTimes, pimoe: Mapping[str, Any], sieve: Mapping[str, Any],
                       where: str) -> str:
    """Why PIMoE per channel trails Sieve: its placement's one-expert time against streaming, and
    the experts each ran on PIM at the point ``where``."""
    span = "one channel" if times.channels == 1 else f"{times.channels} channels (`{times.unit}`)"
    slower = "slower" if times.on_unit_us > times.stream_us else "faster"
    fewer = "fewer" if pim_share(pimoe) < pim_share(sieve) else "no fewer"
    return (f"PIMoE per channel places each {times.model} expert on {span}, where one expert with one token takes "
            f"{times.on_unit_us:.1f} us, {slower} than the {times.stream_us:.1f} us to stream its "
            f"{times.weights_mb:.1f} MB of weights to the GPU; at {where} it ran {pim_share(pimoe):.0%} of the "
            f"activated experts on PIM, {fewer} than Sieve's {pim_share(sieve):.0%}")


def sieve_behind(sieve: Mapping[str, Any], other: Mapping[str, Any], other_name: str, where: str,
                 times: PlacementTimes | None = None) -> str:
    """Why Sieve's step is slower than ``other``'s at ``where``: the two step times, Equation 1's
    estimate of Sieve's step against the executed one (an estimate well under it means the graph
    did not overlap what Equation 1 assumes overlapping), the experts each ran on PIM, and with
    ``times`` (against PIMoE per stack) the engine's tensor-parallel against per-stack times."""
    est, run = sieve["estimated_step_time_s"], sieve["step_time_s"]
    parts = [f"at {where} Sieve's step takes {_ms(run)} against {_ms(other['step_time_s'])} for {other_name}"]
    if est < run * (1.0 - ESTIMATE_GAP):
        parts.append(f"Equation 1 put Sieve's step at {_ms(est)}, {1 - est / run:.0%} under the executed one: "
                     "the executed graph lacks overlap that Equation 1 assumes (attention and non-MoE GPU work "
                     "run serially with the experts of their layer)")
    else:
        parts.append(f"Equation 1 put Sieve's step at {_ms(est)}, within {ESTIMATE_GAP:.0%} of the executed one or above it")
    parts.append(f"Sieve ran {pim_share(sieve):.0%} of the activated experts on PIM, {other_name} "
                 f"{pim_share(other):.0%}")
    if times is not None:
        cmp = "more" if times.tensor_parallel_us > times.on_stacks_us else "less"
        parts.append(f"{times.stacks} one-token experts take {times.tensor_parallel_us:.2f} us tensor-parallel "
                     f"(Sieve's placement) against {times.on_stacks_us:.2f} us one per stack, {cmp} per expert")
    return "; ".join(parts)


def busy_shares(row: Mapping[str, Any]) -> tuple[float, float]:
    """(GPU compute, PIM) busy time of GPU 0 as shares of the step time, from a step row's ``busy_s``."""
    busy, step = row["busy_s"], row["step_time_s"]
    return busy["gpu"][0] / step, busy["pim"][0] / step


def step_compare(sieve: Mapping[str, Any], other: Mapping[str, Any], other_name: str, where: str) -> str:
    """The two step times at ``where`` and the share of the activated experts each ran on PIM."""
    return (f"at {where} Sieve's step takes {_ms(sieve['step_time_s'])} against {_ms(other['step_time_s'])} for "
            f"{other_name}; Sieve ran {pim_share(sieve):.0%} of the activated experts on PIM, {other_name} "
            f"{pim_share(other):.0%}")


def decision_cost(sieve: Mapping[str, Any], other: Mapping[str, Any], other_name: str, where: str,
                  moe_layers: int) -> str:
    """Sieve's modelled decision latency over a step (one decision per MoE layer on the critical path of
    a GPU) beside the step-time difference to ``other`` (a policy that needs no decision)."""
    per_layer = sieve["scheduler_us"]
    diff_us = (sieve["step_time_s"] - other["step_time_s"]) * 1e6
    return (f"at {where} Sieve's decision takes {per_layer:.2f} us a layer, {per_layer * moe_layers:.1f} us over the "
            f"step's {moe_layers} MoE layers; Sieve's step is {diff_us:.1f} us longer than {other_name}'s "
            f"({_ms(sieve['step_time_s'])} against {_ms(other['step_time_s'])}), and {other_name} makes no decision")
