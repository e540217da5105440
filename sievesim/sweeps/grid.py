"""Grids of points: the settings of one point (:data:`GRID_KEYS`), their values from flags or a TOML
file, the products a grid expands to, the checks of every point before anything runs, and the id
of a point (its settings and the content digests of its input files)."""
from __future__ import annotations

import contextlib
import difflib
import functools
import hashlib
import itertools
import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from .._validate import BOUNDS, MAX_LIST, Problems
from ..errors import ConfigError, SievesimError, field_error

#: Settings of one point, in the order they appear in result rows. Each is a keyword argument of
#: ``sievesim.system.simulate_step``.
GRID_KEYS: tuple[str, ...] = ("model", "top_k", "hardware", "gpus", "policy", "pimoe_unit", "batch", "trace",
                              "context_len", "context_preset", "prefill", "steps", "warmup", "seed",
                              "microbatches", "early_loads", "scheduler_latency_us", "policy_options",
                              "gpu_model", "attention", "experts", "weight_format")
#: Keys added after sweeps were first written: left out of a point's id and of ``grid.json`` while
#: unset, so that a sweep begun before they existed resumes. (``gpu_model`` always has a value: a
#: sweep of the roofline era starts over under the calibrated GPU model instead of mixing the two.)
_LATER_KEYS = frozenset({"top_k", "weight_format"})

