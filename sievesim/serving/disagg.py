"""Disaggregated prefill: a prefill pool and a decode pool, the KV cache moved over the interconnect.

As DistServe, Splitwise and vLLM's disaggregated prefill (P/D) serve: of G GPUs, ``Gp`` form a
prefill instance and ``Gd = G - Gp`` a decode instance. Each pool holds the model's weights (its
own expert parallelism over its GPUs, under the same policy), its own KV blocks
(:func:`~sievesim.serving.kv.kv_capacity` on its GPU count) and its own
:class:`~sievesim.serving.pricing.IterationPricer` (prefill-only batches on Gp GPUs, decode-only
batches on Gd GPUs). A request's life:

1. **Prefill pool** (one scheduler, FCFS, chunked prefill under the token budget, as the colocated
   scheduler computes prompts): on admission the request gets, on the prefill GPU with the most
   free blocks, the blocks of its whole prompt (they hold its KV until it has left for the decode
   pool); an iteration computes up to the budget of prompt tokens, the oldest unfinished prompts
   first, then new ones while the budget lasts and the head of the queue has its blocks. When its
   last chunk is computed, the request's first token is emitted (TTFT ends there, as in DistServe).
2. **KV transfer**: at each decode iteration's start the decode scheduler takes the requests whose
   prefill has finished, FCFS, while its running + incoming requests are below ``max_batch`` and
   the decode GPU with the most free blocks has the blocks of the request's KV and its next token
   (vLLM's P/D: the decode instance allocates blocks, then pulls the KV). The transfer takes
   ``latency + KV bytes / bandwidth`` of the hardware's interconnect (NVLink through a switch: the
   two pools are in one node, DistServe's intra-node placement) and overlaps every computation. A
   GPU sends one transfer at a time and receives one at a time (the switch gives each GPU its full
   bandwidth per direction): a transfer starts when its source's send and its destination's
   receive direction are both free, FCFS. The prefill blocks are freed when it arrives.
3. **Decode pool** (continuous batching of decode-only iterations, at most ``max_batch``): a request
   whose KV has arrived joins the batch at the next iteration's start. A request that needs a block
   its GPU does not have preempts the newest running request on that GPU (recompute: its blocks are
   freed and it goes back to the front of the prefill pool's queue, keeping its output so far, as
   the colocated scheduler preempts); no request joins in an iteration that preempted.

The two pools run concurrently: the loop advances whichever pool's next decision comes first (the
prefill pool first on a tie), and a pool with nothing to do waits for the next arrival, transfer,
preemption or iteration end of the other pool. Times in seconds, lengths in tokens, sizes in bytes.
"""
from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import ConfigError, SievesimError, field_error
from .kv import BlockCounter, KvCapacity, kv_capacity
from .metrics import summary
from .pricing import IterationPricer, MemoError
from .scheduler import CHECK_EVERY, SchedulerConfig, ScheduleLog, priced

__all__ = ["Pool", "DisaggLog", "run_disaggregated", "build_pools", "pool_sizes"]

_NONE = np.zeros(0, dtype=np.int64)


def pool_sizes(gpus: int, prefill_gpus: Any) -> tuple[int, int]:
    """(prefill GPUs, decode GPUs) of ``gpus`` GPUs with ``prefill_gpus`` of them prefilling; each
    pool needs at least one GPU."""
    if gpus < 2:
        raise field_error("gpus (--gpus)", gpus, "at least 2 GPUs with prefill_gpus (--prefill-gpus): one prefill, "
                                                  "one decode")
    if isinstance(prefill_gpus, bool) or not isinstance(prefill_gpus, (int, np.integer)) \
            or not 1 <= prefill_gpus <= gpus - 1:
        raise field_error("prefill_gpus (--prefill-gpus)", prefill_gpus,
                          f"an integer from 1 to {gpus - 1} (of gpus = {gpus}; the rest decode)")
    return int(prefill_gpus), int(gpus) - int(prefill_gpus)


