"""Plots of any sweep output (``results.jsonl``, ``results.csv`` or the sweep's directory).

:func:`plot_results` draws one column against another, one line per value of a colour column
(points joined in the order of the x column), one panel per value of a facet column. Its default
is the Sieve paper's Pareto picture (Figure 9): throughput per GPU
(``throughput_tokens_per_s_per_gpu``) against interactivity (``interactivity_tokens_per_s_per_user``),
one line per policy (PIMoE with its unit), one panel per model when the sweep has several; for
a serving sweep (``sievesim sweep --kind serve``) it is goodput (``goodput_requests_per_s``)
against the arrival rate (``rate``).
:func:`save_plot` writes it as PNG, SVG, PDF or any other format of :data:`FORMATS` (by the file's
extension). ``sievesim plot`` is the
same on the command line. Needs matplotlib (``pip install 'sievesim[plot]'``).
"""
from __future__ import annotations

import difflib
import math
import os
import pathlib
import re
import warnings
from typing import Any, Iterable, Mapping, Sequence

from ..errors import ConfigError, field_error
from .results import read_results

__all__ = ["plot_results", "save_plot", "columns_of", "DEFAULT_X", "DEFAULT_Y", "SERVE_X", "SERVE_Y", "FORMATS",
           "MAX_PLOTTED", "MAX_LOG_DECADES"]

#: The paper's Pareto axes: interactivity (x) and throughput per GPU (y).
DEFAULT_X = "interactivity_tokens_per_s_per_user"
DEFAULT_Y = "throughput_tokens_per_s_per_gpu"
#: The axes of a serving sweep's results: arrival rate [requests/s] (x), goodput [requests/s] (y).
SERVE_X = "rate"
SERVE_Y = "goodput_requests_per_s"
#: File formats :func:`save_plot` writes (by extension): every one matplotlib writes but ``.pgf``
#: (which needs a TeX installation) and ``.avif`` (only with some builds of Pillow).
FORMATS = ("png", "svg", "pdf", "svgz", "eps", "ps", "jpg", "jpeg", "tif", "tiff", "webp", "gif", "raw", "rgba")

Rows = Sequence[Mapping[str, Any]]


def _check_rows(param: str, rows: Any, paths: bool = False) -> list[Mapping[str, Any]]:
    """``rows`` as a list of mappings, or a :class:`TypeError` naming ``param``."""
    from .._validate import type_error

    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
        raise type_error(param, rows, "a list of result rows (dicts)" + (
            ", or a sweep directory or results file path" if paths else ""))
    rows = list(rows)
    for i, r in enumerate(rows):
        if not isinstance(r, Mapping):
            raise type_error(f"{param}[{i}]", r, "a result row (a dict of column -> value)")
    return rows


def columns_of(rows: Rows) -> list[str]:
    """Every column of ``rows``, in first-seen order."""
    out: dict[str, None] = {}
    for r in _check_rows("rows", rows):
        out.update(dict.fromkeys(r))
    return list(out)


