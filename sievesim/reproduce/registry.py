"""The figure registry: what a figure returns, how it is registered, how ``reproduce`` runs it.

:func:`reproduce` computes a registered figure (or ``all``, in registration order), writes
``NAME.csv`` and, with matplotlib, ``NAME.png``, and returns a :class:`FigureReport`;
:func:`format_report` prints its claims table. :func:`step_records` gives a figure the executed
step at a list of points, as a resumable sweep.
"""
from __future__ import annotations

import json
import os
import pathlib
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..errors import field_error


#: The verdicts a claim can get (docs/reproduction.md, "One reading, and a verdict for every claim").
REPRODUCED = "reproduced"
NOT_THE_PAPER = "not reproduced: the paper"
NOT_OUR_MODEL = "not reproduced: our model"
NO_NUMBER = "no number to compare"
NOT_JUDGED = "not judged"
VERDICTS = (REPRODUCED, NOT_THE_PAPER, NOT_OUR_MODEL, NO_NUMBER, NOT_JUDGED)

#: The judge's rule for a speedup (docs/reproduction.md, "The judge's rules"): our *gain* (ratio - 1)
#: must lie within this fraction of the paper's gain on either side, e.g. the paper's 1.26x (gain
#: 0.26) accepts 1.195x to 1.325x. A tolerance on the ratio instead would accept no gain at all
#: for a paper's 1.11x.
GAIN_TOLERANCE = 0.25
#: "Comparable" (the paper's "~1x") and "outperforms" (never behind): the ratio may be at most this
#: far below 1 (and, for "comparable", above it).
COMPARABLE_TOLERANCE = 0.03
#: Slack of the inclusive bounds for floating-point rounding (a ratio exactly at a bound counts as in).
_ROUNDING = 1e-9


@dataclass(frozen=True)
class Claim:
    """One statement of the paper, our number for it (``ours`` already formatted) and the verdict.

    ``verdict`` is one of :data:`VERDICTS` (empty: built without one, printed "-"); ``why`` says,
    for a claim not reproduced, the rule it missed and the number it rests on, then which sentences
    of the paper disagree or leave it open (``the paper``) or the measured quantities at that point
    (``our model``); for a claim not judged, which points the run lacks. Build judged claims with
    :func:`judge` or the rules below (:func:`judge_gain`, :func:`judge_not_behind`,
    :func:`judge_share_below`), so that the verdict follows the numbers."""

    what: str
    paper: str
    ours: str
    verdict: str = ""
    why: str = ""


def judge(what: str, paper: str, ours: str, ok: bool | None, *, cause: str = NOT_OUR_MODEL,
          why: str = "") -> Claim:
    """A claim whose verdict is :data:`REPRODUCED` when ``ok``, ``cause`` (with ``why``) when not,
    and :data:`NO_NUMBER` when ``ok`` is None (the paper gives nothing to compare)."""
    if cause not in (NOT_THE_PAPER, NOT_OUR_MODEL):
        raise ValueError(f"cause must be {NOT_THE_PAPER!r} or {NOT_OUR_MODEL!r}, not {cause!r}")
    if ok is None:
        return Claim(what, paper, ours, NO_NUMBER, why)
    return Claim(what, paper, ours, REPRODUCED, "") if ok else Claim(what, paper, ours, cause, why)


def not_judged(what: str, paper: str, missing: str) -> Claim:
    """A claim this run cannot judge because it did not run the points the claim covers
    (``missing`` names them, e.g. "B = 32, 64, 128: the full figure"): :data:`NOT_JUDGED`, so that
    a reduced run never prints a verdict the full run could contradict."""
    return Claim(what, paper, "-", NOT_JUDGED, f"needs {missing}")


def ratio_text(x: float) -> str:
    """A speedup as the report prints it: "1.24x"."""
    return f"{x:.2f}x"


