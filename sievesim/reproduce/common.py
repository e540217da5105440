"""What several figures share: the routing statistics of Figures 3 and 5, and the executed-step
points of Figures 6 and 9-11 (models, readings of the paper, series names, CSV rows)."""
from __future__ import annotations

import functools
import pathlib
from typing import Any, Mapping, Sequence

from .registry import FigureOptions

# ================================================================================================
# Routing statistics (Figures 3 and 5)
# ================================================================================================
#: The four models of the paper's Figures 3 and 5, in its legend order.
PAPER_MODELS = ("mixtral-8x22b", "qwen3-30b-a3b", "qwen3-next-80b-a3b", "gpt-oss-120b")


def _routing_batches(quick: bool) -> tuple[list[int], int]:
    """(batch sizes, steps per batch size) of Figures 3 and 5."""
    if quick:
        return [1, 4, 16, 64, 256], 16
    return [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], 64


@functools.lru_cache(maxsize=32)
def _stats(spec: str, model_name: str | None, batches: tuple[int, ...], steps: int, seed: int) -> tuple[Any, ...]:
    """``routing_stats`` of a routing spec (synthetic:MODEL or a trace file), cached so that
    Figures 3 and 5 share one computation."""
    from ..models import get_model
    from ..workload.batches import TraceSource, open_source
    from ..workload.stats import routing_stats

    src = open_source(spec, seed=seed) if spec.startswith("synthetic:") else open_source(spec)
    opts = {"allow_reuse": True} if isinstance(src, TraceSource) else {}
    model = get_model(model_name) if model_name else None
    return tuple(routing_stats(src, list(batches), batches=steps, seed=seed, model=model, **opts))


def _trace_model(path: str) -> str | None:
    """The model preset a trace was recorded on, from its ``meta.model`` (None if no preset)."""
    from ..models import list_models
    from ..workload.traces import load_routing

    meta = getattr(load_routing(path), "meta", {}) or {}
    text = str(meta.get("model", "")).lower().replace("_", "-")
    return next((m for m in sorted(list_models(), key=len, reverse=True) if m in text), None)


def _routing_series(opts: FigureOptions, need_model: bool) -> list[tuple[str, str, str | None]]:
    """(label, routing spec, model preset) of every series: the paper's four models on calibrated
    synthetic routing, then each trace (with its model preset, if it has one)."""
    series: list[tuple[str, str, str | None]] = [(m, f"synthetic:{m}", m) for m in PAPER_MODELS]
    for t in opts.traces:
        model = _trace_model(t)
        if model is None and need_model:
            continue
        series.append((f"{pathlib.Path(t).stem} (trace)", t, model))
    return series


def pct(x: float | None) -> str:
    """A fraction as a percentage with one decimal ("n/a" for None)."""
    return "n/a" if x is None else f"{100 * x:.1f} %"


@functools.lru_cache(maxsize=4)
def routing_records(opts: FigureOptions) -> tuple[tuple[dict[str, Any], ...], tuple[str, ...]]:
    """(one row per series and batch size with every routing statistic of Figures 3 and 5, labels
    of the trace series with no model preset), computed once for both figures."""
    batches, steps = _routing_batches(opts.quick)
    records = []
    skipped = []
    for label, spec, model in _routing_series(opts, need_model=False):
        stats = _stats(spec, model, tuple(batches), steps, opts.seed)
        for s in stats:
            records.append({
                "series": label, "model": model, "routing": spec, "batch": s.batch_size, "steps": steps,
                "seed": opts.seed,
                "act_param_ratio": s.act_param_ratio, "act_param_ratio_median": s.act_param_ratio_median,
                "activated_expert_ratio": s.activated_ratio,
                "activated_expert_ratio_median": s.activated_ratio_median,
                "frac_n1": s.frac_1, "frac_n2": s.frac_2, "frac_n3_4": s.frac_3_4, "frac_gt4": s.frac_gt4,
                "frac_memory_bound": s.frac_memory_bound, "tokens_per_active_expert": s.tokens_per_active,
            })
        if model is None:
            skipped.append(label)
    return tuple(records), tuple(skipped)


def find_record(records: Sequence[dict[str, Any]], series: str, batch: int) -> dict[str, Any] | None:
    """The row of ``series`` at batch size ``batch`` (None if there is none)."""
    return next((r for r in records if r["series"] == series and r["batch"] == batch), None)


# ================================================================================================
# Executed-step points (Figures 6, 9, 10, 11, overhead, overestimate)
# ================================================================================================
#: The paper's evaluation: model -> GPUs (Section 7.1).
STEP_MODELS = {"qwen3-30b-a3b": 1, "gpt-oss-120b": 4, "qwen3.5-397b-a17b": 8}

