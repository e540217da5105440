"""The input contract in one place: bounds on sizes and counts, strict CLI value types, the memory limit.

Every reader of user input (TOML, YAML, JSON, npz, command-line values) checks a value in three
steps -- type, then range, then meaning -- and raises :class:`~sievesim.errors.SievesimError`
naming the field, the value and what was expected. Types and ranges are checked with the helpers
here; meaning (a timing constraint, a divisor) stays with the reader that knows it.

Bounds (:data:`BOUNDS`) follow from what is physically meaningful, with a wide margin, so that a
typo such as ``--batch 1000000000`` is refused at once instead of hanging. Work whose memory grows
with the input is estimated first (:func:`check_memory`) and refused above :func:`max_memory`
(default :data:`DEFAULT_MAX_MEMORY`; ``sievesim --max-memory`` or :func:`memory_limit` raise it).

This module sits below every other layer (it imports only :mod:`sievesim.errors`).
"""
from __future__ import annotations

import argparse
import contextlib
import contextvars
import math
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from .errors import ConfigError, SievesimError, field_error

__all__ = [
    "Bound", "BOUNDS", "Problems", "check_int", "check_number", "check_bool", "check_str", "check_table",
    "parse_int", "parse_int_list", "int_arg", "int_list_arg", "size_arg", "parse_size",
    "parse_number", "parse_number_list", "number_arg", "number_list_arg",
    "DEFAULT_MAX_MEMORY", "max_memory", "memory_limit", "check_memory", "format_bytes",
    "type_error", "check_name_or_path", "check_strict_bool", "check_optional_str",
    "DEFAULT_MAX_WORK_S", "max_work_s", "work_limit", "check_work", "parse_seconds", "seconds_arg",
    "format_seconds", "MAX_DIGITS",
]


@dataclass(frozen=True)
class Bound:
    """Inclusive range of one kind of size or count, and why the upper end is where it is."""

    lo: int
    hi: int
    why: str

    def expected(self) -> str:
        return f"an integer from {self.lo} to {self.hi} ({self.why})"


#: Upper bounds are far above every published model and machine; a value past them is a typo.
BOUNDS: dict[str, Bound] = {
    "dimension": Bound(1, 1 << 20, "elements of one matrix side; published MoE models stay below 2**17"),
    "vocab": Bound(1, 1 << 24, "tokens in a vocabulary; published ones stay below 2**19"),
    "layers": Bound(1, 1 << 12, "transformer layers; published models have fewer than 200"),
    "heads": Bound(1, 1 << 12, "attention heads"),
    "experts": Bound(1, 1 << 16, "routed experts per layer; published MoE models have at most 512"),
    "batch": Bound(1, 1 << 14, "requests in one decode step; the Sieve paper studies up to 256"),
    "tokens": Bound(1, 1 << 14, "tokens one expert or GEMV handles in a step (at most the batch)"),
    "context": Bound(0, 1 << 24, "tokens of context per request"),
    "requests": Bound(1, (1 << 31) - 1, "requests in one DRAM trace (32-bit request index in the engine)"),
    "gpus": Bound(1, 1 << 12, "GPUs in one system"),
    "stacks": Bound(1, 64, "HBM stacks on one GPU; shipped GPUs have at most 12"),
    "queue": Bound(1, 1 << 16, "entries of one controller queue; DRAM controllers hold tens"),
    "org_level": Bound(1, 1 << 24, "units at one DRAM organisation level"),
    "cycles": Bound(0, 1 << 24, "DRAM command-clock cycles of one timing; JEDEC timings stay below 2**16"),
    "seed": Bound(0, (1 << 63) - 1, "a random seed"),
    "batches": Bound(1, 1 << 12, "decode steps measured per batch size"),
    "threads": Bound(1, 1024, "threads"),
    "clock_ratio": Bound(1, 64, "frontend ticks per memory tick (the engine tracks 64)"),
    "repeat": Bound(1, 10_000, "timed runs"),
    "inner": Bound(1, 1_000_000, "calls per timed run"),
    "layer_index": Bound(0, (1 << 12) - 1, "a layer index"),
    "served_requests": Bound(1, 10_000_000, "requests one serving run serves"),
    "bisect_steps": Bound(1, 40, "halvings of a max-rate bracket"),
}