def judge_gain(what: str, paper: str, lo: float, hi: float | None, ratios: dict[str, float | None], *,
               how: str, missing: str = "", cause: Callable[[str, float], tuple[str | None, str]] | None = None
               ) -> Claim:
    """A speedup claim of the paper judged by the gain rule (:func:`gain_within`).

    ``ratios``: our speedup at each point the claim covers (label -> ratio; None where the run did
    not have the point, which makes the claim :data:`NOT_JUDGED` with ``missing``). ``how``:
    ``"best"`` for the paper's "up to X" (our largest ratio must be accepted), ``"every"`` for a
    range the paper gives across points (every ratio must be accepted). For a claim not
    reproduced, ``cause(label, ratio)`` of the point the verdict rests on (the best one for "best",
    the one furthest outside the band for "every") gives (verdict, why); default: our model. A
    verdict of None says that telling the paper's miss from ours needs points this run lacks
    (``why`` names them): the claim is then :data:`NOT_JUDGED`, so that a reduced run never gives
    a cause the full run could contradict.
    The paper column shows the accepted band; ours shows the number(s) the verdict rests on."""
    if how not in ("best", "every"):
        raise ValueError(f"how must be 'best' or 'every', not {how!r}")
    low, high = accepted_ratios(lo, hi)
    shown_paper = f"{paper} (accepts {low:.3f}-{high:.3f}x)"
    if not ratios or any(v is None for v in ratios.values()):
        return not_judged(what, shown_paper, missing or "points this run did not have")
    values = [float(v) for v in ratios.values() if v is not None]
    if how == "best":
        label = max(ratios, key=lambda k: ratios[k] or 0.0)
        ours = f"best {ratio_text(ratios[label] or 0.0)} at {label}" if len(ratios) > 1 else ratio_text(values[0])
        ok = gain_within(max(values), lo, hi)
    else:
        ours = ", ".join(f"{ratio_text(v or 0.0)} at {k}" for k, v in ratios.items())
        ok = all(gain_within(v, lo, hi) for v in values)
    if ok:
        return Claim(what, shown_paper, ours, REPRODUCED, "")
    def distance_outside(x: float) -> float:
        return max(low - x, x - high, 0.0)

    known = {k: float(v) for k, v in ratios.items() if v is not None}
    decisive = max(known, key=known.get) if how == "best" else max(known, key=lambda k: distance_outside(known[k]))
    x = known[decisive]
    verdict, why = cause(decisive, x) if cause else (NOT_OUR_MODEL, "")
    outside = [v for v in values if not gain_within(v, lo, hi)]
    rule = (f"{ratio_text(x)} at {decisive} is {'above' if x > high else 'below'} {low:.3f}-{high:.3f}x"
            + ("" if how == "best" else f" ({len(outside)} of {len(values)} points outside)"))
    if verdict is None:         # whose miss it is needs points this run does not have
        return Claim(what, shown_paper, ours, NOT_JUDGED, f"not reproduced ({rule}), but {why}")
    return judge(what, shown_paper, ours, False, cause=verdict, why=rule + (f"; {why}" if why else ""))


def judge_share_below(what: str, paper: str, ratios: dict[str, float | None], *, share: float = 0.5,
                      missing: str = "") -> Claim:
    """The paper's "often below 1x": reproduced when at least ``share`` of the points of ``ratios``
    (label -> ratio; None where the run did not have the point, then :data:`NOT_JUDGED`) are below
    1 (strictly). Ours shows how many and the ratios."""
    if not ratios or any(v is None for v in ratios.values()):
        return not_judged(what, paper, missing or "points this run did not have")
    known = {k: float(v) for k, v in ratios.items() if v is not None}
    below = [k for k, v in known.items() if v < 1.0]
    ok = len(below) >= share * len(known) - _ROUNDING
    ours = f"{len(below)} of {len(known)} below 1x (" + ", ".join(f"{ratio_text(v)} {k}" for k, v in known.items()) + ")"
    return judge(what, f"{paper} (accepts at least {share:.0%} of the points below 1x)", ours, ok,
                 why="" if ok else f"only {len(below)} of {len(known)} points below 1x")


def judge_not_behind(what: str, paper: str, ratios: dict[str, float | None], *, missing: str = "",
                     why: Callable[[str, float], str] | None = None) -> Claim:
    """The paper's "A outperforms B" (at every point of ``ratios``: label -> A/B, None where the run
    did not have the point, then :data:`NOT_JUDGED`): reproduced when the worst ratio is at least
    ``1 - COMPARABLE_TOLERANCE`` (:func:`not_behind`). Ours shows the worst ratio and where;
    ``why(label, worst)`` explains a miss."""
    if not ratios or any(v is None for v in ratios.values()):
        return not_judged(what, paper, missing or "points this run did not have")
    label = min(ratios, key=lambda k: ratios[k])           # type: ignore[arg-type, return-value]
    worst = float(ratios[label])                            # type: ignore[arg-type]
    ours = f"worst {ratio_text(worst)} at {label}"
    ok = not_behind(worst)
    return judge(what, f"{paper} (accepts >= {1 - COMPARABLE_TOLERANCE:.2f}x everywhere)", ours, ok,
                 why="" if ok else (f"behind by more than {COMPARABLE_TOLERANCE:.0%} at {label} ({ratio_text(worst)})"
                                    + (f"; {why(label, worst)}" if why else "")))