@dataclass
class Pool:
    """One instance of a disaggregated server: its GPUs, KV blocks and iteration pricer.

    Attributes:
        name: ``"prefill"`` or ``"decode"``.
        gpus: GPUs of the pool (expert parallelism over them).
        kv: KV capacity of one of its GPUs.
        blocks_for: KV blocks of L tokens.
        pricer: the pool's iteration prices (prefill-only or decode-only batches).
    """

    name: str
    gpus: int
    kv: KvCapacity
    blocks_for: BlockCounter
    pricer: IterationPricer


def build_pools(model: Any, hw: Any, *, prefill_gpus: int, decode_gpus: int, policy: str, cfg: SchedulerConfig,
                block_size: int, memory_utilization: float, max_model_len: int, seed: int,
                **step_options: Any) -> tuple[Pool, Pool]:
    """The prefill pool (its iterations hold up to ``cfg.token_budget`` prompt tokens) and the decode
    pool (up to ``cfg.max_batch`` decode requests), each with the model's weights checked against
    its GPUs' HBM."""
    sizes = (("prefill", prefill_gpus, 1, cfg.token_budget), ("decode", decode_gpus, cfg.max_batch, 0))
    def n(g: int) -> str:
        return f"{g} GPU" + ("s" if g != 1 else "")
    pool_of = {"prefill": f"prefill pool (--prefill-gpus = {n(prefill_gpus)})",
               "decode": f"decode pool (--gpus {prefill_gpus + decode_gpus} minus --prefill-gpus {prefill_gpus} "
                         f"= {n(decode_gpus)})"}
    kvs = []
    for name, g, batch, budget in sizes:         # both capacities before any pricer's warm-up
        try:
            kvs.append(kv_capacity(model, hw, g, max_batch=batch, token_budget=budget, block_size=block_size,
                                   memory_utilization=memory_utilization,
                                   redundant_experts=step_options.get("redundant_experts", "auto")))
        except ConfigError as exc:
            raise ConfigError(f"{pool_of[name]}: {exc}") from None
    pools = []
    for (name, g, batch, budget), kv in zip(sizes, kvs):
        try:      # a pool's GPU count must suit the model too (expert parallelism over its GPUs)
            pricer = IterationPricer(model, hw, gpus=g, policy=policy, max_batch=max(batch, g),
                                     max_prefill_tokens=max(budget, 1), max_context=max_model_len, seed=seed,
                                     warmup=name, **step_options)
        except SievesimError as exc:
            raise type(exc)(f"{pool_of[name]}: {exc}") from None
        pools.append(Pool(name, g, kv, BlockCounter(model, kv), pricer))
    return pools[0], pools[1]


@dataclass
class DisaggLog:
    """What a disaggregated run did: each pool's iterations (:class:`ScheduleLog`, the per-request
    arrays shared), the scheduler's count of requests in the system at every decision of either
    pool, and every KV transfer (bytes, time on the link, wait for the link [s])."""

    prefill: ScheduleLog
    decode: ScheduleLog
    end_s: float = 0.0
    event_t: list[float] = field(default_factory=list)
    event_n: list[int] = field(default_factory=list)
    kv_transfer_s: np.ndarray = field(default_factory=lambda: np.zeros(0))   # per request: the last one's time
    transfer_bytes: list[float] = field(default_factory=list)
    transfer_time_s: list[float] = field(default_factory=list)
    transfer_wait_s: list[float] = field(default_factory=list)
    transfer_energy_j: float = 0.0          # the KV transfers' link energy (NaN: the link has no energy model)

    def in_system(self) -> tuple[list[float], list[float], np.ndarray]:
        """(start, duration, requests in the system) of the segments between decisions [s]."""
        t = np.asarray(self.event_t, dtype=float)
        ends = np.append(t[1:], max(self.end_s, float(t[-1]))) if t.size else t
        return list(self.event_t), list(ends - t), np.asarray(self.event_n)

    def transfers(self) -> dict[str, Any]:
        """KV transfers: count, bytes (total and mean), time on the link and wait for it [s]."""
        b = np.asarray(self.transfer_bytes, dtype=float)
        return {"transfers": int(b.size), "bytes_total": float(b.sum()),
                "bytes_mean": float(b.mean()) if b.size else 0.0, "time_s": summary(np.asarray(self.transfer_time_s)),
                "wait_s": summary(np.asarray(self.transfer_wait_s))}


