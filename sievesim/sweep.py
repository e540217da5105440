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
(:mod:`sievesim.provenance`): after an edit those points are new and run again. When every point
is done, ``results.jsonl`` is rewritten in grid order, so two runs of one grid give byte-identical
result files however the executor ordered the work.
"""
from __future__ import annotations

import concurrent.futures as cf
import difflib
import functools
import hashlib
import itertools
import json
import os
import pathlib
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from . import __version__
from ._validate import BOUNDS, MAX_LIST, Problems
from .errors import ConfigError, SievesimError, field_error
from .provenance import file_digest, point_inputs, resolved_digest
from .results import (RESULTS_CSV, RESULTS_JSONL, append_durable as _append, csv_bytes, json_line as _json_line,
                      read_jsonl, read_results, write_atomic as _write_atomic)

__all__ = ["GRID_KEYS", "SETTING_DEFAULTS", "load_grid_file", "expand_grid", "check_points",
           "point_id", "grid_manifest", "run_grid", "SweepSummary", "read_results", "estimate_point",
           "step_point",
           "RESULTS_JSONL", "RESULTS_CSV", "WALL_CLOCK_JSONL", "MANIFEST"]

#: Settings of one point, in the order they appear in result rows. Each is a keyword argument of
#: ``sievesim.system.simulate_step``.
GRID_KEYS: tuple[str, ...] = ("model", "top_k", "hardware", "gpus", "policy", "pimoe_unit", "batch", "trace",
                              "context_len", "context_preset", "prefill", "steps", "warmup", "seed",
                              "microbatches", "early_loads", "scheduler_latency_us", "policy_options")
#: Keys added after sweeps were first written: left out of a point's id and of ``grid.json`` while
#: unset, so that a sweep begun before they existed resumes.
_LATER_KEYS = frozenset({"top_k"})

#: Defaults of the settings a grid leaves out (``None``: the point function's own default);
#: ``pimoe_unit`` is :data:`sievesim.policies.DEFAULT_PIMOE_UNIT` (a test checks they agree).
SETTING_DEFAULTS: dict[str, Any] = {
    "model": None, "top_k": None, "hardware": "b200", "gpus": 1, "policy": "sieve", "pimoe_unit": "channel",
    "batch": None, "trace": None, "context_len": None, "context_preset": None, "prefill": None,
    "steps": 1, "warmup": None, "seed": 0,
    "microbatches": None, "early_loads": None, "scheduler_latency_us": None, "policy_options": None,
}

#: Result-row column of each setting whose name does not already say its unit.
_COLUMN = {"context_len": "context_len_tokens"}

WALL_CLOCK_JSONL = "wall_clock.jsonl"
MANIFEST = "grid.json"
_FORMAT = 1

#: Integer settings and their bounds (:data:`sievesim._validate.BOUNDS` kind, lowest value).
INT_SETTINGS: dict[str, tuple[str, int | None]] = {
    "top_k": ("experts", None), "gpus": ("gpus", None), "batch": ("batch", None), "context_len": ("context", None),
    "steps": ("batches", None), "warmup": ("batches", 0), "seed": ("seed", None), "microbatches": ("batch", None)}
_INT_KEYS = tuple(INT_SETTINGS)
_STR_KEYS = ("model", "hardware", "policy", "pimoe_unit", "trace", "context_preset", "prefill", "policy_options")
_BOOL_KEYS = ("early_loads",)
#: Early-load rules a grid may name besides true (the policy's default rule) and false (off).
_EARLY_LOAD_RULES = ("cheaper", "paper", "off")
_FLOAT_KEYS = ("scheduler_latency_us",)


# ------------------------------------------------------------------------------------------------
# grids
# ------------------------------------------------------------------------------------------------
def _unknown_key(key: str, field: str, where: str) -> ConfigError:
    close = difflib.get_close_matches(key, GRID_KEYS + ("grid",), n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return field_error(field, "<unknown key>", f"one of the grid keys{hint}: {', '.join(GRID_KEYS)}",
                       source=where)  # type: ignore[return-value]


def _value_problem(key: str, v: Any) -> str | None:
    """What a grid value of ``key`` should have been, or None when it fits."""
    if v is None:
        return None
    if key in _INT_KEYS:
        kind, lo = INT_SETTINGS[key]
        b = BOUNDS[kind]
        lo = b.lo if lo is None else lo
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= b.hi:
            return f"an integer from {lo} to {b.hi} ({b.why})"
    if key in _STR_KEYS and not isinstance(v, str):
        return "a string"
    if key in _BOOL_KEYS and not isinstance(v, bool) and v not in _EARLY_LOAD_RULES:
        return "true, false or one of " + ", ".join(_EARLY_LOAD_RULES)
    if key in _FLOAT_KEYS and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1e6):
        return "a number of microseconds in [0, 1e6)"
    if key == "prefill" and not isinstance(v, str):
        return "a string P:L (P prefill requests of L prompt tokens)"
    return None


def _normalise(axes: Mapping[str, Any], problems: Problems, where: str, label: str = "") -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for key, value in axes.items():
        field = f"{label}{key}"
        with problems.check():
            if key not in GRID_KEYS:
                raise _unknown_key(key, field, where)
            values = list(value) if isinstance(value, (list, tuple)) else [value]
            if not values:
                raise field_error(field, value, "at least one value", source=where)
            if len(values) > MAX_LIST:   # the same cap as a comma-separated list on the command line
                raise field_error(field, f"<{len(values)} values>", f"at most {MAX_LIST} values (each one "
                                  "multiplies the points of the grid)", source=where)
            out[key] = values
        for v in out.get(key, []):
            expected = _value_problem(key, v)
            if expected is not None:
                with problems.check():
                    raise field_error(field, v, expected, source=where)
    return out


def normalise_axes(axes: Mapping[str, Any], where: str = "grid") -> dict[str, list[Any]]:
    """``axes`` with every key checked (an unknown key names the closest valid one) and every
    value turned into a list; every problem in one error."""
    problems = Problems(where)
    out = _normalise(axes, problems, where)
    problems.raise_if_any()
    return out


def load_grid_file(path: str | os.PathLike[str]) -> list[dict[str, list[Any]]]:
    """The products of a TOML grid file.

    Top-level keys (from :data:`GRID_KEYS`, a value or a list of values each) apply to every
    product; each ``[[grid]]`` table adds one product with its own keys on top of them (for
    example one table per (model, GPU count) pair). Without ``[[grid]]`` tables the top-level keys
    form one product. Every problem of the file is reported in one error.
    """
    from ._inputs import read_toml

    data = read_toml(path)
    where = str(path)
    tables = data.pop("grid", None)
    problems = Problems(where)
    base = _normalise(data, problems, where)
    if isinstance(tables, dict):
        tables = [tables]
    if tables is not None and (not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables)):
        with problems.check():
            raise field_error("grid", type(tables).__name__, "[[grid]] tables", source=where)
        tables = []
    products = [{**base, **_normalise(t, problems, where, f"[[grid]] #{i + 1} ")} for i, t in enumerate(tables or [])]
    problems.raise_if_any()
    return products or [base]


def expand_grid(products: Iterable[Mapping[str, Sequence[Any]]]) -> list[dict[str, Any]]:
    """Every point of the products, in order (the last key of :data:`GRID_KEYS` varies fastest),
    without repeats. ``pimoe_unit`` is ``None`` unless the policy is PIMoE, so that a sweep over
    units runs the other policies once."""
    from ._validate import type_error

    if isinstance(products, (str, bytes, Mapping)) or not isinstance(products, Iterable):
        raise type_error("products", products, "a list of mappings {setting: value or list of values} "
                                               "(wrap one mapping in a list)")
    products = list(products)
    for i, axes in enumerate(products):
        if not isinstance(axes, Mapping):
            raise type_error(f"products[{i}]", axes, "a mapping {setting: value or list of values}")
    normalised = []
    for axes in products:
        axes = normalise_axes(axes)
        for key in ("model", "batch"):
            if key not in axes:
                raise field_error(key, None, "at least one value (--" + key + " or the grid file)")
        normalised.append(axes)
    count_points(normalised)       # counted before anything is expanded
    points: list[dict[str, Any]] = []
    seen: set[str] = set()
    for axes in normalised:
        lists = [axes.get(k, [SETTING_DEFAULTS[k]]) for k in GRID_KEYS]
        for combo in itertools.product(*lists):
            settings = dict(zip(GRID_KEYS, combo))
            if str(settings["policy"]).lower() != "pimoe":
                settings["pimoe_unit"] = None
            pid = point_id(settings)
            if pid not in seen:
                seen.add(pid)
                points.append(settings)
    return points


#: Most points one grid may have (each is one point-function call).
MAX_GRID_POINTS = 1 << 16


def count_points(products: Sequence[Mapping[str, Sequence[Any]]]) -> int:
    """The points the products would expand to (before repeats are removed), refused above
    :data:`MAX_GRID_POINTS` before anything is expanded."""
    total = 0
    for axes in products:
        n = 1
        for key in GRID_KEYS:
            n *= max(1, len(axes.get(key, ())))
        total += n
    if total > MAX_GRID_POINTS:
        sizes = " + ".join(" x ".join(str(len(v)) for v in axes.values() if len(v) > 1) or "1" for axes in products)
        raise field_error("grid points", total, f"at most {MAX_GRID_POINTS:,} points ({sizes} values per "
                          "setting); split the sweep or list fewer values")
    return total


def _identity(settings: Mapping[str, Any], inputs: Mapping[str, str] | None = None) -> dict[str, Any]:
    out = {k: settings.get(k) for k in GRID_KEYS if k not in _LATER_KEYS or settings.get(k) is not None}
    if inputs:
        out["inputs"] = dict(sorted(inputs.items()))
    return out


def point_id(settings: Mapping[str, Any], inputs: Mapping[str, str] | None = None) -> str:
    """A short stable id of a point: a hash of its settings and of the content digests of its
    input files (``inputs``, from :func:`sievesim.provenance.point_inputs`; none when every input
    is a preset), so that an edited model, hardware or trace file makes its points new."""
    text = json.dumps(_identity(settings, inputs), sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def check_points(points: Sequence[Mapping[str, Any]], *, point: str = "step", workers: int = 1) -> None:
    """Check every point's settings before anything runs (names exist, numbers in range), and the
    estimated time of the whole sweep (``point``: ``"step"`` or ``"estimate"``, run on ``workers``
    processes) against the work limit (``--max-work``).

    Raises :class:`~sievesim.errors.SievesimError` naming the setting, the value and what was
    expected (an unknown model names the closest presets)."""
    from ._validate import check_work
    from .system.step import step_work_s

    work = 0.0
    from .hardware import get_hardware
    from .models import get_model
    from .policies import PIMoE, policy_class
    from .system import GPU_ONLY
    from .workload.lengths import get_length_preset

    models = functools.lru_cache(maxsize=None)(get_model)
    hardware = functools.lru_cache(maxsize=None)(get_hardware)
    for p in points:
        model = models(p["model"])
        if p.get("top_k") is not None:
            model = model.with_top_k(p["top_k"])
        hardware(p["hardware"])
        policy_cls = policy_class("noexp" if str(p["policy"]).lower() == GPU_ONLY else p["policy"], also=(GPU_ONLY,))
        if p.get("pimoe_unit") is not None:
            try:
                PIMoE(unit=p["pimoe_unit"])
            except ConfigError:
                raise field_error("pimoe_unit", p["pimoe_unit"], "one of pseudo_channel, channel, stack, "
                                  "or a group BASE*S such as channel*4") from None
        gpus = p["gpus"]
        if gpus < 1 or model.num_experts % gpus:
            raise field_error("gpus", gpus, f"a positive divisor of {model.name}'s {model.num_experts} experts")
        if p["batch"] < 1:
            raise field_error("batch", p["batch"], "an integer >= 1 (requests)")
        if p["steps"] < 1:
            raise field_error("steps", p["steps"], "an integer >= 1")
        if p.get("warmup") is not None and p["warmup"] < 0:
            raise field_error("warmup", p["warmup"], "an integer >= 0 (steps)")
        if p.get("context_len") is not None and p["context_len"] < 0:
            raise field_error("context_len", p["context_len"], "a non-negative number of tokens")
        if p.get("context_preset") is not None:
            get_length_preset(p["context_preset"])
        if p.get("context_len") is not None and p.get("context_preset") is not None:
            raise field_error("context_preset", p["context_preset"], "not both context_len and context_preset")
        if p.get("prefill") is not None:
            from .system import parse_prefill
            parse_prefill(p["prefill"])
        if p.get("microbatches") is not None and p["microbatches"] not in (1, 2):
            raise field_error("microbatches", p["microbatches"], "1 or 2")
        if p.get("policy_options") is not None:   # checked against the point's policy's options table
            from .policies.options import check_policy_options
            from .system import parse_policy_options
            try:
                check_policy_options(policy_cls, parse_policy_options(p["policy_options"]),
                                     prefix=f"policy_options (policy {p['policy']}) ", cli=True)
            except ConfigError as exc:
                raise ConfigError(f"{exc} (a grid crosses every policy with every policy_options value: give "
                                  "a policy its options in its own [[grid]] table of a grid file)") from None
        trace = p.get("trace")
        if trace is not None and not trace.startswith("synthetic:") and not os.path.exists(trace):
            raise ConfigError(f"file not found: {trace} (trace: expected a routing file (.npz, SGLang dump) "
                              "or synthetic:MODEL)")
        steps = p["steps"] + (2 if p.get("warmup") is None else p["warmup"])
        if point == "step":
            prefill = 0
            if p.get("prefill") is not None:
                from .system import parse_prefill
                n, length = parse_prefill(p["prefill"])
                prefill = n * length
            work += step_work_s(model, gpus, p["batch"] + prefill, steps)
        else:      # one layer's decision per step: about 1 ms
            work += 1e-3 * p["steps"]
    check_work(work / max(1, workers), f"the sweep ({len(points)} points on {max(1, workers)} worker(s))",
               "grid points", len(points))


# ------------------------------------------------------------------------------------------------
# result files
# ------------------------------------------------------------------------------------------------
def _row(settings: Mapping[str, Any], pid: str, result: Mapping[str, Any],
         digests: Mapping[str, str | None] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(result row, wall-clock row) of one finished point; ``digests`` (``model_digest``,
    ``hardware_digest``, ``trace_digest``) go after the point function's results."""
    row: dict[str, Any] = {"point_id": pid}
    for k in GRID_KEYS:  # a setting left to the point function's default shows the value it used
        value = settings.get(k)
        row[_COLUMN.get(k, k)] = result.get(k) if value is None else value
    context = result.get("context")
    if row["context_len_tokens"] is None and settings.get("context_preset") is None and isinstance(context, str) \
            and context.isascii() and context.isdigit():
        row["context_len_tokens"] = int(context)      # the step's default context, as a number
    wall: dict[str, Any] = {"point_id": pid}
    for k, v in result.items():
        if k.startswith("wall_"):
            wall[k] = v
        elif k not in row:
            row[k] = v
    for k, v in (digests or {}).items():
        row.setdefault(k, v)
    row.setdefault("sievesim_version", __version__)
    return row, wall


