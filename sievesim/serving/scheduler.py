"""Continuous batching with chunked prefill, KV blocks and preemption by recompute.

The loop (:func:`run_schedule`) follows vLLM's scheduler (v1, chunked prefill on): every request
has ``tokens = prompt + generated`` and ``computed`` tokens in the KV cache; an iteration computes
up to ``tokens - computed`` tokens of each scheduled request within a token budget, and a request
whose computed tokens reach its tokens emits one output token at the end of the iteration. So a
decode request takes one token per iteration, and a prompt is computed in chunks beside them.

Per iteration, at time t:

1. requests that have arrived by t join the waiting queue (first come, first served);
2. the running requests, oldest first, get their tokens (decode: 1; an unfinished prompt: the rest
   of it, up to the budget left). A request that needs a KV block its GPU does not have preempts
   the newest running request on that GPU (recompute: its blocks are freed and it goes back to the
   front of the queue; it keeps its output so far and computes prompt + output again); when the
   newest is itself, it is preempted;
3. if nothing was preempted, waiting requests are admitted in order while the budget lasts, the
   running set is below ``max_batch`` and the GPU with the most free blocks (data-parallel
   attention: a request's KV and attention live on one GPU) has the blocks for its first chunk;
4. the iteration takes the step time of its batch (:class:`~sievesim.serving.pricing.IterationPricer`);
   tokens are emitted at its end, and a request that has all its output leaves and frees its blocks.

Times are in seconds, lengths in tokens.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

__all__ = ["SchedulerConfig", "ScheduleLog", "run_schedule", "priced"]


@dataclass(frozen=True)
class SchedulerConfig:
    """The scheduler's limits.

    Attributes:
        max_batch: running requests at most (vLLM ``max_num_seqs``; default 256).
        token_budget: tokens per iteration at most, decode and prefill together (vLLM
            ``max_num_batched_tokens``; default 2048).
        horizon_s: stop at this simulated time; requests not finished by then are reported
            unfinished, requests arriving later are not counted (``None``: run until every request
            has finished).
    """

    max_batch: int = 256
    token_budget: int = 2048
    horizon_s: float | None = None


@dataclass
class ScheduleLog:
    """What the loop did: per request and per iteration.

    Per request (arrays indexed by request id): ``first_token_s``, ``finish_s`` (NaN if not
    reached), ``scheduled_s`` (first admission), ``generated`` tokens, ``preemptions``.
    Per iteration (lists): start time, duration, decode requests, prefill tokens, requests
    waiting and running at the start, KV blocks in use on the fullest GPU, energy [J] (NaN
    without an energy model), the memo's and the exact time and energy of sampled iterations.
    Energy (:meth:`add_energy`): ``energy_parts_j``, the iterations' energy by resource
    (:data:`~sievesim.system.energy.RESOURCE_KINDS`; None without an energy model), and
    ``request_energy_j``, each request's share of the iterations it took part in, by the tokens
    it computed in each [J].
    """

    first_token_s: np.ndarray
    finish_s: np.ndarray
    scheduled_s: np.ndarray
    generated: np.ndarray
    preemptions: np.ndarray
    end_s: float = 0.0
    it_start: list[float] = field(default_factory=list)
    it_time: list[float] = field(default_factory=list)
    it_decode: list[int] = field(default_factory=list)
    it_prefill: list[int] = field(default_factory=list)
    it_waiting: list[int] = field(default_factory=list)
    it_running: list[int] = field(default_factory=list)
    it_kv_blocks: list[int] = field(default_factory=list)
    sample_memo: list[float] = field(default_factory=list)
    sample_exact: list[float] = field(default_factory=list)
    it_energy_j: list[float] = field(default_factory=list)
    sample_memo_energy: list[float] = field(default_factory=list)
    sample_exact_energy: list[float] = field(default_factory=list)
    energy_parts_j: np.ndarray | None = None
    request_energy_j: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def add_energy(self, parts: np.ndarray | None, ids: np.ndarray, ntok: np.ndarray) -> None:
        """Log one iteration's energy ``parts`` [J by resource; None: no energy model] and share it
        among the requests ``ids`` by the tokens ``ntok`` each computed in it."""
        if parts is None:
            self.it_energy_j.append(math.nan)
            return
        total = float(parts.sum())
        self.it_energy_j.append(total)
        self.energy_parts_j = parts.copy() if self.energy_parts_j is None else self.energy_parts_j + parts
        np.add.at(self.request_energy_j, ids, total * ntok / float(ntok.sum()))

    def sample(self, priced: Any, exact: Any) -> None:
        """Log an iteration priced both ways: ``priced`` and ``exact`` are (time [s], energy parts [J])."""
        self.sample_memo.append(priced[0])
        self.sample_exact.append(exact[0])
        if priced[1] is not None and exact[1] is not None:
            self.sample_memo_energy.append(float(priced[1].sum()))
            self.sample_exact_energy.append(float(exact[1].sum()))


def priced(result: Any) -> tuple[float, np.ndarray | None]:
    """An iteration price as (time [s], energy by resource [J] or None): a price function may give
    the pair or the time alone."""
    return (float(result[0]), result[1]) if isinstance(result, tuple) else (float(result), None)


#: Iterations between two calls of a serving loop's ``check`` (the work limit): a check costs a
#: clock read, an iteration tens of microseconds and more.
CHECK_EVERY = 64


def run_schedule(arrival: np.ndarray, prompt: np.ndarray, output: np.ndarray, cfg: SchedulerConfig, *,
                 gpus: int, blocks_per_gpu: int, blocks_for: Callable[[int], int], price: Callable[..., float],
                 exact: Callable[..., float] | None = None, samples: int = 0,
                 check: Callable[[float, int], None] | None = None,
                 progress: Callable[[int, float], None] | None = None) -> ScheduleLog:
    """Run the loop over the requests (see the module docstring).

    ``price(dec_ctx, dec_gpu, pf_len, pf_off, pf_gpu)`` gives an iteration's time [s], or its time
    and its energy by resource [J] (:meth:`IterationPricer.memo_priced`); ``exact``
    (same arguments), when given, prices ``samples`` iterations again to measure ``price`` against
    it: the first to start after each of ``samples`` times spread evenly over the arrivals
    (``(k + 1/2) x last arrival / samples``). ``blocks_for(L)``: KV blocks of L tokens.
    ``check(t, arrived)`` is called every :data:`CHECK_EVERY` iterations (the first included) with
    the simulated time [s] and the requests arrived so far; it may raise to stop the run (the
    work limit, see ServingSimulator.work_guard). ``progress(finished, t)`` is called as often, and
    once at the end, with the requests finished so far and the simulated time [s] (a progress bar).
    """
    n = int(arrival.size)
    st = _State(prompt, output, cfg, gpus, blocks_per_gpu, blocks_for)
    log = st.log
    horizon = np.inf if cfg.horizon_s is None else float(cfg.horizon_s)
    t, nxt = 0.0, 0
    marks = list(((np.arange(samples) + 0.5) * float(arrival[-1]) / samples)[::-1]) if samples and n else []
    iteration = 0
    while True:
        if iteration % CHECK_EVERY == 0:
            if check is not None:
                check(t, nxt)
            if progress is not None:
                progress(st.finished, t)
        iteration += 1
        while nxt < n and arrival[nxt] <= t:
            st.waiting.append(nxt)
            nxt += 1
        if not st.running and not st.waiting:
            if nxt >= n or arrival[nxt] >= horizon:
                break
            t = float(arrival[nxt])
            continue
        if t >= horizon:
            break
        sched, preempted = st.schedule(t)
        if not sched:
            if not preempted:   # cannot happen: a request alone fits a GPU (checked above)
                raise RuntimeError("serving loop: nothing to schedule and nothing preempted")
            continue
        ids = np.fromiter((r for r, _ in sched), dtype=np.int64, count=len(sched))
        ntok = np.fromiter((k for _, k in sched), dtype=np.int64, count=len(sched))
        P, gen, comp, gpu = st.P, st.gen, st.comp, st.gpu
        dec = (ntok == 1) & (comp[ids] + 1 == P[ids] + gen[ids]) & (gen[ids] > 0)
        dec_ids, pf_ids = ids[dec], ids[~dec]
        args = (comp[dec_ids] + 1, gpu[dec_ids], ntok[~dec], comp[pf_ids], gpu[pf_ids])
        dt, parts = priced(price(*args))
        if exact is not None and marks and t >= marks[-1]:
            while marks and t >= marks[-1]:
                marks.pop()
            log.sample((dt, parts), priced(exact(*args)))
        log.add_energy(parts, ids, ntok)
        log.it_start.append(t)
        log.it_time.append(dt)
        log.it_decode.append(int(dec_ids.size))
        log.it_prefill.append(int(ntok[~dec].sum()))
        log.it_waiting.append(len(st.waiting))
        log.it_running.append(len(st.running))
        log.it_kv_blocks.append(int(blocks_per_gpu - min(st.free)))
        t += dt
        st.emit(ids, ntok, t)
    log.end_s = t
    if progress is not None:
        progress(st.finished, t)
    return log


class _State:
    """The loop's requests (tokens computed and generated, GPU, KV blocks held), queues and free
    blocks per GPU, and what it logs (see :func:`run_schedule`)."""

    def __init__(self, prompt: np.ndarray, output: np.ndarray, cfg: SchedulerConfig, gpus: int, blocks_per_gpu: int,
                 blocks_for: Callable[[int], int]) -> None:
        n = int(prompt.size)
        self.P, self.O = prompt.astype(np.int64), output.astype(np.int64)
        self.gen = np.zeros(n, dtype=np.int64)
        self.comp = np.zeros(n, dtype=np.int64)
        self.gpu = np.full(n, -1, dtype=np.int64)
        self.held = np.zeros(n, dtype=np.int64)
        self.cfg, self.blocks_for = cfg, blocks_for
        self.log = ScheduleLog(np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan), self.gen,
                               np.zeros(n, dtype=np.int64), request_energy_j=np.zeros(n))
        for r in range(n):
            if blocks_for(int(self.P[r] + self.O[r])) > blocks_per_gpu:
                from ..errors import field_error
                raise field_error(f"request {r} prompt + output tokens", int(self.P[r] + self.O[r]),
                                  f"a request whose KV cache fits one GPU's {blocks_per_gpu} blocks")
        self.free = [int(blocks_per_gpu)] * gpus
        self.waiting: deque[int] = deque()
        self.running: list[int] = []
        self.finished = 0

    def preempt(self, v: int) -> None:
        """Recompute: free ``v``'s blocks and put it at the front of the queue."""
        self.free[self.gpu[v]] += int(self.held[v])
        self.held[v] = 0
        self.comp[v] = 0
        self.running.remove(v)
        self.waiting.appendleft(v)
        self.log.preemptions[v] += 1

    def schedule(self, t: float) -> tuple[list[tuple[int, int]], bool]:
        """Steps 2 and 3 of the module docstring at time ``t``: (request, tokens) of the iteration,
        and whether it preempted."""
        P, gen, comp, gpu, held, free = self.P, self.gen, self.comp, self.gpu, self.held, self.free
        running, waiting, blocks_for = self.running, self.waiting, self.blocks_for
        budget = self.cfg.token_budget
        sched: list[tuple[int, int]] = []
        preempted = False
        i = 0
        while i < len(running) and budget > 0:
            r = running[i]
            n_tok = min(int(P[r] + gen[r] - comp[r]), budget)
            g = int(gpu[r])
            want = blocks_for(int(comp[r]) + n_tok) - int(held[r])
            while want > free[g]:
                victim = next(v for v in reversed(running) if gpu[v] == g)
                self.preempt(victim)
                preempted = True
                if victim == r:
                    break
            if r not in running[i:i + 1]:
                continue
            free[g] -= want
            held[r] += want
            sched.append((r, n_tok))
            budget -= n_tok
            i += 1
        if not preempted:
            while waiting and budget > 0 and len(running) < self.cfg.max_batch:
                r = waiting[0]
                n_tok = min(int(P[r] + gen[r]), budget)
                g = int(np.argmax(free))
                want = blocks_for(n_tok)
                if want > free[g]:
                    break
                waiting.popleft()
                running.append(r)
                gpu[r] = g
                free[g] -= want
                held[r] = want
                if np.isnan(self.log.scheduled_s[r]):
                    self.log.scheduled_s[r] = t
                sched.append((r, n_tok))
                budget -= n_tok
        return sched, preempted

    def emit(self, ids: np.ndarray, ntok: np.ndarray, t: float) -> None:
        """Step 4's end at ``t``: the tokens computed; a request whose prompt and output so far are
        computed emits a token, and leaves with its blocks freed when it has all its output."""
        log = self.log
        self.comp[ids] += ntok
        for r in ids[self.comp[ids] == self.P[ids] + self.gen[ids]].tolist():
            self.gen[r] += 1
            if np.isnan(log.first_token_s[r]):
                log.first_token_s[r] = t
            if self.gen[r] >= self.O[r]:
                log.finish_s[r] = t
                self.finished += 1
                self.free[self.gpu[r]] += int(self.held[r])
                self.held[r] = 0
                self.running.remove(r)
