"""A pure-Python reference of the request-mode controller, tick by tick.

It implements the same controller as the Cython engine (Ramulator 2.0's Generic controller with
FR-FCFS, write watermarks, the active buffer, refresh and the row policies) in the plainest way:
every controller is visited every cycle, nodes are dicts, buffers are lists. It exists to measure
what the engine's design buys (``benchmarks/benchmarks_engine.py``) and as a second implementation
the tests compare cycle counts with. Use it on small traces only.
"""
from __future__ import annotations

import numpy as np

from .spec import (ACTION_CODES, FLAG_ACCESSING, FLAG_CLOSING, FLAG_OPENING, FLAG_REFRESHING, PREREQ_CODES,
                     DRAMConfig)
from .engine import _to_vectors
from .traces import RequestTrace

__all__ = ["reference_cycles"]


def reference_cycles(config: DRAMConfig, trace: RequestTrace) -> int:
    """Memory cycles of ``trace`` on ``config`` (same end condition as :func:`simulate`)."""
    return _Controllers(config, trace).run()


class _Timing:
    """The DRAM's state and its timing constraints: the cycle each (node, command) is ready at, the
    recent issue cycles per (node, command) and the open row of each bank; node paths are tuples
    of child indices from the root."""

    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.n_lv, n_cmd = spec["n_levels"], spec["n_cmd"]
        self.counts = [int(c) for c in spec["counts"]]
        self.rows: dict[tuple, list] = {}
        st, fol, lat, win, sib = (spec["cons_start"], spec["cons_follow"], spec["cons_latency"],
                                  spec["cons_window"], spec["cons_sibling"])
        for lv in range(self.n_lv):
            for c in range(n_cmd):
                k = lv * n_cmd + c
                self.rows[lv, c] = [(int(fol[t]), int(lat[t]), int(win[t]), bool(sib[t]))
                                    for t in range(st[k], st[k + 1])]
        self.flags, self.scope, self.check = spec["cmd_flags"], spec["cmd_scope"], spec["cmd_check"]
        self.action, self.prereq = spec["cmd_action"], spec["cmd_prereq"]
        self.ACT, self.PRE, self.PREA, self.RD, self.WR, self.REF = (
            spec[k] for k in ("cmd_act", "cmd_pre", "cmd_prea", "cmd_rd", "cmd_wr", "cmd_ref"))
        self.ready: dict[tuple, int] = {}          # (node path, cmd) -> cycle
        self.history: dict[tuple, list] = {}       # (node path, cmd) -> recent issue cycles
        self.open_row: dict[tuple, int] = {}       # bank path -> row
        self.col_access: dict[tuple, int] = {}

    def nodes_below(self, prefix: tuple, depth: int):
        if len(prefix) > depth:
            yield prefix[:depth + 1]
            return
        frontier = [prefix]
        for lv in range(len(prefix), depth + 1):
            frontier = [p + (i,) for p in frontier for i in range(self.counts[lv])]
        yield from frontier

    def targets(self, av, depth):
        """Node paths from the root to ``depth`` that a command addresses (-1 = every child)."""
        out, prefix = [], ()
        for lv in range(depth + 1):
            if av[lv] < 0:
                for d in range(lv, depth + 1):
                    out.extend(self.nodes_below(prefix, d))
                return out
            prefix = prefix + (int(av[lv]),)
            out.append(prefix)
        return out

    def ready_at(self, cmd, av):
        return max((self.ready.get((p, cmd), -1) for p in self.targets(av, int(self.check[cmd]))), default=-1)

    def banks_under(self, av, level):
        prefix = []
        for lv in range(min(level, self.n_lv - 1) + 1):
            if av[lv] < 0:
                break
            prefix.append(int(av[lv]))
        return list(self.nodes_below(tuple(prefix), self.n_lv - 1))

    def next_cmd(self, final, av):
        n_lv, kind = self.n_lv, self.prereq[final]
        if kind == PREREQ_CODES["row_open"]:
            row = self.open_row.get(tuple(int(x) for x in av[:n_lv]))
            if row is None:
                return self.ACT
            return final if row == av[n_lv] else self.PRE
        if kind == PREREQ_CODES["all_closed"]:
            if any(b in self.open_row for b in self.banks_under(av, int(self.scope[final]))):
                return self.PREA
        return final

    def issue(self, cmd, av, clk):
        n_lv, ready, rows = self.n_lv, self.ready, self.rows
        for path in self.targets(av, n_lv - 1):
            lv = len(path) - 1
            if lv > 0 and av[lv] >= 0:
                for j in range(self.counts[lv]):
                    if j != av[lv]:
                        sibling = path[:-1] + (j,)
                        for f, l, w, s in rows[lv, cmd]:
                            if s:
                                ready[sibling, f] = max(ready.get((sibling, f), -1), clk + l)
            hist = self.history.setdefault((path, cmd), [])
            hist.insert(0, clk)
            for f, l, w, s in rows[lv, cmd]:
                if s or len(hist) < w:
                    continue
                ready[path, f] = max(ready.get((path, f), -1), hist[w - 1] + l)
            del hist[4:]
        a = self.action[cmd]
        if a == ACTION_CODES["open"]:
            self.open_row[tuple(int(x) for x in av[:n_lv])] = int(av[n_lv])
        elif a == ACTION_CODES["close"]:
            self.open_row.pop(tuple(int(x) for x in av[:n_lv]), None)
        elif a == ACTION_CODES["close_all"]:
            for b in self.banks_under(av, int(self.scope[cmd])):
                self.open_row.pop(b, None)


