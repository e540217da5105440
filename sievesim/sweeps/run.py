"""Sweeps: a grid of settings, one point function call per point, resumable result files.

A *point* is one combination of the settings in :data:`GRID_KEYS` (the keyword arguments of
``sievesim.system.simulate_step``). A grid is the union of Cartesian products of lists of values
(from CLI flags or a TOML file, :func:`load_grid_file`). :func:`run_grid` calls a point function
on each point through any :class:`concurrent.futures.Executor` (a process pool, Dask's
``Client.get_executor()``, or none for serial runs) and writes, in the output directory:

* ``results.jsonl``: one JSON object per finished point, appended with a single ``write`` as the
  point finishes and fsynced; a line cut short by a kill is dropped when the sweep is resumed;
* ``results.csv``: the same rows in grid order, rewritten atomically (temporary file + rename);
* ``wall_clock.jsonl``: fields measured on the wall clock (names starting with ``wall_``) and the
  seconds each point took: they differ between runs, so they are kept out of the result files;
* ``grid.json``: the points (with the content digests of their input files) and the point
  function, so that a rerun can skip finished points and refuse a directory that holds another
  grid; ``input_files`` lists the digest of every file the sweep read (the grid file too).

Every row carries the settings that produced it (the point function's inputs, the
``point_id``, the digests of the resolved model and hardware and the sievesim version), so one
row is enough to reproduce itself. A point's id covers the content of its input files
(:mod:`sievesim.sweeps.provenance`): after an edit those points are new and run again. When every point
is done, ``results.jsonl`` is rewritten in grid order, so two runs of one grid give byte-identical
result files however the executor ordered the work.
"""
from __future__ import annotations

import concurrent.futures as cf
import functools
import json
import os
import pathlib
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from .. import __version__
from ..errors import SievesimError, field_error
from .provenance import file_digest, point_inputs, resolved_digest
from .grid import (_COLUMN, _FORMAT, GRID_KEYS, INT_SETTINGS, MANIFEST, SETTING_DEFAULTS, STEP, WALL_CLOCK_JSONL,
                   PointKind, _identity, check_points, count_points, expand_grid, load_grid_file, normalise_axes,
                   point_id)
from .results import (RESULTS_CSV, RESULTS_JSONL, append_durable as _append, csv_bytes, json_line as _json_line,
                      locked_directory, read_jsonl, read_results, write_atomic as _write_atomic)

__all__ = ["GRID_KEYS", "SETTING_DEFAULTS", "INT_SETTINGS", "load_grid_file", "expand_grid", "check_points",
           "count_points", "normalise_axes", "point_id", "grid_manifest", "run_grid", "SweepSummary", "read_results", "estimate_point",
           "step_point",
           "RESULTS_JSONL", "RESULTS_CSV", "WALL_CLOCK_JSONL", "MANIFEST"]
# ------------------------------------------------------------------------------------------------
# result files
# ------------------------------------------------------------------------------------------------
def _row(settings: Mapping[str, Any], pid: str, result: Mapping[str, Any],
         digests: Mapping[str, str | None] | None = None, kind: PointKind = STEP
         ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(result row, wall-clock row) of one finished point; ``digests`` (``model_digest``,
    ``hardware_digest``, ``trace_digest``) go after the point function's results."""
    row: dict[str, Any] = {"point_id": pid}
    for k in kind.keys:  # a setting left to the point function's default shows the value it used
        value = settings.get(k)
        row[_COLUMN.get(k, k)] = result.get(k) if value is None else value
    context = result.get("context")
    if row.get("context_len_tokens", 0) is None and settings.get("context_preset") is None and isinstance(context, str) \
            and context.isascii() and context.isdigit():
        row["context_len_tokens"] = int(context)      # the step's default context, as a number
    wall: dict[str, Any] = {"point_id": pid}
    for k, v in result.items():
        if k.startswith("wall_"):
            wall[k] = v
        elif k not in row:
            flat = _flat_columns(k, v)
            if flat is None:
                row[k] = v
            else:
                row.update((col, x) for col, x in flat.items() if col not in row)
    for k, v in (digests or {}).items():
        row.setdefault(k, v)
    row.setdefault("sievesim_version", __version__)
    return row, wall


#: Units that stay last in a flattened column's name, as in serving rows
#: (``energy_breakdown_j`` -> ``energy_breakdown_pim_j``).
_UNIT_SUFFIXES = ("_j", "_s", "_bytes")


def _flat_columns(key: str, value: Any) -> dict[str, Any] | None:
    """A result's mapping of numbers as one column each, so that ``plot`` and pandas read them
    (``energy_breakdown_j = {"pim": x}`` -> ``energy_breakdown_pim_j = x``); None for any other value."""
    if not isinstance(value, Mapping) or not value or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in value.values()):
        return None
    unit = next((u for u in _UNIT_SUFFIXES if key.endswith(u)), "")
    base = key[:-len(unit)] if unit else key
    return {f"{base}_{sub}{unit}": x for sub, x in value.items()}


