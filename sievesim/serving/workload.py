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
non-numeric field, a length outside 1 to 2^24 tokens, a date that does not exist, a column given
twice or two names of one field that disagree is an error naming the file, the line and the column
(:class:`~sievesim.errors.TraceError`; the rules in :mod:`sievesim.serving.tracefile`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._inputs import read_text
from ..errors import field_error
from .tracefile import (ARRIVAL_COLUMNS, MAX_ARRIVAL_S, MAX_TOKENS, OUTPUT_COLUMNS, PROMPT_COLUMNS,  # noqa: F401
                        parse_trace)

__all__ = ["Requests", "poisson_requests", "MIN_RATE", "MAX_RATE", "MAX_REQUESTS", "read_trace", "ARRIVAL_COLUMNS", "PROMPT_COLUMNS", "OUTPUT_COLUMNS"]

#: The highest arrival rate accepted [requests/s]; far above what one machine serves.
MAX_RATE = 1e9
#: The lowest [requests/s] (one request in about 17 minutes): slower arrivals put the clock where a
#: millisecond iteration no longer moves it in double precision.
MIN_RATE = 1e-3
#: The most requests one workload holds (``--requests``; ``rate x --arrival-window``).
MAX_REQUESTS = 10_000_000


@dataclass(frozen=True)
class Requests:
    """A workload: arrival times [s], prompt and output tokens of each request (index = request id).

    Checked when made (a :class:`~sievesim.errors.ConfigError` naming the field and the first bad
    entry): one-dimensional arrays of one length, at least one request; arrivals finite, from 0 to
    1e12 s and in order; lengths integers from 1 to 2^24 tokens (a float array is refused even when
    its values are whole: it is a sign of lengths computed, not counted).

    ``source`` and ``lines``, set by :func:`read_trace`: the trace file and the line of each request
    in it, which later messages about a request name (``check_requests``)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    description: str = ""
    #: The rate the arrivals were drawn at [requests/s] (:func:`poisson_requests`); None for a trace.
    rate: float | None = None
    source: str | None = field(default=None, repr=False, compare=False)
    lines: np.ndarray | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        from .._validate import type_error

        arrays = {}
        for name in ("arrival_s", "prompt_tokens", "output_tokens"):
            value = getattr(self, name)
            try:
                a = np.asarray(value)
            except (TypeError, ValueError):
                a = np.asarray(None)
            if a.ndim != 1 or a.dtype.kind not in ("iuf" if name == "arrival_s" else "iu"):
                want = "real numbers" if name == "arrival_s" else "integers"
                raise TypeError(f"{str(type_error(name, value, '')).split(': expected')[0]}: expected a "
                                f"one-dimensional array of {want}, got a {a.ndim}-dimensional {a.dtype} array")
            arrays[name] = a
        if not isinstance(self.description, str):
            raise type_error("description", self.description, "a string")
        if self.rate is not None and (isinstance(self.rate, bool) or not isinstance(self.rate, (int, float, np.number))
                                      or not MIN_RATE <= self.rate <= MAX_RATE):
            raise field_error("rate", self.rate, f"None or requests per second from {MIN_RATE:g} to {MAX_RATE:g}")
        arr, prompt, out = arrays["arrival_s"], arrays["prompt_tokens"], arrays["output_tokens"]
        if not arr.size == prompt.size == out.size >= 1:
            raise field_error("requests", (arr.size, prompt.size, out.size), "arrival_s, prompt_tokens and "
                              "output_tokens of one length, at least 1")
        arr = arr.astype(np.float64, copy=False)
        for name, bad, want in (
                ("arrival_s", ~np.isfinite(arr) | (arr < 0) | (arr > MAX_ARRIVAL_S),
                 f"a finite arrival time from 0 to {MAX_ARRIVAL_S:g} s"),
                ("arrival_s", np.concatenate([[False], np.diff(arr) < 0]) if arr.size > 1 else arr < 0,
                 "arrivals in order (not earlier than the request before)"),
                ("prompt_tokens", (prompt < 1) | (prompt > MAX_TOKENS), f"an integer from 1 to {MAX_TOKENS} (tokens)"),
                ("output_tokens", (out < 1) | (out > MAX_TOKENS), f"an integer from 1 to {MAX_TOKENS} (tokens)")):
            if bad.any():
                i = int(np.argmax(bad))
                raise field_error(f"{name}[{i}]", arrays[name][i].item(), want)
        if self.source is not None and not isinstance(self.source, str):
            raise type_error("source", self.source, "a file path (str) or None")
        if self.lines is not None:
            lines = np.asarray(self.lines)
            if lines.shape != arr.shape or lines.dtype.kind not in "iu":
                raise type_error("lines", self.lines, f"None or {arr.size} integers (the file line of each request)")
            object.__setattr__(self, "lines", lines.astype(np.int64, copy=False))
        object.__setattr__(self, "arrival_s", arr)
        object.__setattr__(self, "prompt_tokens", prompt.astype(np.int64, copy=False))
        object.__setattr__(self, "output_tokens", out.astype(np.int64, copy=False))

    def __len__(self) -> int:
        return int(self.arrival_s.size)

    def head(self, n: int) -> "Requests":
        """The first ``n`` requests."""
        return Requests(self.arrival_s[:n], self.prompt_tokens[:n], self.output_tokens[:n], self.description,
                        self.rate, source=self.source, lines=None if self.lines is None else self.lines[:n])

    def where(self, i: int) -> str:
        """Request ``i`` as a message names it: its file and line when it came from a trace file,
        else its index and row."""
        if self.source is not None and self.lines is not None:
            return f"{self.source}: line {int(self.lines[i])}: request {i}"
        return f"request {i} (row {i + 1})"


def _lengths(n: int, rng: np.random.Generator, lengths: str | None, prompt_tokens: int | None,
             output_tokens: int | None) -> tuple[np.ndarray, np.ndarray]:
    from ..workload.lengths import get_length_preset

    preset = get_length_preset(lengths) if lengths else None
    if preset is None and (prompt_tokens is None or output_tokens is None):
        raise field_error("lengths", lengths, "a length preset (hh-rlhf, math-500) or fixed prompt and output tokens")
    for name, v in (("prompt_tokens", prompt_tokens), ("output_tokens", output_tokens)):
        if v is not None and (not isinstance(v, (int, np.integer)) or isinstance(v, bool) or not 1 <= v <= MAX_TOKENS):
            raise field_error(name, v, f"an integer from 1 to {MAX_TOKENS} (tokens)")
    p_rng, o_rng = rng.spawn(2)
    prompt = (np.full(n, int(prompt_tokens), dtype=np.int64) if prompt_tokens is not None
              else preset.sample_prompts(n, p_rng))
    out = (np.full(n, int(output_tokens), dtype=np.int64) if output_tokens is not None
           else preset.sample_outputs(n, o_rng))
    return prompt, out


def _number_in(value: Any, lo: float, hi: float) -> bool:
    """A real number (not a bool) from ``lo`` to ``hi``; an int too large for a float is not."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        return False
    try:
        return lo <= float(value) <= hi
    except OverflowError:
        return False


def poisson_requests(rate: float, n: int, *, seed: int = 0, cv: float = 1.0, lengths: str | None = "hh-rlhf",
                     prompt_tokens: int | None = None, output_tokens: int | None = None) -> Requests:
    """``n`` requests arriving at ``rate`` requests/s: Poisson (``cv`` = 1) or gamma inter-arrival
    times with coefficient of variation ``cv`` (> 1 bursty, < 1 smoother; shape 1/cv^2). The first
    arrives at its first inter-arrival time. Prompt and output lengths from the preset ``lengths``
    unless fixed by ``prompt_tokens`` / ``output_tokens``."""
    if not _number_in(rate, MIN_RATE, MAX_RATE):
        raise field_error("rate", rate, f"requests per second from {MIN_RATE:g} to {MAX_RATE:g}")
    if not _number_in(cv, 0.01, 100):
        raise field_error("cv", cv, "a coefficient of variation from 0.01 to 100 (1 = Poisson)")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or not 0 <= seed < 2**63:
        raise field_error("seed", seed, "an integer from 0 to 2^63 - 1")
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or not 1 <= n <= MAX_REQUESTS:
        raise field_error("requests", n, f"an integer from 1 to {MAX_REQUESTS}")
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
    return Requests(np.cumsum(gaps), prompt, out, f"{kind} {rate:g}/s, lengths {what}", float(rate))


def read_trace(path: str) -> Requests:
    """The requests of a trace file (see the module docstring for the formats and column names, and
    :mod:`sievesim.serving.tracefile` for what is refused)."""
    from .._inputs import show_path

    path = str(path)
    shown = show_path(path)
    arrival, prompt, out, description, lines = parse_trace(read_text(path, "request trace", "trace"), shown)
    return Requests(arrival, prompt, out, description, source=shown, lines=lines)