def _is_int(value: Any) -> bool:
    if isinstance(value, int):
        return not isinstance(value, bool)
    # a numpy integer only where numpy is loaded (a command line's values are ints: `sievesim dram
    # run` imports numpy later, while its trace is read ahead)
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, np.integer)


# ---------------------------------------------------------------------------------------------
# values read from files (TOML, YAML, JSON, npz)


def check_int(field: str, value: Any, kind: str, *, source: str | None = None,
              lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an int within ``BOUNDS[kind]`` (``lo``/``hi`` narrow it); else a field error."""
    b = BOUNDS[kind]
    lo = b.lo if lo is None else lo
    hi = b.hi if hi is None else hi
    if not _is_int(value):
        raise field_error(field, value, f"an integer ({b.why})", source=source)
    if not lo <= value <= hi:
        raise field_error(field, value, f"an integer from {lo} to {hi} ({b.why})", source=source)
    return int(value)


def check_number(field: str, value: Any, *, source: str | None = None, lo: float = -math.inf,
                 hi: float = math.inf, lo_open: bool = False, what: str = "a number") -> float:
    """A finite real number (not a bool) in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok:
        try:
            v = float(value)
        except OverflowError:
            ok = False
        else:
            ok = math.isfinite(v) and (v > lo if lo_open else v >= lo) and v <= hi
    if not ok:
        rng = "" if (lo, hi) == (-math.inf, math.inf) else (
            f" {'>' if lo_open else '>='} {lo:g}" if hi == math.inf else f" in {'(' if lo_open else '['}{lo:g}, {hi:g}]")
        raise field_error(field, value, f"{what}, finite{rng}", source=source)
    return v


def check_bool(field: str, value: Any, *, source: str | None = None) -> bool:
    """``true`` or ``false`` -- never a string such as ``"no"`` or a number."""
    if not isinstance(value, bool):
        raise field_error(field, value, "true or false", source=source)
    return value


def check_str(field: str, value: Any, *, source: str | None = None, what: str = "a string") -> str:
    if not isinstance(value, str) or not value:
        raise field_error(field, value, f"{what} (a non-empty string)", source=source)
    return value


def check_table(field: str, value: Any, *, source: str | None = None) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise field_error(field, value, "a table (mapping of keys to values)", source=source)
    return value


class Problems:
    """Collects the type and range problems of one input, so that they are reported in one message.

    ::

        problems = Problems(source)
        with problems.check():
            check_int("org.channel", value, "org_level", source=source)
        problems.raise_if_any()     # one ConfigError listing every problem found
    """

    def __init__(self, source: str | None = None, cls: type[SievesimError] = ConfigError) -> None:
        self.source = source
        self.cls = cls
        self.messages: list[str] = []

    @contextlib.contextmanager
    def check(self) -> Iterator[None]:
        try:
            yield
        except SievesimError as exc:
            msg = str(exc)
            prefix = f"{self.source}: " if self.source else ""
            self.messages.append(msg[len(prefix):] if prefix and msg.startswith(prefix) else msg)

    def add(self, field: str, value: Any, expected: str) -> None:
        """Record one problem: ``field`` has ``value`` where ``expected`` was wanted."""
        self.messages.append(str(field_error(field, value, expected)))

    def raise_if_any(self) -> None:
        if not self.messages:
            return
        where = f"{self.source}: " if self.source else ""
        if len(self.messages) == 1:
            raise self.cls(where + self.messages[0])
        raise self.cls(f"{where}{len(self.messages)} problems: " + "; ".join(self.messages))


# ---------------------------------------------------------------------------------------------
# arguments of the Python API, checked at the door


def type_error(param: str, value: Any, expected: str) -> TypeError:
    """A :class:`TypeError` naming the parameter, the value (shortened) and what was expected."""
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:60] + "..." + shown[-10:]
    return TypeError(f"{param} = {shown}: expected {expected}, got {type(value).__name__}")


#: Longest path or name an argument may be (characters; PATH_MAX on Linux is 4096 bytes).
MAX_PATH_CHARS = 4096