def _read_jsonl(path: pathlib.Path, *, repair: bool = False,
                check: Callable[[dict[str, Any]], "str | None"] | None = None) -> list[dict[str, Any]]:
    """Rows of a sweep's JSON-lines file; a damaged line (or a row ``check`` finds wrong) is skipped
    with a warning naming the file and the line, and its point runs again
    (:func:`sievesim.sweeps.results.read_jsonl`)."""
    return read_jsonl(path, repair=repair, damaged="skipped; its point runs again", check=check)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _time_or_nan(v: Any) -> bool:
    return _number(v) and (v != v or 0 <= v < float("inf"))


#: Result fields a recorded row of a point kind must hold to be believed when a sweep resumes:
#: (test, what was expected). A row without one, or with another type (``meets_slos = "false"``,
#: ``null``), is run again with a warning: a max-rate search never bisects on a damaged probe.
RESULT_FIELDS: dict[str, dict[str, tuple[Callable[[Any], bool], str]]] = {
    "serve": {
        "meets_slos": (lambda v: isinstance(v, bool), "true or false"),
        "requests_served": (lambda v: _number(v) and float(v).is_integer() and v >= 0, "a count of requests >= 0"),
        "slo_attainment": (lambda v: _number(v) and (v != v or 0 <= v <= 1), "a share from 0 to 1 (NaN: none arrived)"),
        "goodput_requests_per_s": (lambda v: _number(v) and 0 <= v < float("inf"), "a finite rate >= 0"),
        "ttft_p90_s": (_time_or_nan, "a time >= 0 [s] (NaN: none finished)"),
        "tpot_p90_s": (_time_or_nan, "a time >= 0 [s] (NaN: none finished)")}}


def _row_check(kind: PointKind, settings_of: Mapping[str, Mapping[str, Any]]
               ) -> Callable[[dict[str, Any]], "str | None"]:
    """What is wrong with a recorded row (None: nothing): a setting that is not its point's (the
    point id covers the settings, so the row was edited or damaged), or a result field of the
    wrong type (:data:`RESULT_FIELDS`)."""
    fields = RESULT_FIELDS.get(kind.name, {})

    def check(row: dict[str, Any]) -> str | None:
        settings = settings_of.get(row["point_id"], {})
        for k in kind.keys:
            want, col = settings.get(k), _COLUMN.get(k, k)
            got = row.get(col)
            if want is not None and (got != want or isinstance(got, bool) != isinstance(want, bool)):
                return f"a row whose {col} = {got!r:.60} is not its point's {want!r:.60}"
        for name, (ok, expected) in fields.items():
            if name not in row:
                return f"a {kind.name} point's row without {name} (expected {expected})"
            if not ok(row[name]):
                return f"a {kind.name} point's row whose {name} = {row[name]!r:.60}: expected {expected}"
        return None
    return check


# ------------------------------------------------------------------------------------------------
# running
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepSummary:
    """What :func:`run_grid` did: points in the grid, skipped (already done) and run now; ``rows``:
    the result rows of the grid's finished points, in grid order."""

    out_dir: pathlib.Path
    total: int
    skipped: int
    ran: int
    rows: tuple[dict[str, Any], ...] = field(default=(), repr=False)

    @property
    def done(self) -> int:
        return self.skipped + self.ran


#: The modules of the sweep family by the name they had before it became a package: a point
#: function's name in ``grid.json`` keeps the old spelling, so directories written before resume.
_FORMER_NAMES = {"sievesim.sweeps.run": "sievesim.sweep", "sievesim.sweeps.serve_points": "sievesim.serve_sweep"}


