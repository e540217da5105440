"""The strict reader of request trace files (CSV with a header line, or JSON lines): every field
bounded, every column read once, every error naming the file, the line and the column.

What is refused (:class:`~sievesim.errors.TraceError`, exit 2 from the command line):

* a CSV field longer than :data:`MAX_FIELD_CHARS` characters (16 Mi; a prompt's text in a column
  is read and ignored up to that size); a JSON line that is not one object, or nested too deep;
* a column of the trace's fields given twice (``prompt_tokens`` and ``Prompt Tokens`` are one
  name), or two names of one field (``prompt_tokens`` and ``input_tokens``, ``arrival_s`` and
  ``arrival_ms``) that disagree on a row (arrivals compared from each column's first row);
* a length that is not an integer from 1 to :data:`MAX_TOKENS` (``1e30`` and a 400-digit integer
  are refused as they are read: no sum of two lengths can overflow 64 bits); the model's own
  limit is ``--max-model-len``, checked when the requests are served;
* an arrival that is not a finite number of seconds from 0 to :data:`MAX_ARRIVAL_S` (1e12 s, the
  longest arrival window ``serve`` takes: past it a millisecond no longer moves the clock), or a
  date and time that does not exist (``2023-02-30``, hour 25), or that is not written
  ``YYYY-MM-DD HH:MM:SS[.fraction][Z|+HH:MM]`` like the column's first row;
* an arrival earlier than the row before: arrivals must be in order (sort the file by its arrival
  column first; a trace is not reordered silently, so that row N stays request N - 2).

Line ends may be ``\\n``, ``\\r\\n`` or ``\\r`` alone.
"""
from __future__ import annotations

import array
import contextlib
import csv
import datetime as _dt
import io
import json
import math
import re
from typing import Any, Iterator

import numpy as np

from ..errors import TraceError

__all__ = ["ARRIVAL_COLUMNS", "PROMPT_COLUMNS", "OUTPUT_COLUMNS", "MAX_FIELD_CHARS", "MAX_TOKENS", "MAX_ARRIVAL_S",
           "parse_trace"]

#: Accepted column names (normalised) and the factor to seconds.
ARRIVAL_COLUMNS = {"arrival_s": 1.0, "arrival_time": 1.0, "arrival_time_s": 1.0, "arrived_at": 1.0,
                   "timestamp": 1.0, "arrival_ms": 1e-3, "timestamp_ms": 1e-3}
PROMPT_COLUMNS = ("prompt_tokens", "prompt_len", "input_tokens", "input_length", "num_prefill_tokens",
                  "context_tokens", "request_tokens")
OUTPUT_COLUMNS = ("output_tokens", "output_len", "output_length", "num_decode_tokens", "generated_tokens",
                  "response_tokens")
_FIELDS = (("arrival time", tuple(ARRIVAL_COLUMNS)), ("prompt tokens", PROMPT_COLUMNS),
           ("output tokens", OUTPUT_COLUMNS))
_KNOWN = frozenset(ARRIVAL_COLUMNS) | frozenset(PROMPT_COLUMNS) | frozenset(OUTPUT_COLUMNS)

#: The longest CSV field read [characters] (Python's csv module stops at 128 Ki by default).
MAX_FIELD_CHARS = 16 * 2**20
#: The largest prompt or output length [tokens]: the largest ``--max-model-len``.
MAX_TOKENS = 1 << 24
#: The latest arrival [s] after the trace's unit is applied (the longest ``--arrival-window``).
MAX_ARRIVAL_S = 1e12
#: Two names of one arrival column agree when their times from the first row differ by at most
#: this [s] plus a relative 1e-9 (a time in ms and in s round differently).
_AGREE_S = 1e-6
_SHOWN = 80

_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d{1,4})?")
_DATE = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(\.\d{1,9})?(Z|[+-]\d\d:?\d\d)?")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN - 20]}...{text[-12:]} ({len(text)} characters)"


def _err(path: str, line: int, col: str, value: Any, expected: str) -> TraceError:
    return TraceError(f"{path}: line {line}: {col} = {_shown(value)}: expected {expected}")


def _norm(name: str) -> str:
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", str(name).strip())
    return re.sub(r"[\s\-]+", "_", name).lower()


class _Digits(str):
    """A JSON integer of more digits than a number of tokens or seconds ever has, kept as its text
    (``int()`` of 400 digits is slow, of 4,300 an error, and ``float()`` of it overflows)."""

    def __repr__(self) -> str:
        return str(self)


class _Pairs(list):  # type: ignore[type-arg]
    """A JSON object as its (key, value) pairs, so that a key given twice is seen."""


def _json_int(text: str) -> Any:
    return int(text) if len(text) <= 40 else _Digits(text)