def accepted_ratios(lo: float, hi: float | None = None, *, tolerance: float = GAIN_TOLERANCE) -> tuple[float, float]:
    """The speedups the judge accepts for the paper's ``lo``-``hi`` (``hi`` defaults to ``lo``):
    gains ``lo - 1`` and ``hi - 1`` widened by ``tolerance`` of themselves, e.g. 1.26 ->
    (1.195, 1.325), 1.11-1.17 -> (1.0825, 1.2125). A paper's slowdown (ratio below 1) widens the
    same way around its loss."""
    hi = lo if hi is None else hi
    if hi < lo:
        raise ValueError(f"the paper's range must be lo <= hi, not {lo} > {hi}")
    def widened(ratio: float, outward: bool) -> float:
        gain = ratio - 1.0
        return 1.0 + gain * (1.0 + tolerance if outward else 1.0 - tolerance)

    # the low end moves down: a gain shrinks by the tolerance, a loss grows by it; the high end up
    return widened(lo, outward=lo < 1.0), widened(hi, outward=hi >= 1.0)


def gain_within(ours: float | None, lo: float, hi: float | None = None, *,
                tolerance: float = GAIN_TOLERANCE) -> bool:
    """Whether the speedup ``ours`` is one the judge accepts for the paper's ``lo``-``hi``
    (:func:`accepted_ratios`, bounds included); False for None."""
    if ours is None:
        return False
    low, high = accepted_ratios(lo, hi, tolerance=tolerance)
    return low - _ROUNDING <= ours <= high + _ROUNDING


def comparable(ours: float | None, *, tolerance: float = COMPARABLE_TOLERANCE) -> bool:
    """Whether the ratio ``ours`` is "comparable" (about 1x): ``|ours - 1| <= tolerance``, bounds
    included; False for None."""
    return ours is not None and abs(ours - 1.0) <= tolerance + _ROUNDING


def not_behind(ours: float | None, *, tolerance: float = COMPARABLE_TOLERANCE) -> bool:
    """Whether the ratio ``ours`` says "outperforms (or matches)": at least ``1 - tolerance``,
    bound included (the paper calls the small-batch points, where Sieve equals AllExp, comparable);
    False for None."""
    return ours is not None and ours >= 1.0 - tolerance - _ROUNDING


def within(ours: float | None, lo: float, hi: float | None = None, *, rel: float = 0.1) -> bool:
    """``ours`` inside the paper's ``[lo, hi]`` (``hi`` defaults to ``lo``) widened by ``rel``
    on each side (a number read off a figure or rounded in the text)."""
    if ours is None:
        return False
    hi = lo if hi is None else hi
    return lo * (1.0 - rel) <= ours <= hi * (1.0 + rel)


@dataclass
class FigureData:
    """What a figure function returns: records (one CSV row each), claims, and notes that explain
    differences (printed under the claims)."""

    records: list[dict[str, Any]]
    claims: list[Claim] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FigureOptions:
    """Options every figure function receives.

    quick: the reduced version (fewer batch sizes and steps).
    traces: routing trace files to add beside the synthetic routing where a figure can use them.
    seed: seed of every random draw.
    out_dir: where the figure's files go (:func:`step_records` keeps its points there too).
    jobs: worker processes for :func:`step_records` (1: in this process).
    progress: a terminal stream for progress bars, or None (quiet).
    gpu_model: the GPU model of every executed step: "roofline" (the paper's, the default) or
    "calibrated" (docs/hardware.md); a figure under the calibrated model writes NAME-calibrated.*.
    """

    quick: bool = False
    traces: tuple[str, ...] = ()
    seed: int = 0
    out_dir: str = "figures"
    jobs: int = 1
    progress: Any = field(default=None, compare=False)
    gpu_model: str = "roofline"

    @property
    def suffix(self) -> str:
        """What a figure's file names carry beside the paper's reading ("" under the roofline)."""
        return "" if self.gpu_model == "roofline" else f"-{self.gpu_model}"