class _Sampler:
    """The iterations of one pool priced exactly too: the first to start after each of ``samples``
    times spread evenly over the arrivals (as the colocated loop samples)."""

    def __init__(self, samples: int, last_arrival: float) -> None:
        self.marks = list(((np.arange(samples) + 0.5) * last_arrival / samples)[::-1]) if samples else []

    def due(self, t: float) -> bool:
        if not self.marks or t < self.marks[-1]:
            return False
        while self.marks and t >= self.marks[-1]:
            self.marks.pop()
        return True


def run_disaggregated(arrival: np.ndarray, prompt: np.ndarray, output: np.ndarray, cfg: SchedulerConfig, *,
                      prefill: Pool, decode: Pool, link: Any, kv_bytes: Callable[[int], float], exact: bool,
                      samples: int, check: Callable[[float, int], None] | None = None,
                      progress: Callable[[int, float], None] | None = None) -> DisaggLog:
    """Serve the requests on the two pools (see the module docstring). ``link`` is the
    :class:`~sievesim.hardware.InterconnectSpec` the KV moves over; ``kv_bytes(L)`` the KV bytes of
    L tokens of one request; ``exact`` prices every iteration exactly; otherwise ``samples``
    iterations of each pool are priced both ways (``ScheduleLog.sample_memo`` / ``sample_exact``).
    ``check``, ``progress``: as for :func:`~sievesim.serving.scheduler.run_schedule`."""
    loop = _Loop(arrival, prompt, output, cfg, prefill, decode, link, kv_bytes, exact, samples, check)
    loop.progress = progress
    return loop.run()


