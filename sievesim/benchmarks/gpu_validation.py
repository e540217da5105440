"""The GPU model against published measured decode: simulated / measured TPOT per point.

``python -m sievesim.benchmarks gpu-validation [--gpu-model calibrated|roofline|both]`` prints the
table of docs/validation.md ("The GPU against measured decode"): every point of
``sievesim/data/validation/decode_points.csv`` (model, GPUs, parallelism, formats, batch, mean
decode context, the measured TPOT and where it was published) run as one GPU-only decode step
(``sievesim run --policy gpu-only``, the command each row shows) and its ratio to the measurement.
The points validate the model; none of its constants is fitted to them (docs/hardware.md).

The same CSV layout is what ``sievesim calibrate`` reads (:func:`read_points`).
"""
from __future__ import annotations

import argparse
import csv
import io
import math
import os
import pathlib
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..errors import ConfigError, field_error

#: The published points shipped with sievesim.
POINTS_CSV = pathlib.Path(__file__).resolve().parent.parent / "data" / "validation" / "decode_points.csv"
#: Columns a measurements file must have (``sievesim calibrate`` reads the same layout).
REQUIRED_COLUMNS = ("model", "gpus", "batch", "context_len", "measured_tpot_ms")
#: Columns that may be left out (their default in brackets in :class:`DecodePoint`).
OPTIONAL_COLUMNS = ("id", "hardware", "attention", "experts", "weight_format", "nodes", "engine", "reported", "source")
#: The band of simulated / measured that counts as agreeing, and the share of points that must.
BAND = (0.75, 1.33)


@dataclass(frozen=True)
class DecodePoint:
    """One measured decode point: a deployment and its measured time per output token."""

    id: str
    model: str
    hardware: str
    gpus: int
    attention: str
    experts: str
    weight_format: str | None
    batch: int
    context_len: int
    measured_tpot_ms: float
    engine: str = ""
    reported: str = ""
    source: str = ""
    #: NVLink domains the GPUs span (1: one node).
    nodes: int = 1

    def step_kwargs(self) -> dict[str, Any]:
        """``simulate_step`` keywords of this point (a GPU-only decode step)."""
        return dict(gpus=self.gpus, policy="gpu-only", batch=self.batch, context_len=self.context_len,
                    attention=self.attention, experts=self.experts, weight_format=self.weight_format,
                    nodes=self.nodes if self.nodes > 1 else None)

    def command(self, gpu_model: str = "calibrated") -> str:
        """The ``sievesim run`` command line that simulates this point."""
        parts = [f"sievesim run --model {self.model} --hardware {self.hardware} --gpus {self.gpus}",
                 f"--policy gpu-only --batch {self.batch} --context-len {self.context_len}"]
        if self.attention != "dp" or self.experts != "ep":
            parts.append(f"--attention {self.attention} --experts {self.experts}")
        if self.weight_format:
            parts.append(f"--weight-format {self.weight_format}")
        if self.nodes > 1:
            parts.append(f"--nodes {self.nodes}")
        if gpu_model != "calibrated":
            parts.append(f"--gpu-model {gpu_model}")
        return " ".join(parts + ["--warmup 0"])


def _cell(row: dict[str, str], key: str, line: int, path: str) -> str:
    value = (row.get(key) or "").strip()
    if not value and key in REQUIRED_COLUMNS:
        raise field_error(key, "<empty>", "a value", source=f"{path}, line {line}")
    return value


def _int(row: dict[str, str], key: str, line: int, path: str, lo: int = 1) -> int:
    text = _cell(row, key, line, path)
    if not text.isdigit() or int(text) < lo or int(text) > 1 << 24:
        raise field_error(key, text, f"an integer from {lo} to {1 << 24}", source=f"{path}, line {line}")
    return int(text)


def read_points(path: str | os.PathLike[str] = POINTS_CSV) -> list[DecodePoint]:
    """The measured points of a CSV file (columns :data:`REQUIRED_COLUMNS`, and any of
    :data:`OPTIONAL_COLUMNS`); a clear error naming the file, line, column and value otherwise."""
    from .._inputs import read_text

    path = str(path)
    text = read_text(path, "measurements CSV", "config")   # a regular, bounded, UTF-8 file
    try:
        with io.StringIO(text, newline="") as fh:
            reader = csv.DictReader(fh)
            header = [h.strip() for h in (reader.fieldnames or [])]
            missing = [c for c in REQUIRED_COLUMNS if c not in header]
            if missing:
                raise field_error("columns", ",".join(header) or "<none>", "the columns " + ", ".join(REQUIRED_COLUMNS)
                                  + " (and any of " + ", ".join(OPTIONAL_COLUMNS) + f"); missing {missing[0]}",
                                  source=path)
            unknown = [c for c in header if c not in REQUIRED_COLUMNS + OPTIONAL_COLUMNS]
            if unknown:
                raise field_error("columns", unknown[0], "one of " + ", ".join(REQUIRED_COLUMNS + OPTIONAL_COLUMNS),
                                  source=path)
            points = [_point(row, n, path) for n, row in enumerate(reader, start=2)]
    except csv.Error as exc:
        raise ConfigError(f"{path}: not a CSV of measurements ({exc})") from None
    if not points:
        raise field_error("rows", 0, "at least one measured point", source=path)
    return points