@dataclass(frozen=True)
class Figure:
    """A registered figure: its name, title, compute function and optional plot function."""

    name: str
    title: str
    compute: Callable[[FigureOptions], FigureData]
    plot: Callable[[FigureData, pathlib.Path], None] | None = None
    #: Whether the figure uses routing traces given with ``--trace`` (a figure that does not is
    #: refused a trace rather than silently ignoring it).
    takes_traces: bool = False


@dataclass
class FigureReport:
    """A reproduced figure: its data and the files written (``png`` is None without matplotlib)."""

    name: str
    title: str
    data: FigureData
    csv: pathlib.Path
    png: pathlib.Path | None
    message: str = ""


#: Registered figures, in the order ``all`` runs them.
FIGURES: dict[str, Figure] = {}


def register_figure(name: str, title: str, *, plot: Callable[[FigureData, pathlib.Path], None] | None = None,
                    takes_traces: bool = False
                    ) -> Callable[[Callable[[FigureOptions], FigureData]], Callable[[FigureOptions], FigureData]]:
    """Decorator: register ``compute(opts) -> FigureData`` as figure ``name`` (see module doc)."""
    def wrap(compute: Callable[[FigureOptions], FigureData]) -> Callable[[FigureOptions], FigureData]:
        if name in FIGURES or name == "all":
            raise ValueError(f"figure {name!r} is already registered")
        FIGURES[name] = Figure(name, title, compute, plot, takes_traces)
        return compute
    return wrap


def figure_names() -> list[str]:
    """Registered figure names and ``all``."""
    return list(FIGURES) + ["all"]


def _have_matplotlib() -> bool:
    """Whether matplotlib imports; it is imported here with the Agg backend (figures are files).
    An ``MPLBACKEND`` that is not a matplotlib backend would make the import itself fail: it is
    set aside for the import, with a warning, and the PNGs are written with Agg."""
    import warnings

    backend = os.environ.get("MPLBACKEND")
    if backend is not None and backend.strip().lower() != "agg":
        del os.environ["MPLBACKEND"]
    try:
        import matplotlib
    except ImportError:
        return False
    finally:
        if backend is not None:
            os.environ["MPLBACKEND"] = backend
    if backend is not None and backend.strip().lower() not in _matplotlib_backends(matplotlib):
        warnings.warn(f"MPLBACKEND = {backend!r} is not a matplotlib backend; writing the figures with Agg")
    matplotlib.use("Agg")
    return True


def _matplotlib_backends(matplotlib: Any) -> set[str]:
    try:
        from matplotlib.backends import backend_registry     # matplotlib >= 3.9
        return {b.lower() for b in backend_registry.list_all()}
    except ImportError:
        from matplotlib import rcsetup
        return {b.lower() for b in rcsetup.all_backends}


def step_records(name: str, points: Sequence[dict[str, Any]], opts: FigureOptions, *,
                 point_fn: Callable[[dict[str, Any]], Any] | None = None) -> list[dict[str, Any]]:
    """Rows of the executed step (:func:`sievesim.sweeps.run.step_point`, or ``point_fn``) at every
    point, in point order, for a figure that needs the step (Figures 6 and 9-11).

    The points run as a sweep in ``OUT/NAME-points/`` (``opts.jobs`` worker processes), so an
    interrupted ``reproduce`` resumes where it stopped and a rerun of a finished figure only
    redraws it. ``points`` are settings dicts as :func:`sievesim.sweeps.run.expand_grid` gives them
    (``expand_grid`` fills the defaults)."""
    from ..sweeps.provenance import point_inputs
    from ..sweeps.run import expand_grid, point_id, read_results, run_grid, step_point
    from ..sweeps.workers import process_pool

    fn = point_fn or step_point
    pts = expand_grid([{k: [v] for k, v in {"gpu_model": opts.gpu_model, **p}.items()} for p in points])
    out = pathlib.Path(opts.out_dir) / f"{name}{opts.suffix}-points"
    if opts.jobs > 1 and len(pts) > 1:
        with process_pool(min(opts.jobs, len(pts))) as pool:
            run_grid(pts, out, point_fn=fn, executor=pool, force=_grid_changed(out, pts, fn),
                     progress=opts.progress, bar=True, label=name)
    else:
        run_grid(pts, out, point_fn=fn, force=_grid_changed(out, pts, fn), progress=opts.progress, bar=True,
                 label=name)
    by_id = {r["point_id"]: r for r in read_results(out)}
    return [by_id[point_id(p, point_inputs(p))] for p in pts]