def check_name_or_path(param: str, value: Any, what: str = "a preset name or a file path") -> str:
    """A preset name or a path (``str`` or ``os.PathLike``, not bytes), non-empty, without a NUL
    byte, at most :data:`MAX_PATH_CHARS` characters; returns it as text."""
    import os  # noqa: PLC0415

    if isinstance(value, (bytes, bytearray)) or not isinstance(value, (str, os.PathLike)):
        raise type_error(param, value, f"{what} (str or os.PathLike)")
    text = os.fspath(value)
    if not isinstance(text, str):
        raise type_error(param, value, f"{what} (str or os.PathLike)")
    if not text.strip():
        raise field_error(param, text, what)
    if "\x00" in text:
        raise field_error(param, text, f"{what} without a NUL byte")
    if len(text) > MAX_PATH_CHARS:
        raise field_error(param, text, f"{what} of at most {MAX_PATH_CHARS} characters")
    return text


def check_strict_bool(param: str, value: Any) -> bool:
    """``True`` or ``False`` (numpy booleans too): a string such as ``"no"`` is refused, not read as true."""
    import numpy as np  # noqa: PLC0415

    if not isinstance(value, (bool, np.bool_)):
        raise type_error(param, value, "True or False")
    return bool(value)


def check_optional_str(param: str, value: Any, what: str = "a name") -> str | None:
    """``None`` or a non-empty string."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise type_error(param, value, f"{what} (str) or None")
    if not value.strip():
        raise field_error(param, value, what)
    return value


# ---------------------------------------------------------------------------------------------
# values typed on the command line

_ASCII_INT = re.compile(r"[+-]?[0-9]{1,30}")


def parse_int(field: str, text: str, kind: str, *, lo: int | None = None) -> int:
    """An ASCII decimal integer within ``BOUNDS[kind]``; Python's ``int`` also takes Unicode digits
    (``'٣'``), underscores and spaces, which are refused here."""
    b = BOUNDS[kind]
    lo = b.lo if lo is None else lo
    if not isinstance(text, str) or not _ASCII_INT.fullmatch(text):
        raise field_error(field, text, f"an integer written in ASCII digits ({b.why})")
    value = int(text)
    if not lo <= value <= b.hi:
        raise field_error(field, value, f"an integer from {lo} to {b.hi} ({b.why})")
    return value


#: Longest comma-separated list a command takes (each entry is one run).
MAX_LIST = 64


def parse_int_list(field: str, text: str, kind: str, *, lo: int | None = None) -> list[int]:
    """Comma-separated integers (1 to :data:`MAX_LIST`), each as :func:`parse_int` reads it."""
    parts = [p.strip() for p in str(text).split(",")]
    if not text or not text.strip() or any(not p for p in parts) or len(parts) > MAX_LIST:
        raise field_error(field, text, f"1 to {MAX_LIST} comma-separated integers ({BOUNDS[kind].why})")
    return [parse_int(field, p, kind, lo=lo) for p in parts]


_ASCII_NUMBER = re.compile(r"[+-]?([0-9]{1,30}(\.[0-9]{0,30})?|\.[0-9]{1,30})([eE][+-]?[0-9]{1,4})?")


def parse_number(field: str, text: str, *, lo: float, hi: float, what: str) -> float:
    """A finite decimal number written in ASCII within ``[lo, hi]``; Python's ``float`` also takes
    Unicode digits (``'٣'``), underscores, ``nan`` and ``inf``, which are refused here."""
    if not isinstance(text, str) or not _ASCII_NUMBER.fullmatch(text.strip()):
        raise field_error(field, text, f"a number written in ASCII digits ({what})")
    value = float(text)
    if not (math.isfinite(value) and lo <= value <= hi):
        raise field_error(field, value, f"{what}, from {lo:g} to {hi:g}")
    return value


#: Units a time option may carry, in seconds.
TIME_UNITS: dict[str, float] = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0}
_TIME_TEXT = re.compile(r"\s*((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?)\s*([a-z]*)\s*")


def parse_duration(field: str, text: str, *, bare_max: float | None = None) -> float:
    """A time in seconds: ``"0.05"``, ``"50ms"``, ``"2 s"``, ``"200us"``, ``"1.5min"``. A bare number
    above ``bare_max`` seconds is refused with the unit it was probably meant in (a TPOT target of
    ``50`` is 50 ms written as a vLLM benchmark writes it, not 50 s)."""
    m = _TIME_TEXT.fullmatch(text) if isinstance(text, str) else None
    if m is None or m.group(2) not in ("",) + tuple(TIME_UNITS):
        raise field_error(field, text, "a time: seconds, or a number with a unit (" + ", ".join(
            f"50{u}" for u in TIME_UNITS) + ")")
    value = float(m.group(1)) * TIME_UNITS.get(m.group(2) or "s", 1.0)
    if not (math.isfinite(value) and 0 < value <= 1e12):
        raise field_error(field, text, "a positive time, at most 1e12 s")
    if not m.group(2) and bare_max is not None and value > bare_max:
        raise field_error(field, text, f"seconds: {value:g} s is implausible for this target (a bare number above "
                          f"{bare_max:g} s); write the unit, e.g. {m.group(1)}ms")
    return value


def duration_arg(*, bare_max: float | None = None) -> Callable[[str], float]:
    """argparse ``type=`` for :func:`parse_duration`."""
    return _arg_type(lambda t: parse_duration("value", t, bare_max=bare_max), "time")


def parse_number_list(field: str, text: str, *, lo: float, hi: float, what: str) -> list[float]:
    """Comma-separated numbers (1 to :data:`MAX_LIST`), each as :func:`parse_number` reads it."""
    parts = [p.strip() for p in str(text).split(",")]
    if not text or not text.strip() or any(not p for p in parts) or len(parts) > MAX_LIST:
        raise field_error(field, text, f"1 to {MAX_LIST} comma-separated numbers ({what})")
    return [parse_number(field, p, lo=lo, hi=hi, what=what) for p in parts]


def _arg_type(parse: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except SievesimError as exc:
            # argparse names the option itself
            raise argparse.ArgumentTypeError(str(exc).removeprefix("value = ")) from None
    convert.__name__ = name
    return convert


def int_arg(kind: str, *, lo: int | None = None) -> Callable[[str], int]:
    """argparse ``type=`` for one bounded integer of ``kind``."""
    return _arg_type(lambda t: parse_int("value", t, kind, lo=lo), "integer")


def int_list_arg(kind: str, *, lo: int | None = None) -> Callable[[str], list[int]]:
    """argparse ``type=`` for comma-separated bounded integers of ``kind``."""
    return _arg_type(lambda t: parse_int_list("value", t, kind, lo=lo), "integer list")


def number_arg(*, lo: float, hi: float, what: str) -> Callable[[str], float]:
    """argparse ``type=`` for one finite number in ``[lo, hi]`` (``what`` says its unit)."""
    return _arg_type(lambda t: parse_number("value", t, lo=lo, hi=hi, what=what), "number")


def number_list_arg(*, lo: float, hi: float, what: str) -> Callable[[str], list[float]]:
    """argparse ``type=`` for comma-separated finite numbers in ``[lo, hi]``."""
    return _arg_type(lambda t: parse_number_list("value", t, lo=lo, hi=hi, what=what), "number list")


# ---------------------------------------------------------------------------------------------
# memory

#: Default limit on the memory one estimated piece of work may ask for (bytes).
DEFAULT_MAX_MEMORY = 4 * 2**30
_MAX_MEMORY: contextvars.ContextVar[int] = contextvars.ContextVar("sievesim_max_memory", default=DEFAULT_MAX_MEMORY)
_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "kib": 2**10, "m": 10**6, "mb": 10**6, "mib": 2**20,
          "g": 10**9, "gb": 10**9, "gib": 2**30, "t": 10**12, "tb": 10**12, "tib": 2**40}
_SIZE = re.compile(r"([0-9]{1,15}(?:\.[0-9]{1,6})?)\s*([a-zA-Z]{0,3})")


def parse_size(text: str, field: str = "--max-memory") -> int:
    """``'8GiB'``, ``'500M'``, ``'1073741824'`` -> bytes (positive)."""
    m = _SIZE.fullmatch(text.strip()) if isinstance(text, str) else None
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _UNITS or float(m.group(1)) * _UNITS[unit] < 1:
        raise field_error(field, text, "a positive size such as 8GiB, 500MB or 1073741824 (bytes)")
    return int(float(m.group(1)) * _UNITS[unit])


size_arg = _arg_type(lambda t: parse_size(t, "value"), "size")


def max_memory() -> int:
    """The memory limit in force (bytes)."""
    return _MAX_MEMORY.get()


@contextlib.contextmanager
def memory_limit(nbytes: int) -> Iterator[None]:
    """Raise (or lower) the memory limit inside a ``with`` block."""
    if not _is_int(nbytes) or nbytes < 1:
        raise field_error("max_memory", nbytes, "a positive number of bytes")
    with _limit_set(_MAX_MEMORY, int(nbytes)):
        yield


@contextlib.contextmanager
def _limit_set(var: contextvars.ContextVar[Any], value: Any) -> Iterator[None]:
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


def format_bytes(n: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def check_memory(nbytes: float, what: str, field: str, value: Any, *, source: str | None = None) -> None:
    """Refuse work estimated at ``nbytes`` above :func:`max_memory`, naming ``field`` = ``value``."""
    limit = max_memory()
    if nbytes > limit:
        raise field_error(field, value, f"a smaller value: {what} needs about {format_bytes(nbytes)} of "
                          f"memory, above the limit of {format_bytes(limit)} (raise it with --max-memory)",
                          source=source, cls=ConfigError)


# ---------------------------------------------------------------------------------------------
# time: the work estimate guards time as well as memory

#: Default limit on the estimated run time of one piece of work (seconds): ten minutes.
DEFAULT_MAX_WORK_S = 600.0
_MAX_WORK_S: contextvars.ContextVar[float] = contextvars.ContextVar("sievesim_max_work_s", default=DEFAULT_MAX_WORK_S)
_DURATION = re.compile(r"([0-9]{1,9}(?:\.[0-9]{1,6})?)\s*(s|sec|m|min|h)?")


def parse_seconds(text: str, field: str = "--max-work") -> float:
    """``'600'``, ``'90s'``, ``'10min'``, ``'2h'`` -> seconds (positive)."""
    m = _DURATION.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None or float(m.group(1)) <= 0:
        raise field_error(field, text, "a positive duration such as 600, 90s, 10min or 2h")
    return float(m.group(1)) * {None: 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}[m.group(2)]


seconds_arg = _arg_type(lambda t: parse_seconds(t, "value"), "duration")


def max_work_s() -> float:
    """The limit on estimated run time in force (seconds)."""
    return _MAX_WORK_S.get()


@contextlib.contextmanager
def work_limit(seconds: float) -> Iterator[None]:
    """Raise (or lower) the limit on estimated run time inside a ``with`` block."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < math.inf:
        raise field_error("max_work_s", seconds, "a positive, finite number of seconds")
    with _limit_set(_MAX_WORK_S, float(seconds)):
        yield


def format_seconds(s: float) -> str:
    if s >= 86400 * 365:
        return f"{s / (86400 * 365):.3g} years"
    if s >= 86400:
        return f"{s / 86400:.3g} days"
    if s >= 3600:
        return f"{s / 3600:.3g} hours"
    if s >= 60:
        return f"{s / 60:.3g} minutes"
    return f"{s:.3g} s"


def check_work(seconds: float, what: str, field: str, value: Any, *, source: str | None = None) -> None:
    """Refuse work estimated to run ``seconds`` above :func:`max_work_s`, naming ``field`` = ``value``,
    the estimate and the flag that raises the limit."""
    limit = max_work_s()
    if not seconds <= limit:   # nan counts as too long
        raise field_error(field, value, f"a smaller value: {what} would run about {format_seconds(seconds)} "
                          f"(estimated), above the limit of {format_seconds(limit)} (raise it with --max-work, "
                          "e.g. --max-work 2h)", source=source, cls=ConfigError)


#: Most digits a number written in a file or on the command line may have before it is converted
#: (Python's int() refuses 4,300 digits with a ValueError; no quantity here needs 40).
MAX_DIGITS = 40
