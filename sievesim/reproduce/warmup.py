"""Warm-up to convergence for the executed-step figures: the policy's PIM cost table is warm before
the measured step.

The system step's policy prices PIM experts from a cost table that learns the engine's time of each
token count it has seen (a key's first observation replaces the roofline fallback; later ones fold
in by an exponential moving average). A fixed count of warm-up steps can leave keys on the
fallback: with one warm-up, PIMoE per channel on Qwen3-30B-A3B still prices some token counts on
the roofline and runs 10-15 % slow.

:func:`converged_step_point` therefore runs a point twice over the same routing stream. A first
simulator warms up until one step moves no table entry by more than :data:`WARMUP_TOLERANCE`
(relative, against the value the policy read before that step: the old entry, or the fallback for a
key met for the first time), at most :data:`WARMUP_LIMIT` steps. A second simulator of the same
settings starts from that table (every entry copied in with ``table.update``, whose first
observation replaces) and measures the step after :data:`MEASURED_AFTER` warm-up steps of its own,
so that every policy of a figure is measured on the same routing step and the same contexts,
whatever its warm-up needed. Policies that place every expert on one side (NoExp, AllExp) never
read the table and skip the first simulator. Only the public
:class:`~sievesim.system.StepSimulator` API is used (``run_step``, ``run``, ``table``,
``dynamic``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

#: A warm-up step that moves no cost-table entry by more than this fraction (relative) ends the warm-up.
WARMUP_TOLERANCE = 0.01
#: Warm-up steps at most (the ``warmup`` setting of a point run by :func:`converged_step_point`);
#: a point that reaches it unconverged says so in its row (``table_converged``).
WARMUP_LIMIT = 10
#: Warm-up steps of the measuring simulator: the measured step is step number MEASURED_AFTER + 1
#: of the routing stream for every policy (the package's default ``warmup``).
MEASURED_AFTER = 2


@dataclass(frozen=True)
class Warmup:
    """What a warm-up did: steps run, whether the last one moved no entry by more than the
    tolerance, and the largest relative move of an entry in the last step."""

    steps: int
    converged: bool
    last_move: float


def _value_before(table: Any, key: tuple[Any, int], before: Mapping[tuple[Any, int], float]) -> float:
    """The time the policy read for ``key`` before the step: the entry, or the table's fallback."""
    if key in before:
        return before[key]
    shape, tokens = key
    if isinstance(shape, tuple):                          # (expert shape, placement unit)
        return float(table.fallback.expert_time_on_unit_s(tokens, shape[1]))
    if shape == table.expert_shape:
        return float(table.fallback.expert_time_s(tokens))
    return float(table.fallback.attention_time_s([tokens]))


def table_move(table: Any, before: Mapping[tuple[Any, int], float]) -> float:
    """The largest relative change of any entry of ``table`` against ``before`` (its entries before a
    step; a key not in ``before`` is compared with the fallback the policy used for it)."""
    worst = 0.0
    for key, now in table.items():
        old = _value_before(table, key, before)
        if old > 0:
            worst = max(worst, abs(now - old) / old)
        elif now != old:
            worst = float("inf")
    return worst


def warm_until_converged(sim: Any, *, tolerance: float = WARMUP_TOLERANCE, limit: int = WARMUP_LIMIT) -> Warmup:
    """Run warm-up steps of ``sim`` (a :class:`~sievesim.system.StepSimulator`) until one moves no
    cost-table entry by more than ``tolerance``, at most ``limit`` steps (at least one, so that the
    comparison is against a learned table). A simulator without a table (a GPU-only reference)
    needs none."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
    table = getattr(sim, "table", None)
    if table is None:
        return Warmup(0, True, 0.0)
    move = float("inf")
    for step in range(1, limit + 1):
        before = dict(table.items())
        sim.run_step()
        move = table_move(table, before)
        if move <= tolerance + 1e-12:          # bound included (floating-point rounding)
            return Warmup(step, True, move)
    return Warmup(limit, False, move)


def warmed_simulator(limit: int = WARMUP_LIMIT, **kwargs: Any) -> tuple[Any, Warmup]:
    """(a :class:`~sievesim.system.StepSimulator` of ``kwargs`` whose cost table holds the entries of a
    converged warm-up, the warm-up): a first simulator of the same settings warms up until converged
    (at most ``limit`` steps), and its table is copied into the returned one, which has run no step
    yet (its next steps see the routing stream from the start). A policy that reads no table, or
    says it needs no warm one (``needs_warm_table = False``: the oracle, which prices every candidate
    on the executed layer), gets a fresh simulator and ``Warmup(0, True, 0.0)``."""
    from ..system import StepSimulator

    measure = StepSimulator(**kwargs)
    if not (measure.dynamic and getattr(measure, "table", None) is not None
            and getattr(measure.policy, "needs_warm_table", True)):
        return measure, Warmup(0, True, 0.0)
    first = StepSimulator(**kwargs)
    first.check_capacity(limit)
    warm = warm_until_converged(first, limit=limit)
    for key, value in first.table.items():
        measure.table.update(key, value)
    return measure, warm


def converged_step_point(settings: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`sievesim.sweeps.run.step_point` with a converged cost table (module docstring): ``warmup``
    is the most warm-up steps of the first simulator (default :data:`WARMUP_LIMIT`); the measured
    step follows :data:`MEASURED_AFTER` warm-up steps of the second. The row adds
    ``table_warmup_steps`` (steps the first simulator ran; 0 for a policy that reads no table),
    ``table_converged`` and ``table_last_move`` (the largest relative move of an entry in its last
    step)."""
    from ..sweeps.run import GRID_KEYS
    from ..system import parse_policy_options

    kwargs = {k: settings[k] for k in GRID_KEYS if settings.get(k) is not None}
    if "scheduler_latency_us" in kwargs:
        kwargs["scheduler_latency_s"] = kwargs.pop("scheduler_latency_us") * 1e-6
    if "policy_options" in kwargs:
        kwargs["policy_options"] = parse_policy_options(kwargs["policy_options"])
    steps = int(kwargs.pop("steps", 1))
    limit = int(kwargs.pop("warmup", WARMUP_LIMIT))
    measure, warm = warmed_simulator(limit, **kwargs)
    out = dict(measure.run(steps=steps, warmup=MEASURED_AFTER).to_dict())
    out.update(table_warmup_steps=warm.steps, table_converged=warm.converged, table_last_move=warm.last_move)
    return out


def warmup_note(rows: list[dict[str, Any]]) -> str:
    """A figure's note on the warm-up of its points (rows with the fields of :func:`converged_step_point`)."""
    warmed = [r for r in rows if r["table_warmup_steps"]]
    text = (f"cost table warmed until a step moved no entry by more than {WARMUP_TOLERANCE:.0%}, then "
            f"{MEASURED_AFTER} warm-up steps and the measured step on the same routing for every policy")
    if warmed:
        steps = [r["table_warmup_steps"] for r in warmed]
        span = f"{min(steps)}" if min(steps) == max(steps) else f"{min(steps)}-{max(steps)}"
        text += f": {span} warm-up steps over {len(warmed)} point{'s' if len(warmed) > 1 else ''} that read the table"
    late = [f"{r['series']} {r.get('panel', r['model'])} B={r['batch']}"
            + (f" P={r['prefill_requests']}" if r.get("prefill_requests") else "") for r in warmed if not r["table_converged"]]
    if late:
        text += f"; not converged after {WARMUP_LIMIT} (last move {max(r['table_last_move'] for r in warmed):.0%}): " \
            + ", ".join(late)
    return text