def _check_column(option: str, name: str, columns: Sequence[str]) -> None:
    if name in columns:
        return
    close = difflib.get_close_matches(name, columns, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise field_error(option, name, f"a column of the results{hint}; they have: {', '.join(columns)}")


def _number(option: str, column: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise field_error(option, column, f"a column of numbers (it holds {value!r:.60}); pick a numeric column")
    try:
        return float(value)
    except OverflowError:      # an integer of hundreds of digits: beyond any axis, left out
        return math.inf if value > 0 else -math.inf


#: The largest magnitude drawn: past it matplotlib's axis arithmetic overflows (a limit of 1e308
#: and -1e308 is a range of infinity); such values, NaN and infinities are left out with a warning.
MAX_PLOTTED = 1e300
#: On a logarithmic axis only values from 1e-90 to 1e90 are drawn: matplotlib widens the view by 5 %
#: of its span in decades on each side and may put a tick one whole view span beyond it (two ticks
#: on a short axis), so 90 decades each side reach at most about 10**297; past about 10**308 a tick
#: is infinite and its label overflows (1e200 and 1e300 on one log axis raised OverflowError).
MAX_LOG_DECADES = 90


def _text(value: Any) -> str:
    """Text from the results or the user as matplotlib prints it literally: a ``$`` would start
    mathtext (``$\\foo$`` fails to parse), so every one is escaped."""
    return str(value).replace("$", r"\$")


def _drawable(option: str, column: str, value: float, log: bool) -> str | None:
    """Why ``value`` cannot be drawn on its axis (None: it can)."""
    if not math.isfinite(value):
        return "not finite"
    if log:
        if value <= 0:
            return f"not positive on the logarithmic {option[2:]} axis"
        if not 10.0 ** -MAX_LOG_DECADES <= value <= 10.0 ** MAX_LOG_DECADES:
            return f"outside 1e-{MAX_LOG_DECADES} .. 1e{MAX_LOG_DECADES} on the logarithmic {option[2:]} axis"
    elif abs(value) > MAX_PLOTTED:
        return f"beyond +-{MAX_PLOTTED:g}"
    return None


def _label(row: Mapping[str, Any], column: str | None) -> str:
    if column is None:
        return ""
    value = row.get(column)
    if column == "policy" and row.get("pimoe_unit"):
        return f"{value}({row['pimoe_unit']})"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return "-" if value is None else str(value)


def _rows_of(results: str | os.PathLike[str] | Rows) -> list[dict[str, Any]]:
    if isinstance(results, (str, os.PathLike)):
        rows = read_results(results)
        if not rows:
            raise ConfigError(f"{results}: no result rows to plot")
        return rows
    rows = [dict(r) for r in _check_rows("results", results, paths=True)]
    if not rows:
        raise ConfigError("results = []: no result rows to plot")
    return rows


def _where(rows: list[dict[str, Any]], where: Mapping[str, Any] | None, columns: Sequence[str]) -> list[dict[str, Any]]:
    for key, want in (where or {}).items():
        _check_column("--where", key, columns)
        rows = [r for r in rows if r.get(key) == want or str(r.get(key)) == str(want)]
    if not rows:
        raise ConfigError(f"no row matches {', '.join(f'{k}={v}' for k, v in (where or {}).items())}")
    return rows


def plot_results(results: str | os.PathLike[str] | Rows, *, x: str | None = None, y: str | None = None,
                 color: str | None = None, facet: str | None = None, logx: bool = False, logy: bool = False,
                 where: Mapping[str, Any] | None = None, title: str | None = None) -> Any:
    """A matplotlib ``Figure`` of ``results`` (a sweep directory, a ``.jsonl``/``.csv`` path, or rows).

    ``x``, ``y``: numeric columns (default :data:`DEFAULT_X`, :data:`DEFAULT_Y`, the paper's
    Pareto axes; for serving results, which have neither, :data:`SERVE_X` and :data:`SERVE_Y`); ``color``: one line per value of this column (default ``policy`` when present);
    ``facet``: one panel per value (default ``model`` when the rows hold several models);
    ``logx``, ``logy``: logarithmic axes; ``where``: keep only rows whose columns equal these
    values. A column that is not in the results raises :class:`~sievesim.errors.ConfigError`
    naming every column there is."""
    rows = _rows_of(results)
    columns = columns_of(rows)
    rows = _where(rows, where, columns)
    serving = DEFAULT_X not in columns and SERVE_X in columns and SERVE_Y in columns
    x = x or (SERVE_X if serving else DEFAULT_X)
    y = y or (SERVE_Y if serving else DEFAULT_Y)
    _check_column("--x", x, columns)
    _check_column("--y", y, columns)
    if color is None and "policy" in columns:
        color = "policy"
    if facet is None and "model" in columns and len({str(r.get("model")) for r in rows}) > 1:
        facet = "model"
    for option, column in (("--color", color), ("--facet", facet)):
        if column is not None:
            _check_column(option, column, columns)
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigError("plots need matplotlib: pip install 'sievesim[plot]'") from None

    panels: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        panels.setdefault(_label(r, facet) if facet else "", []).append(r)
    n = len(panels)
    ncols = min(n, 3)
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(4.6 * ncols, 3.6 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    dropped: dict[str, int] = {}
    for ax, (name, panel) in zip(axes.ravel(), panels.items()):
        series: dict[str, list[tuple[float, float]]] = {}
        for r in panel:
            if r.get(x) is None or r.get(y) is None:
                continue
            pt = (_number("--x", x, r[x]), _number("--y", y, r[y]))
            why = _drawable("--x", x, pt[0], logx) or _drawable("--y", y, pt[1], logy)
            if why is None:
                series.setdefault(_label(r, color), []).append(pt)
            else:
                what = f"{x if _drawable('--x', x, pt[0], logx) else y} {why}"
                dropped[what] = dropped.get(what, 0) + 1
        for label, pts in series.items():
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=4,
                    label=_text(label) if label else None)
        ax.set_xlabel(_text(x))
        ax.set_ylabel(_text(y))
        if logx:
            ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
        if facet:
            ax.set_title(_text(f"{facet} = {name}"), fontsize=10)
        ax.grid(True, alpha=0.3)
        if color and len(series) > 0:
            ax.legend(title=_text(color), fontsize=8, title_fontsize=8)
    for what, n in dropped.items():
        warnings.warn(f"{n} row(s) left out of the plot: {what}", stacklevel=2)
    if title:
        fig.suptitle(_text(title))
    return fig


def save_plot(fig: Any, path: str | os.PathLike[str]) -> pathlib.Path:
    """Write ``fig`` to ``path`` in the format its extension names (:data:`FORMATS`: every one
    matplotlib writes without a TeX installation), without a date in the file, so that the same
    results give the same bytes; written atomically (a full disk leaves an earlier file intact)."""
    from .._validate import type_error

    if not isinstance(path, (str, os.PathLike)):
        raise type_error("path", path, "a file path ending in " + ", ".join("." + f for f in FORMATS))
    if not callable(getattr(fig, "savefig", None)):
        raise type_error("fig", fig, "a matplotlib Figure (from plot_results)")
    p = pathlib.Path(path)
    fmt = p.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise field_error("--out", str(path), f"a file ending in {', '.join('.' + f for f in FORMATS)}")
    metadata = {"png": {"Software": None}, "svg": {"Date": None}, "svgz": {"Date": None},
                "pdf": {"CreationDate": None}}.get(fmt)
    import io

    import matplotlib

    from .._outputs import write_output

    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": "sievesim"}):
        fig.savefig(buf, format="svg" if fmt == "svgz" else fmt, dpi=150,
                    **({"metadata": metadata} if metadata else {}))
    data = buf.getvalue()
    if fmt in ("ps", "eps"):     # PostScript takes its date from the clock (or SOURCE_DATE_EPOCH) only
        data = re.sub(rb"%%CreationDate: [^\n]*\n", b"%%CreationDate: Thu Jan  1 00:00:00 1970\n", data, count=1)
    elif fmt == "svgz":
        import gzip
        data = gzip.compress(data, mtime=0)
    write_output(p, data, "plot")
    return p


def parse_where(items: Iterable[str]) -> dict[str, Any]:
    """``COLUMN=VALUE`` filters of the command line (values compared as the results print them)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise field_error("--where", item, "COLUMN=VALUE")
        out[key.strip()] = value.strip()
    return out
