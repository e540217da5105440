# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Cycle-accurate DRAM command engine (request mode).

The engine is generic over a compiled timing table (see ``sievesim.dram.config.DRAMConfig.compile``):
it knows levels, node counts, commands with flags, and rows ``(level, preceding) -> (following,
latency, window, sibling)``. It never sees a model, a policy or a file.

Semantics follow Ramulator 2.0's GenericDRAMSystem / Generic controller / FRFCFS scheduler tick by
tick (one command per controller per cycle, active buffer first, then the priority buffer, then
reads or writes by watermark), but the loop is event-driven: a controller that cannot issue
anything before cycle T is not visited before T. Skipping is exact because nothing a controller
decides can change between its own issues, arrivals and refresh deadlines (docs/dram.md).

All times are in memory (command clock) cycles.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t, int32_t, int8_t
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memmove

cnp.import_array()

cdef int64_t NEVER = 0x3FFFFFFFFFFFFFFF

# a lockstep run that has run this long (ns) and slept waiting for the others a third of it gives
# up: the split's threads do not all have a core (docs/dram.md, "Threads")
CONTENTION_GRACE_NS = 20_000_000

# the lockstep's shared array (lockstep_exchange): a header, each controller's run, then per run
# its progress slot (8: progress, last step once done, out of the lockstep for input, futex word
# and sleepers), its promises (2 per controller, padded to 8) and its ring of stops
XCH_MAGIC = 0x5153
XCH_HEADER = 8
LOCKSTEP_RING = 4096


def _round8(n):
    return (n + 7) // 8 * 8


def _exchange_size(n_ctrl, runs, ring):
    return XCH_HEADER + _round8(n_ctrl) + runs * (8 + _round8(2 * n_ctrl) + ring)


def lockstep_exchange(owners, runs=None, ring=LOCKSTEP_RING):
    """The array the runs of a lockstep share: ``owners[c]`` is the run (0 .. runs - 1) that
    simulates controller ``c`` (``runs``: default, the highest such index + 1; a run may have
    none); ``ring`` (a power of two): how many cycles a run may get ahead of the slowest one."""
    owners = np.asarray(owners, dtype=np.int64)
    if owners.ndim != 1 or owners.size == 0 or owners.min() < 0:
        raise ValueError("owners: expected one run index >= 0 per controller")
    if ring < 64 or ring & (ring - 1):
        raise ValueError(f"ring: {ring}, expected a power of two >= 64")
    n_ctrl = owners.size
    runs = int(owners.max()) + 1 if runs is None else int(runs)
    if runs <= owners.max():
        raise ValueError(f"runs: {runs}, expected more than the highest run index in owners")
    x = np.full(_exchange_size(n_ctrl, runs, ring), -1, dtype=np.int64)
    x[:XCH_HEADER] = [XCH_MAGIC, runs, n_ctrl, ring, 0, 0, 0, 0]
    x[XCH_HEADER:XCH_HEADER + n_ctrl] = owners
    stride = 8 + _round8(2 * n_ctrl) + ring
    for r in range(runs):
        base = XCH_HEADER + _round8(n_ctrl) + r * stride
        # progress -1, its last step, out of the lockstep (not started yet), the futex word, no sleepers
        x[base:base + 8] = [-1, -1, 1, -1 & 0xFFFFFFFF, 0, 0, 0, 0]
        x[base + 8:base + 8 + 2 * n_ctrl] = 0
    return x


# per-request outputs: cycle accepted (-1 never), cycle served (-1 never), row class of the first
# command (-1 not yet, 0 hit, 1 miss, 2 conflict), forwarded from a pending write (0 / 1)
OUTPUTS = {"arrive": (np.int64, -1), "depart": (np.int64, -1), "row_class": (np.int8, -1),
           "forwarded": (np.int8, 0)}


def new_outputs(n):
    """Per-request output arrays for ``n`` requests, in their initial state."""
    return {name: np.full(n, init, dtype=dtype) for name, (dtype, init) in OUTPUTS.items()}



cdef inline int64_t i64max(int64_t a, int64_t b) noexcept nogil:
    return a if a > b else b


cdef inline int64_t i64min(int64_t a, int64_t b) noexcept nogil:
    return a if a < b else b

include "_engine_state.pxi"
include "_engine_banks.pxi"
include "_engine_sched.pxi"
include "_engine_pim.pxi"
include "_engine_log.pxi"
include "_engine_loop.pxi"