@contextlib.contextmanager
def _field_limit() -> Iterator[None]:
    old = csv.field_size_limit()
    csv.field_size_limit(MAX_FIELD_CHARS)
    try:
        yield
    finally:
        csv.field_size_limit(old)


def _json_rows(text: str, path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for n, raw in enumerate(io.StringIO(text, newline=""), 1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        try:
            obj = json.loads(line, object_pairs_hook=_Pairs, parse_int=_json_int)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{path}: line {n}: column {exc.colno}: not JSON ({exc.msg}); expected one "
                             "request per line, a JSON object") from None
        except (ValueError, RecursionError) as exc:
            raise TraceError(f"{path}: line {n}: not a JSON object ({type(exc).__name__}); expected one request "
                             "per line, a JSON object") from None
        if not isinstance(obj, _Pairs):
            raise TraceError(f"{path}: line {n}: {_shown(line.strip())}: expected a JSON object (one request)")
        row: dict[str, Any] = {}
        first: dict[str, str] = {}
        for key, value in obj:
            name = _norm(key)
            if name in row and name in _KNOWN:
                raise TraceError(f"{path}: line {n}: column {name} given twice ({_shown(first[name])} and "
                                 f"{_shown(key)}): expected each column once")
            row[name], first[name] = value, key
        yield n, row


def _csv_rows(text: str, path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    reader = csv.reader(io.StringIO(text, newline=""))

    def rows() -> Iterator[tuple[int, list[str]]]:
        while True:
            start = reader.line_num + 1      # the row's first line (a quoted field may span several)
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                why = (f"a field longer than {MAX_FIELD_CHARS} characters" if "field limit" in str(exc)
                       else f"not CSV ({exc})")
                raise TraceError(f"{path}: line {start}: {why}; expected one request per row") from None
            yield start, row

    it = rows()
    _, header = next(it, (0, None))
    if header is None:
        raise TraceError(f"{path}: empty file; expected a header line and one request per row")
    names = [_norm(h) for h in header]
    seen: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in _KNOWN and name in seen:
            raise TraceError(f"{path}: line 1: column {name} given twice (columns {seen[name] + 1} and {i + 1}: "
                             f"{_shown(header[seen[name]])} and {_shown(header[i])}): expected each column once")
        seen.setdefault(name, i)
    yield 0, dict.fromkeys(names)     # the header: which columns there are
    wanted = {name: i for name, i in seen.items() if name in _KNOWN}
    for start, row in it:
        if any(c.strip() for c in row):
            if len(row) != len(names):
                raise TraceError(f"{path}: line {start}: {len(row)} fields; expected {len(names)} as in the header")
            yield start, {name: row[i] for name, i in wanted.items()}


def _number(value: Any) -> float | None:
    """A field as a float, or None when it is not a plain number (text, bool, null, an object...)."""
    kind = type(value)
    if kind is str:      # CSV fields: the common case first
        text = value.strip()
        if len(text) > 64 or not _DECIMAL.fullmatch(text):
            return None
        return float(text)
    if kind is int:
        return float(value)
    if kind is float:
        return value
    return None          # bool, None, a JSON integer of many digits (_Digits), a list, an object


def _tokens(value: Any, path: str, line: int, col: str) -> int:
    if type(value) is str and 0 < len(value) <= 8 and value.isascii() and value.isdigit() and value[0] != "0" \
            and int(value) <= MAX_TOKENS:
        return int(value)          # the common case: plain ASCII digits
    x = _number(value)
    if x is None or not math.isfinite(x) or x != math.floor(x) or not 1 <= x <= MAX_TOKENS:
        raise _err(path, line, col, value, f"an integer from 1 to {MAX_TOKENS} (tokens; {MAX_TOKENS} is the largest "
                   "--max-model-len)")
    return int(x)


def _date(value: Any, path: str, line: int, col: str) -> float:
    m = _DATE.fullmatch(value.strip()) if isinstance(value, str) else None
    if m is None:
        raise _err(path, line, col, value, "a date and time YYYY-MM-DD HH:MM:SS[.fraction][Z|+HH:MM], as in the "
                   "column's first row")
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    tz = _dt.timezone.utc
    if m.group(8) and m.group(8) != "Z":
        off = m.group(8).replace(":", "")
        minutes = int(off[1:3]) * 60 + int(off[3:5])
        if minutes >= 24 * 60:
            raise _err(path, line, col, value, "a time zone offset below 24 hours")
        tz = _dt.timezone(_dt.timedelta(minutes=-minutes if off[0] == "-" else minutes))
    try:
        when = _dt.datetime(y, mo, d, h, mi, s, tzinfo=tz)
    except ValueError as exc:
        raise _err(path, line, col, value, f"a date and time that exists ({exc})") from None
    return when.timestamp() + (float(m.group(7)) if m.group(7) else 0.0)


def _seconds(value: Any, path: str, line: int, col: str, factor: float) -> float:
    x = _number(value)
    if x is None or not math.isfinite(x) or not 0 <= x * factor <= MAX_ARRIVAL_S:
        unit, top = ("milliseconds", MAX_ARRIVAL_S / factor) if factor != 1.0 else ("seconds", MAX_ARRIVAL_S)
        raise _err(path, line, col, value, f"a number of {unit} from 0 to {top:g} (an arrival time)")
    return x * factor


def _is_date(value: Any) -> bool:
    return isinstance(value, str) and re.match(r"\s*\d{4}-\d\d-\d\d", value) is not None


def _columns(first: dict[str, Any], path: str) -> list[list[str]]:
    """The columns present of each field (arrival, prompt, output), in the order of preference."""
    out = []
    for what, options in _FIELDS:
        present = [name for name in options if name in first]
        if not present:
            found = ", ".join(first)
            found = found if len(found) <= 300 else found[:280] + f"... ({len(first)} columns)"
            raise TraceError(f"{path}: no {what} column; expected one of {', '.join(options)} (found {found})")
        out.append(present)
    return out


def parse_trace(text: str, path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, str, np.ndarray]:
    """Arrivals [s] from the first row's, prompt and output tokens of a trace file's ``text`` (read
    from ``path``, which messages name), a description, and the file's line of each request (for
    later messages); raises :class:`TraceError`."""
    text = text.lstrip("\ufeff")
    jsonl = text.lstrip().startswith("{")
    with _field_limit():
        rows = _json_rows(text, path) if jsonl else _csv_rows(text, path)
        if not jsonl:
            a_cols, p_cols, o_cols = _columns(next(rows)[1], path)
        first_line, first = next(rows, (0, None))
        if first is None:
            raise TraceError(f"{path}: no requests; expected one request per row")
        if jsonl:
            a_cols, p_cols, o_cols = _columns(first, path)
        factors = {c: ARRIVAL_COLUMNS[c] for c in a_cols}
        if jsonl and "timestamp" in factors and p_cols[0] == "input_length":
            factors["timestamp"] = 1e-3      # Mooncake's traces: milliseconds
        dates = {c: _is_date(first[c]) for c in a_cols}
        known = a_cols + p_cols + o_cols          # (a list: the first missing one is named, every run alike)
        times = {c: array.array("d") for c in a_cols}
        prompt, out, lines = array.array("q"), array.array("q"), array.array("q")
        prev = -math.inf
        for line, row in _chain(first_line, first, rows):
            if jsonl:
                extra = sorted((set(row) & _KNOWN) - set(known))
                if extra:
                    raise TraceError(f"{path}: line {line}: column {extra[0]} is not in the first row: expected "
                                     "the columns of the first row")
            for col in known:
                if col not in row:
                    raise TraceError(f"{path}: line {line}: no {col}; expected every row to have it")
            for col in a_cols:
                t = (_date(row[col], path, line, col) if dates[col]
                     else _seconds(row[col], path, line, col, factors[col]))
                if col == a_cols[0]:
                    if t < prev:
                        raise _err(path, line, col, row[col], "arrivals in order: this one is earlier than the row "
                                   "before (sort the file by its arrival column)")
                    prev = t
                times[col].append(t)
            for what, cols, into in (("prompt", p_cols, prompt), ("output", o_cols, out)):
                values = [_tokens(row[c], path, line, c) for c in cols]
                for c, v in zip(cols[1:], values[1:]):
                    if v != values[0]:
                        raise TraceError(f"{path}: line {line}: {cols[0]} = {values[0]} and {c} = {v} disagree: "
                                         f"expected one {what} length per request (keep one of the columns)")
                into.append(values[0])
            lines.append(line)
    arrival = np.frombuffer(times[a_cols[0]], dtype=np.float64)
    arrival = arrival - arrival[0]
    for col in a_cols[1:]:
        other = np.frombuffer(times[col], dtype=np.float64)
        other = other - other[0]
        bad = np.abs(other - arrival) > _AGREE_S + 1e-9 * np.maximum(np.abs(other), np.abs(arrival))
        if bad.any():
            i = int(np.argmax(bad))
            raise TraceError(f"{path}: line {lines[i]}: {a_cols[0]} and {col} disagree ({arrival[i]:.9g} s and "
                             f"{other[i]:.9g} s after the first row): expected one arrival time per request "
                             "(keep one column)")
    used = ", ".join(c[0] for c in (a_cols, p_cols, o_cols))
    return (arrival, np.frombuffer(prompt, dtype=np.int64).copy(), np.frombuffer(out, dtype=np.int64).copy(),
            f"trace {path} ({used})", np.frombuffer(lines, dtype=np.int64).copy())


def _chain(line: int, row: dict[str, Any], rest: Iterator[tuple[int, dict[str, Any]]]
           ) -> Iterator[tuple[int, dict[str, Any]]]:
    yield line, row
    yield from rest