def _read_jsonl(path: pathlib.Path, *, repair: bool = False) -> list[dict[str, Any]]:
    """Rows of a sweep's JSON-lines file; a damaged line is skipped with a warning naming the file
    and the line, and its point runs again (:func:`sievesim.results.read_jsonl`)."""
    return read_jsonl(path, repair=repair, damaged="skipped; its point runs again")


# ------------------------------------------------------------------------------------------------
# running
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepSummary:
    """What :func:`run_grid` did: points in the grid, skipped (already done) and run now."""

    out_dir: pathlib.Path
    total: int
    skipped: int
    ran: int

    @property
    def done(self) -> int:
        return self.skipped + self.ran


def _function_name(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def grid_manifest(points: Sequence[Mapping[str, Any]], fn: Callable[..., Any],
                  inputs: Sequence[Mapping[str, str]] | None = None,
                  files: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What ``grid.json`` records of a sweep: its points (with the content digests of their input
    files, ``inputs``, one mapping per point), the point function's name and, in ``input_files``,
    the digest of every file the sweep read (the grid file included)."""
    inputs = inputs or [{}] * len(points)
    out: dict[str, Any] = {"format": _FORMAT, "point_function": _function_name(fn),
                           "points": [_identity(p, i) for p, i in zip(points, inputs)]}
    if files:
        out["input_files"] = dict(sorted(files.items()))
    return out


def _same_grid(old: Any, new: Mapping[str, Any]) -> bool:
    """Whether ``grid.json`` ``old`` holds the grid ``new`` (input files may have been edited since:
    their points are new then, and run again)."""
    if not isinstance(old, dict) or not isinstance(old.get("points"), list):
        return False

    def bare(m: Mapping[str, Any]) -> Any:
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

    def __init__(self, total: int, initial: int, stream: Any, bar: bool | None, label: str = "sweep") -> None:
        self.total, self.done, self.stream = total, initial, stream
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
        what = " ".join(f"{k}={settings[k]}" for k in GRID_KEYS if settings.get(k) is not None
                        and (k in ("model", "policy", "batch") or settings[k] != SETTING_DEFAULTS[k]))
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
             label: str = "sweep") -> SweepSummary:
    """Run ``point_fn(settings)`` for every point not yet in ``out_dir`` and record the results.

    ``point_fn`` takes a settings dict (keys :data:`GRID_KEYS`) and returns a flat dict of
    results whose keys carry their units; with an ``executor`` it must be picklable (a
    module-level function). ``executor=None`` runs the points one after the other in this
    process. A directory that holds another grid (or another point function) is refused with a
    :class:`~sievesim.errors.SievesimError` unless ``force``, which starts it over. The CSV is
    rewritten after each point, at most once per ``csv_interval_s`` seconds, and at the end.
    ``progress``: stream for the progress bar or lines (``None``: quiet); ``bar``: force the tqdm
    bar on (True) or off (False); default: on when ``progress`` is a terminal. ``grid_file``: the
    TOML file the points came from (its digest goes into ``grid.json``); ``label``: the bar's name.

    Provenance: a point's id covers the content of its input files (model, hardware with its
    ``base`` and DRAM configuration files, trace), so after an edit those points are new and run
    again (the others are kept); every row records ``model_digest``, ``hardware_digest`` (of the
    resolved specs, presets too), ``trace_digest`` (trace files) and ``sievesim_version``.
    """
    from ._validate import check_name_or_path, check_strict_bool, type_error

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
    out.mkdir(parents=True, exist_ok=True)
    points = [dict(p) for p in points]
    inputs, digest_cols, files = _digests(points, grid_file)
    ids = [point_id(p, i) for p, i in zip(points, inputs)]
    manifest = grid_manifest(points, point_fn, inputs, files)
    jsonl, csv_path, wall_path, man_path = (out / RESULTS_JSONL, out / RESULTS_CSV,
                                            out / WALL_CLOCK_JSONL, out / MANIFEST)
    existing = man_path.exists() or jsonl.exists() or csv_path.exists()
    old = None
    if existing and not force:
        if man_path.exists():
            try:
                from ._inputs import read_text
                old = json.loads(read_text(man_path, "sweep grid.json", "manifest"))
            except (ValueError, RecursionError):
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

    order = {pid: i for i, pid in enumerate(ids)}
    rows = {r["point_id"]: r for r in _read_jsonl(jsonl, repair=True) if r.get("point_id") in order}
    _read_jsonl(wall_path, repair=True)
    digest_of = dict(zip(ids, digest_cols))
    todo = [(pid, p) for pid, p in zip(ids, points) if pid not in rows]
    skipped = len(points) - len(todo)
    bar_out = _Progress(len(points), skipped, progress, bar, label) if progress is not None else None

    def sorted_rows() -> list[dict[str, Any]]:
        return sorted(rows.values(), key=lambda r: order[r["point_id"]])

    last_csv = 0.0

    def record(pid: str, settings: dict[str, Any], result: dict[str, Any], seconds: float) -> None:
        nonlocal last_csv
        row, wall = _row(settings, pid, result, digest_of[pid])
        wall["wall_point_s"] = seconds
        _append(jsonl, _json_line(row))
        _append(wall_path, _json_line(wall))
        rows[pid] = row
        now = time.monotonic()
        if now - last_csv >= csv_interval_s:
            _write_atomic(csv_path, csv_bytes(sorted_rows()))
            last_csv = now
        if bar_out is not None:
            bar_out.update(settings, seconds)

    def failed(settings: Mapping[str, Any], exc: BaseException) -> SievesimError:
        what = ", ".join(f"{k}={settings[k]!r}" for k in GRID_KEYS if settings.get(k) is not None)
        cls = type(exc) if isinstance(exc, SievesimError) else SievesimError
        return cls(f"point {what}: {exc}")

    ran = 0
    try:
        if executor is None:
            for pid, settings in todo:
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
            finally:
                for fut in futures:
                    fut.cancel()
    finally:
        if bar_out is not None:
            bar_out.close()
        if rows:
            _write_atomic(csv_path, csv_bytes(sorted_rows()))
    if len(rows) == len(points):
        # grid order, so that the file does not depend on the order the executor finished in
        _write_atomic(jsonl, b"".join(_json_line(r) for r in sorted_rows()))
    return SweepSummary(out, len(points), skipped, ran)


# ------------------------------------------------------------------------------------------------
# point functions
# ------------------------------------------------------------------------------------------------
def step_point(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The executed decode step at a point: ``sievesim.system.simulate_step(**settings).to_dict()``
    (settings left as ``None`` take the step's own defaults)."""
    from .system import parse_policy_options, simulate_step

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
    from .workload.batches import open_source
    from .workload.synthetic import source_for_model

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

    from .costs import DEFAULT_CONTEXT_LEN, build_context, default_layer
    from .hardware import get_hardware
    from .models import get_model
    from .policies import get_policy
    from .workload.lengths import decode_context_lengths

    from .system import parse_policy_options, parse_prefill

    if settings.get("prefill") and parse_prefill(settings["prefill"])[0] > 0:
        raise field_error("prefill", settings["prefill"], "none with the estimate point function "
                          "(colocated prefill needs the executed step)")
    model = get_model(settings["model"], top_k=settings.get("top_k"))
    hw = get_hardware(settings.get("hardware") or "b200")
    gpus, batch = int(settings.get("gpus") or 1), int(settings["batch"])
    seed, steps = int(settings.get("seed") or 0), int(settings.get("steps") or 1)
    from ._validate import check_int
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
