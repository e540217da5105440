"""Requests that arrive: Poisson or gamma (bursty) arrivals with lengths from a preset or fixed, or a
request trace file (CSV or JSON lines).

A workload is a :class:`Requests`: arrival times [s] (non-decreasing, from 0 or the trace's own
origin), prompt tokens and output tokens per request.

Trace files: one request per row (CSV with a header line) or per line (JSON lines, one object
each). The columns are recognised by name, case-insensitive, with spaces, dashes and camelCase
read as underscores (``ContextTokens`` = ``context_tokens``):

==================  =======================================================================
arrival [s]         ``arrival_s``, ``arrival_time``, ``arrival_time_s``, ``arrived_at`` (Vidur),
                    ``timestamp`` (BurstGPT: seconds); ``arrival_ms``, ``timestamp_ms``
                    [ms]; ``timestamp`` holding a date and time (Azure LLM inference traces,
                    ``2023-11-16 18:15:46.6805900``) is read as seconds from the first row;
                    in JSON lines with ``input_length`` (Mooncake), ``timestamp`` is in ms
prompt tokens       ``prompt_tokens``, ``prompt_len``, ``input_tokens``, ``input_length``
                    (Mooncake), ``num_prefill_tokens`` (Vidur), ``context_tokens`` (Azure),
                    ``request_tokens`` (BurstGPT)
output tokens       ``output_tokens``, ``output_len``, ``output_length`` (Mooncake),
                    ``num_decode_tokens`` (Vidur), ``generated_tokens`` (Azure),
                    ``response_tokens`` (BurstGPT)
==================  =======================================================================

Arrivals are shifted so that the first request arrives at 0. A row out of order, a missing or
non-numeric field, or a length below 1 is an error naming the line (:class:`~sievesim.errors.TraceError`).
"""
from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._inputs import read_text
from ..errors import TraceError, field_error

__all__ = ["Requests", "poisson_requests", "MIN_RATE", "MAX_RATE", "read_trace", "ARRIVAL_COLUMNS", "PROMPT_COLUMNS", "OUTPUT_COLUMNS"]

#: The highest arrival rate accepted [requests/s]; far above what one machine serves.
MAX_RATE = 1e9
#: The lowest [requests/s] (one request in about 17 minutes): slower arrivals put the clock where a
#: millisecond iteration no longer moves it in double precision.
MIN_RATE = 1e-3

#: Accepted column names (normalised) and the factor to seconds.
ARRIVAL_COLUMNS = {"arrival_s": 1.0, "arrival_time": 1.0, "arrival_time_s": 1.0, "arrived_at": 1.0,
                   "timestamp": 1.0, "arrival_ms": 1e-3, "timestamp_ms": 1e-3}
PROMPT_COLUMNS = ("prompt_tokens", "prompt_len", "input_tokens", "input_length", "num_prefill_tokens",
                  "context_tokens", "request_tokens")
OUTPUT_COLUMNS = ("output_tokens", "output_len", "output_length", "num_decode_tokens", "generated_tokens",
                  "response_tokens")


@dataclass(frozen=True)
class Requests:
    """A workload: arrival times [s], prompt and output tokens of each request (index = request id)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    description: str = ""

    def __len__(self) -> int:
        return int(self.arrival_s.size)

    def head(self, n: int) -> "Requests":
        """The first ``n`` requests."""
        return Requests(self.arrival_s[:n], self.prompt_tokens[:n], self.output_tokens[:n], self.description)


def _lengths(n: int, rng: np.random.Generator, lengths: str | None, prompt_tokens: int | None,
             output_tokens: int | None) -> tuple[np.ndarray, np.ndarray]:
    from ..workload.lengths import get_length_preset

    preset = get_length_preset(lengths) if lengths else None
    if preset is None and (prompt_tokens is None or output_tokens is None):
        raise field_error("lengths", lengths, "a length preset (hh-rlhf, math-500) or fixed prompt and output tokens")
    for name, v in (("prompt_tokens", prompt_tokens), ("output_tokens", output_tokens)):
        if v is not None and (not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1):
            raise field_error(name, v, "an integer >= 1 (tokens)")
    p_rng, o_rng = rng.spawn(2)
    prompt = (np.full(n, int(prompt_tokens), dtype=np.int64) if prompt_tokens is not None
              else preset.sample_prompts(n, p_rng))
    out = (np.full(n, int(output_tokens), dtype=np.int64) if output_tokens is not None
           else preset.sample_outputs(n, o_rng))
    return prompt, out


def poisson_requests(rate: float, n: int, *, seed: int = 0, cv: float = 1.0, lengths: str | None = "hh-rlhf",
                     prompt_tokens: int | None = None, output_tokens: int | None = None) -> Requests:
    """``n`` requests arriving at ``rate`` requests/s: Poisson (``cv`` = 1) or gamma inter-arrival
    times with coefficient of variation ``cv`` (> 1 bursty, < 1 smoother; shape 1/cv^2). The first
    arrives at its first inter-arrival time. Prompt and output lengths from the preset ``lengths``
    unless fixed by ``prompt_tokens`` / ``output_tokens``."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float, np.floating, np.integer)) \
            or not np.isfinite(rate) or not MIN_RATE <= rate <= MAX_RATE:
        raise field_error("rate", rate, f"requests per second from {MIN_RATE:g} to {MAX_RATE:g}")
    if isinstance(cv, bool) or not isinstance(cv, (int, float, np.floating, np.integer)) \
            or not np.isfinite(cv) or not 0.01 <= cv <= 100:
        raise field_error("cv", cv, "a coefficient of variation from 0.01 to 100 (1 = Poisson)")
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or not 1 <= n <= 10_000_000:
        raise field_error("requests", n, "an integer from 1 to 10000000")
    rng = np.random.default_rng([int(seed), 24])
    a_rng, l_rng = rng.spawn(2)
    if cv == 1.0:
        gaps = a_rng.exponential(1.0 / rate, n)
    else:
        shape = 1.0 / cv ** 2
        gaps = a_rng.gamma(shape, 1.0 / (rate * shape), n)
    prompt, out = _lengths(n, l_rng, lengths, prompt_tokens, output_tokens)
    kind = "poisson" if cv == 1.0 else f"gamma cv={cv:g}"
    what = lengths if prompt_tokens is None or output_tokens is None else f"{prompt_tokens}:{output_tokens}"
    return Requests(np.cumsum(gaps), prompt, out, f"{kind} {rate:g}/s, lengths {what}")


