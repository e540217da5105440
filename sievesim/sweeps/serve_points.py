"""Serving points in sweeps: one point = one ``sievesim serve`` run (:func:`serve_point`), and the
largest rate meeting the SLOs searched by bisection with every probe a sweep point
(:func:`max_rate_search`), so that an interrupted search resumes from the probes it recorded.

A serving point's settings are :data:`sievesim.sweeps.grid.SERVE_KEYS` (``serve``'s options; times in
seconds, ``rate`` in requests/s); :func:`sievesim.sweeps.run.run_grid` runs them with
``kind=SERVE``, so they are resumable and keyed by the content of every input file (model,
hardware, request trace) like decode-step points. A row holds the settings, then ``serve
--json``'s fields flattened into columns whose names end in their unit: ``ttft_p50_s``,
``tpot_p99_s``, ``e2e_mean_s``, ``throughput_tokens_per_s``, ``goodput_requests_per_s``,
``slo_attainment``, ``meets_slos``, ``batch_mean``, ``kv_use_max``, ``kv_capacity_blocks_per_gpu``,
``memo_error_mean_abs_rel``, ``energy_j``, ``energy_per_request_mean_j``, ``energy_breakdown_pim_j``,
``tokens_per_joule``, ``power_per_gpu_w``, ``goodput_requests_per_joule``, ...

The search: each group (a point without a rate) is bisected between ``lo`` and ``hi``
(:func:`sievesim.serving.search.next_probe`); every round serves the next probe of every group
not yet decided (in parallel with an executor) and records it in ``results.jsonl``. The answer
per group goes to ``max_rate.json`` in the output directory.
"""
from __future__ import annotations

import concurrent.futures as cf
import functools
import json
import math
import os
import pathlib
from typing import Any, Callable, Mapping, Sequence

from ..errors import ConfigError, field_error
from .grid import SERVE, SERVE_DEFAULTS, SERVE_KEYS, AllProblems, model_policy_problems

__all__ = ["serve_point", "check_serve_points", "max_rate_search", "MAX_RATE_JSON", "flatten_result"]

#: The answer of a max-rate search, in its output directory.
MAX_RATE_JSON = "max_rate.json"

#: ``serve --json`` fields left out of a row: the settings' columns already hold them.
_DROPPED = ("slo", "model", "hardware")
#: ``serve --json`` fields whose names are settings of a point: the row names them apart.
_RENAMED = {"requests": "requests_served", "output_tokens": "generated_tokens"}
#: Row names of the nested ``serve --json`` objects' prefixes (``pricing`` is the memo).
_PREFIX = {"pricing": "memo", "error_vs_exact": "error", "energy_error_vs_exact": "energy_error"}
#: Units that stay last in a flattened column's name (``energy_breakdown_j`` -> ``energy_breakdown_pim_j``).
_UNITS = ("_s", "_j")