#: Readings of the paper (docs/system.md, "Readings"): ``text`` is what its text says (attention in
#: Sieve's T_PIM, early weight loads, a 20 us decision per 256 experts); ``matching`` is the reading
#: whose executed results come closest to its Figure 9 trends (no early loads, no decision latency,
#: and Sieve weighing only the expert work of each side, the terms that overlap in Figure 8).
READINGS = {
    "text": {},
    "matching": {"early_loads": False, "scheduler_latency_us": 0.0},
}

#: Top-k the paper's text gives where the model's config.json says otherwise (Section 6:
#: "GPT-OSS and Qwen3 activate four experts out of 128"; Qwen3-30B-A3B's config says 8).
TEXT_TOP_K = {"qwen3-30b-a3b": 4}


def series_name(policy: str, unit: str | None, reading: str) -> str:
    """The legend name of a policy (with PIMoE's unit) in a reading, e.g. "PIMoE (stack) [matching]"."""
    name = {"noexp": "NoExp", "allexp": "AllExp", "sieve": "Sieve", "gpu-only": "GPU-only",
            "naive": "Naive", "overlap": "Overlap", "oracle": "Oracle"}.get(policy, "PIMoE")
    if policy == "pimoe":
        name += f" ({unit})"
    return name + ("" if reading == "text" else " [matching]")


def point_settings(model: str, gpus: int, policy: str, batch: int, reading: str, *, unit: str | None = None,
                   steps: int = 1, warmup: int = 2, seed: int = 0, prefill: str | None = None,
                   top_k: int | None = None) -> dict[str, Any]:
    """The settings of one executed-step point (for :func:`~sievesim.reproduce.registry.step_records`)
    of ``policy`` in ``reading`` (a key of :data:`READINGS`)."""
    p: dict[str, Any] = {"model": model, "gpus": gpus, "policy": policy, "batch": batch, "steps": steps,
                         "warmup": warmup, "seed": seed, **READINGS[reading]}
    if top_k is not None:
        p["top_k"] = top_k
    if policy == "pimoe":
        p["pimoe_unit"] = unit or "stack"
    if policy == "sieve" and reading == "matching":
        p["policy_options"] = "experts_only=true"
    if prefill:
        p["prefill"] = prefill
    return p


def text_points(policies: Sequence[tuple[str, str | None]], batches: Any, opts: FigureOptions,
                warmup: int) -> tuple[list[dict[str, Any]], list[str]]:
    """Every point of the paper's three models (:data:`STEP_MODELS`) in the text reading: each batch of
    ``batches(gpus, quick)`` and each ``(policy, unit)``, with ``warmup`` warm-up steps; and each
    point's series name."""
    points, names = [], []
    for model, gpus in STEP_MODELS.items():
        for b in batches(gpus, opts.quick):
            for pol, unit in policies:
                points.append(point_settings(model, gpus, pol, b, "text", unit=unit, warmup=warmup, seed=opts.seed))
                names.append(series_name(pol, unit, "text"))
    return points, names


def with_series(rows: list[dict[str, Any]], meta: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The CSV rows of executed-step results: each row of ``rows`` with its (series, reading) from
    ``meta``, its panel and the columns Figures 9 and 11 show."""
    out = []
    for r, (series, reading) in zip(rows, meta):
        out.append({
            "series": series, "reading": reading, "panel": panel(r), "model": r["model"], "top_k": r.get("top_k"),
            "gpus": r["gpus"], "policy": r["policy"],
            "pimoe_unit": r.get("pimoe_unit"), "batch": r["batch"], "prefill_requests": r.get("prefill_requests", 0),
            "prefill_len": r.get("prefill_len", 0), "context": r.get("context"), "routing": r.get("routing"),
            "seed": r.get("seed"), "throughput_tokens_per_s_per_gpu": r["throughput_tokens_per_s_per_gpu"],
            "interactivity_tokens_per_s_per_user": r["interactivity_tokens_per_s_per_user"],
            "step_time_s": r["step_time_s"], "estimated_step_time_s": r["estimated_step_time_s"],
            "experts_on_gpu": r["experts_on_gpu"], "experts_on_pim": r["experts_on_pim"],
            "energy_j": r.get("energy_j"), "tokens_per_joule": r.get("tokens_per_joule"),
            "sievesim_version": r.get("sievesim_version"),
        })
    return out


def panel(r: Mapping[str, Any]) -> str:
    """A figure panel: the model, with its top-k when a point overrode the config's."""
    return r["model"] + (f" top-{r['top_k']}" if r.get("top_k") is not None and r["model"] in TEXT_TOP_K
                         and r["top_k"] == TEXT_TOP_K[r["model"]] else "")