cdef class Engine:
    """One memory system: controllers, banks and timing state, driven by a request stream.

    Build it from ``DRAMConfig.compile()`` and call :meth:`run` once with the mapped requests.
    """
    def __cinit__(self):
        self.log_clk = NULL
        self.log_addr = NULL
        self.log_cmd = NULL

    def __dealloc__(self):
        free(self.log_clk)
        free(self.log_addr)
        free(self.log_cmd)

    def __init__(self, dict spec, cnp.ndarray addr_vecs, cnp.ndarray keys, cnp.ndarray is_write,
                 cnp.ndarray arrival, bint log_commands=False, bint skip_idle=True, own=None,
                 abort=None, outputs=None, exchange=None, int rank=0, grace_ns=CONTENTION_GRACE_NS,
                 bint stream=False):
        """``own``: (n_ctrl,) bools, the controllers this engine simulates (default all); with
        ``own``, a request refused by its controller ends the run (``run()['refused']``).
        ``abort``: an int32 array shared by the engines of one split; a refusal sets
        ``abort[0]`` and an engine that sees it set stops. ``outputs``: the per-request output
        arrays to write into (see :func:`new_outputs`), shared by the engines of one split, each
        writing only its own requests; default: new ones. ``exchange``, ``rank``: a lockstep run
        (see :func:`run_lockstep`); ``grace_ns``: such a run gives up once it has run this long
        (nanoseconds) and slept waiting for the others a third of that time (``None``: never).
        ``stream``: the requests given here are the first window of a trace that :meth:`feed`
        continues; the engine keeps counters instead of per-request outputs (no command log, no
        lockstep; with ``own``, one held run of a split: each run is fed the same windows)."""
        keep = []

        def arr(x, dtype):
            a = np.ascontiguousarray(x, dtype=dtype)
            keep.append(a)
            return a

        cdef cnp.ndarray a
        self.n_lv = spec["n_levels"]
        self.A = spec["addr_len"]
        if self.A > MAX_ADDR or self.n_lv > MAX_SLOT_LEVELS:
            raise ValueError(f"too many levels: {self.n_lv} above the row (at most {MAX_SLOT_LEVELS}), "
                             f"{self.A} in an address (at most {MAX_ADDR})")
        self.row_lv = self.n_lv
        self.n_cmd = spec["n_cmd"]
        self.n_nodes = spec["n_nodes"]
        self.n_banks = spec["n_banks"]
        self.ctrl_level = spec["ctrl_level"]
        self.cmd_act = spec["cmd_act"]; self.cmd_pre = spec["cmd_pre"]; self.cmd_prea = spec["cmd_prea"]
        self.cmd_rd = spec["cmd_rd"]; self.cmd_wr = spec["cmd_wr"]; self.cmd_ref = spec["cmd_ref"]
        self.cmd_actab = spec.get("cmd_actab", -1); self.cmd_preab = spec.get("cmd_preab", -1)
        self.cmd_macab = spec.get("cmd_macab", -1); self.cmd_gwrite = spec.get("cmd_gwrite", -1)
        self.cmd_rdres = spec.get("cmd_rdres", -1)
        self.dual_buf = spec.get("dual_row_buffer", True)
        self.n_rfc = spec.get("nRFC", 0)
        self.read_latency = spec["read_latency"]
        self.write_latency = spec["write_latency"]
        self.refresh_interval = spec["refresh_interval"]
        self.qcap[BUF_READ] = spec["read_queue_size"] + 1     # Ramulator: enqueue if size <= max_size
        self.qcap[BUF_WRITE] = spec["write_queue_size"] + 1
        self.qcap[BUF_ACTIVE] = spec["active_queue_size"] + 1
        self.qcap[BUF_PRIO] = spec["priority_queue_size"] + 1
        self.wr_low = spec["wr_low"]
        self.wr_high = spec["wr_high"]
        set_watermarks(self)
        self.closed_row = spec["closed_row"]
        self.row_cap = spec["row_policy_cap"]
        self.clock_ratio = spec["clock_ratio"]
        self.mem_ratio = spec["memory_clock_ratio"]
        self.end_on_accept = spec["end_on_accept"]

        a = arr(spec["counts"], np.int64); self.counts = <int64_t*> a.data
        a = arr(spec["node_offset"], np.int64); self.node_off = <int64_t*> a.data
        span = np.zeros((self.n_lv, self.n_lv), dtype=np.int64)
        counts = np.asarray(spec["counts"], dtype=np.int64)
        for L in range(self.n_lv):
            for L2 in range(L, self.n_lv):
                span[L, L2] = int(np.prod(counts[L + 1:L2 + 1]))
        a = arr(span, np.int64); self.sub_span = <int64_t*> a.data
        a = arr(spec["cmd_check"], np.int32); self.cmd_check = <int32_t*> a.data
        a = arr(spec["cmd_scope"], np.int32); self.cmd_scope = <int32_t*> a.data
        a = arr(spec["cmd_flags"], np.int32); self.cmd_flags = <int32_t*> a.data
        a = arr(spec["cmd_action"], np.int32); self.cmd_action = <int32_t*> a.data
        a = arr(spec["cmd_prereq"], np.int32); self.cmd_prereq = <int32_t*> a.data
        a = arr(spec["hist_window"], np.int32); self.hist_window = <int32_t*> a.data
        self.flat_ready = 0
        if (self.n_lv in (4, 5) and spec["cmd_prereq"][self.cmd_rd] == P_ROW_OPEN
                and spec["cmd_prereq"][self.cmd_wr] == P_ROW_OPEN and (self.dual_buf or self.cmd_actab < 0)
                and all(spec["cmd_check"][k] == self.n_lv - 1
                        for k in (self.cmd_act, self.cmd_pre, self.cmd_rd, self.cmd_wr))):
            self.flat_ready = self.n_lv
        st, fo, la, _ = spec["simple_rows"]
        a = arr(st, np.int32); self.s_start = <int32_t*> a.data
        a = arr(fo, np.int32); self.s_follow = <int32_t*> a.data
        a = arr(la, np.int64); self.s_lat = <int64_t*> a.data
        st, fo, la, wi = spec["window_rows"]
        a = arr(st, np.int32); self.w_start = <int32_t*> a.data
        a = arr(fo, np.int32); self.w_follow = <int32_t*> a.data
        a = arr(la, np.int64); self.w_lat = <int64_t*> a.data
        a = arr(wi, np.int32); self.w_win = <int32_t*> a.data
        st, fo, la, _ = spec["sibling_rows"]
        a = arr(st, np.int32); self.b_start = <int32_t*> a.data
        a = arr(fo, np.int32); self.b_follow = <int32_t*> a.data
        a = arr(la, np.int64); self.b_lat = <int64_t*> a.data
        self.hist_w = max(1, int(np.max(spec["hist_window"])) if len(spec["hist_window"]) else 1)
        n_sib = np.diff(np.asarray(spec["sibling_rows"][0]))
        n_rows = np.diff(np.asarray(spec["simple_rows"][0])) + np.diff(np.asarray(spec["window_rows"][0])) + n_sib
        # A controller's cached ready times stay exact while it issues nothing, and threads split
        # controllers: both need every timing row to stay inside one controller's subtree.
        rows_per_level = n_rows.reshape(self.n_lv, self.n_cmd).sum(axis=1)
        sib_per_level = n_sib.reshape(self.n_lv, self.n_cmd).sum(axis=1)
        for L in range(self.n_lv):
            if rows_per_level[L] and L < self.ctrl_level or sib_per_level[L] and L <= self.ctrl_level:
                raise ValueError(f"timing rows at level {L}, above the controller level {self.ctrl_level} "
                                 f"(or between its nodes): one controller's commands would change another's "
                                 f"timing, which the engine does not model")
        a = arr((n_sib > 0).astype(np.int32), np.int32); self.has_sibling = <int32_t*> a.data
        a = arr((n_sib.reshape(self.n_lv, self.n_cmd).sum(axis=0) > 0).astype(np.int32), np.int32)
        self.cmd_has_sibling = <int32_t*> a.data
        a = arr((n_rows > 0).astype(np.int32), np.int32); self.has_rows = <int32_t*> a.data
        self._row_source = (np.asarray(spec["simple_rows"][0]), np.asarray(spec["simple_rows"][1]),
                            np.asarray(spec["simple_rows"][2]), np.asarray(spec["window_rows"][0]))
        self.set_issue_rows(())

        # state
        a = arr(np.full(self.n_nodes * self.n_cmd, -1, dtype=np.int64), np.int64); self.ready = <int64_t*> a.data
        a = arr(np.full(self.n_nodes * self.n_cmd * self.hist_w, -1, dtype=np.int64), np.int64); self.hist = <int64_t*> a.data
        a = arr(np.full(self.n_banks, -1, dtype=np.int32), np.int32); self.open_row = <int32_t*> a.data
        a = arr(np.zeros(self.n_banks, dtype=np.int64), np.int64); self.col_access = <int64_t*> a.data
        a = arr(np.full(self.n_nodes, -1, dtype=np.int32), np.int32); self.pim_row = <int32_t*> a.data
        # residency units: nodes of spec["residency_level"] (default: the controller level)
        res_level = int(spec.get("residency_level", self.ctrl_level))
        if not 0 <= res_level < self.n_lv:
            raise ValueError(f"residency_level: {res_level}, expected 0..{self.n_lv - 1}")
        self.res_bpu = int(span[res_level, self.n_lv - 1])
        self.res_units = self.n_banks // self.res_bpu
        self.res_ref_busy = max(0, int(spec.get("refresh_busy_cycles", 0)))
        a = arr(np.zeros(self.res_units, dtype=np.int32), np.int32); self.res_open = <int32_t*> a.data
        a = arr(np.zeros(self.res_units, dtype=np.int64), np.int64); self.res_since = <int64_t*> a.data
        a = arr(np.zeros(self.res_units, dtype=np.int64), np.int64); self.res_cycles = <int64_t*> a.data
        a = arr(np.zeros(self.res_units, dtype=np.int64), np.int64); self.res_ref_cycles = <int64_t*> a.data
        a = arr(np.full(self.res_units, -1, dtype=np.int64), np.int64); self.res_ref_end = <int64_t*> a.data
        n_ctrl = int(np.prod(counts[:self.ctrl_level + 1]))
        self.n_ctrl = n_ctrl
        self.stride = max(self.qcap[BUF_READ], self.qcap[BUF_WRITE], self.qcap[BUF_ACTIVE], self.qcap[BUF_PRIO])
        a = arr(np.zeros(n_ctrl * NBUF * self.stride, dtype=np.int32), np.int32); self.buf = <int32_t*> a.data
        a = arr(np.zeros(n_ctrl * NBUF, dtype=np.int32), np.int32); self.bsize = <int32_t*> a.data
        a = arr(np.zeros(n_ctrl, dtype=np.int8), np.int8); self.write_mode = <int8_t*> a.data
        a = arr(np.full(n_ctrl, -1, dtype=np.int64), np.int64); self.flip_clk = <int64_t*> a.data
        for name in ("prog_start", "prog_end", "prog_head", "prog_done", "prog_stall", "prog_release",
                     "prog_result"):
            a = arr(np.zeros(n_ctrl, dtype=np.int64), np.int64)
            if name == "prog_start": self.prog_start = <int64_t*> a.data
            elif name == "prog_release": self.prog_release = <int64_t*> a.data
            elif name == "prog_result": self.prog_result = <int64_t*> a.data
            elif name == "prog_end": self.prog_end = <int64_t*> a.data
            elif name == "prog_head": self.prog_head = <int64_t*> a.data
            elif name == "prog_done": self.prog_done = <int64_t*> a.data
            else: self.prog_stall = <int64_t*> a.data
        a = arr(np.zeros(n_ctrl * 5, dtype=np.int64), np.int64); self.pim_counts = <int64_t*> a.data
        # each controller's node address, worked out once (a PIM op's address and a refresh's
        # copy it; working it out at each op, by divisions, cost 15 % of the PIM command rate)
        prefix = np.full((n_ctrl, self.A), -1, dtype=np.int32)
        prefix[:, :self.ctrl_level + 1] = np.stack(np.unravel_index(np.arange(n_ctrl), counts[:self.ctrl_level + 1]),
                                                   axis=1)
        a = arr(prefix, np.int32); self.ctrl_prefix = <int32_t*> a.data
        a = arr(np.zeros(1, dtype=np.int32), np.int32); self.prog_final = <int32_t*> a.data
        a = arr(np.zeros(2, dtype=np.int32), np.int32); self.prog_rowcol = <int32_t*> a.data
        self.n_prog_ops = 0
        a = arr(np.full(n_ctrl, NEVER, dtype=np.int64), np.int64); self.wake = <int64_t*> a.data
        nr = np.full(n_ctrl, NEVER, dtype=np.int64)
        if self.refresh_interval > 0:
            nr[:] = self.refresh_interval
        a = arr(nr, np.int64); self.next_refresh = <int64_t*> a.data
        if self.refresh_interval > 0:
            for c in range(n_ctrl):
                self.wake[c] = self.refresh_interval

        # trace requests: inputs used in place, outputs allocated here
        if self.n_nodes * self.n_cmd >= 2**31:
            raise ValueError("organisation too large for 32-bit node offsets")
        self.streaming = stream
        self.eof = not stream
        if stream and (log_commands or outputs is not None):
            raise ValueError("stream: no command log or outputs (the counters are kept instead)")
        self.set_window(addr_vecs, keys, is_write, arrival)
        n = self.n_req
        if stream:
            n = 0                   # no per-request outputs
            cap = (n_ctrl + 64) * (max(self.read_latency, self.write_latency) + 2)
            a = arr(np.zeros(3 * cap, dtype=np.int64), np.int64); self.dep_ring = <int64_t*> a.data
            self.dep_cap = cap
            self.dep_n = 0
            self.st_class[0] = 0
            self.st_class[1] = 0
            self.st_class[2] = 0
            self.st_forwarded = 0
            self.st_served = 0
            self.st_read_served = 0
            self.st_lat_sum = 0
            self.st_max_depart = 0
        out = new_outputs(n) if outputs is None else dict(outputs)
        for name, (dtype, _) in OUTPUTS.items():
            o = out.get(name)
            if not (isinstance(o, np.ndarray) and o.dtype == dtype and o.shape == (n,)
                    and o.flags.c_contiguous and o.flags.writeable):
                raise ValueError(f"outputs[{name!r}]: expected a writeable contiguous {np.dtype(dtype).name} "
                                 f"array of shape ({n},)")
            keep.append(o)
        self.out_arrive = <int64_t*> (<cnp.ndarray> out["arrive"]).data
        self.out_depart = <int64_t*> (<cnp.ndarray> out["depart"]).data
        self.out_row_class = <int8_t*> (<cnp.ndarray> out["row_class"]).data
        self.out_forwarded = <int8_t*> (<cnp.ndarray> out["forwarded"]).data
        self._out = out
        # slots
        S = n_ctrl * (self.qcap[BUF_READ] + self.qcap[BUF_WRITE] + self.qcap[BUF_ACTIVE] + self.qcap[BUF_PRIO])
        self.n_slots = S
        a = arr(np.arange(S - 1, -1, -1, dtype=np.int32), np.int32); self.slot_free = <int32_t*> a.data
        self.slot_free_top = S
        # A slot's fields are all set when it is taken (fill_slot, new_maintenance), before they
        # are read: left as allocated, the slots never used (most of them: the free list is a
        # stack) cost no page faults (a few megabytes: docs/dram.md, "Side by side with windows
        # of addresses alone")
        a = arr(np.empty(S, dtype=np.int32), np.int32); self.slot_req = <int32_t*> a.data
        a = arr(np.empty(S * self.A, dtype=np.int32), np.int32); self.addr = <int32_t*> a.data
        a = arr(np.zeros(S, dtype=np.intp), np.intp); self.aptr = <int32_t**> a.data
        a = arr(np.zeros(S, dtype=np.int64), np.int64); self.key = <int64_t*> a.data
        a = arr(np.empty(S, dtype=np.int64), np.int64); self.arrive = <int64_t*> a.data
        a = arr(np.empty(S, dtype=np.int8), np.int8); self.row_class = <int8_t*> a.data
        a = arr(np.empty(S * sizeof(Slot) + 64, dtype=np.uint8), np.uint8)
        self.sl = <Slot*> ((<size_t> a.data + 63) & ~(<size_t> 63))     # line-aligned
        a = arr(np.zeros(n_ctrl, dtype=np.int64), np.int64); self.ctrl_issues = <int64_t*> a.data
        a = arr(np.full(n_ctrl, -1, dtype=np.int64), np.int64); self.pred_clk = <int64_t*> a.data
        a = arr(np.full(n_ctrl, -1, dtype=np.int64), np.int64); self.pred_stamp = <int64_t*> a.data
        a = arr(np.zeros(n_ctrl, dtype=np.int32), np.int32); self.pred_pos = <int32_t*> a.data
        a = arr(np.zeros(n_ctrl, dtype=np.int8), np.int8); self.pred_src = <int8_t*> a.data
        a = arr(np.zeros(self.n_banks, dtype=np.int32), np.int32); self.bank_epoch = <int32_t*> a.data
        bits = 4
        while (1 << bits) < 4 * self.n_ctrl * self.qcap[BUF_WRITE]:
            bits += 1
        a = arr(np.zeros(1 << bits, dtype=np.int64), np.int64); self.wh_key = <int64_t*> a.data
        a = arr(np.zeros(1 << bits, dtype=np.int32), np.int32); self.wh_cnt = <int32_t*> a.data
        self.wh_mask = (1 << bits) - 1
        self.wh_shift = 64 - bits
        self._keep = keep

        self.log_on = log_commands
        self.log_n = 0
        self.log_cap = 0
        self.n_commands = 0
        self.n_refresh = 0
        self.clk_end = 0
        self.last_issue = 0
        self.error_code = 0
        self.skip_idle = skip_idle
        self.partial = own is not None
        own_arr = np.ones(n_ctrl, dtype=np.int8) if own is None else np.asarray(own, dtype=bool).astype(np.int8)
        if own_arr.shape != (n_ctrl,):
            raise ValueError(f"own: shape {own_arr.shape}, expected ({n_ctrl},)")
        a = arr(own_arr, np.int8); self.own = <int8_t*> a.data
        a = arr(np.flatnonzero(own_arr).astype(np.int32), np.int32); self.own_list = <int32_t*> a.data
        self.n_own = int(own_arr.sum())
        self.own_mask = 0
        for c in range(min(n_ctrl, 64)):
            if own_arr[c]:
                self.own_mask |= (<unsigned long long> 1) << c
        if self.partial and not skip_idle:
            raise ValueError("own needs skip_idle (a partial run skips the other controllers)")
        for c in range(n_ctrl):
            if not self.own[c]:
                self.wake[c] = NEVER
                self.next_refresh[c] = NEVER
        if abort is None:
            abort = np.zeros(1, dtype=np.int32)
        if not (isinstance(abort, np.ndarray) and abort.dtype == np.int32 and abort.size >= 1
                and abort.flags.c_contiguous):
            raise ValueError("abort: expected a contiguous int32 array of size >= 1")
        keep.append(abort)
        self.abort_flag = <int32_t*> (<cnp.ndarray> abort).data
        self.lockstep = exchange is not None
        if self.lockstep:
            if not self.partial:
                raise ValueError("exchange needs own (a lockstep run is one part of a split)")
            if not (isinstance(exchange, np.ndarray) and exchange.dtype == np.int64
                    and exchange.flags.c_contiguous and exchange.size >= XCH_HEADER
                    and exchange[0] == XCH_MAGIC and exchange[2] == n_ctrl
                    and exchange.size == _exchange_size(n_ctrl, int(exchange[1]), int(exchange[3]))):
                raise ValueError("exchange: expected an array made by lockstep_exchange for this many controllers")
            self.n_peers = int(exchange[1])
            if self.n_peers > 64:
                raise ValueError(f"exchange: {self.n_peers} runs, expected at most 64")
            if not 0 <= rank < self.n_peers:
                raise ValueError(f"rank: {rank}, expected 0 <= rank < {self.n_peers}")
            ranks = exchange[XCH_HEADER:XCH_HEADER + n_ctrl]
            if not np.array_equal(ranks == rank, own_arr.astype(bool)):
                raise ValueError(f"own: expected the controllers the exchange gives to rank {rank}")
            keep.append(exchange)
            self.xch = <int64_t*> (<cnp.ndarray> exchange).data
            self.rank = rank
            self.ring_mask = exchange[3] - 1
            self.l_off = 8
            self.ring_off = 8 + _round8(2 * n_ctrl)
            self.run_stride = self.ring_off + exchange[3]
            self.runs_off = XCH_HEADER + _round8(n_ctrl)
            self.ctrl_rank = self.xch + <int> XCH_HEADER
            a = arr(np.zeros(2 * n_ctrl, dtype=np.int64), np.int64); self.cum = <int64_t*> a.data
            promise = np.tile(np.array([self.qcap[BUF_READ], self.qcap[BUF_WRITE]], dtype=np.int64), n_ctrl)
            a = arr(promise, np.int64); self.lcache = <int64_t*> a.data     # empty queues at cycle 0
            a = arr(promise, np.int64); self.lpub = <int64_t*> a.data
            base = self.runs_off + rank * self.run_stride
            exchange[base + self.l_off:base + self.l_off + 2 * n_ctrl] = promise
            self.peer_floor = -1
            self.slept_ns = 0
            self.grace_ns = -1 if grace_ns is None else int(grace_ns)
            self.lock_ns = 0
        self.set_ghosts()           # (once own and lockstep are known)
        self.in_lockstep = self.lockstep
        self.lp_wait = False
        self.lp_clk = 0
        self.lp_phase = -1
        self.lp_head = 0
        self.lp_refused = False
        self.refused_ctrl = 0
        self.refused_stamp = -1





    def set_window(self, addr_vecs, keys, is_write, arrival, ctrl=None):
        """The trace requests the frontend reads (used in place): (n, A) int32 address vectors,
        (n,) int64 keys (the addresses, for read forwarding), (n,) write flags, (n,) int64 arrival
        cycles; ``ctrl``: optionally each request's controller, (n,) int32 (runs of a split that
        share their windows compute it once). ``addr_vecs`` None (after :meth:`map_keys`): each
        request's controller (unless given) and vector are worked out from its key, which must
        be >= 0 (a key at or beyond the capacity wraps: the caller checks the keys)."""
        cdef cnp.ndarray a
        if addr_vecs is None:
            if not self.kmap_on:
                raise ValueError("address vectors: None needs Engine.map_keys first")
            vecs = None
            n = np.shape(keys)[0] if np.ndim(keys) == 1 else -1
        else:
            vecs = np.ascontiguousarray(addr_vecs, dtype=np.int32)
            if vecs.ndim != 2 or vecs.shape[1] != self.A:
                raise ValueError(f"address vectors: shape {np.shape(addr_vecs)}, expected (n, {self.A})")
            n = vecs.shape[0]
        window = [vecs, np.ascontiguousarray(keys, dtype=np.int64),
                  np.ascontiguousarray(np.asarray(is_write, dtype=np.bool_).view(np.uint8)),
                  np.ascontiguousarray(arrival, dtype=np.int64)]
        if any(w.shape != (n,) for w in window[1:]):
            raise ValueError(f"keys, is_write, arrival: expected shape ({n},) each")
        if vecs is None:
            self.req_addr = NULL
            if n and window[1].min() < 0:
                raise ValueError("keys: expected byte addresses >= 0 when the vectors are worked out from them")
        else:
            a = window[0]; self.req_addr = <int32_t*> a.data
        a = window[1]; self.req_key = <int64_t*> a.data
        a = window[2]; self.req_write = <unsigned char*> a.data
        a = window[3]; self.arrival = <int64_t*> a.data
        self._window = window
        self.n_req = n
        if ctrl is not None:
            ctrl = np.ascontiguousarray(ctrl, dtype=np.int32)
            if ctrl.shape != (n,) or (n and (ctrl.min() < 0 or ctrl.max() >= self.n_ctrl)):
                raise ValueError(f"ctrl: expected ({n},) controller indices below {self.n_ctrl}")
        self.req_c_all = False
        if self.partial:            # (in __init__, before own is known: set_ghosts is called later)
            self.set_ghosts(ctrl)
        elif vecs is None and ctrl is not None:
            a = ctrl
            self.req_c = <int32_t*> a.data
            self.req_c_all = True
            self._window.append(ctrl)

    def map_keys(self, order, radix, int tx_shift):
        """Windows may come as keys alone (``addr_vecs`` None): the vector of key ``k`` is
        ``k >> tx_shift`` split into the levels ``order`` (every level once), in turn,
        ``v[level] = rest % radix[level]; rest //= radix[level]``, what is left dropped: a linear
        mapper's (sievesim.dram.mapping.linear_key_map). Every radix a power of two, each level
        is a bit field of the key, taken without the chain of divisions."""
        cdef int k, lv
        cdef int64_t b
        levels = [int(x) for x in order]
        radices = [int(x) for x in radix]
        if sorted(levels) != list(range(self.A)) or len(radices) != self.A:
            raise ValueError(f"map_keys: order {levels}: expected each of the {self.A} levels once, "
                             f"and {self.A} radices")
        if not 0 <= tx_shift < 63:
            raise ValueError(f"map_keys: tx_shift {tx_shift}: expected 0 to 62")
        pos = tx_shift
        self.kmap_bits = True
        for k in range(self.A):
            lv = levels[k]
            b = radices[lv]
            if b < 1 or b > 2**31:
                raise ValueError(f"map_keys: radix {b} of level {lv}: expected 1 to 2**31")
            self.kmap_level[k] = lv
            self.kmap_shift[k] = -1
            self.kmap_lpos[lv] = pos
            self.kmap_lmask[lv] = b - 1
            if b & (b - 1) == 0:
                self.kmap_shift[k] = radices[lv].bit_length() - 1
                pos += self.kmap_shift[k]
            else:
                self.kmap_bits = False
        if pos > 62:
            self.kmap_bits = False      # (a field past bit 62: the chain of shifts)
        self.kmap_tx_shift = tx_shift
        self.kmap_on = True

    def set_ghosts(self, ctrl=None):
        """The window's ghost flags: 1 for a request whose controller another run simulates; and,
        for a lockstep run, each request's controller (its steps look at them again and again;
        ``ctrl``: given, as set_window checked it)."""
        cdef cnp.ndarray a = np.zeros(max(self.n_req, 1), dtype=np.int8)
        cdef cnp.ndarray rc
        cdef Py_ssize_t r
        cdef int c
        cdef bint given = ctrl is not None and self.n_req > 0
        rc = ctrl if given else np.zeros(max(self.n_req, 1) if self.lockstep else 1, dtype=np.int32)
        self.ghost = <int8_t*> a.data
        self.req_c = <int32_t*> rc.data
        self.req_c_all = False          # (req_ctrl below: the key's while req_c fills)
        if self.partial:
            with nogil:         # (the other runs of the split take their windows meanwhile)
                if given:
                    for r in range(self.n_req):
                        self.ghost[r] = not self.own[self.req_c[r]]
                elif self.req_addr == NULL and self.kmap_bits:
                    ghosts_of_keys(self)
                else:
                    for r in range(self.n_req):
                        c = req_ctrl(self, r)
                        self.ghost[r] = not self.own[c]
                        if self.lockstep:
                            self.req_c[r] = c
        self.req_c_all = given or (self.lockstep and self.n_req > 0)
        self._window.append(a)
        self._window.append(rc)

    def feed(self, addr_vecs, keys, is_write, arrival, bint last, ctrl=None):
        """A streaming engine's next window of requests (as for ``__init__``), once :meth:`run`
        has consumed the one before (``run()['need_input']``); ``last``: no more will come;
        ``ctrl``: optionally each request's controller (see set_window). The result is the one
        of the whole trace in one engine, bit for bit (tests/test_streaming.py)."""
        if not self.streaming:
            raise RuntimeError("feed: not a streaming engine (Engine(..., stream=True))")
        if self.eof or (self.lp_head < self.n_req and not self.lp_wait):
            raise RuntimeError("feed: the window before is not consumed yet, or the last was given")
        if self.lp_head < self.n_req:
            # a lockstep stopped short of the window's end (its look-ahead crossed it): the
            # requests not taken yet (fewer than 64) come first in the next window
            h, old = self.lp_head, self._window
            if (old[0] is None) != (addr_vecs is None):
                raise ValueError("feed: address vectors given in one window and not in the next")
            if addr_vecs is not None:
                addr_vecs = np.concatenate([old[0][h:], np.asarray(addr_vecs, dtype=np.int32)])
            keys = np.concatenate([old[1][h:], np.asarray(keys, dtype=np.int64)])
            is_write = np.concatenate([old[2][h:].view(np.bool_), np.asarray(is_write, dtype=np.bool_)])
            arrival = np.concatenate([old[3][h:], np.asarray(arrival, dtype=np.int64)])
            if ctrl is not None:
                # (only a lockstep stops short, and a lockstep run keeps each request's controller;
                # otherwise they are worked out again)
                ctrl = np.concatenate([np.asarray(<int32_t[:self.n_req]> self.req_c)[h:],
                                       np.asarray(ctrl, dtype=np.int32)]) if self.req_c_all else None
        self.set_window(addr_vecs, keys, is_write, arrival, ctrl)
        self.lp_head = 0
        self.lp_wait = False
        self.eof = last

    def stream_totals(self, int64_t cycles):
        """A streaming run's counters, counting only requests served by ``cycles`` (the run's last
        cycle): ``served``, ``read_served``, ``read_latency_sum`` (cycles), ``forwarded``,
        ``row_hits``, ``row_misses``, ``row_conflicts``, ``max_depart``."""
        cdef int64_t k, served = self.st_served, reads = self.st_read_served, lat = self.st_lat_sum
        cdef int64_t first = self.dep_n - self.dep_cap if self.dep_n > self.dep_cap else 0
        cdef int64_t* e
        if not self.streaming:
            raise RuntimeError("stream_totals: not a streaming engine")
        if first > 0 and self.dep_ring[3 * (first % self.dep_cap)] > cycles:
            raise RuntimeError("stream_totals: departure ring too short")   # its size says never
        for k in range(first, self.dep_n):
            e = self.dep_ring + 3 * (k % self.dep_cap)
            if e[0] > cycles:
                served -= 1
                if e[2]:
                    reads -= 1
                    lat -= e[1]
        return dict(served=int(served), read_served=int(reads), read_latency_sum=int(lat),
                    forwarded=int(self.st_forwarded), row_hits=int(self.st_class[0]),
                    row_misses=int(self.st_class[1]), row_conflicts=int(self.st_class[2]),
                    max_depart=int(self.st_max_depart))

    def live_commands(self, extra_finals=()):
        """Commands this run can issue: the final commands of its requests (reads, writes; the
        closed-row policy's PRE; REFab when refresh is on; ``extra_finals``: PIM programs') and
        every command their prerequisite rules can return."""
        finals = {self.cmd_rd, self.cmd_wr}
        if self.closed_row:
            finals.add(self.cmd_pre)
        if self.refresh_interval > 0:
            finals.add(self.cmd_ref)
        finals.update(int(f) for f in extra_finals)
        finals.discard(-1)
        live = set(finals)
        for f in finals:
            kind = self.cmd_prereq[f]
            if kind == P_ROW_OPEN:
                live.update((self.cmd_act, self.cmd_pre))
                if not self.dual_buf and self.cmd_actab >= 0:
                    live.add(self.cmd_preab)
            elif kind == P_ALL_CLOSED:
                live.add(self.cmd_prea)
                if self.cmd_actab >= 0:
                    live.add(self.cmd_preab)
            elif kind == P_PIM_ROW_OPEN:
                if not self.dual_buf:
                    live.add(self.cmd_prea)
                live.update((self.cmd_actab, self.cmd_preab))
        return sorted(c for c in live if c >= 0)

    def set_issue_rows(self, extra_finals):
        """Flatten, per command, the plain timing rows over all levels (for issue's fast path),
        keeping only rows whose following command this run can issue: the ready times of the
        others are never read. Before the first issue only (a PIM program widens the set)."""
        if self.n_commands:
            raise RuntimeError("issue rows can change only before the run")
        s_st, s_fo, s_la, w_st = self._row_source
        live = np.zeros(self.n_cmd, dtype=bool)
        live[self.live_commands(extra_finals)] = True
        f_start, f_level, f_follow, f_lat, wlv_start, wlv_level = [0], [], [], [], [0], []
        for cmd in range(self.n_cmd):
            for L in range(self.n_lv):
                k = L * self.n_cmd + cmd
                for t in range(s_st[k], s_st[k + 1]):
                    if live[s_fo[t]]:
                        f_level.append(L)
                        f_follow.append(s_fo[t])
                        f_lat.append(s_la[t])
                if w_st[k + 1] > w_st[k]:
                    wlv_level.append(L)
            f_start.append(len(f_level))
            wlv_start.append(len(wlv_level))
        cdef cnp.ndarray a
        arrays = [np.asarray(f_start, np.int32), np.asarray(f_level + [0], np.int32),
                  np.asarray(f_follow + [0], np.int32), np.asarray(f_lat + [0], np.int64),
                  np.asarray(wlv_start, np.int32), np.asarray(wlv_level + [0], np.int32)]
        self._issue_rows = arrays
        a = arrays[0]; self.f_start = <int32_t*> a.data
        a = arrays[1]; self.f_level = <int32_t*> a.data
        a = arrays[2]; self.f_follow = <int32_t*> a.data
        a = arrays[3]; self.f_lat = <int64_t*> a.data
        a = arrays[4]; self.wlv_start = <int32_t*> a.data
        a = arrays[5]; self.wlv_level = <int32_t*> a.data

    def load_pim_programs(self, cnp.ndarray controllers, cnp.ndarray ops, cnp.ndarray rowcol, release=None):
        """Give controller ``controllers[i]`` the i-th program; ``ops`` lists each program's final
        commands (MACAB, GWRITE, RDRES, PREAB) back to back, ``rowcol`` their (row, column).

        ``controllers`` (int, (k,)) are controller indices; the programs are split by
        ``np.cumsum`` of the lengths given as the second column of ``controllers``.
        ``release`` (int, (k,), optional): the cycle before which program i issues nothing (its
        start within the refresh interval: refresh requests come every nREFI from cycle nREFI).
        """
        cdef cnp.ndarray a
        ctrl = np.asarray(controllers, dtype=np.int64).reshape(-1, 2)
        ops = np.ascontiguousarray(ops, dtype=np.int32)
        rowcol = np.ascontiguousarray(rowcol, dtype=np.int32).reshape(-1, 2)
        if ops.shape[0] != rowcol.shape[0] or int(ctrl[:, 1].sum()) != ops.shape[0]:
            raise ValueError("program lengths do not match the op arrays")
        for k in (self.cmd_macab, self.cmd_actab):
            if k < 0:
                raise ValueError("this standard has no PIM commands")
        # the commands the programs use, in one compiled pass (np.unique hashed every op:
        # `python benchmarks/run.py pim PIMCommandRate`, docs/pim.md "Speed")
        used = np.zeros(max(self.n_cmd, 1), dtype=np.uint8)
        cdef unsigned char[::1] used_v = used
        cdef const int32_t[::1] ops_v = ops
        cdef Py_ssize_t op_i, bad_op = -1
        cdef int32_t op
        with nogil:
            for op_i in range(ops_v.shape[0]):
                op = ops_v[op_i]
                if op < 0 or op >= self.n_cmd:
                    bad_op = op_i
                    break
                used_v[op] = 1
        if bad_op >= 0:
            raise ValueError(f"ops[{bad_op}] = {ops[bad_op]}: expected a command index from 0 to {self.n_cmd - 1}")
        self.set_issue_rows(np.flatnonzero(used))
        self._keep.extend([ops, rowcol])
        self.prog_final = <int32_t*> (<cnp.ndarray> ops).data
        self.prog_rowcol = <int32_t*> (<cnp.ndarray> rowcol).data
        self.n_prog_ops = ops.shape[0]
        rel = np.zeros(len(ctrl), dtype=np.int64) if release is None else np.asarray(release, dtype=np.int64)
        if rel.shape != (len(ctrl),) or (rel < 0).any():
            raise ValueError("release: one non-negative cycle per program")
        pos = 0
        for i, (c, n) in enumerate(ctrl):
            if not 0 <= c < self.n_ctrl:
                raise ValueError(f"controller {c} out of range")
            if self.prog_end[c] > self.prog_start[c]:
                raise ValueError(f"controller {c} has two programs")
            self.prog_start[c] = pos
            self.prog_head[c] = pos
            self.prog_end[c] = pos + n
            self.prog_release[c] = rel[i]
            pos += n
            if n:
                self.wake[c] = 1

    # ------------------------------------------------------------------ Python face
    def run(self, int64_t until=-1):
        """Simulate until the end condition (or, ``until`` >= 0, to cycle ``until``), from where
        the last call stopped; returns a dict of raw per-request arrays and counters.

        ``refused`` in the result: a partial run (``own``) stopped at a refused request, or
        because another run of its split did (``abort``); its numbers are then incomplete.
        ``contended``: a lockstep run gave up because it slept waiting for the others more than a
        third of its time (their threads did not all have a core); ``refused`` is set too.
        """
        cdef int64_t clk
        cdef bint ended = False
        if self.in_lockstep and until >= 0:
            raise ValueError("a lockstep run goes to the end of the trace before it can stop at a cycle")
        with nogil:
            if self.in_lockstep:
                ended = run_lockstep(self)
            # (a streamed lockstep that waits for input does not go on in run_loop)
            clk = self.lp_clk if ended or self.error_code or self.in_lockstep else run_loop(self, until)
        if self.error_code == 1:
            raise RuntimeError("request slots exhausted: more requests in flight than the buffers hold")
        if self.error_code == 2:
            raise RuntimeError("priority buffer overflow")
        if self.error_code == 3:
            raise MemoryError("command log")
        if self.error_code == 4:
            raise RuntimeError("engine deadlock: no controller can make progress")
        if self.error_code == 5:
            raise ValueError(f"clock ratio x memory clock ratio {self.clock_ratio * self.mem_ratio} above 64")
        if self.error_code == 8:
            raise RuntimeError("lockstep: a request that the dry run accepted was refused")
        out = dict(
            clk=int(clk),
            last_issue=int(self.last_issue),
            n_commands=int(self.n_commands),
            n_refresh=int(self.n_refresh),
            need_input=bool(self.streaming and not self.eof and (self.lp_head >= self.n_req or self.lp_wait)),
            arrive=self._out["arrive"],
            depart=self._out["depart"],
            row_class=self._out["row_class"],
            forwarded=self._out["forwarded"],
            pim_done=np.asarray(<int64_t[:self.n_ctrl]> self.prog_done).copy(),
            pim_stall=np.asarray(<int64_t[:self.n_ctrl]> self.prog_stall).copy(),
            pim_counts=np.asarray(<int64_t[:self.n_ctrl * 5]> self.pim_counts).reshape(self.n_ctrl, 5).copy(),
            pim_has_program=(np.asarray(<int64_t[:self.n_ctrl]> self.prog_end)
                             > np.asarray(<int64_t[:self.n_ctrl]> self.prog_start)).copy(),
            refused=self.error_code in (6, 7, 9),
            contended=self.error_code == 9,
            idle=bool(idle(self)),
        )
        out.update(self.residency())
        if self.log_on:
            out.update(log_arrays(self))
        return out

    def residency(self):
        """Bank-state residency so far, per unit (node of the residency level), int64 arrays:
        ``res_open_cycles`` (cycles of closed intervals with a row buffer open), ``res_open_since``
        (start of the interval still open, -1 none), ``res_ref_cycles`` (tRFC cycles of the
        refreshes issued), ``res_ref_end`` (end of the last one, -1 none). Active standby time up
        to cycle T: open cycles + (T - since where open) + refresh cycles - (end - T where end > T)."""
        n = self.res_units
        since = np.asarray(<int64_t[:n]> self.res_since).copy()
        since[np.asarray(<int32_t[:n]> self.res_open) == 0] = -1
        return dict(res_open_cycles=np.asarray(<int64_t[:n]> self.res_cycles).copy(), res_open_since=since,
                    res_ref_cycles=np.asarray(<int64_t[:n]> self.res_ref_cycles).copy(),
                    res_ref_end=np.asarray(<int64_t[:n]> self.res_ref_end).copy())