class _Loop:
    """The state of a disaggregated run: per request, per pool, the link."""

    def __init__(self, arrival: np.ndarray, prompt: np.ndarray, output: np.ndarray, cfg: SchedulerConfig,
                 prefill: Pool, decode: Pool, link: Any, kv_bytes: Callable[[int], float], exact: bool,
                 samples: int, check: Callable[[float, int], None] | None = None) -> None:
        n = self.n = int(arrival.size)
        self.check = check
        self.progress: Callable[[int, float], None] | None = None
        self.finished = 0
        self.arrival, self.cfg, self.link, self.kv_bytes = arrival, cfg, link, kv_bytes
        self.P, self.O = prompt.astype(np.int64), output.astype(np.int64)
        self.gen = np.zeros(n, dtype=np.int64)
        self.comp = np.zeros(n, dtype=np.int64)
        self.gpu = np.full(n, -1, dtype=np.int64)       # the request's GPU in the pool that holds it
        self.held = np.zeros(n, dtype=np.int64)         # its blocks there
        self.ready_s = np.full(n, np.nan)
        per = (np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan), self.gen, np.zeros(n, dtype=np.int64))
        energy = np.zeros(n)            # each request's energy [J], both pools' shares and its KV transfers
        self.log = DisaggLog(ScheduleLog(*per, request_energy_j=energy), ScheduleLog(*per, request_energy_j=energy),
                             kv_transfer_s=np.full(n, np.nan))
        self.pools = {"prefill": prefill, "decode": decode}
        self.free = {k: [int(p.kv.blocks_per_gpu)] * p.gpus for k, p in self.pools.items()}
        self.clock = {"prefill": 0.0, "decode": 0.0}
        self.busy = {"prefill": False, "decode": False}
        self.pending: dict[str, tuple[np.ndarray, np.ndarray]] = {"prefill": (_NONE, _NONE), "decode": (_NONE, _NONE)}
        last = float(arrival[-1]) if n else 0.0
        self.samplers = {k: _Sampler(0 if exact else samples, last) for k in self.pools}
        self.price = {k: (p.pricer.exact_priced if exact else p.pricer.memo_priced) for k, p in self.pools.items()}
        self.exact = None if exact else {k: p.pricer.exact_priced for k, p in self.pools.items()}
        self.waiting: deque[int] = deque()
        self.prefilling: list[int] = []
        self.ready: deque[int] = deque()                # prefilled, KV on the prefill GPU
        self.joining: list[int] = []                    # KV arrived on the decode GPU
        self.running: list[int] = []
        self.in_flight: list[tuple[float, int, int, int]] = []   # (arrival on decode, seq, request, source GPU)
        self.send_free = [0.0] * prefill.gpus
        self.recv_free = [0.0] * decode.gpus
        self.nxt = 0
        self.in_sys = 0
        self.seq = 0
        self.horizon = math.inf if cfg.horizon_s is None else float(cfg.horizon_s)
        self.stopped = {"prefill": False, "decode": False}
        self._held_p: dict[int, int] = {}             # prefill blocks of a request whose KV is on the link

    # ------------------------------------------------------------------ the loop
    def run(self) -> DisaggLog:
        iteration = 0
        while True:
            tp, td = self.clock["prefill"], self.clock["decode"]
            if math.isinf(tp) and math.isinf(td):
                break
            name, other = ("prefill", "decode") if tp <= td else ("decode", "prefill")
            t = min(tp, td)
            if iteration % CHECK_EVERY == 0:
                if self.check is not None:
                    self.check(t, self.nxt)
                if self.progress is not None:
                    self.progress(self.finished, t)
            iteration += 1
            self._arrived_transfers(t)
            preempted = self._prefill_step(t) if name == "prefill" else self._decode_step(t)
            self.log.event_t.append(t)
            self.log.event_n.append(self.in_sys)
            if not self.busy[name]:
                self.clock[name] = self._wake(name, t)
            if not self.busy[other] and not self.stopped[other]:
                wake = t if preempted else self._wake(other, t)
                self.clock[other] = min(self.clock[other], wake)
        self.log.end_s = max(self.log.prefill.end_s, self.log.decode.end_s)
        if self.progress is not None:
            self.progress(self.finished, self.log.end_s)
        return self.log

    def _wake(self, name: str, t: float) -> float:
        """The next time after ``t`` something can change for an idle pool (inf: nothing will)."""
        if self.stopped[name]:
            return math.inf
        other = "decode" if name == "prefill" else "prefill"
        cands = [self.in_flight[0][0]] if self.in_flight else []
        if self.busy[other]:
            cands.append(self.clock[other])
        if name == "prefill" and self.nxt < self.n:
            cands.append(float(self.arrival[self.nxt]))
        return min((c for c in cands if c > t), default=math.inf)

    def _arrived_transfers(self, t: float) -> None:
        """Transfers that have arrived by ``t``: the prefill blocks are freed, the request may join."""
        while self.in_flight and self.in_flight[0][0] <= t:
            _, _, r, src = heapq.heappop(self.in_flight)
            self.free["prefill"][src] += int(self._held_p.pop(r))
            self.joining.append(r)

    def _iteration(self, name: str, t: float, ids: np.ndarray, ntok: np.ndarray, dec: bool, waiting: int,
                   running: int) -> None:
        """Price and log one iteration of pool ``name`` from ``t``; its tokens land at its end."""
        args = ((self.comp[ids] + 1, self.gpu[ids], _NONE, _NONE, _NONE) if dec
                else (_NONE, _NONE, ntok, self.comp[ids], self.gpu[ids]))
        dt, parts = priced(self.price[name](*args))
        lg = getattr(self.log, name)
        if self.exact is not None and self.samplers[name].due(t):
            lg.sample((dt, parts), priced(self.exact[name](*args)))
        lg.add_energy(parts, ids, ntok)
        pool = self.pools[name]
        lg.it_start.append(t)
        lg.it_time.append(dt)
        lg.it_decode.append(int(ids.size) if dec else 0)
        lg.it_prefill.append(0 if dec else int(ntok.sum()))
        lg.it_waiting.append(waiting)
        lg.it_running.append(running)
        lg.it_kv_blocks.append(int(pool.kv.blocks_per_gpu - min(self.free[name])))
        self.pending[name] = (ids, ntok)
        self.busy[name] = True
        self.clock[name] = t + dt
        lg.end_s = t + dt

    def _emit(self, ids: np.ndarray, t: float) -> list[int]:
        """One output token for each of ``ids`` at ``t``; returns those that still have output to make."""
        more = []
        for r in ids.tolist():
            self.gen[r] += 1
            if np.isnan(self.log.prefill.first_token_s[r]):
                self.log.prefill.first_token_s[r] = t
            if self.gen[r] >= self.O[r]:
                self.log.prefill.finish_s[r] = t
                self.in_sys -= 1
                self.finished += 1
            else:
                more.append(r)
        return more

    # ------------------------------------------------------------------ prefill pool
    def _prefill_step(self, t: float) -> bool:
        ids, ntok = self.pending["prefill"]
        self.pending["prefill"] = (_NONE, _NONE)
        self.busy["prefill"] = False
        free = self.free["prefill"]
        if ids.size:
            self.comp[ids] += ntok
            done = ids[self.comp[ids] == self.P[ids] + self.gen[ids]]
            for r in done.tolist():
                self.prefilling.remove(r)
            for r in self._emit(done, t):
                self.ready.append(r)
                self.ready_s[r] = t
            for r in done.tolist():
                if self.gen[r] >= self.O[r]:       # one output token: done at the prefill
                    free[self.gpu[r]] += int(self.held[r])
                    self.held[r] = 0
        while self.nxt < self.n and self.arrival[self.nxt] <= t:
            self.waiting.append(self.nxt)
            self.nxt += 1
            self.in_sys += 1
        if t >= self.horizon:
            self.stopped["prefill"] = True
            return False
        budget = self.cfg.token_budget
        sched: list[tuple[int, int]] = []
        for r in self.prefilling:
            if budget <= 0:
                break
            k = min(int(self.P[r] + self.gen[r] - self.comp[r]), budget)
            sched.append((r, k))
            budget -= k
        bf = self.pools["prefill"].blocks_for
        while self.waiting and budget > 0:
            r = self.waiting[0]
            g = int(np.argmax(free))
            want = bf(int(self.P[r] + self.gen[r]))
            if want > free[g]:
                break
            self.waiting.popleft()
            self.prefilling.append(r)
            self.gpu[r], self.held[r] = g, want
            free[g] -= want
            if np.isnan(self.log.prefill.scheduled_s[r]):
                self.log.prefill.scheduled_s[r] = t
            k = min(int(self.P[r] + self.gen[r]), budget)
            sched.append((r, k))
            budget -= k
        if sched:
            ids = np.fromiter((r for r, _ in sched), dtype=np.int64, count=len(sched))
            ntok = np.fromiter((k for _, k in sched), dtype=np.int64, count=len(sched))
            self._iteration("prefill", t, ids, ntok, False, len(self.waiting), len(self.prefilling))
        return False

    # ------------------------------------------------------------------ decode pool
    def _decode_step(self, t: float) -> bool:
        ids, _ = self.pending["decode"]
        self.pending["decode"] = (_NONE, _NONE)
        self.busy["decode"] = False
        free = self.free["decode"]
        if ids.size:
            self.comp[ids] += 1
            for r in ids.tolist():
                if self.gen[r] + 1 >= self.O[r]:
                    free[self.gpu[r]] += int(self.held[r])
                    self.held[r] = 0
                    self.running.remove(r)
            self._emit(ids, t)
        if t >= self.horizon:
            self.stopped["decode"] = True
            return False
        bf = self.pools["decode"].blocks_for
        preempted = False
        i = 0
        while i < len(self.running):
            r = self.running[i]
            g = int(self.gpu[r])
            want = bf(int(self.comp[r]) + 1) - int(self.held[r])
            while want > free[g]:
                victim = next(v for v in reversed(self.running) if self.gpu[v] == g)
                self._preempt(victim)
                preempted = True
                if victim == r:
                    break
            if r not in self.running[i:i + 1]:
                continue
            free[g] -= want
            self.held[r] += want
            i += 1
        if not preempted:
            self.running.extend(self.joining)
            self.joining.clear()
            self._start_transfers(t)
        if self.running:
            ids = np.asarray(self.running, dtype=np.int64)
            self._iteration("decode", t, ids, np.ones(ids.size, dtype=np.int64), True,
                            len(self.ready) + len(self.in_flight) + len(self.joining), len(self.running))
        return preempted

    def _preempt(self, v: int) -> None:
        """Recompute: free ``v``'s decode blocks and send it to the front of the prefill queue."""
        self.free["decode"][self.gpu[v]] += int(self.held[v])
        self.held[v] = 0
        self.comp[v] = 0
        self.running.remove(v)
        self.waiting.appendleft(v)
        self.log.decode.preemptions[v] += 1

    def _start_transfers(self, t: float) -> None:
        """Allocate decode blocks for prefilled requests (FCFS) and start their KV transfers."""
        free, bf = self.free["decode"], self.pools["decode"].blocks_for
        while self.ready and len(self.running) + len(self.in_flight) < self.cfg.max_batch:
            r = self.ready[0]
            g = int(np.argmax(free))
            want = bf(int(self.comp[r]) + 1)
            if want > free[g]:
                break
            self.ready.popleft()
            src = int(self.gpu[r])
            self._held_p[r] = int(self.held[r])
            self.gpu[r], self.held[r] = g, want
            free[g] -= want
            nbytes = float(self.kv_bytes(int(self.comp[r])))
            start = max(t, self.send_free[src], self.recv_free[g])
            dur = float(self.link.transfer_time_s(nbytes))
            self.send_free[src] = self.recv_free[g] = start + dur
            self.seq += 1
            heapq.heappush(self.in_flight, (start + dur, self.seq, r, src))
            self.log.kv_transfer_s[r] = dur
            self.log.transfer_bytes.append(nbytes)
            self.log.transfer_time_s.append(dur)
            self.log.transfer_wait_s.append(start - float(self.ready_s[r]))
            if self.link.energy_pj_per_bit is None:
                self.log.transfer_energy_j = math.nan
            else:
                e = nbytes * 8 * self.link.energy_pj_per_bit * 1e-12
                self.log.transfer_energy_j += e
                self.log.decode.request_energy_j[r] += e