class _Controllers(_Timing):
    """The controllers on top of :class:`_Timing`: their read, write, active and priority buffers,
    FR-FCFS with write watermarks, refresh and the closed-row policy, and the clock loop."""

    def __init__(self, config: DRAMConfig, trace: RequestTrace) -> None:
        spec = config.compile()
        super().__init__(spec)
        vecs, keys = _to_vectors(config, trace)
        counts = self.counts
        self.trace = trace
        self.cl = cl = spec["ctrl_level"]
        self.n_ctrl = int(np.prod(counts[:cl + 1]))
        self.qcap = [spec["read_queue_size"] + 1, spec["write_queue_size"] + 1, spec["active_queue_size"] + 1,
                     spec["priority_queue_size"] + 1]
        self.bufs = [[[] for _ in range(4)] for _ in range(self.n_ctrl)]   # read, write, active, priority
        self.write_mode = [False] * self.n_ctrl
        self.reqs = [dict(av=[int(x) for x in vecs[i]] + [], final=self.WR if trace.is_write[i] else self.RD,
                          key=int(keys[i]), write=bool(trace.is_write[i]), arrive=-1) for i in range(len(trace))]
        for r in self.reqs:
            ctrl = 0
            for lv in range(cl + 1):
                ctrl = ctrl * counts[lv] + r["av"][lv]
            r["ctrl"] = ctrl
        self.nrefi = spec["refresh_interval"]
        self.wr_max = spec["write_queue_size"]
        self.last_done = 0

    def best(self, buf, clk):
        cand, cand_ready = None, False
        for r in buf:
            r["cmd"] = self.next_cmd(r["final"], r["av"])
            rdy = clk >= self.ready_at(r["cmd"], r["av"])
            if cand is None or (rdy and not cand_ready) or (rdy == cand_ready and r["arrive"] < cand["arrive"]):
                cand, cand_ready = r, rdy
        return cand, cand_ready

    def pick(self, c, clk):
        """(request, the buffer it leaves) that controller ``c`` serves at ``clk``; (_, None): none."""
        spec, counts, cl = self.spec, self.counts, self.cl
        rb, wb, ab, pb = self.bufs[c]
        if self.nrefi and clk % self.nrefi == 0:
            flat, av = c, [-1] * len(counts)
            for lv in range(cl, -1, -1):
                av[lv], flat = flat % counts[lv], flat // counts[lv]
            pb.append(dict(av=av, final=self.REF, maint=True, arrive=-1))
        req, src = None, None
        if ab:
            req, rdy = self.best(ab, clk)
            src = ab if rdy else None
        if src is None:
            if pb:
                req = pb[0]
                req["cmd"] = self.next_cmd(req["final"], req["av"])
                if clk < self.ready_at(req["cmd"], req["av"]):
                    return req, None
                src = pb
            else:
                w, r_ = len(wb), len(rb)
                if not self.write_mode[c] and (w > spec["wr_high"] * self.wr_max or r_ == 0):
                    self.write_mode[c] = True
                elif self.write_mode[c] and w < spec["wr_low"] * self.wr_max and r_ != 0:
                    self.write_mode[c] = False
                buf = wb if self.write_mode[c] else rb
                if buf:
                    req, rdy = self.best(buf, clk)
                    src = buf if rdy else None
        return req, src

    def tick(self, c, clk):
        spec, n_lv, flags, scope = self.spec, self.n_lv, self.flags, self.scope
        ab, pb = self.bufs[c][2], self.bufs[c][3]
        req, src = self.pick(c, clk)
        if src is None:
            return
        cmd, av = req["cmd"], req["av"]
        if flags[cmd] & FLAG_CLOSING:
            for o in ab:
                if all(o["av"][lv] == av[lv] or o["av"][lv] < 0 or av[lv] < 0 for lv in range(n_lv)):
                    return
        if spec["closed_row"]:
            col_access = self.col_access
            if flags[cmd] & (FLAG_CLOSING | FLAG_REFRESHING):
                for b in self.banks_under(av, min(int(scope[cmd]), n_lv - 1)):
                    col_access[b] = 0
            elif flags[cmd] & FLAG_ACCESSING:
                b = tuple(av[:n_lv])
                col_access[b] = col_access.get(b, 0) + 1
                if col_access[b] >= spec["row_policy_cap"]:
                    pb.append(dict(av=list(av), final=self.PRE, maint=True, arrive=-1))
                    col_access[b] = 0
        self.issue(cmd, av, clk)
        if cmd == req["final"]:
            if not req.get("maint"):
                self.last_done = max(self.last_done,
                                     clk + (spec["write_latency"] if req["write"] else spec["read_latency"]))
            src.remove(req)
        elif flags[cmd] & FLAG_OPENING and len(ab) < self.qcap[2]:
            ab.append(req)
            src.remove(req)

    def run(self) -> int:
        """Memory cycles until the trace's end condition (its last request accepted, or done)."""
        spec, reqs, bufs, qcap = self.spec, self.reqs, self.bufs, self.qcap
        f, m = spec["clock_ratio"], spec["memory_clock_ratio"]
        head, clk, i = 0, 0, 0
        arrival = self.trace.arrival
        while True:
            phase = i % (f * m)
            if phase % m == 0 and head < len(reqs) and arrival[head] <= clk:
                r = reqs[head]
                rb, wb = bufs[r["ctrl"]][0], bufs[r["ctrl"]][1]
                if not r["write"] and any(w["key"] == r["key"] for w in wb):
                    self.last_done = max(self.last_done, clk + 1)
                    head += 1
                elif len(wb if r["write"] else rb) < qcap[1 if r["write"] else 0]:
                    r["arrive"] = clk
                    (wb if r["write"] else rb).append(r)
                    head += 1
                if head >= len(reqs) and spec["end_on_accept"]:
                    return clk
            if phase % f == 0:
                clk += 1
                for c in range(self.n_ctrl):
                    self.tick(c, clk)
                if head >= len(reqs) and not spec["end_on_accept"] and not any(any(b) for bs in bufs for b in bs):
                    return max(clk, self.last_done)
            i += 1
