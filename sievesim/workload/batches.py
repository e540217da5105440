"""Forming decode batches from recorded routing.

Modes (``mode=``):

``distinct`` (default)
    B different requests, each entering at an independent random position of its own sequence
    (in a continuous batch, requests are at different points of their lives), then advancing one
    token per step, so a request's consecutive steps follow its real sequence. A request that
    reaches its end is replaced by a request not currently in the batch, starting at its first
    token (continuous batching). Needs at least B requests unless ``allow_reuse=True`` (then
    slots may share a request, at different positions).
``random``
    B tokens drawn without replacement from the pool of tokens, fresh every step.
``consecutive``
    B successive rows of the pool in file order (a random start, then the next B rows each step,
    wrapping around).
``recorded``
    the forward passes as the recorder saw them (SGLang dumps with ``pass_id``); the batch size
    is whatever each pass had.

The pool is the decode tokens of the trace by default, or its prompt tokens for prefill-only
traces (``phase="auto"``). Prompt tokens skip each prompt's first token (position 0, BOS), whose
routing is the same in every prompt.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, TraceError, field_error
from .routing import RoutingSource, RoutingStep, RoutingStream, counts_from_ids
from .traces import PassCounts, TraceData, load_routing

__all__ = ["TraceSource", "PassCountSource", "open_source", "BATCH_MODES"]

BATCH_MODES = ("distinct", "random", "consecutive", "recorded")


class TraceSource(RoutingSource):
    """A :class:`RoutingSource` over a per-token :class:`TraceData`.

    Args:
        trace: the trace.
        phase: ``"auto"`` (decode tokens if any, else prompt tokens), ``"decode"``, ``"prefill"``.
    """

    def __init__(self, trace: TraceData, phase: str = "auto") -> None:
        if phase not in ("auto", "decode", "prefill"):
            raise field_error("phase", phase, "'auto', 'decode' or 'prefill'")
        ph = trace.default_phase() if phase == "auto" else (1 if phase == "decode" else 0)
        self.trace = trace
        self.phase = ph
        self.name = trace.model or Path(trace.source).stem
        self.num_experts = trace.num_experts
        self.top_k = trace.top_k
        self.num_layers = trace.num_layers
        mask = trace.phase == ph
        if ph == 0:
            mask &= trace.pos != 0  # drop BOS: same routing in every prompt
        rows = np.flatnonzero(mask)
        if rows.size == 0:
            raise TraceError(f"{trace.source}: phase: no {'decode' if ph else 'prefill'} tokens in the trace")
        self.pool = rows  # file order
        order = np.lexsort((trace.pos[rows], trace.seq_id[rows]))
        srt = rows[order]
        seq = trace.seq_id[srt]
        starts = np.flatnonzero(np.r_[True, seq[1:] != seq[:-1]])
        self.seq_rows = srt  # rows of request r: seq_rows[seq_ptr[r]:seq_ptr[r+1]]
        self.seq_ptr = np.r_[starts, srt.size].astype(np.int64)
        self.seq_ids = seq[starts]
        self.num_requests = int(starts.size)

    def modes(self) -> tuple[str, ...]:
        return BATCH_MODES if self.trace.pass_id is not None else BATCH_MODES[:3]

    def seq_lengths(self) -> np.ndarray:
        """(S,) tokens of each request in the pool."""
        return np.diff(self.seq_ptr)

    def stream(self, batch_size: int, *, seed: int = 0, mode: str = "distinct",
               allow_reuse: bool = False, **options: object) -> RoutingStream:
        """Open a batch stream. See the module docstring for ``mode``."""
        if options:
            raise ConfigError(f"unknown stream options {sorted(options)}")
        if mode not in self.modes():
            raise field_error("mode", mode, " / ".join(self.modes()))
        if mode != "recorded" and (not isinstance(batch_size, (int, np.integer)) or batch_size < 1):
            raise field_error("batch_size", batch_size, "an integer >= 1")
        rng = np.random.default_rng(seed)
        if mode == "distinct":
            return _DistinctStream(self, int(batch_size), rng, allow_reuse)
        if mode == "random":
            return _RandomStream(self, int(batch_size), rng, allow_reuse)
        if mode == "consecutive":
            return _ConsecutiveStream(self, int(batch_size), rng, allow_reuse)
        return _RecordedStream(self)

    def _step_from_rows(self, rows: np.ndarray) -> RoutingStep:
        ids = self.trace.topk_ids[rows].astype(np.int32)
        return RoutingStep(counts=counts_from_ids(ids, self.num_experts), topk_ids=ids,
                           request_ids=self.trace.seq_id[rows], positions=self.trace.pos[rows])


def _too_few(src: TraceSource, what: str, have: int, need: int) -> TraceError:
    return TraceError(
        f"{src.trace.source}: seq_id: the trace has {have} {what} "
        f"({'decode' if src.phase else 'prompt'} tokens), batch size {need} needs {need}; "
        f"use a smaller batch, another trace, or allow reuse (allow_reuse=True / --allow-reuse)")


class _DistinctStream(RoutingStream):
    def __init__(self, src: TraceSource, b: int, rng: np.random.Generator, allow_reuse: bool) -> None:
        s = src.num_requests
        if b > s and not allow_reuse:
            raise _too_few(src, "requests", s, b)
        self.src, self.batch_size, self.rng = src, b, rng
        if b <= s:
            req = rng.choice(s, size=b, replace=False)
        else:
            req = np.concatenate([rng.permutation(s) for _ in range(-(-b // s))])[:b]
        lengths = src.seq_lengths()
        self.req = req.astype(np.int64)
        self.off = (rng.random(b) * lengths[self.req]).astype(np.int64)
        self.lengths = lengths

    def step(self) -> RoutingStep:
        src = self.src
        rows = src.seq_rows[src.seq_ptr[self.req] + self.off]
        out = src._step_from_rows(rows)
        self.off += 1
        ended = np.flatnonzero(self.off >= self.lengths[self.req])
        if ended.size:
            in_batch = np.zeros(src.num_requests, dtype=bool)
            in_batch[self.req] = True
            for slot in ended:  # few per step
                free = np.flatnonzero(~in_batch)  # the finished request is still marked
                new = int(free[self.rng.integers(free.size)]) if free.size else int(self.req[slot])
                in_batch[self.req[slot]] = False
                self.req[slot] = new
                self.off[slot] = 0
                in_batch[new] = True
        return out


class _RandomStream(RoutingStream):
    def __init__(self, src: TraceSource, b: int, rng: np.random.Generator, allow_reuse: bool) -> None:
        if b > src.pool.size and not allow_reuse:
            raise _too_few(src, "tokens", int(src.pool.size), b)
        self.src, self.batch_size, self.rng = src, b, rng
        self.replace = b > src.pool.size

    def step(self) -> RoutingStep:
        rows = self.src.pool[self.rng.choice(self.src.pool.size, size=self.batch_size, replace=self.replace)]
        return self.src._step_from_rows(rows)


class _ConsecutiveStream(RoutingStream):
    def __init__(self, src: TraceSource, b: int, rng: np.random.Generator, allow_reuse: bool) -> None:
        if b > src.pool.size and not allow_reuse:
            raise _too_few(src, "tokens", int(src.pool.size), b)
        self.src, self.batch_size = src, b
        self.start = int(rng.integers(src.pool.size))

    def step(self) -> RoutingStep:
        n = self.src.pool.size
        idx = (self.start + np.arange(self.batch_size)) % n
        self.start = (self.start + self.batch_size) % n
        return self.src._step_from_rows(self.src.pool[idx])


class _RecordedStream(RoutingStream):
    def __init__(self, src: TraceSource) -> None:
        self.src = src
        pid = src.trace.pass_id[src.pool]  # type: ignore[index]
        order = np.argsort(pid, kind="stable")
        rows = src.pool[order]
        p = pid[order]
        starts = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
        self.groups = np.split(rows, starts[1:])
        self.i = 0
        self.batch_size = -1

    def step(self) -> RoutingStep:
        rows = self.groups[self.i % len(self.groups)]
        self.i += 1
        return self.src._step_from_rows(rows)


class PassCountSource(RoutingSource):
    """Replays per-pass counts (SGLang ``per_pass``/``stat`` dumps); only mode ``recorded``.

    ``stream(batch_size)`` yields, in recorded order, the passes whose token count equals
    ``batch_size`` (``batch_size=None``: every pass).
    """

    def __init__(self, pc: PassCounts) -> None:
        self.pc = pc
        self.name = pc.model or Path(pc.source).stem
        self.num_experts = pc.num_experts
        self.top_k = pc.top_k
        self.num_layers = pc.num_layers

    def modes(self) -> tuple[str, ...]:
        return ("recorded",)

    def stream(self, batch_size: int | None = None, *, seed: int = 0, mode: str = "recorded",
               **options: object) -> RoutingStream:
        if mode != "recorded":
            raise field_error("mode", mode, f"'recorded' ({self.pc.source} holds per-pass counts only)")
        idx = np.arange(self.pc.counts.shape[0])
        if batch_size is not None:
            idx = idx[self.pc.batch_sizes() == batch_size]
            if idx.size == 0:
                raise TraceError(f"{self.pc.source}: pass_counts: no recorded pass has {batch_size} tokens")
        return _PassStream(self.pc, idx)


class _PassStream(RoutingStream):
    def __init__(self, pc: PassCounts, idx: np.ndarray) -> None:
        self.pc, self.idx, self.i = pc, idx, 0
        self.batch_size = -1

    def step(self) -> RoutingStep:
        c = self.pc.counts[self.idx[self.i % self.idx.size]]
        self.i += 1
        return RoutingStep(counts=c)


def open_source(spec: str, *, phase: str = "auto", num_experts: int | None = None,
                top_k: int | None = None, **synthetic: Any) -> RoutingSource:
    """A :class:`RoutingSource` from a CLI-style spec.

    ``spec`` is a trace file (``.npz``), an SGLang dump (``.pt`` or converted ``.npz``), or
    ``synthetic:MODEL`` (a preset of :mod:`sievesim.workload.synthetic`; ``top_k`` replaces its
    top-k), or ``synthetic:like-MODEL`` (that preset's shape with ``num_experts``, ``top_k`` and
    ``num_layers`` of another model). A trace that records a top-k other than ``top_k`` is refused.
    """
    if spec.startswith("synthetic:"):
        from .synthetic import SyntheticSource  # noqa: PLC0415

        if top_k is not None:  # replaces the preset's top-k
            synthetic = {**synthetic, "top_k": top_k}
        if spec.startswith("synthetic:like-") and num_experts is not None:
            synthetic = {**synthetic, "num_experts": num_experts}
        return SyntheticSource.from_preset(spec.split(":", 1)[1], **synthetic)
    routing = load_routing(spec, num_experts=num_experts, top_k=top_k)
    if isinstance(routing, TraceData):
        return TraceSource(routing, phase=phase)
    return PassCountSource(routing)