def _norm(name: str) -> str:
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", str(name).strip())
    return re.sub(r"[\s\-]+", "_", name).lower()


def _rows(text: str, path: str) -> tuple[list[tuple[int, dict[str, Any]]], bool]:
    """(line number, row) pairs and whether the file is JSON lines."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        rows = []
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise TraceError(f"{path}: line {i}: not a JSON object ({exc.msg}); expected one request per line") from None
            if not isinstance(obj, dict):
                raise TraceError(f"{path}: line {i}: {line.strip()[:60]!r}: expected a JSON object")
            rows.append((i, {_norm(k): v for k, v in obj.items()}))
        return rows, True
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        raise TraceError(f"{path}: empty file; expected a header line and one request per row") from None
    names = [_norm(h) for h in header]
    rows = []
    for row in reader:
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(names):
            raise TraceError(f"{path}: line {reader.line_num}: {len(row)} fields; expected {len(names)} as in the header")
        rows.append((reader.line_num, dict(zip(names, row))))
    return rows, False


def _pick(keys: Any, options: Any, path: str, what: str) -> str:
    for name in options:
        if name in keys:
            return name
    raise TraceError(f"{path}: no {what} column; expected one of {', '.join(options)} (found {', '.join(keys)})")


def _number(value: Any, path: str, line: int, col: str, *, integer: bool) -> float:
    try:
        x = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        x = float("nan")
    if not np.isfinite(x) or (integer and (x != int(x) or x < 1)) or (not integer and x < 0):
        want = "an integer >= 1 (tokens)" if integer else "a number of seconds >= 0"
        raise TraceError(f"{path}: line {line}: {col} = {value!r}: expected {want}")
    return x


def _time(value: Any, path: str, line: int, col: str, factor: float) -> float:
    if isinstance(value, str) and re.match(r"^\d{4}-\d\d-\d\d[ T]", value.strip()):
        text = value.strip().replace("T", " ")
        m = re.match(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(\.\d+)?", text)
        if not m:
            raise TraceError(f"{path}: line {line}: {col} = {value!r}: expected a time YYYY-MM-DD HH:MM:SS[.fraction]")
        base = _dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=_dt.timezone.utc)
        return base.timestamp() + (float(m.group(2)) if m.group(2) else 0.0)
    return _number(value, path, line, col, integer=False) * factor


def read_trace(path: str) -> Requests:
    """The requests of a trace file (see the module docstring for the formats and column names)."""
    path = str(path)
    rows, jsonl = _rows(read_text(path, "request trace").lstrip("\ufeff"), path)
    if not rows:
        raise TraceError(f"{path}: no requests; expected one request per row")
    keys = list(rows[0][1])
    a_col = _pick(keys, ARRIVAL_COLUMNS, path, "arrival time")
    p_col = _pick(keys, PROMPT_COLUMNS, path, "prompt tokens")
    o_col = _pick(keys, OUTPUT_COLUMNS, path, "output tokens")
    factor = ARRIVAL_COLUMNS[a_col]
    if jsonl and a_col == "timestamp" and p_col == "input_length":
        factor = 1e-3      # Mooncake's traces: milliseconds
    arr, prompt, out = [], [], []
    prev = -np.inf
    for line, row in rows:
        for col in (a_col, p_col, o_col):
            if col not in row:
                raise TraceError(f"{path}: line {line}: no {col}; expected every row to have it")
        t = _time(row[a_col], path, line, a_col, factor)
        if t < prev:
            raise TraceError(f"{path}: line {line}: {a_col} = {row[a_col]!r} is earlier than the row before; "
                             "expected arrivals in order")
        prev = t
        arr.append(t)
        prompt.append(int(_number(row[p_col], path, line, p_col, integer=True)))
        out.append(int(_number(row[o_col], path, line, o_col, integer=True)))
    a = np.asarray(arr, dtype=np.float64)
    return Requests(a - a[0], np.asarray(prompt, dtype=np.int64), np.asarray(out, dtype=np.int64),
                    f"trace {path} ({a_col}, {p_col}, {o_col})")