def _point(row: dict[str, str], line: int, path: str) -> DecodePoint:
    where = f"{path}, line {line}"
    row = {(k or "").strip(): (v if isinstance(v, str) else "") for k, v in row.items()}
    text = _cell(row, "measured_tpot_ms", line, path)
    try:
        tpot = float(text)
    except ValueError:
        tpot = math.nan
    if not (math.isfinite(tpot) and 1e-3 <= tpot <= 1e6):
        raise field_error("measured_tpot_ms", text, "a time per output token in milliseconds, 0.001 to 1e6",
                          source=where)
    attention = _cell(row, "attention", line, path) or "dp"
    experts = _cell(row, "experts", line, path) or "ep"
    if attention not in ("dp", "tp"):
        raise field_error("attention", attention, "dp or tp", source=where)
    if experts not in ("ep", "tp"):
        raise field_error("experts", experts, "ep or tp", source=where)
    fmt = _cell(row, "weight_format", line, path) or None
    if fmt is not None:
        from ..formats import parse_weight_formats
        try:
            parse_weight_formats(fmt, "weight_format")
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return DecodePoint(id=_cell(row, "id", line, path) or f"line {line}", model=_cell(row, "model", line, path),
                       hardware=_cell(row, "hardware", line, path), gpus=_int(row, "gpus", line, path),
                       attention=attention, experts=experts, weight_format=fmt, batch=_int(row, "batch", line, path),
                       context_len=_int(row, "context_len", line, path), measured_tpot_ms=tpot,
                       engine=_cell(row, "engine", line, path), reported=_cell(row, "reported", line, path),
                       source=_cell(row, "source", line, path),
                       nodes=_int(row, "nodes", line, path) if _cell(row, "nodes", line, path) else 1)


def simulated_tpot_s(point: DecodePoint, gpu_model: str = "calibrated", hardware: Any = None) -> float:
    """The simulated decode step [s] of ``point`` (one GPU-only step, no warm-up: nothing to learn)."""
    from ..system import simulate_step

    hw = point.hardware if hardware is None else hardware
    if not hw:
        raise field_error("hardware", "<empty>", f"the hardware of point {point.id} (a column, or the hardware given)")
    try:
        res = simulate_step(point.model, hw, steps=1, warmup=0, gpu_model=gpu_model, energy=False,
                            **point.step_kwargs())
    except ConfigError as exc:
        raise ConfigError(f"point {point.id}: {exc}") from None
    return res.step_time_s


@dataclass(frozen=True)
class Comparison:
    """A point, its simulated TPOT and the ratio simulated / measured."""

    point: DecodePoint
    simulated_ms: float

    @property
    def ratio(self) -> float:
        return self.simulated_ms / self.point.measured_tpot_ms

    @property
    def in_band(self) -> bool:
        return BAND[0] <= self.ratio <= BAND[1]


def compare(points: Iterable[DecodePoint], gpu_model: str = "calibrated") -> list[Comparison]:
    """Each point simulated under ``gpu_model``."""
    return [Comparison(p, simulated_tpot_s(p, gpu_model) * 1e3) for p in points]


def geometric_mean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def summary_line(rows: Sequence[Comparison], gpu_model: str) -> str:
    """In band, geometric mean, range: one line."""
    ratios = [r.ratio for r in rows]
    inside = sum(r.in_band for r in rows)
    return (f"{gpu_model}: simulated / measured in [{BAND[0]}, {BAND[1]}] on {inside} of {len(rows)} points "
            f"({100.0 * inside / len(rows):.0f} %), geometric mean {geometric_mean(ratios):.2f}, "
            f"range {min(ratios):.2f}-{max(ratios):.2f}")


def markdown_table(roof: Sequence[Comparison], cal: Sequence[Comparison]) -> list[str]:
    """The table of docs/validation.md: one row per point, both GPU models."""
    lines = ["| point | model | GPUs | parallelism | formats | batch | context | engine | measured ms | "
             "roofline ms (x) | calibrated ms (x) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r, c in zip(roof, cal):
        p = r.point
        par = f"{p.attention.upper()} attention, {p.experts.upper()} experts" + (f", {p.nodes} nodes" if p.nodes > 1 else "")
        lines.append(f"| {p.id} | {p.model} | {p.gpus} x {p.hardware} | {par} | {p.weight_format or 'bf16'} | "
                     f"{p.batch} | {p.context_len} | {p.engine} | {p.measured_tpot_ms:.2f} | "
                     f"{r.simulated_ms:.2f} ({r.ratio:.2f}) | {c.simulated_ms:.2f} ({c.ratio:.2f}) |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sievesim.benchmarks gpu-validation", description=__doc__.split("\n")[0])
    ap.add_argument("--points", default=str(POINTS_CSV), help="CSV of measured points (default: the shipped ones)")
    ap.add_argument("--commands", action="store_true", help="print each point's sievesim command and source")
    args = ap.parse_args(argv)
    points = read_points(args.points)
    roof, cal = compare(points, "roofline"), compare(points, "calibrated")
    for line in markdown_table(roof, cal):
        print(line)
    print()
    print(summary_line(roof, "roofline"))
    print(summary_line(cal, "calibrated"))
    if args.commands:
        print()
        for p in points:
            print(f"{p.id}: {p.command()}  # {p.reported}; {p.source}")
    return 0