#: Defaults of the settings a grid leaves out (``None``: the point function's own default);
#: ``pimoe_unit`` is :data:`sievesim.policies.DEFAULT_PIMOE_UNIT` (a test checks they agree).
SETTING_DEFAULTS: dict[str, Any] = {
    "model": None, "top_k": None, "hardware": "b200", "gpus": 1, "policy": "sieve", "pimoe_unit": "channel",
    "batch": None, "trace": None, "context_len": None, "context_preset": None, "prefill": None,
    "steps": 1, "warmup": None, "seed": 0,
    "microbatches": None, "early_loads": None, "scheduler_latency_us": None, "policy_options": None,
    "gpu_model": "calibrated", "attention": "dp", "experts": "ep", "weight_format": None,
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
_STR_KEYS = ("model", "hardware", "policy", "pimoe_unit", "trace", "context_preset", "prefill", "policy_options",
             "weight_format")
#: Settings with a fixed set of values (the GPU model and the parallelism).
_CHOICE_KEYS: dict[str, tuple[str, ...]] = {"gpu_model": ("roofline", "calibrated"), "attention": ("dp", "tp"),
                                            "experts": ("ep", "tp")}
_BOOL_KEYS = ("early_loads",)
#: Early-load rules a grid may name besides true (the policy's default rule) and false (off).
_EARLY_LOAD_RULES = ("cheaper", "paper", "policy", "off")
_FLOAT_KEYS = ("scheduler_latency_us",)

#: Settings of one serving point (``sievesim serve``'s options; times in seconds, ``rate`` in
#: requests/s), in the order they appear in result rows.
SERVE_KEYS: tuple[str, ...] = (
    "model", "top_k", "hardware", "gpus", "prefill_gpus", "policy", "pimoe_unit", "policy_options", "trace", "rate",
    "requests",
    "arrival_window_s", "cv", "lengths", "prompt_tokens", "output_tokens", "seed", "max_batch", "token_budget",
    "horizon_s", "ttft_slo_s", "tpot_slo_s", "e2e_slo_s", "attainment", "block_size", "memory_utilization",
    "max_model_len", "exact", "error_samples", "gpu_model", "weight_format")
#: Defaults of the serving settings a grid leaves out: ``sievesim serve``'s (``requests``: 100, or
#: a trace's every row; ``rate`` or ``trace`` must be given, or ``--max-rate`` searches the rate).
SERVE_DEFAULTS: dict[str, Any] = {
    "model": None, "top_k": None, "hardware": "b200", "gpus": 1, "prefill_gpus": None, "policy": "sieve",
    "pimoe_unit": SETTING_DEFAULTS["pimoe_unit"], "policy_options": None, "trace": None, "rate": None,
    "requests": None, "arrival_window_s": None, "cv": 1.0, "lengths": "hh-rlhf", "prompt_tokens": None,
    "output_tokens": None, "seed": 0, "max_batch": 256, "token_budget": 2048, "horizon_s": None,
    "ttft_slo_s": 2.0, "tpot_slo_s": 0.05, "e2e_slo_s": None, "attainment": 0.9, "block_size": 16,
    "memory_utilization": 0.9, "max_model_len": 32768, "exact": False, "error_samples": 20,
    "gpu_model": "calibrated", "weight_format": None}
#: The serving setting whose 0 means colocated prefill (the point of ``None``, the default), so that
#: one grid or command line mixes colocated and disaggregated points (``--prefill-gpus 0,1,2``).
COLOCATED_KEY = "prefill_gpus"
#: Integer serving settings: (lowest, highest, what they count).
_SERVE_INTS: dict[str, tuple[int, int, str]] = {
    "top_k": (1, 1 << 16, "routed experts per token"), "gpus": (1, 1 << 12, "GPUs in one system"),
    "prefill_gpus": (0, 1 << 12, "GPUs of the prefill pool (disaggregated prefill; fewer than gpus; 0: colocated)"),
    "requests": (1, 10_000_000, "requests served at the point"),
    "prompt_tokens": (1, 1 << 24, "tokens"), "output_tokens": (1, 1 << 24, "tokens"),
    "seed": (0, (1 << 63) - 1, "a random seed"), "max_batch": (1, 1 << 14, "running requests"),
    "token_budget": (1, 1 << 20, "tokens per iteration"), "block_size": (1, 4096, "tokens per KV block"),
    "max_model_len": (2, 1 << 24, "tokens of prompt + output"),
    "error_samples": (0, 100_000, "iterations priced exactly to measure the memo")}
#: Number serving settings: (lowest, whether the lowest itself is allowed, highest, what they are).
_SERVE_NUMBERS: dict[str, tuple[float, bool, float, str]] = {
    "rate": (1e-3, True, 1e9, "requests per second"), "arrival_window_s": (0.0, False, 1e12, "seconds"),
    "cv": (0.01, True, 100.0, "coefficient of variation of the inter-arrival times, 1 = Poisson"),
    "horizon_s": (0.0, False, 1e12, "seconds"), "ttft_slo_s": (0.0, False, 1e12, "seconds"),
    "tpot_slo_s": (0.0, False, 1e12, "seconds"), "e2e_slo_s": (0.0, False, 1e12, "seconds"),
    "attainment": (0.0, False, 1.0, "a share of the requests"),
    "memory_utilization": (0.0, False, 1.0, "a share of the HBM")}
_SERVE_STRS = ("model", "hardware", "policy", "pimoe_unit", "policy_options", "trace", "lengths", "gpu_model",
               "weight_format")


# ------------------------------------------------------------------------------------------------
# grids
# ------------------------------------------------------------------------------------------------
def _unknown_key(key: str, field: str, where: str, kind: "PointKind | None" = None) -> ConfigError:
    keys = GRID_KEYS if kind is None else kind.keys
    other = [k for k in KINDS.values() if k is not kind and key in k.keys]
    if other:      # a setting of the other kind of point: say which
        return field_error(field, "<unknown key>", f"one of the {kind.name if kind else 'step'} grid keys: {key} is "
                           f"a setting of {other[0].name} points (kind = \"{other[0].name}\")",
                           source=where)  # type: ignore[return-value]
    close = difflib.get_close_matches(key, keys + ("grid", "kind"), n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return field_error(field, "<unknown key>", f"one of the grid keys{hint}: {', '.join(keys)}",
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
    return _choice_problem(key, v)


def _choice_problem(key: str, v: Any) -> str | None:
    """A GPU model, parallelism or weight-format value that is not one of its kind, or None."""
    if key in _CHOICE_KEYS and v not in _CHOICE_KEYS[key]:
        return "one of " + ", ".join(_CHOICE_KEYS[key])
    if key == "weight_format" and v is not None:
        from ..errors import ConfigError
        from ..formats import parse_weight_formats
        try:
            parse_weight_formats(v, key)
        except ConfigError as exc:
            return str(exc).split("expected ", 1)[-1]
    return None


def _serve_value_problem(key: str, v: Any) -> str | None:
    """What a serving grid value of ``key`` should have been, or None when it fits."""
    import math

    if v is None:
        return None
    if key in _SERVE_INTS:
        lo, hi, why = _SERVE_INTS[key]
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            return f"an integer from {lo} to {hi} ({why})"
    if key in _SERVE_NUMBERS:
        lo, closed, hi, why = _SERVE_NUMBERS[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or not (lo <= v if closed else lo < v) or v > hi:
            return f"a number in {'[' if closed else '('}{lo:g}, {hi:g}] ({why})"
    if key in _SERVE_STRS and not isinstance(v, str):
        return "a string"
    if key == "exact" and not isinstance(v, bool):
        return "true or false"
    return _choice_problem(key, v)


@dataclass(frozen=True)
class PointKind:
    """What one point of a grid is: its settings (``keys``, in row order), their ``defaults``, the
    check of one value (``problem``: what was expected, or None), the settings every grid must
    give (``required``), those a progress line always shows (``shown``) and those held as floats
    (``floats``: ``rate = 20`` and ``--rate 20`` are one point)."""

    name: str
    keys: tuple[str, ...]
    defaults: Mapping[str, Any]
    problem: Callable[[str, Any], "str | None"]
    required: tuple[str, ...]
    shown: tuple[str, ...]
    floats: tuple[str, ...] = ()


#: A decode-step point (``sievesim.system.simulate_step``'s settings): the default kind.
STEP = PointKind("step", GRID_KEYS, SETTING_DEFAULTS, _value_problem, ("model", "batch"), ("model", "policy", "batch"))
#: A serving point (``sievesim serve``'s settings): ``kind = "serve"`` in a grid file.
SERVE = PointKind("serve", SERVE_KEYS, SERVE_DEFAULTS, _serve_value_problem, ("model",), ("model", "policy", "rate"),
                  tuple(_SERVE_NUMBERS))
#: Point kinds by name.
KINDS: dict[str, PointKind] = {"step": STEP, "serve": SERVE}


def point_kind(name: Any, field: str = "kind", source: str | None = None) -> PointKind:
    """The :class:`PointKind` called ``name`` (``"step"`` or ``"serve"``)."""
    if not isinstance(name, str) or name not in KINDS:
        raise field_error(field, name, "one of " + ", ".join(f'"{k}"' for k in KINDS), source=source)
    return KINDS[name]


def _normalise(axes: Mapping[str, Any], problems: Problems, where: str, label: str = "",
               kind: "PointKind | None" = None) -> dict[str, list[Any]]:
    kind = kind or STEP
    out: dict[str, list[Any]] = {}
    for key, value in axes.items():
        field = f"{label}{key}"
        with problems.check():
            if key not in kind.keys:
                raise _unknown_key(key, field, where, kind)
            values = list(value) if isinstance(value, (list, tuple)) else [value]
            if not values:
                raise field_error(field, value, "at least one value", source=where)
            if len(values) > MAX_LIST:   # the same cap as a comma-separated list on the command line
                raise field_error(field, f"<{len(values)} values>", f"at most {MAX_LIST} values (each one "
                                  "multiplies the points of the grid)", source=where)
            out[key] = values
        for v in out.get(key, []):
            expected = kind.problem(key, v)
            if expected is not None:
                with problems.check():
                    raise field_error(field, v, expected, source=where)
        if key in kind.floats and key in out:
            out[key] = [float(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in out[key]]
        if key == COLOCATED_KEY and kind.name == "serve" and key in out:   # 0 prefill GPUs: colocated, one point
            out[key] = [None if v == 0 and not isinstance(v, bool) else v for v in out[key]]
    return out


def normalise_axes(axes: Mapping[str, Any], where: str = "grid", kind: "PointKind | None" = None
                   ) -> dict[str, list[Any]]:
    """``axes`` with every key checked (an unknown key names the closest valid one) and every
    value turned into a list; every problem in one error. ``kind``: :data:`STEP` (default) or
    :data:`SERVE`."""
    problems = Problems(where)
    out = _normalise(axes, problems, where, kind=kind)
    problems.raise_if_any()
    return out


def load_grid_file(path: str | os.PathLike[str]) -> list[dict[str, list[Any]]]:
    """The products of a TOML grid file (of either kind: :func:`read_grid_file` says which)."""
    return read_grid_file(path)[1]


def read_grid_file(path: str | os.PathLike[str]) -> tuple[PointKind, list[dict[str, list[Any]]]]:
    """The kind of point and the products of a TOML grid file.

    ``kind = "serve"`` makes every point one serving run (keys :data:`SERVE_KEYS`); without it
    the points are decode steps (keys :data:`GRID_KEYS`). Top-level keys (a value or a list of
    values each) apply to every product; each ``[[grid]]`` table adds one product with its own
    keys on top of them (for example one table per (model, GPU count) pair). Without ``[[grid]]``
    tables the top-level keys form one product. Every problem of the file is reported in one error.
    """
    from .._inputs import read_toml

    data = read_toml(path)
    where = str(path)
    tables = data.pop("grid", None)
    problems = Problems(where)
    kind = STEP
    if "kind" in data:
        with problems.check():
            kind = point_kind(data.pop("kind"), source=where)
    base = _normalise(data, problems, where, kind=kind)
    if isinstance(tables, dict):
        tables = [tables]
    if tables is not None and (not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables)):
        with problems.check():
            raise field_error("grid", type(tables).__name__, "[[grid]] tables", source=where)
        tables = []
    products = [{**base, **_normalise(t, problems, where, f"[[grid]] #{i + 1} ", kind)}
                for i, t in enumerate(tables or [])]
    if problems.messages:    # the names too, so that one error lists what a run of the points would find
        _name_problems(products or [base], problems)
    problems.raise_if_any()
    return kind, products or [base]


def _name_problems(products: Sequence[Mapping[str, Sequence[Any]]], problems: Problems) -> None:
    """Record in ``problems`` each model, hardware and policy of ``products`` that does not exist
    (each once; the points' other checks come when the file has no problem of its own)."""
    from ..hardware import get_hardware
    from ..models import get_model
    from ..policies import policy_class
    from ..system import GPU_ONLY

    def policy(name: str) -> Any:
        return policy_class("noexp" if name.lower() == GPU_ONLY else name, also=(GPU_ONLY,))

    seen: set[tuple[str, str]] = set()
    for axes in products:
        for key, check in (("model", get_model), ("hardware", get_hardware), ("policy", policy)):
            for value in axes.get(key, ()):
                if isinstance(value, str) and (key, value) not in seen:
                    seen.add((key, value))
                    with problems.check():
                        check(value)


def expand_grid(products: Iterable[Mapping[str, Sequence[Any]]], kind: PointKind | None = None
                ) -> list[dict[str, Any]]:
    """Every point of the products, in order (the last key of :data:`GRID_KEYS`, or of
    :data:`SERVE_KEYS` for ``kind`` :data:`SERVE`, varies fastest), without repeats.
    ``pimoe_unit`` is ``None`` unless the policy is PIMoE, so that a sweep over units runs the
    other policies once."""
    kind = kind or STEP
    from .._validate import type_error

    if isinstance(products, (str, bytes, Mapping)) or not isinstance(products, Iterable):
        raise type_error("products", products, "a list of mappings {setting: value or list of values} "
                                               "(wrap one mapping in a list)")
    products = list(products)
    for i, axes in enumerate(products):
        if not isinstance(axes, Mapping):
            raise type_error(f"products[{i}]", axes, "a mapping {setting: value or list of values}")
    normalised = []
    for axes in products:
        axes = normalise_axes(axes, kind=kind)
        for key in kind.required:
            if key not in axes:
                raise field_error(key, None, "at least one value (--" + key + " or the grid file)")
        normalised.append(axes)
    count_points(normalised, kind)       # counted before anything is expanded
    points: list[dict[str, Any]] = []
    seen: set[str] = set()
    for axes in normalised:
        lists = [axes.get(k, [kind.defaults[k]]) for k in kind.keys]
        for combo in itertools.product(*lists):
            settings = dict(zip(kind.keys, combo))
            if str(settings["policy"]).lower() != "pimoe":
                settings["pimoe_unit"] = None
            pid = point_id(settings, kind=kind)
            if pid not in seen:
                seen.add(pid)
                points.append(settings)
    return points


#: Most points one grid may have (each is one point-function call).
MAX_GRID_POINTS = 1 << 16


def count_points(products: Sequence[Mapping[str, Sequence[Any]]], kind: PointKind | None = None) -> int:
    """The points the products would expand to (before repeats are removed), refused above
    :data:`MAX_GRID_POINTS` before anything is expanded."""
    total = 0
    for axes in products:
        n = 1
        for key in (kind or STEP).keys:
            n *= max(1, len(axes.get(key, ())))
        total += n
    if total > MAX_GRID_POINTS:
        sizes = " + ".join(" x ".join(str(len(v)) for v in axes.values() if len(v) > 1) or "1" for axes in products)
        raise field_error("grid points", total, f"at most {MAX_GRID_POINTS:,} points ({sizes} values per "
                          "setting); split the sweep or list fewer values")
    return total


def _identity(settings: Mapping[str, Any], inputs: Mapping[str, str] | None = None,
              kind: PointKind | None = None) -> dict[str, Any]:
    kind = kind or STEP
    later = _LATER_KEYS if kind is STEP else frozenset()
    out: dict[str, Any] = {k: settings.get(k) for k in kind.keys if k not in later or settings.get(k) is not None}
    if kind is not STEP:
        out["kind"] = kind.name
    if inputs:
        out["inputs"] = dict(sorted(inputs.items()))
    return out


def point_id(settings: Mapping[str, Any], inputs: Mapping[str, str] | None = None,
             kind: PointKind | None = None) -> str:
    """A short stable id of a point: a hash of its settings (those of ``kind``, default
    :data:`STEP`; a serving point's identity also says ``kind = "serve"``) and of the content
    digests of its input files (``inputs``, from :func:`sievesim.sweeps.provenance.point_inputs`; none
    when every input is a preset), so that an edited model, hardware or trace file makes its
    points new."""
    text = json.dumps(_identity(settings, inputs, kind), sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:12]


class AllProblems:
    """Every problem of a grid's points, each once (many points share one bad value), raised together
    by :meth:`raise_if_any`: one problem as it was raised (its own class and message), several as
    one :class:`~sievesim.errors.ConfigError` listing them (the first :data:`SHOWN` of them)."""

    SHOWN = 20

    def __init__(self) -> None:
        self.errors: list[SievesimError] = []

    @contextlib.contextmanager
    def check(self) -> Iterator[None]:
        try:
            yield
        except SievesimError as exc:
            if all(str(exc) != str(e) for e in self.errors):
                self.errors.append(exc)

    def raise_if_any(self) -> None:
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            more = len(self.errors) - self.SHOWN
            raise ConfigError(f"{len(self.errors)} problems: " + "; ".join(str(e) for e in self.errors[:self.SHOWN])
                              + (f"; and {more} more" if more > 0 else ""))


def check_points(points: Sequence[Mapping[str, Any]], *, point: str = "step", workers: int = 1) -> None:
    """Check every point's settings before anything runs (names exist, numbers in range), and the
    estimated time of the whole sweep (``point``: ``"step"`` or ``"estimate"``, run on ``workers``
    processes) against the work limit (``--max-work``).

    Raises :class:`~sievesim.errors.SievesimError` naming the setting, the value and what was
    expected (an unknown model names the closest presets); every problem of every point at once
    (:class:`AllProblems`)."""
    from .._validate import check_work, type_error
    from ..hardware import get_hardware
    from ..models import get_model

    if isinstance(points, (str, bytes, Mapping)) or not isinstance(points, Iterable):
        raise type_error("points", points, "a list of point settings (mappings), e.g. from expand_grid")
    full = []
    for i, p in enumerate(points):      # partial settings take the defaults; every value is checked
        if not isinstance(p, Mapping):
            raise type_error(f"points[{i}]", p, "a mapping of settings (from expand_grid)")
        if not all(k in p for k in GRID_KEYS):    # (a point of expand_grid has every key, checked already)
            p = {**expand_grid([{k: [v] for k, v in p.items()}])[0], "pimoe_unit": p.get("pimoe_unit")}
        full.append(p)
    points = full
    models = functools.lru_cache(maxsize=None)(get_model)
    hardware = functools.lru_cache(maxsize=None)(get_hardware)
    problems = AllProblems()
    work = 0.0
    for p in points:
        work += _step_point_problems(p, point, models, hardware, problems)
    problems.raise_if_any()
    check_work(work / max(1, workers), f"the sweep ({len(points)} points on {max(1, workers)} worker(s))",
               "grid points", len(points))


def model_policy_problems(p: Mapping[str, Any], models: Callable[[Any], Any], hardware: Callable[[Any], Any],
                          problems: AllProblems, *, unit_only_with_pimoe: bool = False) -> tuple[Any, Any]:
    """Record the problems of a point's model (its top-k applied), hardware, policy and PIMoE unit in
    ``problems`` (the unit only under PIMoE with ``unit_only_with_pimoe``); returns the model and the
    policy class, None for either that failed. Shared by decode-step and serving points."""
    from ..policies import PIMoE, policy_class
    from ..system import GPU_ONLY

    model = cls = None
    with problems.check():
        model = models(p["model"])
        if p.get("top_k") is not None:
            model = model.with_top_k(p["top_k"])
    with problems.check():
        hardware(p["hardware"])
    name = str(p["policy"]).lower()
    with problems.check():
        cls = policy_class("noexp" if name == GPU_ONLY else p["policy"], also=(GPU_ONLY,))
    if p.get("pimoe_unit") is not None and (name == "pimoe" or not unit_only_with_pimoe):
        with problems.check():
            try:
                PIMoE(unit=p["pimoe_unit"])
            except ConfigError:
                raise field_error("pimoe_unit", p["pimoe_unit"], "one of pseudo_channel, channel, stack, "
                                  "or a group BASE*S such as channel*4") from None
    return model, cls


def _step_point_problems(p: Mapping[str, Any], point: str, models: Callable[[Any], Any],
                         hardware: Callable[[Any], Any], problems: AllProblems) -> float:
    """Record the problems of one decode-step point in ``problems``; its estimated work [s] (0 when
    it has a problem: the sweep is refused then)."""
    from ..system.budget import step_work_s
    from ..workload.lengths import get_length_preset

    before = len(problems.errors)
    model, policy_cls = model_policy_problems(p, models, hardware, problems)
    gpus = p["gpus"]
    if gpus < 1:
        with problems.check():
            raise field_error("gpus", gpus, "a positive number of GPUs")
    elif point == "estimate" and model is not None and model.num_experts % gpus:
        with problems.check():      # an executed step takes redundant replicas (auto); the estimate does not
            raise field_error("gpus", gpus, f"a divisor of {model.name}'s {model.num_experts} experts with "
                              "--point estimate (the executed step, --point step, takes redundant experts)")
    for ok, field, expected in ((p["batch"] >= 1, "batch", "an integer >= 1 (requests)"),
                                (p["steps"] >= 1, "steps", "an integer >= 1"),
                                (p.get("warmup") is None or p["warmup"] >= 0, "warmup", "an integer >= 0 (steps)"),
                                (p.get("context_len") is None or p["context_len"] >= 0, "context_len",
                                 "a non-negative number of tokens")):
        if not ok:
            with problems.check():
                raise field_error(field, p[field], expected)
    with problems.check():
        if p.get("context_preset") is not None:
            get_length_preset(p["context_preset"])
            if p.get("context_len") is not None:
                raise field_error("context_preset", p["context_preset"], "not both context_len and context_preset")
    prefill = 0
    with problems.check():
        if p.get("prefill") is not None:
            from ..system import parse_prefill
            n, length = parse_prefill(p["prefill"])
            prefill = n * length
    if p.get("microbatches") is not None and p["microbatches"] not in (1, 2):
        with problems.check():
            raise field_error("microbatches", p["microbatches"], "1 or 2")
    if p.get("policy_options") is not None and policy_cls is not None:   # checked against the policy's options
        from ..policies.options import check_policy_options
        from ..system import parse_policy_options
        with problems.check():
            try:
                check_policy_options(policy_cls, parse_policy_options(p["policy_options"]),
                                     prefix=f"policy_options (policy {p['policy']}) ", cli=True)
            except ConfigError as exc:
                raise ConfigError(f"{exc} (a grid crosses every policy with every policy_options value: give "
                                  "a policy its options in its own [[grid]] table of a grid file)") from None
    trace = p.get("trace")
    if trace is not None and not trace.startswith("synthetic:") and not os.path.exists(trace):
        with problems.check():
            raise ConfigError(f"file not found: {trace} (trace: expected a routing file (.npz, SGLang dump) "
                              "or synthetic:MODEL)")
    if len(problems.errors) > before or model is None:
        return 0.0
    steps = p["steps"] + (2 if p.get("warmup") is None else p["warmup"])
    if point == "step":
        return step_work_s(model, gpus, p["batch"] + prefill, steps)
    return 1e-3 * p["steps"]      # one layer's decision per step: about 1 ms