def _grid_changed(out: pathlib.Path, points: Sequence[dict[str, Any]], fn: Callable[..., Any]) -> bool:
    """Whether ``out`` holds the points of another grid (a figure's points changed with --quick or
    --seed): then its directory is started over."""
    from ..sweeps.run import MANIFEST, grid_manifest

    path = out / MANIFEST
    if not path.exists():
        return out.exists() and any(out.iterdir())
    try:
        from .._inputs import read_text
        return json.loads(read_text(path, "sweep grid.json", "manifest")) != grid_manifest(points, fn)
    except (json.JSONDecodeError, RecursionError):
        return True


def reproduce(name: str, out_dir: str | os.PathLike[str] = "figures", *, quick: bool = False,
              traces: Sequence[str] = (), seed: int = 0, plot: bool = True, jobs: int = 1,
              progress: Any = None, gpu_model: str = "roofline") -> list[FigureReport]:
    """Compute figure ``name`` (or ``all``), write ``NAME.csv`` and ``NAME.png`` into ``out_dir``
    and return the reports. An unknown name is a :class:`~sievesim.errors.SievesimError`.
    ``progress``: a terminal stream for progress bars (figures, and the points of the figures that
    run the executed step), or None (quiet)."""
    if name not in FIGURES and name != "all":
        import difflib
        close = difflib.get_close_matches(name, figure_names(), n=1)
        raise field_error("figure", name, "one of " + ", ".join(figure_names())
                          + (f" (did you mean {close[0]!r}?)" if close else ""))
    for t in traces:
        if not os.path.exists(t):
            raise field_error("--trace", t, "an existing routing trace file")
    names = list(FIGURES) if name == "all" else [name]
    if traces and not any(FIGURES[n].takes_traces for n in names):
        raise field_error("--trace", traces[0], "a figure that uses routing traces ("
                          + ", ".join(n for n, f in FIGURES.items() if f.takes_traces) + f"); {name} takes none")
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if jobs < 1:
        raise field_error("--jobs", jobs, "a positive number of worker processes")
    from ..costs.gpu_model import check_gpu_model_name
    opts = FigureOptions(quick=quick, traces=tuple(traces), seed=seed, out_dir=str(out), jobs=jobs,
                         progress=progress, gpu_model=check_gpu_model_name(gpu_model, "--gpu-model"))
    reports = []
    from ..progress import progress_bar
    bar = progress_bar(len(names), "reproduce", progress if len(names) > 1 else None, unit="figure",
                       force=progress is not None)
    for n in names:
        fig = FIGURES[n]
        bar.set_description(f"reproduce {n}")
        data = fig.compute(opts)
        bar.update()
        for r in data.records:
            r.setdefault("figure", n)
        csv_path = out / f"{n}{opts.suffix}.csv"
        from .._outputs import write_output
        from ..sweeps.run import csv_bytes
        write_output(csv_path, csv_bytes(data.records), "figure CSV")
        png, message = None, ""
        if plot and fig.plot is not None:
            if _have_matplotlib():
                png = out / f"{n}{opts.suffix}.png"
                fig.plot(data, png)
            else:
                message = "no PNG: matplotlib is not installed (pip install 'sievesim[plot]')"
        reports.append(FigureReport(n, fig.title, data, csv_path, png, message))
    bar.close()
    return reports


def format_report(report: FigureReport) -> str:
    """The claims table of a report, with the files written and the notes."""
    lines = [f"{report.name}: {report.title}"]
    claims = report.data.claims
    if claims:
        w1 = max(len("claim"), *(len(c.what) for c in claims))
        w2 = max(len("paper"), *(len(c.paper) for c in claims))
        w3 = max(len("ours"), *(len(c.ours) for c in claims))
        lines.append(f"  {'claim':<{w1}}  {'paper':<{w2}}  {'ours':<{w3}}  verdict")
        for c in claims:
            lines.append(f"  {c.what:<{w1}}  {c.paper:<{w2}}  {c.ours:<{w3}}  {c.verdict or '-'}")
        for c in claims:
            if c.why:
                lines.append(f"  why ({c.what}): {c.why}")
    for note in report.data.notes:
        lines.append(f"  note: {note}")
    files = [str(report.csv)] + ([str(report.png)] if report.png else [])
    lines.append("  wrote " + ", ".join(files) + (f"; {report.message}" if report.message else ""))
    return "\n".join(lines)