def memo_record(pools: tuple[Pool, Pool], before: list[dict[str, Any]], log: DisaggLog, exact: bool) -> dict[str, Any]:
    """The ``pricing`` record of a disaggregated run: both pools together, and each."""
    per: dict[str, Any] = {}
    tot = {"steps_priced": 0, "lookups": 0, "outside_grid_exact": 0, "grid_points_total": 0}
    pairs_m: list[float] = []
    pairs_e: list[float] = []
    energy_m: list[float] = []
    energy_e: list[float] = []
    for pool, b in zip(pools, before):
        a = pool.pricer.stats()
        lg = getattr(log, pool.name)
        rec = {"steps_priced": a["grid_points_priced"] - b["grid_points_priced"] + a["exact_steps"] - b["exact_steps"],
               "lookups": a["lookups"] - b["lookups"],
               "outside_grid_exact": a["outside_grid_exact"] - b["outside_grid_exact"],
               "grid_points_total": a["grid_points_priced"],
               "corner_hit_rate": a["corner_hit_rate"],
               "error_vs_exact": MemoError.from_pairs(lg.sample_memo, lg.sample_exact).as_dict(),
               "energy_error_vs_exact": MemoError.from_pairs(lg.sample_memo_energy, lg.sample_exact_energy).as_dict()}
        per[pool.name] = rec
        for k in tot:
            tot[k] += rec[k]
        pairs_m += lg.sample_memo
        pairs_e += lg.sample_exact
        energy_m += lg.sample_memo_energy
        energy_e += lg.sample_exact_energy
    hits = [per[p.name]["corner_hit_rate"] for p in pools if not math.isnan(per[p.name]["corner_hit_rate"])]
    return {"mode": "exact" if exact else "memo", **tot,
            "corner_hit_rate": float(np.mean(hits)) if hits else math.nan,
            "error_vs_exact": MemoError.from_pairs(pairs_m, pairs_e).as_dict(),
            "energy_error_vs_exact": MemoError.from_pairs(energy_m, energy_e).as_dict(), "pools": per}
