"""Fit the calibrated GPU model's constants to a user's own measured decode times.

:func:`calibrate` takes measured points (the CSV layout of
:func:`sievesim.benchmarks.gpu_validation.read_points`: model, GPUs, parallelism, formats, batch,
context, measured TPOT in ms), a base hardware spec, and the names of the fields to fit
(:data:`FITTABLE`); it minimises the squared log ratios simulated / measured
(:func:`scipy.optimize.least_squares`, bounded) and returns the fitted hardware with every point's
ratio before and after. ``sievesim calibrate`` writes the result as a hardware TOML with ``base =``
and the fitted fields only.

Fitting belongs to the user's own measurements of their own deployment; the shipped presets are
never fitted to end-to-end points (docs/hardware.md).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .errors import field_error

__all__ = ["FITTABLE", "DEFAULT_FIT", "CalibrationResult", "calibrate", "with_fields"]

#: Fields ``calibrate`` may fit: section, lower and upper bound (units of the field).
FITTABLE: dict[str, tuple[str, float, float]] = {
    "kernel_launch_s": ("gpu", 0.0, 1e-4),
    "kernel_ramp_s": ("gpu", 0.0, 1e-4),
    "kernel_bandwidth_fraction": ("gpu", 0.05, 1.0),
    "kernel_flops_fraction": ("gpu", 0.05, 1.0),
    "attention_bandwidth_fraction": ("gpu", 0.05, 1.0),
    "step_overhead_s_per_request": ("gpu", 0.0, 1e-3),
    "allreduce_latency_s": ("interconnect", 0.0, 1e-3),
    "alltoall_latency_s": ("interconnect", 0.0, 1e-3),
}
#: What ``sievesim calibrate`` fits unless told otherwise: the per-kernel fixed cost and the
#: achieved share of the HBM bandwidth.
DEFAULT_FIT: tuple[str, ...] = ("kernel_launch_s", "kernel_bandwidth_fraction")


def with_fields(hardware: Any, values: dict[str, float]) -> Any:
    """``hardware`` with some calibrated-model fields replaced (:data:`FITTABLE` names)."""
    gpu = {k: v for k, v in values.items() if FITTABLE[k][0] == "gpu"}
    link = {k: v for k, v in values.items() if FITTABLE[k][0] == "interconnect"}
    return dataclasses.replace(hardware, gpu=dataclasses.replace(hardware.gpu, **gpu),
                               interconnect=dataclasses.replace(hardware.interconnect, **link))


@dataclass(frozen=True)
class CalibrationResult:
    """The fitted fields, the hardware with them, and each point's ratio before and after."""

    hardware: Any
    fitted: dict[str, float]
    start: dict[str, float]
    points: tuple[Any, ...]
    ratio_before: tuple[float, ...]
    ratio_after: tuple[float, ...]
    evaluations: int

    def rms_log_error(self, after: bool = True) -> float:
        r = np.log(np.asarray(self.ratio_after if after else self.ratio_before))
        return float(np.sqrt(np.mean(r * r)))


def _check_fit(fit: Sequence[str]) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(fit))
    if not names:
        raise field_error("--fit", "", "at least one field: " + ", ".join(FITTABLE))
    for name in names:
        if name not in FITTABLE:
            import difflib
            close = difflib.get_close_matches(name, FITTABLE, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise field_error("--fit", name, "one of " + ", ".join(FITTABLE) + hint)
    return names


def calibrate(points: Sequence[Any], hardware: Any, fit: Sequence[str] = DEFAULT_FIT, *,
              max_evaluations: int = 200) -> CalibrationResult:
    """Fit the fields ``fit`` of ``hardware``'s calibrated GPU model to ``points`` (measured
    :class:`~sievesim.benchmarks.gpu_validation.DecodePoint`). Every point runs on ``hardware``."""
    from scipy.optimize import least_squares

    from .benchmarks.gpu_validation import simulated_tpot_s
    from .hardware import get_hardware

    hw = get_hardware(hardware)
    names = _check_fit(fit)
    if not points:
        raise field_error("points", 0, "at least one measured point")
    missing = hw.gpu.calibration_missing()
    if missing:
        raise field_error(f"gpu.{missing[0]}", None, f"a starting value (hardware {hw.name!r} lacks the calibrated "
                          "GPU model's fields: use base = a preset that has them)")
    start = {}
    for n in names:
        section, lo, hi = FITTABLE[n]
        value = getattr(getattr(hw, section), n)
        if value is None:
            raise field_error(f"{section}.{n}", None, f"a starting value to fit from (hardware {hw.name!r})")
        start[n] = float(min(max(value, lo), hi))
    measured = np.array([p.measured_tpot_ms * 1e-3 for p in points])
    # each field scaled by its upper bound, so that the solver's steps are alike in size
    scale = np.array([FITTABLE[n][2] for n in names])
    evaluations = 0

    def ratios(values: dict[str, float]) -> np.ndarray:
        nonlocal evaluations
        evaluations += 1
        trial = with_fields(hw, values)
        return np.array([simulated_tpot_s(p, "calibrated", trial) for p in points]) / measured

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.log(ratios(dict(zip(names, (x * scale).tolist()))))

    before = ratios(start)
    x0 = np.array([start[n] for n in names]) / scale
    lo = np.array([FITTABLE[n][1] for n in names]) / scale
    hi = np.array([FITTABLE[n][2] for n in names]) / scale
    sol = least_squares(residuals, x0, bounds=(lo, hi), x_scale="jac", diff_step=1e-3, max_nfev=max_evaluations)
    fitted = {n: float(v) for n, v in zip(names, (sol.x * scale).tolist())}
    after = ratios(fitted)
    return CalibrationResult(with_fields(hw, fitted), fitted, start, tuple(points), tuple(before.tolist()),
                             tuple(after.tolist()), evaluations)


def calibration_toml(result: CalibrationResult, base: str, name: str) -> str:
    """The hardware TOML of a calibration: ``base =`` and the fitted fields (with their values before)."""
    import tomli_w

    doc: dict[str, Any] = {"name": name, "base": base,
                           "description": f"{base} calibrated by sievesim calibrate on {len(result.points)} "
                                          "measured points"}
    for n, v in result.fitted.items():
        doc.setdefault(FITTABLE[n][0], {})[n] = v
    head = ("# sievesim calibrate: fields fitted to measured decode (docs/hardware.md); before the fit:\n"
            + "".join(f"#   {n} = {v:.6g}\n" for n, v in result.start.items()))
    return head + tomli_w.dumps(doc)


def describe_fit(result: CalibrationResult) -> list[str]:
    """Lines: each fitted field before and after, each point's ratio before and after."""
    lines = [f"{n}: {result.start[n]:.6g} -> {v:.6g}" for n, v in result.fitted.items()]
    lines.append(f"{'point':12s} {'measured_ms':>11s} {'before':>8s} {'after':>8s}   (simulated / measured)")
    for p, b, a in zip(result.points, result.ratio_before, result.ratio_after):
        lines.append(f"{p.id:12s} {p.measured_tpot_ms:11.3f} {b:8.3f} {a:8.3f}")
    gm = [math.exp(float(np.mean(np.log(r)))) for r in (result.ratio_before, result.ratio_after)]
    lines.append(f"geometric mean {gm[0]:.3f} -> {gm[1]:.3f}; rms log error {result.rms_log_error(False):.3f} -> "
                 f"{result.rms_log_error(True):.3f} ({result.evaluations} evaluations of every point)")
    return lines
