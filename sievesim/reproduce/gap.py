"""Every policy's executed throughput as a share of the oracle's (ours, beyond the paper).

The oracle (``oracle`` in a step) searches each layer's partition and PIM placement on the executed
layer: every prefix cut of the popularity-sorted list with tensor-parallel PIM experts and every
partition along the busiest-unit walk on stacks and on PIMoE's channels, each priced by running that
GPU's part of the layer through the step's own graph (docs/policies.md). No decision latency, every
GPU expert loaded early. The table gives, per model and batch, each policy's throughput per GPU over
the oracle's, on the points and warm-up of Figure 9.
"""
from __future__ import annotations

from typing import Any

from .common import series_name, text_points
from .fig9 import _step_batches
from .registry import FigureData, FigureOptions, judge, register_figure, step_records
from .warmup import WARMUP_LIMIT, converged_step_point, warmup_note

#: The policies measured against the oracle, in the table's order.
POLICIES = (("noexp", None), ("allexp", None), ("pimoe", "channel"), ("pimoe", "stack"), ("sieve", None),
            ("overlap", None), ("oracle", None))


@register_figure("gap", "Every policy's throughput as a share of the oracle's (executed; ours, not the paper's)")
def gap(opts: FigureOptions) -> FigureData:
    """The share of the oracle's throughput per GPU each policy reaches, per model and batch."""
    points, names = text_points(POLICIES, _step_batches, opts, WARMUP_LIMIT)
    raw = step_records("gap", points, opts, point_fn=converged_step_point)
    oracle = {(r["model"], r["batch"]): r["throughput_tokens_per_s_per_gpu"]
              for r, n in zip(raw, names) if n == "Oracle"}
    records = []
    for r, n in zip(raw, names):
        best = oracle[(r["model"], r["batch"])]
        records.append({"model": r["model"], "gpus": r["gpus"], "batch": r["batch"], "series": n,
                        "throughput_tokens_per_s_per_gpu": r["throughput_tokens_per_s_per_gpu"],
                        "share_of_oracle": r["throughput_tokens_per_s_per_gpu"] / best,
                        "step_time_s": r["step_time_s"], "table_warmup_steps": r["table_warmup_steps"],
                        "table_converged": r["table_converged"], "table_last_move": r["table_last_move"]})
    above = [x for x in records if x["series"] != "Oracle" and x["share_of_oracle"] > 1.0]
    worst = max(records, key=lambda x: x["share_of_oracle"] if x["series"] != "Oracle" else 0.0)
    claims = [judge("No policy beats the oracle", "(ours: an upper bound)",
                    f"highest share {worst['share_of_oracle']:.3f} ({worst['series']}, {worst['model']}, "
                    f"B = {worst['batch']})", not above,
                    why="; ".join(f"{x['series']} {x['share_of_oracle']:.4f} at {x['model']} B = {x['batch']}"
                                  for x in above))]
    for name in ("Sieve", "Overlap"):
        shares = [x["share_of_oracle"] for x in records if x["series"] == name]
        claims.append(judge(f"{name} as a share of the oracle", "(ours)",
                            f"{min(shares):.3f}-{max(shares):.3f} over every model and B", None))
    order = [series_name(pol, unit, "text") for pol, unit in POLICIES if pol != "oracle"]
    table = [f"share of the oracle's throughput, {m} B = {b} (oracle {oracle[(m, b)]:.1f} tokens/s/GPU): "
             + ", ".join(f"{x['series']} {x['share_of_oracle']:.3f}" for n in order for x in records
                         if x["series"] == n and x["model"] == m and x["batch"] == b)
             for m, b in oracle]
    notes = table + ["executed schedules under the paper's roofline GPU unless --gpu-model; the oracle's search and "
             "pricing: docs/policies.md ('Oracle'): every prefix cut and every busiest-unit walk, each priced on "
             "the executed layer (on several GPUs assuming that every GPU reaches its router at the same time)",
             warmup_note(records)]
    return FigureData(records, claims, notes)
