"""Synthetic request traces for validation and benchmarks: streaming, random, hot-row."""
from __future__ import annotations

import numpy as np

from .._validate import check_int, check_memory, parse_int
from ..errors import field_error
from .spec import DRAMConfig
from .traces import RequestTrace

__all__ = ["TRACE_KINDS", "make_trace", "parse_synthetic"]

TRACE_KINDS = ("stream", "random", "hotrow")


def make_trace(kind: str, n: int, config: DRAMConfig, *, seed: int = 0, write_fraction: float = 0.2,
               footprint_bytes: int | None = None) -> RequestTrace:
    """``n`` requests of one kind, addresses below the capacity of ``config``.

    ``stream``: consecutive transactions (reads and writes interleaved by ``write_fraction``);
    ``random``: uniform over the footprint (default: the whole capacity);
    ``hotrow``: 90 % of requests to 16 hot rows' worth of lines, 10 % uniform.
    """
    if kind not in TRACE_KINDS:
        raise field_error("trace kind", kind, f"one of {list(TRACE_KINDS)}")
    check_int("requests", n, "requests")
    # the arrays here, and the text of `dram gen-trace` (peak RSS 104 MB higher for 1e6 requests than for 10)
    check_memory(n * 128, f"a synthetic trace of {n:,} requests", "requests", n)
    if not 0.0 <= write_fraction <= 1.0:
        raise field_error("write_fraction", write_fraction, "a fraction in [0, 1]")
    rng = np.random.default_rng(seed)
    tx = config.tx_bytes
    lines = (footprint_bytes or config.capacity_bytes) // tx
    lines = min(lines, config.capacity_bytes // tx)
    if kind == "stream":
        idx = np.arange(n, dtype=np.int64) % lines
    elif kind == "random":
        idx = rng.integers(0, lines, n, dtype=np.int64)
    else:
        row_lines = config.org["column"] // config.standard.prefetch
        hot = rng.integers(0, lines // row_lines, 16, dtype=np.int64) * row_lines
        pick = hot[rng.integers(0, 16, n)] + rng.integers(0, row_lines, n)
        idx = np.where(rng.random(n) < 0.9, pick, rng.integers(0, lines, n, dtype=np.int64)) % lines
    is_write = rng.random(n) < write_fraction
    return RequestTrace(is_write=is_write, arrival=np.zeros(n, dtype=np.int64), addresses=idx * tx,
                        source=f"synthetic:{kind}:{n}")


def parse_synthetic(spec: str, config: DRAMConfig, seed: int = 0) -> RequestTrace:
    """``synthetic:KIND[:N]`` -> a trace (N defaults to 100000)."""
    parts = spec.split(":")
    if len(parts) not in (2, 3) or parts[0] != "synthetic":
        raise field_error("TRACE", spec, "a trace file or synthetic:KIND[:N] with KIND in " + "|".join(TRACE_KINDS))
    n = 100_000
    if len(parts) == 3:
        n = parse_int("TRACE synthetic:KIND:N, N", parts[2], "requests")
    return make_trace(parts[1], n, config, seed=seed)