def _function_name(fn: Callable[..., Any]) -> str:
    module = getattr(fn, '__module__', '?')
    return f"{_FORMER_NAMES.get(module, module)}.{getattr(fn, '__qualname__', repr(fn))}"


def grid_manifest(points: Sequence[Mapping[str, Any]], fn: Callable[..., Any],
                  inputs: Sequence[Mapping[str, str]] | None = None,
                  files: Mapping[str, str] | None = None, kind: PointKind = STEP,
                  search: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What ``grid.json`` records of a sweep: its points (with the content digests of their input
    files, ``inputs``, one mapping per point), the point function's name and, in ``input_files``,
    the digest of every file the sweep read (the grid file included). A search whose points
    grow as it goes (:mod:`sievesim.sweeps.serve_points`) records what it searches in ``search``."""
    inputs = inputs or [{}] * len(points)
    out: dict[str, Any] = {"format": _FORMAT, "point_function": _function_name(fn),
                           "points": [_identity(p, i, kind) for p, i in zip(points, inputs)]}
    if search is not None:
        out["search"] = dict(search)
    if files:
        out["input_files"] = dict(sorted(files.items()))
    return out


def _same_grid(old: Any, new: Mapping[str, Any]) -> bool:
    """Whether ``grid.json`` ``old`` holds the grid ``new`` (input files may have been edited since:
    their points are new then, and run again)."""
    if not isinstance(old, dict) or not isinstance(old.get("points"), list):
        return False

    def bare(m: Mapping[str, Any]) -> Any:
        if "search" in old or "search" in new:      # a search: its points so far grow run by run
            return (m.get("format"), m.get("point_function"), m.get("search"))
        pts = [{k: v for k, v in p.items() if k != "inputs"} if isinstance(p, dict) else p for p in m["points"]]
        return (m.get("format"), m.get("point_function"), pts)

    return bare(old) == bare(new)


def _digests(points: Sequence[Mapping[str, Any]], grid_file: str | os.PathLike[str] | None
             ) -> tuple[list[dict[str, str]], list[dict[str, str | None]], dict[str, str]]:
    """Per point: the digests of its input files (part of its id) and the row's digest columns;
    and every input file with its digest (``grid.json``'s ``input_files``)."""
    memo: dict[tuple[str, str], str] = {}
    spec_memo: dict[tuple[str, Any], str | None] = {}

    def spec(kind: str, value: Any) -> str | None:
        key = (kind, value)
        if key not in spec_memo:
            try:
                spec_memo[key] = resolved_digest(kind, value) if isinstance(value, str) else None
            except SievesimError:   # a point function of one's own may read its settings otherwise
                spec_memo[key] = None
        return spec_memo[key]

    inputs, columns, files = [], [], {}
    if grid_file is not None:
        files[str(grid_file)] = file_digest(grid_file)
    for p in points:
        ins = point_inputs(p, memo)
        inputs.append(ins)
        col: dict[str, str | None] = {
            "model_digest": ins.get("model") or spec("model", p.get("model")),
            "hardware_digest": ins.get("hardware") or spec("hardware", p.get("hardware") or "b200")}
        if "trace" in ins:
            col["trace_digest"] = ins["trace"]
        columns.append(col)
        for k, d in ins.items():
            files[str(p[k])] = d
    return inputs, columns, files


class _Progress:
    """tqdm bar on a terminal, else one plain line per point on ``stream``."""

    def __init__(self, total: int, initial: int, stream: Any, bar: bool | None, label: str = "sweep",
                 kind: PointKind = STEP) -> None:
        self.total, self.done, self.stream, self.kind = total, initial, stream, kind
        self.bar = None
        if bar is None:
            bar = bool(getattr(stream, "isatty", lambda: False)())
        if bar:
            try:
                from tqdm import tqdm
                self.bar = tqdm(total=total, initial=initial, unit="point", file=stream, desc=label)
            except ImportError:  # tqdm is an optional extra (sievesim[progress])
                self.bar = None
        if self.bar is None and initial:
            print(f"sweep: {initial}/{total} points already done, skipped", file=stream, flush=True)

    def update(self, settings: Mapping[str, Any], seconds: float) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)
            return
        kind = self.kind
        what = " ".join(f"{k}={settings[k]}" for k in kind.keys if settings.get(k) is not None
                        and (k in kind.shown or settings[k] != kind.defaults[k]))
        print(f"sweep: {self.done}/{self.total} {what} ({seconds:.2f} s)", file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _timed_call(fn: Callable[[dict[str, Any]], Mapping[str, Any]], settings: dict[str, Any]
                ) -> tuple[dict[str, Any], float]:
    t0 = time.perf_counter()
    result = dict(fn(settings))
    return result, time.perf_counter() - t0


def run_grid(points: Sequence[Mapping[str, Any]], out_dir: str | os.PathLike[str], *,
             point_fn: Callable[[dict[str, Any]], Mapping[str, Any]],
             executor: cf.Executor | None = None, force: bool = False,
             progress: Any = sys.stderr, bar: bool | None = None,
             csv_interval_s: float = 2.0, grid_file: str | os.PathLike[str] | None = None,
             label: str = "sweep", kind: PointKind = STEP, search: Mapping[str, Any] | None = None
             ) -> SweepSummary:
    """Run ``point_fn(settings)`` for every point not yet in ``out_dir`` and record the results.

    ``point_fn`` takes a settings dict (keys :data:`GRID_KEYS`) and returns a flat dict of
    results whose keys carry their units; with an ``executor`` it must be picklable (a
    module-level function). ``executor=None`` runs the points one after the other in this
    process. A directory that holds another grid (or another point function) is refused with a
    :class:`~sievesim.errors.SievesimError` unless ``force``, which starts it over. The CSV is
    rewritten after each point, at most once per ``csv_interval_s`` seconds, and at the end.
    ``progress``: stream for the progress bar or lines (``None``: quiet); ``bar``: force the tqdm
    bar on (True) or off (False); default: on when ``progress`` is a terminal. ``grid_file``: the
    TOML file the points came from (its digest goes into ``grid.json``); ``label``: the bar's name;
    ``kind``: the settings of a point (:data:`sievesim.sweeps.grid.STEP`, the decode step's, or
    :data:`sievesim.sweeps.grid.SERVE`, a serving run's). ``search``: what a search whose points grow
    from run to run searches (a directory is then refused when it holds another search, not when
    it holds fewer points).

    Provenance: a point's id covers the content of its input files (model, hardware with its
    ``base`` and DRAM configuration files, trace), so after an edit those points are new and run
    again (the others are kept); every row records ``model_digest``, ``hardware_digest`` (of the
    resolved specs, presets too), ``trace_digest`` (trace files) and ``sievesim_version``.
    """
    from .._validate import check_name_or_path, check_strict_bool, type_error

    out = pathlib.Path(check_name_or_path("out_dir", out_dir, "an output directory path"))
    if not callable(point_fn):
        raise type_error("point_fn", point_fn, "a function settings -> dict of results")
    if isinstance(points, (str, bytes, Mapping)) or not isinstance(points, Iterable):
        raise type_error("points", points, "a list of point settings (mappings), e.g. from expand_grid")
    points = list(points)
    for i, p in enumerate(points):
        if not isinstance(p, Mapping):
            raise type_error(f"points[{i}]", p, "a mapping of settings (from expand_grid)")
    force = check_strict_bool("force", force)
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise type_error("executor", executor, "a concurrent.futures.Executor or None")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise field_error("--out", str(out), f"a directory that can be made ({exc.strerror})") from None
    with locked_directory(out):
        return _run_locked([dict(p) for p in points], out, point_fn, executor, force, progress, bar, csv_interval_s,
                           grid_file, label, kind, search)


def _claim_directory(out: pathlib.Path, manifest: dict[str, Any], files: Mapping[str, str], force: bool,
                     progress: Any) -> None:
    """Make ``out`` this grid's directory: refuse one that holds another grid (unless ``force``, which
    empties it), say how many points read input files that changed since the last run, and write
    ``grid.json`` when it differs from ``manifest``."""
    jsonl, csv_path, wall_path, man_path = (out / RESULTS_JSONL, out / RESULTS_CSV,
                                            out / WALL_CLOCK_JSONL, out / MANIFEST)
    existing = man_path.exists() or jsonl.exists() or csv_path.exists()
    old = None
    if existing and not force:
        if man_path.exists():
            try:
                from .._inputs import read_text
                old = json.loads(read_text(man_path, "sweep grid.json", "manifest"))
            except (json.JSONDecodeError, RecursionError):   # damaged: an unknown grid (a FIFO or an oversized file is refused)
                old = None
        if not _same_grid(old, manifest):
            what = "another grid" if old is not None else "results of an unknown grid"
            raise field_error("--out", str(out), f"a new directory or one of this same grid: it holds "
                              f"{what}; rerun with --force to start it over")
    if force:
        for path in (jsonl, csv_path, wall_path, man_path):
            path.unlink(missing_ok=True)
    if old != manifest:
        renewed = sum(a != b for a, b in zip(old["points"], manifest["points"])) if old is not None else 0
        if renewed and progress is not None:
            before = old.get("input_files") or {}
            changed = sorted(f for f, d in files.items() if f in before and before[f] != d)
            print(f"sweep: {renewed} point(s) read input files that changed since the last run"
                  f"{' (' + ', '.join(changed) + ')' if changed else ''}: they are new and run again",
                  file=progress, flush=True)
        _write_atomic(man_path, (json.dumps(manifest, indent=1) + "\n").encode())


def _run_locked(points: list[dict[str, Any]], out: pathlib.Path, point_fn: Callable[[dict[str, Any]], Mapping[str, Any]],
                executor: cf.Executor | None, force: bool, progress: Any, bar: bool | None, csv_interval_s: float,
                grid_file: str | os.PathLike[str] | None, label: str, kind: PointKind,
                search: Mapping[str, Any] | None) -> SweepSummary:
    """:func:`run_grid` once it holds the directory's lock."""
    inputs, digest_cols, files = _digests(points, grid_file)
    ids = [point_id(p, i, kind) for p, i in zip(points, inputs)]
    manifest = grid_manifest(points, point_fn, inputs, files, kind, search)
    jsonl, csv_path, wall_path = out / RESULTS_JSONL, out / RESULTS_CSV, out / WALL_CLOCK_JSONL
    _claim_directory(out, manifest, files, force, progress)

    order = {pid: i for i, pid in enumerate(ids)}
    recorded = _read_jsonl(jsonl, repair=True, check=_row_check(kind, dict(zip(ids, points))))
    rows = {r["point_id"]: r for r in recorded if r.get("point_id") in order}
    # a search's later probes are not among this run's points yet: their rows stay in the files
    kept = [r for r in recorded if r.get("point_id") not in order] if search is not None else []
    _read_jsonl(wall_path, repair=True)
    digest_of = dict(zip(ids, digest_cols))
    todo = [(pid, p) for pid, p in zip(ids, points) if pid not in rows]
    skipped = len(points) - len(todo)
    bar_out = _Progress(len(points), skipped, progress, bar, label, kind) if progress is not None else None

    def sorted_rows() -> list[dict[str, Any]]:
        return sorted(rows.values(), key=lambda r: order[r["point_id"]])

    def file_rows() -> list[dict[str, Any]]:
        return sorted_rows() + kept

    last_csv = 0.0

    def record(pid: str, settings: dict[str, Any], result: dict[str, Any], seconds: float) -> None:
        nonlocal last_csv
        row, wall = _row(settings, pid, result, digest_of[pid], kind)
        wall["wall_point_s"] = seconds
        _append(jsonl, _json_line(row))
        _append(wall_path, _json_line(wall))
        rows[pid] = row
        now = time.monotonic()
        if now - last_csv >= csv_interval_s:
            _write_atomic(csv_path, csv_bytes(file_rows()))
            last_csv = now
        if bar_out is not None:
            bar_out.update(settings, seconds)

    def failed(settings: Mapping[str, Any], exc: BaseException) -> SievesimError:
        what = ", ".join(f"{k}={settings[k]!r}" for k in kind.keys if settings.get(k) is not None)
        cls = type(exc) if isinstance(exc, SievesimError) else SievesimError
        return cls(f"point {what}: {exc}")

    ran = 0
    over_limit = _work_clock(kind, out, len(points), skipped)
    try:
        if executor is None:
            for pid, settings in todo:
                over_limit(ran)
                try:
                    result, seconds = _timed_call(point_fn, settings)
                except SievesimError as exc:
                    raise failed(settings, exc) from None
                record(pid, settings, result, seconds)
                ran += 1
        else:
            futures = {executor.submit(_timed_call, point_fn, settings): (pid, settings)
                       for pid, settings in todo}
            try:
                for fut in cf.as_completed(futures):
                    pid, settings = futures[fut]
                    try:
                        result, seconds = fut.result()
                    except SievesimError as exc:
                        raise failed(settings, exc) from None
                    record(pid, settings, result, seconds)
                    ran += 1
                    if ran < len(todo):
                        over_limit(ran)
            finally:
                for fut in futures:
                    fut.cancel()
    finally:
        if bar_out is not None:
            bar_out.close()
        if rows:
            _write_atomic(csv_path, csv_bytes(file_rows()))
    if len(rows) == len(points):
        # grid order, so that the file does not depend on the order the executor finished in
        _write_atomic(jsonl, b"".join(_json_line(r) for r in file_rows()))
    return SweepSummary(out, len(points), skipped, ran, tuple(sorted_rows()))


def _work_clock(kind: PointKind, out: pathlib.Path, total: int, skipped: int) -> Callable[[int], None]:
    """``check(ran)``: for serving points, whose run time nothing estimates before they run, stop the
    sweep with a :class:`~sievesim.errors.ConfigError` once it has run longer than the work limit
    (``--max-work``); the points finished so far are kept, so the same command with a higher limit
    resumes it. Decode-step sweeps are refused before they start instead (:func:`check_points`)."""
    from .._validate import format_seconds, max_work_s

    limit, t0 = max_work_s(), time.monotonic()

    def check(ran: int) -> None:
        spent = time.monotonic() - t0
        if kind.name == "serve" and spent > limit:
            from ..errors import ConfigError
            raise field_error("--max-work", format_seconds(limit), f"more time for this sweep: it ran "
                              f"{format_seconds(spent)} and {skipped + ran} of its {total} points are done (kept in "
                              f"{out}); rerun the command with a higher limit, e.g. --max-work 2h, to run the "
                              f"{total - skipped - ran} left", cls=ConfigError)
    return check


# ------------------------------------------------------------------------------------------------
# point functions
# ------------------------------------------------------------------------------------------------
def step_point(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The executed decode step at a point: ``sievesim.system.simulate_step(**settings).to_dict()``
    (settings left as ``None`` take the step's own defaults)."""
    from ..system import parse_policy_options, simulate_step

    kwargs = {k: settings[k] for k in GRID_KEYS if settings.get(k) is not None}
    if "scheduler_latency_us" in kwargs:
        kwargs["scheduler_latency_s"] = kwargs.pop("scheduler_latency_us") * 1e-6
    if "policy_options" in kwargs:
        kwargs["policy_options"] = parse_policy_options(kwargs["policy_options"])
    return dict(simulate_step(**kwargs).to_dict())


# ------------------------------------------------------------------------------------------------
# a point function that needs no executed step: the scheduler's estimate of one layer
# ------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _routing_source(spec: str | None, model: Any, seed: int) -> tuple[Any, str]:
    """(source, spec) of a point's routing: ``spec``, or the model's calibrated synthetic routing;
    the model's top-k either way."""
    from ..workload.batches import open_source
    from ..workload.synthetic import source_for_model

    if spec is None:
        return source_for_model(model, seed=seed)
    if spec.startswith("synthetic:"):
        return open_source(spec, seed=seed, top_k=model.top_k), spec
    return open_source(spec, num_experts=model.num_experts, top_k=model.top_k), spec


def estimate_point(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The policy's estimated ``T_total`` of one MoE layer of GPU 0 (paper Equation 1) at a point.

    Routing: ``trace`` or, by default, the calibrated synthetic routing of the model
    (``synthetic:MODEL``, or the closest preset's shape for another model; with the point's
    ``top_k``); ``steps`` decode steps of ``batch`` requests from a stream seeded by
    ``[seed, batch]``, at the model's default layer (first MoE layer with full/MLA attention).
    Context per request: ``context_len`` tokens, or drawn from ``context_preset``
    (``sievesim.workload.lengths``), else 4096 (:data:`~sievesim.costs.DEFAULT_CONTEXT_LEN`, the
    default of ``run`` and ``simulate_step``). Times are means over the steps, in seconds. This
    is the scheduler's estimate, not the executed step; prefill needs the executed step.
    """
    import numpy as np

    from ..costs import DEFAULT_CONTEXT_LEN, build_context, default_layer
    from ..hardware import get_hardware
    from ..models import get_model
    from ..policies import get_policy
    from ..workload.lengths import decode_context_lengths

    from ..system import parse_policy_options, parse_prefill

    if settings.get("prefill") and parse_prefill(settings["prefill"])[0] > 0:
        raise field_error("prefill", settings["prefill"], "none with the estimate point function "
                          "(colocated prefill needs the executed step)")
    model = get_model(settings["model"], top_k=settings.get("top_k"))
    hw = get_hardware(settings.get("hardware") or "b200")
    gpus, batch = int(settings.get("gpus") or 1), int(settings["batch"])
    seed, steps = int(settings.get("seed") or 0), int(settings.get("steps") or 1)
    from .._validate import check_int
    check_int("steps", steps, "batches")
    name = str(settings.get("policy") or "sieve")
    kwargs = parse_policy_options(settings["policy_options"]) if settings.get("policy_options") else {}
    if name.lower() == "pimoe" and settings.get("pimoe_unit"):
        if kwargs.get("unit", settings["pimoe_unit"]) != settings["pimoe_unit"]:
            raise field_error("policy_options unit", kwargs["unit"], f"the same unit as pimoe_unit = "
                              f"{settings['pimoe_unit']!r}, or only one of them")
        kwargs["unit"] = settings["pimoe_unit"]
    policy = get_policy(name, **kwargs)
    src, spec = _routing_source(settings.get("trace"), model, seed)
    if src.num_experts != model.num_experts:
        raise field_error("trace", spec, f"routing over {model.num_experts} experts ({model.name}); it has {src.num_experts}")
    layer = default_layer(model)
    moe = list(model.moe_layer_indices)
    routing_layer = moe.index(layer) if layer in moe and src.num_layers == len(moe) else 0
    stream = src.stream(batch, seed=[seed, batch])
    local = -(-batch // gpus)
    rng = np.random.default_rng([seed, batch, 1])
    e_local = model.num_experts // gpus
    sums = {"estimated_layer_time_s": 0.0, "t_comm_s": 0.0, "t_gpu_s": 0.0, "t_pim_s": 0.0,
            "t_attention_s": 0.0, "experts_on_gpu": 0.0, "experts_on_pim": 0.0, "context_mean_tokens": 0.0}
    for _ in range(steps):
        step = stream.step()
        if settings.get("context_len") is not None:
            lens: Any = np.full(local, int(settings["context_len"]), dtype=np.int64)
        elif settings.get("context_preset"):
            lens = decode_context_lengths(settings["context_preset"], local, rng)
        else:
            lens = np.full(local, DEFAULT_CONTEXT_LEN, dtype=np.int64)
        counts = step.counts[routing_layer, :e_local]
        ids = step.topk_ids[:, routing_layer, :] if step.topk_ids is not None else None
        if ids is not None and np.any(ids < 0):
            ids = None
        ctx = build_context(model, hw, gpus, batch, counts=counts, routing=ids, context_lens=lens)
        part = policy.decide(counts, ctx)
        est = part.evaluate(ctx)
        for key, value in (("estimated_layer_time_s", est.t_total_s), ("t_comm_s", est.t_comm_s),
                           ("t_gpu_s", est.t_gpu_s), ("t_pim_s", est.t_pim_s),
                           ("t_attention_s", est.t_attention_s),
                           ("experts_on_gpu", part.gpu_experts.size), ("experts_on_pim", part.pim_experts.size),
                           ("context_mean_tokens", float(np.mean(lens)) if len(lens) else 0.0)):
            sums[key] += float(value)
    out = {k: v / steps for k, v in sums.items()}
    context = settings.get("context_preset") or str(settings.get("context_len") or DEFAULT_CONTEXT_LEN)
    out.update({"top_k": model.top_k, "layer": layer, "routing": spec, "context": context,
                "point_function": "estimate"})
    return out