def flatten_result(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``serve --json``'s object as flat columns: ``{"ttft_s": {"p50": x}}`` -> ``ttft_p50_s``
    (the unit, seconds or joules, stays last: ``energy_breakdown_j`` -> ``energy_breakdown_pim_j``), ``{"batch": {"mean": x}}`` -> ``batch_mean``, ``pricing`` ->
    ``memo_...``; ``requests`` (those served) -> ``requests_served``, ``output_tokens`` (those
    generated) -> ``generated_tokens``."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        if not prefix and key in _DROPPED:
            continue
        if isinstance(value, Mapping):
            name = _PREFIX.get(key, key)
            unit = next((u for u in _UNITS if name.endswith(u)), "")
            base = name[:-len(unit)] if unit else name
            for sub, v in flatten_result(value, f"{prefix}{base}_").items():
                out[sub + unit] = v
        elif not prefix and key in _RENAMED:
            out[_RENAMED[key]] = value
        else:
            out[prefix + key] = value
    return out


def _full(settings: Mapping[str, Any]) -> dict[str, Any]:
    return {k: settings.get(k, SERVE_DEFAULTS[k]) for k in SERVE_KEYS}


@functools.lru_cache(maxsize=16)
def _policy_kwargs(text: str | None) -> tuple[tuple[str, Any], ...]:
    from ..system import parse_policy_options

    return tuple(parse_policy_options(text).items()) if text else ()


def simulator_for(settings: Mapping[str, Any]) -> Any:
    """The :class:`~sievesim.serving.simulator.ServingSimulator` of a serving point's settings."""
    from ..serving.metrics import SloTargets
    from ..serving.scheduler import SchedulerConfig
    from ..serving.simulator import ServingSimulator

    s = _full(settings)
    policy = str(s["policy"]).lower()
    return ServingSimulator(
        s["model"], s["hardware"], gpus=int(s["gpus"]), policy=policy,
        prefill_gpus=None if s["prefill_gpus"] is None else int(s["prefill_gpus"]),
        scheduler=SchedulerConfig(int(s["max_batch"]), int(s["token_budget"]), s["horizon_s"]),
        slo=SloTargets(s["ttft_slo_s"], s["tpot_slo_s"], s["e2e_slo_s"], float(s["attainment"])),
        block_size=int(s["block_size"]), memory_utilization=float(s["memory_utilization"]),
        max_model_len=int(s["max_model_len"]), exact=bool(s["exact"]), error_samples=int(s["error_samples"]),
        seed=int(s["seed"]), top_k=s["top_k"], pimoe_unit=s["pimoe_unit"] if policy == "pimoe" else None,
        policy_options=dict(_policy_kwargs(s["policy_options"])), gpu_model=s["gpu_model"],
        weight_format=s["weight_format"])


def _lengths(s: Mapping[str, Any]) -> str | None:
    """The length preset, unless both prompt and output lengths are fixed (as ``serve`` does)."""
    return None if s["prompt_tokens"] is not None and s["output_tokens"] is not None else s["lengths"]


def serve_point(settings: Mapping[str, Any]) -> dict[str, Any]:
    """One serving run at a point (``sievesim serve --json`` for one policy, flattened by
    :func:`flatten_result`): ``requests`` requests (default 100; at least ``rate x
    arrival_window_s``) arriving at ``rate`` per second, or the first ``requests`` rows of the
    request ``trace``. A fresh simulator each time, so a point's row does not depend on the
    points run before it in the same process."""
    from ..serving.simulator import make_requests, requests_for

    s = _full(settings)
    n = s["requests"]
    if s["rate"] is not None and s["arrival_window_s"] is not None:
        n = requests_for(float(s["rate"]), n or 100, float(s["arrival_window_s"]))
    q, rate = make_requests(rate=s["rate"], requests=n, trace=s["trace"], cv=float(s["cv"]), lengths=_lengths(s),
                            prompt_tokens=s["prompt_tokens"], output_tokens=s["output_tokens"], seed=int(s["seed"]))
    return flatten_result(simulator_for(s).run(q, rate).to_dict())


def check_serve_points(points: Sequence[Mapping[str, Any]], *, search: bool = False) -> None:
    """Check every serving point before anything runs: names exist (model, hardware, policy, PIMoE
    unit, length preset), GPUs divide the experts, the policy takes its options, a rate or a trace
    (not both; neither with ``search``, which picks the rates), a trace file exists.

    Raises :class:`~sievesim.errors.SievesimError` naming the setting, the value and what was
    expected; every problem of every point at once (:class:`~sievesim.sweeps.grid.AllProblems`)."""
    from ..hardware import get_hardware
    from ..models import get_model

    models = functools.lru_cache(maxsize=None)(get_model)
    hardware = functools.lru_cache(maxsize=None)(get_hardware)
    problems = AllProblems()
    for p in map(_full, points):
        _serve_point_problems(p, search, models, hardware, problems)
    problems.raise_if_any()


def _serve_point_problems(p: Mapping[str, Any], search: bool, models: Callable[[Any], Any],
                          hardware: Callable[[Any], Any], problems: AllProblems) -> None:
    """Record the problems of one serving point (all its settings) in ``problems``."""
    from ..workload.lengths import get_length_preset

    _, cls = model_policy_problems(p, models, hardware, problems, unit_only_with_pimoe=True)
    if p["policy_options"] is not None and cls is not None:
        from ..policies.options import check_policy_options
        with problems.check():
            check_policy_options(cls, dict(_policy_kwargs(p["policy_options"])),
                                 prefix=f"policy_options (policy {p['policy']}) ", cli=True)
    with problems.check():
        if _lengths(p) is not None:
            get_length_preset(_lengths(p))
    with problems.check():
        _arrival_problem(p, search)


def _arrival_problem(p: Mapping[str, Any], search: bool) -> None:
    """Raise the first problem of a point's arrivals: a rate or a trace (not both; neither with
    ``search``), no arrival window with a trace, the trace file there."""
    if search:
        for key in ("rate", "trace"):
            if p[key] is not None:
                raise field_error(key, p[key], "none with --max-rate (the search picks the rates)")
    elif p["rate"] is None and p["trace"] is None:
        raise field_error("rate", None, "a rate (requests/s), a request trace, or --max-rate LO:HI")
    if p["rate"] is not None and p["trace"] is not None:
        raise field_error("rate", p["rate"], "no rate with a request trace (the trace sets the arrivals)")
    if p["trace"] is not None:
        if p["arrival_window_s"] is not None:
            raise field_error("arrival_window_s", p["arrival_window_s"], "none with a request trace")
        if not os.path.exists(p["trace"]):     # what is there (a FIFO, a directory) its reader refuses
            raise ConfigError(f"file not found: {p['trace']} (trace: expected a request trace, CSV or JSON lines)")


# ------------------------------------------------------------------------------------------------
# the largest rate meeting the SLOs, one sweep point per probe
# ------------------------------------------------------------------------------------------------
def _tried(row: Mapping[str, Any]) -> dict[str, Any]:
    """One probe of the search as ``serve --max-rate`` lists it (``tried``)."""
    return {"rate": row["rate"], "requests": row["requests_served"], "slo_attainment": row["slo_attainment"],
            "meets_slos": row["meets_slos"], "goodput_requests_per_s": row["goodput_requests_per_s"],
            "ttft_p90_s": row["ttft_p90_s"], "tpot_p90_s": row["tpot_p90_s"], "window_reached": row.get("window_reached"),
            "point_id": row["point_id"]}


def _record(group: Mapping[str, Any], found: Mapping[str, Any], tried: list[dict[str, Any]]) -> dict[str, Any]:
    g = _full(group)
    out = {k: g[k] for k in SERVE_KEYS if k not in ("rate", "trace")}
    out["requests"] = g["requests"] or 100
    out["slo"] = {"ttft_s": g["ttft_slo_s"], "tpot_s": g["tpot_slo_s"], "e2e_s": g["e2e_slo_s"],
                  "attainment": g["attainment"]}
    return {**out, **found, "tried": tried}


def max_rate_search(groups: Sequence[Mapping[str, Any]], out_dir: str | os.PathLike[str], *, lo: float, hi: float,
                    steps: int = 7, executor: cf.Executor | None = None, force: bool = False,
                    progress: Any = None, grid_file: str | os.PathLike[str] | None = None,
                    point_fn: Callable[[dict[str, Any]], Mapping[str, Any]] = serve_point) -> list[dict[str, Any]]:
    """The largest rate [requests/s] in ``[lo, hi]`` at which each group (serving settings without
    a rate) meets its SLOs, by ``steps`` bisection steps, every probe a point of a sweep in
    ``out_dir`` (:func:`sievesim.sweeps.run.run_grid`, ``kind=SERVE``).

    Each round serves the next probe of every group not yet decided (through ``executor`` when
    given); a rerun finds the probes already in ``results.jsonl`` and, given their outcomes,
    asks for the same next ones, so an interrupted search resumes without serving a recorded
    probe again. A directory holding another search (other groups, bracket or steps) is refused
    unless ``force``. Returns one record per group (its settings, ``slo``, ``max_rate``,
    ``bracket``, ``tried``: the probes in order, each with its ``point_id``), also written to
    ``out_dir/max_rate.json``."""
    from .._outputs import write_output
    from .._validate import check_int
    from ..serving.search import next_probe
    from ..serving.workload import MAX_RATE, MIN_RATE
    from .run import run_grid

    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in (lo, hi)) \
            or not MIN_RATE <= lo < hi <= MAX_RATE:
        raise field_error("--max-rate", f"{lo}:{hi}",
                          f"LO:HI, two rates in requests/s with {MIN_RATE:g} <= LO < HI <= {MAX_RATE:g}")
    check_int("--bisect-steps", steps, "bisect_steps")
    groups = [_full({**g, "rate": None}) for g in groups]
    search = {"max_rate": [float(lo), float(hi)], "bisect_steps": int(steps),
              "groups": [{k: g[k] for k in SERVE_KEYS} for g in groups]}
    probes: list[dict[str, Any]] = []      # every probe so far: by round, then group (a stable prefix)
    outcomes: list[dict[float, bool]] = [{} for _ in groups]
    tried: list[list[dict[str, Any]]] = [[] for _ in groups]
    answers: list[dict[str, Any] | None] = [None] * len(groups)
    first, summary = True, None
    while True:
        new = []
        for i, g in enumerate(groups):
            if answers[i] is None:
                rate, found = next_probe(float(lo), float(hi), int(steps), outcomes[i])
                if found is not None:
                    answers[i] = found
                else:
                    new.append((i, {**g, "rate": rate}))
        if not new:
            break
        probes.extend(p for _, p in new)
        summary = run_grid(probes, out_dir, point_fn=point_fn, executor=executor, force=force and first,
                           progress=progress, grid_file=grid_file, label="max-rate", kind=SERVE, search=search)
        first = False
        rows = summary.rows[len(probes) - len(new):]     # grid order: this round's probes come last
        if len(summary.rows) != len(probes):
            raise ConfigError(f"{out_dir}: {len(probes) - len(summary.rows)} probe(s) of the search left no result row")
        for (i, p), row in zip(new, rows):
            outcomes[i][p["rate"]] = bool(row["meets_slos"])
            tried[i].append(_tried(row))
    if summary is not None:
        _drop_stale(pathlib.Path(out_dir), summary.rows)
    records = [_record(g, a or {}, t) for g, a, t in zip(groups, answers, tried)]
    write_output(pathlib.Path(out_dir) / MAX_RATE_JSON, json.dumps(records, indent=1) + "\n")
    return records


def _drop_stale(out: pathlib.Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Keep only the search's probes in its result files: a probe served before an input file was
    edited is no probe of the search any more (its id changed with the file)."""
    from .results import RESULTS_CSV, RESULTS_JSONL, csv_bytes, json_line, read_jsonl, write_atomic

    if len(read_jsonl(out / RESULTS_JSONL)) != len(rows):
        write_atomic(out / RESULTS_JSONL, b"".join(json_line(r) for r in rows))
        write_atomic(out / RESULTS_CSV, csv_bytes(rows))


def max_rate_lines(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per group of a search: what differs between the groups, the rate found, the bracket."""
    shown = ("model", "policy", "pimoe_unit", "rate", "trace")
    varying = [k for k in SERVE_KEYS if k not in shown and len({repr(r.get(k)) for r in records}) > 1]
    lines = []
    for r in records:
        policy = f"{r['policy']}({r['pimoe_unit']})" if r.get("pimoe_unit") else r["policy"]
        what = " ".join([f"model={r['model']}", f"policy={policy}", *(f"{k}={r[k]}" for k in varying)])
        from ..serving.search import describe_answer
        lines.append(f"{what}: max rate meeting the SLOs {describe_answer(r)}")
    return lines
