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
from libc.string cimport memmove

cnp.import_array()

cdef enum:
    BUF_READ = 0
    BUF_WRITE = 1
    BUF_ACTIVE = 2
    BUF_PRIO = 3
    NBUF = 4
    T_READ = 0
    T_WRITE = 1
    T_REFRESH = 2
    T_CLOSE = 3
    F_OPENING = 1
    F_CLOSING = 2
    F_ACCESSING = 4
    F_REFRESHING = 8
    A_OPEN = 1
    A_CLOSE = 2
    A_CLOSE_ALL = 3
    A_PIM_OPEN = 4
    A_PIM_CLOSE = 5
    P_ROW_OPEN = 1
    P_ALL_CLOSED = 2
    P_PIM_ROW_OPEN = 3
    MAX_ADDR = 16
    MAX_SLOT_LEVELS = 6

cdef int64_t NEVER = 0x3FFFFFFFFFFFFFFF

ctypedef struct Slot:
    # A request in a buffer: what FR-FCFS scans read, in one 64-byte line.
    # The cache: its last computed (next command, ready time) stays a valid lower bound of its
    # ready time until its bank changes state (ready times only grow), tracked by a per-bank
    # epoch; and it is exact while its controller has issued nothing since (same issue count).
    int64_t rt                    # cached ready time (cycles)
    int64_t exact                 # ctrl_issues when rt was computed
    int32_t epoch                 # bank_epoch[bank] then
    int32_t bank                  # bank index, -1 below a broadcast
    int32_t row
    int32_t cur_cmd               # next command (set with rt)
    int32_t final_cmd
    int8_t rtype                  # T_READ, T_WRITE, T_REFRESH, T_CLOSE
    int32_t nodes[MAX_SLOT_LEVELS]  # per level: (node offset) * n_cmd, -1 below a broadcast

# per-request outputs: cycle accepted (-1 never), cycle served (-1 never), row class of the first
# command (-1 not yet, 0 hit, 1 miss, 2 conflict), forwarded from a pending write (0 / 1)
OUTPUTS = {"arrive": (np.int64, -1), "depart": (np.int64, -1), "row_class": (np.int8, -1),
           "forwarded": (np.int8, 0)}


def new_outputs(n):
    """Per-request output arrays for ``n`` requests, in their initial state."""
    return {name: np.full(n, init, dtype=dtype) for name, (dtype, init) in OUTPUTS.items()}

cdef extern from *:
    int __builtin_ctzll(unsigned long long) nogil

cdef extern from *:
    """
    /* the abort flag is written by one thread and polled by others: volatile keeps every poll */
    static inline int32_t sievesim_flag_get(int32_t *p) { return *(volatile int32_t *) p; }
    static inline void sievesim_flag_set(int32_t *p) { *(volatile int32_t *) p = 1; }
    """
    int32_t sievesim_flag_get(int32_t* p) nogil
    void sievesim_flag_set(int32_t* p) nogil

cdef extern from *:
    """
    #include <sched.h>
    /* lockstep exchange between the runs of a split: a value is published with release order and
       read with acquire order, so what was written before the publication is seen after it */
    static inline void sievesim_publish(int64_t *p, int64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
    static inline int64_t sievesim_read(int64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    static inline void sievesim_spin(long n) {
    #if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
    #endif
        if (n > 2000) sched_yield();     /* more threads than cores: let the others run */
    }
    """
    void sievesim_publish(int64_t* p, int64_t v) nogil
    int64_t sievesim_read(int64_t* p) nogil
    void sievesim_spin(long n) nogil


cdef inline int64_t i64max(int64_t a, int64_t b) noexcept nogil:
    return a if a > b else b


cdef inline int64_t i64min(int64_t a, int64_t b) noexcept nogil:
    return a if a < b else b


cdef class Engine:
    """One memory system: controllers, banks and timing state, driven by a request stream.

    Build it from ``DRAMConfig.compile()`` and call :meth:`run` once with the mapped requests.
    """
    # ---- compiled standard
    cdef int n_lv, A, n_cmd, n_nodes, n_banks, ctrl_level, row_lv, n_ctrl, hist_w
    cdef int cmd_act, cmd_pre, cmd_prea, cmd_rd, cmd_wr, cmd_ref
    cdef int cmd_actab, cmd_preab, cmd_macab, cmd_gwrite, cmd_rdres
    cdef bint dual_buf
    cdef int flat_ready           # 4 or 5: reads and writes open rows by ACT / PRE, and ACT, PRE, RD and WR
                                  # check every one of the 4 or 5 levels (entry_ready's straight path); else 0
    cdef int64_t n_rfc
    cdef int32_t* has_rows        # per (level, cmd): any rows (skips empty levels of broadcasts)
    # ---- PIM programs: per controller, ops [start, end) issued in order
    cdef int32_t* pim_row         # per node: open PIM row (-1 closed)
    cdef int64_t* prog_start
    cdef int64_t* prog_end
    cdef int64_t* prog_head
    cdef int64_t* prog_done
    cdef int64_t* prog_stall
    cdef int64_t* prog_release    # per controller: the program's first command issues no earlier
    cdef int64_t* prog_result     # per controller: when the last RDRES's data has reached the GPU
    cdef int64_t* pim_counts      # (n_ctrl, 5): ACTAB, PREAB, MACAB, GWRITE, RDRES issued
    cdef int32_t* prog_final
    cdef int32_t* prog_rowcol     # (n_ops, 2)
    cdef int64_t n_prog_ops
    cdef int64_t read_latency, write_latency, refresh_interval
    cdef int qcap[NBUF]
    cdef float wr_low, wr_high
    cdef int wr_enter, wr_leave     # write mode: enter at >= wr_enter writes, leave below wr_leave
    cdef bint closed_row, end_on_accept
    cdef int64_t row_cap
    cdef int clock_ratio, mem_ratio
    cdef int64_t* counts
    cdef int64_t* node_off
    cdef int64_t* sub_span        # sub_span[L * n_lv + L2]: nodes at level L2 below one node at level L
    cdef int32_t* cmd_check
    cdef int32_t* cmd_scope
    cdef int32_t* cmd_flags
    cdef int32_t* cmd_action
    cdef int32_t* cmd_prereq
    cdef int32_t* hist_window
    # the same rows split by kind for the hot loop: plain (window 1), windowed (tFAW), sibling
    cdef int32_t* s_start
    cdef int32_t* s_follow
    cdef int64_t* s_lat
    cdef int32_t* w_start
    cdef int32_t* w_follow
    cdef int64_t* w_lat
    cdef int32_t* w_win
    cdef int32_t* b_start
    cdef int32_t* b_follow
    cdef int64_t* b_lat
    cdef int32_t* has_sibling     # per (level, cmd)
    # plain rows of one command over every level, flattened for requests with a full address:
    # f_start[cmd]..f_start[cmd+1] -> (level, following command, latency)
    cdef int32_t* f_start
    cdef int32_t* f_level
    cdef int32_t* f_follow
    cdef int64_t* f_lat
    cdef int32_t* wlv_start       # per command: the levels that have windowed rows (tFAW)
    cdef int32_t* wlv_level
    cdef int32_t* cmd_has_sibling # per command: sibling rows at any level
    # ---- state
    cdef int64_t* ready           # (n_nodes, n_cmd)
    cdef int64_t* hist            # (n_nodes, n_cmd, hist_w)
    cdef int32_t* open_row        # (n_banks,)
    cdef int64_t* col_access      # (n_banks,) closed-row policy counters
    cdef int32_t* buf             # (n_ctrl, NBUF, stride)
    cdef int32_t* bsize           # (n_ctrl, NBUF)
    cdef int stride
    cdef int8_t* write_mode
    cdef int64_t* flip_clk        # (n_ctrl,) write mode flipped ahead of the tick at this cycle (see flip_ahead)
    cdef int64_t* wake
    cdef int64_t* next_refresh
    # ---- trace requests (inputs read where they are; outputs per request)
    cdef int n_req
    cdef int32_t* req_addr        # (n_req, A) address vectors
    cdef int64_t* req_key         # (n_req,) physical address (read forwarding)
    cdef unsigned char* req_write # (n_req,)
    cdef int64_t* arrival         # (n_req,) earliest frontend cycle
    cdef int64_t* out_arrive      # (n_req,) cycle accepted, -1 never
    cdef int64_t* out_depart      # (n_req,) cycle served, -1 never
    cdef int8_t* out_row_class    # (n_req,) -1 not yet, 0 hit, 1 miss, 2 conflict
    cdef int8_t* out_forwarded    # (n_req,)
    # ---- slots: every request in a buffer (trace or maintenance) lives in one; bounded by the
    # buffers' capacities, so the hot loop touches a few kilobytes whatever the trace length
    cdef int n_slots, slot_free_top
    cdef int32_t* slot_free
    cdef int32_t* slot_req        # trace request index, -1 for maintenance
    cdef int32_t* addr            # (n_slots, A) addresses of maintenance requests
    cdef int32_t** aptr           # (n_slots,) address vector: into req_addr, or into addr
    cdef Slot* sl                 # (n_slots,) what the scans read, one cache line per slot (see Slot)
    cdef int64_t* key
    cdef int64_t* arrive
    cdef int8_t* row_class        # -1 not yet, 0 hit, 1 miss, 2 conflict
    cdef int64_t* ctrl_issues     # (n_ctrl,) commands issued so far
    # what the post-issue prediction found: at cycle pred_clk, with no issue since (pred_stamp), the
    # request at pred_pos of queue pred_src is the oldest ready one (see next_wake_after_issue)
    cdef int64_t* pred_clk
    cdef int64_t* pred_stamp
    cdef int32_t* pred_pos
    cdef int8_t* pred_src
    cdef int32_t* bank_epoch
    # ---- command log
    cdef bint log_on
    cdef int64_t log_n, log_cap
    cdef int64_t* log_clk
    cdef int32_t* log_addr
    cdef int8_t* log_cmd
    # ---- counters
    cdef int64_t n_commands, n_refresh, clk_end, last_issue
    cdef int error_code
    cdef bint skip_idle
    # ---- a run of some controllers only (see sievesim._core.parallel): requests to the others
    # are accepted without effect; a refused request ends the run (error_code 6), since in the
    # whole system it would hold the frontend back for every controller
    cdef int8_t* own              # (n_ctrl,) 1: simulated here
    cdef int32_t* own_list        # the controllers simulated here, in index order
    cdef int n_own
    cdef int8_t* ghost            # (n_req,) 1: the request goes to a controller not simulated here
    cdef bint partial
    cdef int32_t* abort_flag      # shared between the runs of one split: set by the run that fails
    # lockstep (see run_lockstep): the runs of a split exchange, each memory cycle, how far the
    # frontend can go by their own controllers and when these wake next
    cdef bint lockstep
    cdef int64_t* xch             # (n_peers, 2 parities, 8): step, stop, wake (one cache line each)
    cdef int rank, n_peers
    cdef int64_t xstep
    # ---- main loop state kept between calls of run(until)
    cdef int64_t lp_clk, lp_phase
    cdef int32_t lp_head
    cdef bint lp_refused
    # the controller that refused the frontend's head request, and its issue count then: until it
    # issues, its queues cannot shrink and offering the request again is futile
    cdef int refused_ctrl
    cdef int64_t refused_stamp
    cdef object _keep             # keeps numpy buffers alive
    cdef object _row_source       # the spec's plain rows (start, follow, latency) and window starts
    cdef object _issue_rows       # keeps the f_* / wlv_* arrays alive
    cdef dict _out                # per-request output arrays (returned as views)
    # keys of the writes waiting in write buffers (read forwarding): open addressing, linear probing
    cdef int64_t* wh_key
    cdef int32_t* wh_cnt
    cdef int64_t wh_mask
    cdef int wh_shift

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
                 abort=None, outputs=None, exchange=None, int rank=0):
        """``own``: (n_ctrl,) bools, the controllers this engine simulates (default all); with
        ``own``, a request refused by its controller ends the run (``run()['refused']``).
        ``abort``: an int32 array shared by the engines of one split; a refusal sets
        ``abort[0]`` and an engine that sees it set stops. ``outputs``: the per-request output
        arrays to write into (see :func:`new_outputs`), shared by the engines of one split, each
        writing only its own requests; default: new ones."""
        cdef Py_ssize_t slot_i
        cdef int level_i
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
        self.set_watermarks()
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
        n = addr_vecs.shape[0]
        self.n_req = n
        if self.n_nodes * self.n_cmd >= 2**31:
            raise ValueError("organisation too large for 32-bit node offsets")
        a = arr(addr_vecs, np.int32)
        if a.ndim != 2 or a.shape[1] != self.A:
            raise ValueError(f"address vectors: shape {np.shape(addr_vecs)}, expected (n, {self.A})")
        self.req_addr = <int32_t*> a.data
        a = arr(keys, np.int64); self.req_key = <int64_t*> a.data
        a = arr(np.asarray(is_write, dtype=np.bool_).view(np.uint8), np.uint8)
        self.req_write = <unsigned char*> a.data
        a = arr(arrival, np.int64); self.arrival = <int64_t*> a.data
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
        a = arr(np.full(S, -1, dtype=np.int32), np.int32); self.slot_req = <int32_t*> a.data
        a = arr(np.full(S * self.A, -1, dtype=np.int32), np.int32); self.addr = <int32_t*> a.data
        a = arr(np.zeros(S, dtype=np.intp), np.intp); self.aptr = <int32_t**> a.data
        a = arr(np.zeros(S, dtype=np.int64), np.int64); self.key = <int64_t*> a.data
        a = arr(np.full(S, -1, dtype=np.int64), np.int64); self.arrive = <int64_t*> a.data
        a = arr(np.full(S, -1, dtype=np.int8), np.int8); self.row_class = <int8_t*> a.data
        a = arr(np.zeros(S * sizeof(Slot) + 64, dtype=np.uint8), np.uint8)
        self.sl = <Slot*> ((<size_t> a.data + 63) & ~(<size_t> 63))     # line-aligned
        for slot_i in range(S):        # typed counters: a C loop
            self.sl[slot_i].rt = -1
            self.sl[slot_i].exact = -1
            self.sl[slot_i].epoch = -1
            self.sl[slot_i].bank = -1
            self.sl[slot_i].row = -1
            for level_i in range(MAX_SLOT_LEVELS):
                self.sl[slot_i].nodes[level_i] = -1
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
        if self.partial and not skip_idle:
            raise ValueError("own needs skip_idle (a partial run skips the other controllers)")
        for c in range(n_ctrl):
            if not self.own[c]:
                self.wake[c] = NEVER
                self.next_refresh[c] = NEVER
        a = arr(np.zeros(max(n, 1) if self.partial else 1, dtype=np.int8), np.int8)
        self.ghost = <int8_t*> a.data
        if self.partial:
            for r in range(n):
                self.ghost[r] = not self.own[self.req_ctrl(r)]
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
                    and exchange.flags.c_contiguous and exchange.size % 16 == 0 and exchange.size >= 16):
                raise ValueError("exchange: expected a contiguous int64 array of 16 per run")
            self.n_peers = exchange.size // 16
            if not 0 <= rank < self.n_peers:
                raise ValueError(f"rank: {rank}, expected 0 <= rank < {self.n_peers}")
            keep.append(exchange)
            self.xch = <int64_t*> (<cnp.ndarray> exchange).data
            self.rank = rank
            self.xstep = 0
        self.lp_clk = 0
        self.lp_phase = -1
        self.lp_head = 0
        self.lp_refused = False
        self.refused_ctrl = 0
        self.refused_stamp = -1

    cdef inline int req_ctrl(self, int32_t r) noexcept nogil:
        """Controller of trace request ``r``: flat index of its address down to the controller level."""
        cdef int64_t flat = 0
        cdef int L
        cdef int32_t* av = self.req_addr + <int64_t> r * self.A
        for L in range(self.ctrl_level + 1):
            flat = flat * self.counts[L] + av[L]
        return <int> flat

    cdef inline int32_t slot_take(self) noexcept nogil:
        if self.slot_free_top == 0:
            self.error_code = 1
            return -1
        self.slot_free_top -= 1
        return self.slot_free[self.slot_free_top]

    cdef inline void slot_give(self, int32_t s) noexcept nogil:
        self.slot_free[self.slot_free_top] = s
        self.slot_free_top += 1

    cdef inline void fill_slot(self, int32_t s, int32_t r, int64_t clk) noexcept nogil:
        """Slot ``s`` takes trace request ``r`` arriving at ``clk``: type, command, address, node offsets."""
        cdef int L
        cdef int64_t flat = 0
        cdef int32_t* av = self.req_addr + <int64_t> r * self.A
        cdef int32_t* nodes = self.sl[s].nodes
        self.slot_req[s] = r
        self.key[s] = self.req_key[r]
        self.sl[s].rtype = T_WRITE if self.req_write[r] else T_READ
        self.sl[s].final_cmd = self.cmd_wr if self.req_write[r] else self.cmd_rd
        self.sl[s].cur_cmd = self.sl[s].final_cmd
        self.arrive[s] = clk
        self.row_class[s] = -1
        self.sl[s].rt = -1
        self.sl[s].exact = -1
        self.aptr[s] = av
        self.sl[s].row = av[self.row_lv]
        # set_nodes without its broadcast test: a trace request addresses every level (measured:
        # calling set_nodes here costs 1-2 % more instructions per request)
        for L in range(self.n_lv):
            flat = flat * self.counts[L] + av[L]
            nodes[L] = <int32_t> ((self.node_off[L] + flat) * self.n_cmd)
        self.sl[s].bank = <int32_t> flat

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
        self.set_issue_rows(np.unique(ops))
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

    # ------------------------------------------------------------------ timing state
    cdef inline int64_t ready_time(self, int cmd, int32_t* av) noexcept nogil:
        """Earliest cycle at which ``cmd`` to address ``av`` satisfies every timing row (max of ready times)."""
        cdef int64_t rt = -1, idx = 0, span, base, j
        cdef int L, L2, depth = self.cmd_check[cmd], n_cmd = self.n_cmd
        for L in range(depth + 1):
            if av[L] < 0:
                # broadcast below here: every node of the subtree of node idx (level L-1)
                for L2 in range(L, depth + 1):
                    span = self.sub_span[(L - 1) * self.n_lv + L2]
                    base = self.node_off[L2] + idx * span
                    for j in range(span):
                        rt = i64max(rt, self.ready[(base + j) * n_cmd + cmd])
                return rt
            idx = idx * self.counts[L] + av[L]
            rt = i64max(rt, self.ready[(self.node_off[L] + idx) * n_cmd + cmd])
        return rt

    cdef inline int64_t req_ready(self, int cmd, int32_t r) noexcept nogil:
        """ready_time for a queued request, through its precomputed node offsets."""
        cdef int64_t rt = -1, v
        cdef int L
        cdef int32_t* nodes = self.sl[r].nodes
        cdef int64_t* rd = self.ready + cmd
        cdef int depth = self.cmd_check[cmd]
        if self.sl[r].bank < 0:
            return self.ready_time(cmd, self.aptr[r])
        # the first four levels unrolled, branch-free (every standard here checks at most 4 or 5)
        rt = rd[nodes[0]]
        if depth >= 1:
            v = rd[nodes[1]]
            rt = v if v > rt else rt
            if depth >= 2:
                v = rd[nodes[2]]
                rt = v if v > rt else rt
                if depth >= 3:
                    v = rd[nodes[3]]
                    rt = v if v > rt else rt
                    for L in range(4, depth + 1):
                        v = rd[nodes[L]]
                        rt = v if v > rt else rt
        return rt

    cdef inline int row_open_next(self, int32_t r, int64_t bank) noexcept nogil:
        """Next command of request ``r`` whose final command needs its row open in ``bank`` (a
        plain row buffer): ACT, PRE or the final command itself, chosen by selects rather than
        branches, since which of the three it is, is hard to predict."""
        cdef int32_t row = self.open_row[bank]
        cdef int cmd = self.sl[r].final_cmd if row == self.sl[r].row else self.cmd_pre
        return self.cmd_act if row < 0 else cmd

    cdef inline int req_prereq(self, int32_t r) noexcept nogil:
        """Next command of request ``r`` (prerequisite rule of its final command)."""
        cdef int cmd = self.sl[r].final_cmd
        if self.cmd_prereq[cmd] == P_ROW_OPEN and self.sl[r].bank >= 0 and (self.dual_buf or self.cmd_actab < 0):
            return self.row_open_next(r, self.sl[r].bank)
        return self.prereq(cmd, self.aptr[r])

    cdef inline void apply_rows(self, int L, int64_t node, int cmd, int64_t clk, bint sibling) noexcept nogil:
        """Push the ready times that ``cmd`` at ``clk`` imposes on ``node`` (level ``L``)."""
        self.apply_at(L * self.n_cmd + cmd, node * self.n_cmd, cmd, clk, sibling)

    cdef inline void apply_at(self, int k, int64_t off, int cmd, int64_t clk, bint sibling) noexcept nogil:
        """Rows of (level, command) ``k`` on the node whose ready times start at ``ready + off``."""
        cdef int t
        cdef int64_t v
        cdef int64_t* rd = self.ready + off
        if sibling:
            for t in range(self.b_start[k], self.b_start[k + 1]):
                v = clk + self.b_lat[t]
                if v > rd[self.b_follow[t]]:
                    rd[self.b_follow[t]] = v
            return
        for t in range(self.s_start[k], self.s_start[k + 1]):
            v = clk + self.s_lat[t]
            if v > rd[self.s_follow[t]]:
                rd[self.s_follow[t]] = v
        if self.w_start[k] < self.w_start[k + 1]:
            self.apply_window(k, off, cmd, clk)

    cdef inline void apply_window(self, int k, int64_t off, int cmd, int64_t clk) noexcept nogil:
        """Windowed rows (e.g. tFAW) of (level, command) ``k``: shift the issue history, then push."""
        cdef int t, e = self.w_start[k + 1], hw
        cdef int64_t past, v, hbase
        cdef int64_t* rd = self.ready + off
        hw = self.hist_window[k]
        hbase = (off + cmd) * self.hist_w
        memmove(&self.hist[hbase + 1], &self.hist[hbase], (hw - 1) * sizeof(int64_t))
        self.hist[hbase] = clk
        for t in range(self.w_start[k], e):
            past = self.hist[hbase + self.w_win[t] - 1]
            if past >= 0:
                v = past + self.w_lat[t]
                if v > rd[self.w_follow[t]]:
                    rd[self.w_follow[t]] = v

    cdef inline void update_timing_req(self, int cmd, int32_t r, int64_t clk) noexcept nogil:
        """update_timing for a request with a full address, through its precomputed node offsets:
        the command's plain rows over all levels in one pass, then its windowed levels."""
        cdef int t, e = self.f_start[cmd + 1]
        cdef int64_t v
        cdef int64_t* rd
        cdef int32_t* nodes = self.sl[r].nodes
        for t in range(self.f_start[cmd], e):
            rd = self.ready + nodes[self.f_level[t]] + self.f_follow[t]
            v = clk + self.f_lat[t]
            rd[0] = v if v > rd[0] else rd[0]      # branch-free max
        for t in range(self.wlv_start[cmd], self.wlv_start[cmd + 1]):
            self.apply_window(self.wlv_level[t] * self.n_cmd + cmd, nodes[self.wlv_level[t]], cmd, clk)

    cdef void update_timing(self, int cmd, int32_t* av, int64_t clk) noexcept nogil:
        cdef int64_t idx = 0, span, base, j, parent
        cdef int L, L2, c
        for L in range(self.n_lv):
            if av[L] < 0:
                for L2 in range(L, self.n_lv):
                    if not self.has_rows[L2 * self.n_cmd + cmd]:
                        continue
                    span = self.sub_span[(L - 1) * self.n_lv + L2]
                    base = idx * span
                    for j in range(span):
                        self.apply_rows(L2, base + j + self.node_off[L2], cmd, clk, False)
                return
            parent = idx
            idx = idx * self.counts[L] + av[L]
            if not self.has_rows[L * self.n_cmd + cmd]:
                continue
            if L > 0 and self.has_sibling[L * self.n_cmd + cmd]:
                for c in range(self.counts[L]):
                    if c != av[L]:
                        self.apply_rows(L, self.node_off[L] + parent * self.counts[L] + c, cmd, clk, True)
            self.apply_rows(L, self.node_off[L] + idx, cmd, clk, False)

    cdef inline int64_t bank_of(self, int32_t* av) noexcept nogil:
        cdef int64_t idx = 0
        cdef int L
        for L in range(self.n_lv):
            idx = idx * self.counts[L] + av[L]
        return idx

    cdef inline void bank_range(self, int32_t* av, int level, int64_t* lo, int64_t* hi) noexcept nogil:
        """Banks below the node that ``av`` addresses at ``level`` (or above, where ``av`` is -1)."""
        cdef int64_t idx = 0, span
        cdef int L, last = -1
        for L in range(level + 1):
            if av[L] < 0:
                break
            idx = idx * self.counts[L] + av[L]
            last = L
        span = self.sub_span[last * self.n_lv + self.n_lv - 1]
        lo[0] = idx * span
        hi[0] = (idx + 1) * span

    cdef inline void update_states(self, int cmd, int32_t* av, int64_t bank) noexcept nogil:
        """Bank states after ``cmd`` to ``av``; ``bank``: its bank index when known (-1: derive it)."""
        cdef int act = self.cmd_action[cmd]
        cdef int64_t lo, hi, b
        if act == A_OPEN:
            b = bank if bank >= 0 else self.bank_of(av)
            self.open_row[b] = av[self.row_lv]
            self.bank_epoch[b] += 1
        elif act == A_CLOSE:
            b = bank if bank >= 0 else self.bank_of(av)
            self.open_row[b] = -1
            self.bank_epoch[b] += 1
        elif act == A_CLOSE_ALL:
            self.bank_range(av, self.cmd_scope[cmd], &lo, &hi)
            for b in range(lo, hi):
                self.open_row[b] = -1
                self.bank_epoch[b] += 1
        elif act == A_PIM_OPEN or act == A_PIM_CLOSE:
            self.pim_row[self.node_at(av, self.cmd_scope[cmd])] = av[self.row_lv] if act == A_PIM_OPEN else -1
            # a shared row buffer makes every bank's prerequisite depend on the PIM row
            self.bank_range(av, self.cmd_scope[cmd], &lo, &hi)
            for b in range(lo, hi):
                self.bank_epoch[b] += 1

    cdef inline int64_t node_at(self, int32_t* av, int level) noexcept nogil:
        """Flat node index (into per-node arrays) of the node ``av`` addresses at ``level``."""
        cdef int64_t idx = 0
        cdef int L
        for L in range(level + 1):
            idx = idx * self.counts[L] + av[L]
        return self.node_off[level] + idx

    cdef inline bint any_bank_open(self, int32_t* av, int level) noexcept nogil:
        cdef int64_t lo, hi, b
        self.bank_range(av, level, &lo, &hi)
        for b in range(lo, hi):
            if self.open_row[b] >= 0:
                return True
        return False

    cdef inline int prereq(self, int cmd, int32_t* av) noexcept nogil:
        cdef int kind = self.cmd_prereq[cmd]
        cdef int32_t r
        cdef int pim_level
        if kind == P_ROW_OPEN:
            if not self.dual_buf and self.cmd_actab >= 0:
                if self.pim_row[self.node_at(av, self.cmd_scope[self.cmd_actab])] >= 0:
                    return self.cmd_preab
            r = self.open_row[self.bank_of(av)]
            if r < 0:
                return self.cmd_act
            if r == av[self.row_lv]:
                return cmd
            return self.cmd_pre
        if kind == P_ALL_CLOSED:
            if self.any_bank_open(av, self.cmd_scope[cmd]):
                return self.cmd_prea
            if self.cmd_actab >= 0 and self.pim_row[self.node_at(av, self.cmd_scope[self.cmd_actab])] >= 0:
                return self.cmd_preab
            return cmd
        if kind == P_PIM_ROW_OPEN:
            pim_level = self.cmd_scope[cmd]
            if not self.dual_buf and self.any_bank_open(av, pim_level):
                return self.cmd_prea
            r = self.pim_row[self.node_at(av, pim_level)]
            if r < 0:
                return self.cmd_actab
            if r == av[self.row_lv]:
                return cmd
            return self.cmd_preab
        return cmd

    # ------------------------------------------------------------------ buffers
    cdef inline int64_t wh_home(self, int64_t key) noexcept nogil:
        return <int64_t> ((<unsigned long long> key * 0x9E3779B97F4A7C15ULL) >> self.wh_shift)

    cdef inline int64_t wh_find(self, int64_t key) noexcept nogil:
        """Slot of ``key`` among the pending write keys, -1 if none is pending."""
        cdef int64_t i = self.wh_home(key)
        while self.wh_cnt[i]:
            if self.wh_key[i] == key:
                return i
            i = (i + 1) & self.wh_mask
        return -1

    cdef inline void wh_add(self, int64_t key) noexcept nogil:
        cdef int64_t i = self.wh_home(key)
        while self.wh_cnt[i]:
            if self.wh_key[i] == key:
                self.wh_cnt[i] += 1
                return
            i = (i + 1) & self.wh_mask
        self.wh_key[i] = key
        self.wh_cnt[i] = 1

    cdef inline void wh_remove(self, int64_t key) noexcept nogil:
        """One write of ``key`` left its write buffer; backward-shift deletion keeps probes short."""
        cdef int64_t i = self.wh_find(key), j, home
        if i < 0:
            return
        self.wh_cnt[i] -= 1
        if self.wh_cnt[i]:
            return
        j = i
        while True:
            j = (j + 1) & self.wh_mask
            if not self.wh_cnt[j]:
                return
            home = self.wh_home(self.wh_key[j])
            # move j into the hole at i unless its home lies cyclically in (i, j]
            if (j > i and (home <= i or home > j)) or (j < i and (home <= i and home > j)):
                self.wh_key[i] = self.wh_key[j]
                self.wh_cnt[i] = self.wh_cnt[j]
                self.wh_cnt[j] = 0
                i = j

    cdef inline int32_t* bptr(self, int c, int b) noexcept nogil:
        return self.buf + (c * NBUF + b) * self.stride

    cdef inline void bremove(self, int c, int b, int pos) noexcept nogil:
        cdef int32_t* p = self.bptr(c, b)
        cdef int n = self.bsize[c * NBUF + b]
        if b == BUF_WRITE:
            self.wh_remove(self.key[p[pos]])
        memmove(p + pos, p + pos + 1, (n - pos - 1) * sizeof(int32_t))
        self.bsize[c * NBUF + b] = n - 1

    cdef inline bint bpush(self, int c, int b, int32_t r) noexcept nogil:
        cdef int n = self.bsize[c * NBUF + b]
        if n >= self.qcap[b]:
            return False
        self.bptr(c, b)[n] = r
        self.bsize[c * NBUF + b] = n + 1
        if b == BUF_WRITE:
            self.wh_add(self.key[r])
        return True

    cdef inline int64_t entry_ready(self, int c, int32_t r, int64_t clk) noexcept nogil:
        """Ready time of queued request ``r``'s next command, exact or a lower bound above ``clk``.

        Sets ``cur_cmd[r]`` when it computes. The cached value is exact while controller ``c`` has
        issued nothing since; otherwise, while its bank keeps its state, a lower bound (ready times
        only grow), good enough when it lies after ``clk``.
        """
        cdef int64_t rt, bank = self.sl[r].bank, a, b
        cdef int cmd
        cdef int32_t* nodes
        cdef int64_t* rd
        if self.sl[r].exact == self.ctrl_issues[c]:
            return self.sl[r].rt
        if bank >= 0 and self.sl[r].epoch == self.bank_epoch[bank] and self.sl[r].rt > clk:
            return self.sl[r].rt
        if self.flat_ready and bank >= 0 and self.sl[r].rtype <= T_WRITE:
            # req_prereq and req_ready, straight: the next command by selects, then the maximum
            # over its 4 or 5 levels
            cmd = self.row_open_next(r, bank)
            nodes = self.sl[r].nodes
            rd = self.ready + cmd
            a = rd[nodes[0]]
            b = rd[nodes[1]]
            a = a if a > b else b
            b = rd[nodes[2]]
            a = a if a > b else b
            b = rd[nodes[3]]
            rt = a if a > b else b
            if self.flat_ready == 5:
                b = rd[nodes[4]]
                rt = rt if rt > b else b
        else:
            return self.entry_ready_generic(c, r)
        self.sl[r].cur_cmd = cmd
        self.sl[r].rt = rt
        self.sl[r].epoch = self.bank_epoch[bank]
        self.sl[r].exact = self.ctrl_issues[c]
        return rt

    cdef int64_t entry_ready_generic(self, int c, int32_t r) noexcept nogil:
        """entry_ready's computation for any request (through req_prereq and req_ready)."""
        cdef int64_t rt, bank = self.sl[r].bank
        cdef int cmd = self.req_prereq(r)
        rt = self.req_ready(cmd, r)
        self.sl[r].cur_cmd = cmd
        if bank >= 0:
            self.sl[r].rt = rt
            self.sl[r].epoch = self.bank_epoch[bank]
            self.sl[r].exact = self.ctrl_issues[c]
        return rt

    cdef inline int best_of(self, int c, int b, int64_t clk, bint* is_ready, int64_t* min_ready) noexcept nogil:
        """FR-FCFS: the oldest ready request, else the oldest; sets each scanned request's next command.

        Read and write queues are in arrival order (appended on arrival, removed in place), so the
        first ready request is the oldest ready one and the scan stops there; the active buffer is
        filled in ACT order and is scanned whole.
        """
        cdef int32_t* p = self.bptr(c, b)
        cdef int n = self.bsize[c * NBUF + b], k, best = -1, cmd
        cdef int32_t r
        cdef int64_t rt, bank
        cdef bint rdy, best_rdy = False, fifo = b != BUF_ACTIVE
        for k in range(n):
            r = p[k]
            rt = self.entry_ready(c, r, clk)
            if rt < min_ready[0]:
                min_ready[0] = rt
            rdy = clk >= rt
            if best < 0:
                best = k
                best_rdy = rdy
                if rdy and fifo:
                    break
            elif rdy != best_rdy:
                if rdy:
                    best = k
                    best_rdy = True
                    if fifo:
                        break
            elif not fifo and self.arrive[p[best]] > self.arrive[r]:
                best = k
        is_ready[0] = best_rdy
        return best

    cdef void set_watermarks(self) noexcept nogil:
        """Integer thresholds equal to Ramulator's float tests ``w > high * max`` / ``w < low * max``."""
        cdef float wmax = <float> (self.qcap[BUF_WRITE] - 1)
        cdef int w
        self.wr_enter = self.qcap[BUF_WRITE] + 1
        for w in range(self.qcap[BUF_WRITE] + 1, -1, -1):
            if <float> w > self.wr_high * wmax:
                self.wr_enter = w
        self.wr_leave = 0
        for w in range(self.qcap[BUF_WRITE] + 2):
            if <float> w < self.wr_low * wmax:
                self.wr_leave = w + 1

    cdef inline bint write_mode_would_change(self, int c) noexcept nogil:
        cdef int w = self.bsize[c * NBUF + BUF_WRITE], rd = self.bsize[c * NBUF + BUF_READ]
        if not self.write_mode[c]:
            return w >= self.wr_enter or rd == 0
        return w < self.wr_leave and rd != 0

    cdef inline void set_write_mode(self, int c) noexcept nogil:
        if self.write_mode_would_change(c):
            self.write_mode[c] = not self.write_mode[c]

    cdef void set_nodes(self, int32_t r) noexcept nogil:
        """Slot ``r`` from its address ``aptr[r]``: node offsets and bank (-1 below a broadcast);
        its ready-time cache emptied."""
        cdef int64_t idx = 0
        cdef int L
        cdef int32_t* av = self.aptr[r]
        self.sl[r].bank = -1
        self.sl[r].rt = -1
        self.sl[r].exact = -1
        for L in range(self.n_lv):
            if av[L] < 0:
                return
            idx = idx * self.counts[L] + av[L]
            self.sl[r].nodes[L] = <int32_t> ((self.node_off[L] + idx) * self.n_cmd)
        self.sl[r].bank = idx

    cdef int new_maintenance(self, int c, int kind, int32_t* av_src) noexcept nogil:
        cdef int32_t r
        cdef int L
        r = self.slot_take()
        if r < 0:
            return -1
        self.slot_req[r] = -1
        self.sl[r].rtype = kind
        self.row_class[r] = -1
        for L in range(self.A):
            self.addr[r * self.A + L] = av_src[L]
        self.aptr[r] = self.addr + r * self.A
        self.sl[r].row = av_src[self.row_lv]
        self.sl[r].final_cmd = self.cmd_ref if kind == T_REFRESH else self.cmd_pre
        self.set_nodes(r)
        if not self.bpush(c, BUF_PRIO, r):
            self.error_code = 2
            return -1
        return r

    # ------------------------------------------------------------------ one controller cycle
    cdef bint tick(self, int c, int64_t clk) noexcept nogil:
        """Ramulator 2.0 GenericDRAMController::tick for controller ``c`` at cycle ``clk``.

        Returns True when a command was issued.
        """
        cdef int32_t av_ref[MAX_ADDR]
        cdef int32_t av_pim[MAX_ADDR]
        cdef int L, pos = -1, src = -1, k, cmd, n_act
        cdef bint pim = False
        cdef int64_t op
        cdef int32_t r = -1, o
        cdef int32_t* p
        cdef int32_t* ra
        cdef int32_t* oa
        cdef bint found = False, rdy = False, match
        cdef int64_t min_ready = NEVER, lo, hi, b, bank, flat, rt
        # refresh manager
        if self.refresh_interval > 0 and clk == self.next_refresh[c]:
            self.next_refresh[c] += self.refresh_interval
            flat = c
            for L in range(self.A - 1, -1, -1):
                av_ref[L] = -1
            for L in range(self.ctrl_level, -1, -1):
                av_ref[L] = <int32_t> (flat % self.counts[L])
                flat //= self.counts[L]
            r = self.new_maintenance(c, T_REFRESH, av_ref)
            if r >= 0:
                self.arrive[r] = clk
            self.n_refresh += 1
        if self.pred_clk[c] == clk and self.pred_stamp[c] == self.ctrl_issues[c] \
                and self.bsize[c * NBUF + BUF_PRIO] == 0 and self.prog_head[c] == self.prog_end[c] \
                and not self.write_mode_would_change(c):
            # nothing changed since the prediction but arrivals at the queues' ends: no active
            # request is ready, and the predicted request is the oldest ready one of the queue
            found = True
            src = self.pred_src[c]
            pos = self.pred_pos[c]
            min_ready = clk         # if the closing rule holds it back, look again next cycle
        # 2.1 active buffer
        elif self.bsize[c * NBUF + BUF_ACTIVE] > 0:
            pos = self.best_of(c, BUF_ACTIVE, clk, &rdy, &min_ready)
            if rdy:
                found = True
                src = BUF_ACTIVE
        if not found:
            # 2.2.1 priority buffer: its head blocks everything until it can issue
            if self.bsize[c * NBUF + BUF_PRIO] > 0:
                r = self.bptr(c, BUF_PRIO)[0]
                cmd = self.req_prereq(r)
                self.sl[r].cur_cmd = cmd
                rt = self.req_ready(cmd, r)
                if clk >= rt:
                    found = True
                    src = BUF_PRIO
                    pos = 0
                else:
                    # the head blocks the read and write queues: only it and the active buffer count
                    self.schedule_wake(c, clk, i64min(min_ready, rt))
                    return False
            if not found and self.prog_head[c] < self.prog_end[c]:
                # PIM program: its next op goes before new reads and writes
                op = self.prog_head[c]
                self.pim_address(c, op, av_pim)
                cmd = self.prereq(self.prog_final[op], av_pim)
                rt = i64max(self.ready_time(cmd, av_pim), self.prog_release[c])
                if clk >= rt:
                    found = True
                    pim = True
                elif rt < min_ready:
                    min_ready = rt
            if not found:
                self.set_write_mode(c)
                src = BUF_WRITE if self.write_mode[c] else BUF_READ
                if self.bsize[c * NBUF + src] > 0:
                    pos = self.best_of(c, src, clk, &rdy, &min_ready)
                    found = rdy
        if pim:
            ra = av_pim
        elif found:
            r = self.bptr(c, src)[pos]
            cmd = self.sl[r].cur_cmd
            ra = self.aptr[r]
        if found:
            # 2.3 never close a row that a request in the active buffer has opened
            if self.cmd_flags[cmd] & F_CLOSING:
                p = self.bptr(c, BUF_ACTIVE)
                n_act = self.bsize[c * NBUF + BUF_ACTIVE]
                if not pim and self.sl[r].bank >= 0 and self.cmd_scope[cmd] >= self.n_lv - 1:
                    # a bank-scoped close of a fully addressed request: same bank = same prefix
                    bank = self.sl[r].bank
                    for k in range(n_act):
                        if self.sl[p[k]].bank == bank:
                            found = False
                            break
                    n_act = 0
                for k in range(n_act):
                    oa = self.aptr[p[k]]
                    match = True
                    for L in range(self.n_lv):
                        if oa[L] != ra[L] and oa[L] != -1 and ra[L] != -1:
                            match = False
                            break
                    if match:
                        found = False
                        break
        if not found:
            self.schedule_wake(c, clk, min_ready)
            return False
        if pim:
            self.issue(cmd, ra, clk, -1)
            self.ctrl_issues[c] += 1
            self.pim_counts[c * 5 + self.pim_slot(cmd)] += 1
            if cmd == self.cmd_rdres:
                self.prog_result[c] = clk + self.read_latency     # its data reaches the GPU then
            if cmd == self.prog_final[self.prog_head[c]]:
                self.prog_head[c] += 1
                if self.prog_head[c] == self.prog_end[c]:
                    # the program is over when its last command is and its last result has arrived
                    self.prog_done[c] = i64max(self.prog_result[c], clk + (
                        self.read_latency if cmd == self.cmd_rdres else
                        (self.write_latency if cmd == self.cmd_gwrite else 0)))
            self.wake[c] = clk + 1
            if self.prog_head[c] < self.prog_end[c] and self.queues_empty(c):
                # only the program is left: sleep until its next command can issue (or refresh)
                op = self.prog_head[c]
                self.pim_address(c, op, av_pim)
                rt = i64max(self.ready_time(self.prereq(self.prog_final[op], av_pim), av_pim),
                            self.prog_release[c])
                self.wake[c] = i64max(clk + 1, i64min(rt, self.next_refresh[c]))
            return True
        # row policy (closed: close a bank after row_cap column accesses)
        if self.closed_row:
            if self.cmd_flags[cmd] & (F_CLOSING | F_REFRESHING):
                self.bank_range(ra, self.cmd_scope[cmd] if self.cmd_scope[cmd] < self.n_lv else self.n_lv - 1, &lo, &hi)
                for b in range(lo, hi):
                    self.col_access[b] = 0
            elif self.cmd_flags[cmd] & F_ACCESSING:
                bank = self.sl[r].bank if self.sl[r].bank >= 0 else self.bank_of(ra)
                self.col_access[bank] += 1
                if self.col_access[bank] >= self.row_cap:
                    self.new_maintenance(c, T_CLOSE, ra)
                    self.col_access[bank] = 0
        # statistics: row hit / miss / conflict of a request's first command
        if self.row_class[r] < 0 and self.sl[r].rtype <= T_WRITE:
            o = self.open_row[self.sl[r].bank]
            self.row_class[r] = 0 if o == ra[self.row_lv] else (2 if o >= 0 else 1)
            self.out_row_class[self.slot_req[r]] = self.row_class[r]
        self.issue(cmd, ra, clk, r)
        self.ctrl_issues[c] += 1
        if cmd == self.sl[r].final_cmd:
            if self.sl[r].rtype == T_READ:
                self.out_depart[self.slot_req[r]] = clk + self.read_latency
            elif self.sl[r].rtype == T_WRITE:
                self.out_depart[self.slot_req[r]] = clk + self.write_latency
            elif self.sl[r].rtype == T_REFRESH and self.prog_head[c] < self.prog_end[c] \
                    and self.prog_head[c] > self.prog_start[c]:
                # a running PIM program waited from the refresh request until tRFC is over
                self.prog_stall[c] += clk - self.arrive[r] + self.n_rfc
            self.bremove(c, src, pos)
            self.slot_give(r)
        elif self.cmd_flags[cmd] & F_OPENING:
            if self.bpush(c, BUF_ACTIVE, r):
                self.bremove(c, src, pos)
        self.wake[c] = self.next_wake_after_issue(c, clk)
        return True

    cdef inline void pim_address(self, int c, int64_t op, int32_t* av) noexcept nogil:
        """Address of PIM op ``op`` of controller ``c``: the controller's node, all banks below it."""
        cdef int64_t flat = c
        cdef int L
        for L in range(self.A):
            av[L] = -1
        for L in range(self.ctrl_level, -1, -1):
            av[L] = <int32_t> (flat % self.counts[L])
            flat //= self.counts[L]
        av[self.row_lv] = self.prog_rowcol[2 * op]
        av[self.row_lv + 1] = self.prog_rowcol[2 * op + 1]

    cdef int64_t next_wake_after_issue(self, int c, int64_t clk) noexcept nogil:
        """After controller ``c`` issued at ``clk``: the next cycle it must be visited.

        Nothing changes for it before then but arrivals (which wake it themselves), so the
        candidates the next tick would look at (the active buffer, the priority head that blocks
        the queues, else the queue the write mode picks) are evaluated now, against cycle clk + 1;
        each evaluation is cached exactly, so a tick at clk + 1 does not repeat it. The write-mode
        switch has hysteresis, so a cycle at which it would flip is never skipped; a running PIM
        program is visited every cycle.
        """
        cdef int64_t nxt = clk + 1, t = self.next_refresh[c], rt
        cdef int k, n, b
        cdef int32_t r
        cdef int32_t* p
        if self.prog_head[c] < self.prog_end[c] or not self.skip_idle:
            return nxt
        n = self.bsize[c * NBUF + BUF_ACTIVE]
        p = self.bptr(c, BUF_ACTIVE)
        for k in range(n):
            rt = self.entry_ready(c, p[k], nxt)
            if rt <= nxt:
                return nxt
            if rt < t:
                t = rt
        if self.bsize[c * NBUF + BUF_PRIO] > 0:
            # the head blocks the queues until it issues (an issue): the mode is not looked at before
            r = self.bptr(c, BUF_PRIO)[0]
            rt = self.req_ready(self.req_prereq(r), r)
            return i64max(nxt, i64min(t, rt))
        if self.write_mode_would_change(c):
            if self.next_refresh[c] <= nxt:
                return nxt
            self.flip_ahead(c, nxt)
        b = BUF_WRITE if self.write_mode[c] else BUF_READ
        n = self.bsize[c * NBUF + b]
        p = self.bptr(c, b)
        for k in range(n):
            rt = self.entry_ready(c, p[k], nxt)
            if rt <= nxt:
                # the oldest request ready at nxt: the tick there takes it without scanning again
                self.pred_clk[c] = nxt
                self.pred_stamp[c] = self.ctrl_issues[c]
                self.pred_src[c] = b
                self.pred_pos[c] = k
                return nxt
            if rt < t:
                t = rt
        return i64max(nxt, t)

    cdef inline void flip_ahead(self, int c, int64_t at) noexcept nogil:
        """Flip controller ``c``'s write mode now for its tick at ``at``.

        Only for a tick that reaches the read/write stage (nothing in the active buffer ready at
        ``at``, no priority request, no PIM program, no refresh due): it flips the mode there, as the
        switch is a function of the queue sizes, unless a request arrives first; try_send then
        takes the flip back and wakes the controller at ``at``.
        """
        self.write_mode[c] = not self.write_mode[c]
        self.flip_clk[c] = at

    cdef inline bint queues_empty(self, int c) noexcept nogil:
        cdef int32_t* n = self.bsize + c * NBUF
        return (n[0] | n[1] | n[2] | n[3]) == 0

    cdef inline int pim_slot(self, int cmd) noexcept nogil:
        if cmd == self.cmd_actab: return 0
        if cmd == self.cmd_preab: return 1
        if cmd == self.cmd_macab: return 2
        if cmd == self.cmd_gwrite: return 3
        return 4

    cdef inline void schedule_wake(self, int c, int64_t clk, int64_t min_ready) noexcept nogil:
        """Controller ``c`` issued nothing at ``clk``: sleep until a queued command can be ready.

        ``min_ready`` is the earliest ready cycle over everything this tick looked at: the active
        buffer (scanned whole), the priority head, and the read or write queue chosen by the write
        mode (scanned whole when nothing in it was ready). The other queue cannot be chosen before
        queue sizes change, which needs an issue or an arrival, and both wake the controller.
        """
        cdef int64_t t = min_ready
        if self.next_refresh[c] < t:
            t = self.next_refresh[c]
        self.wake[c] = i64max(t, clk + 1)

    cdef void issue(self, int cmd, int32_t* av, int64_t clk, int32_t r) noexcept nogil:
        """Issue ``cmd`` at ``clk``; ``r``: the request it serves (-1: PIM op), for its node offsets."""
        cdef int L
        if r >= 0 and self.sl[r].bank >= 0 and not self.cmd_has_sibling[cmd]:
            self.update_timing_req(cmd, r, clk)
        else:
            self.update_timing(cmd, av, clk)
        self.update_states(cmd, av, self.sl[r].bank if r >= 0 else -1)
        self.n_commands += 1
        self.last_issue = clk
        if self.log_on:
            if self.log_n == self.log_cap:
                self.log_cap = self.log_cap * 2 + 4096
                self.log_clk = <int64_t*> realloc(self.log_clk, self.log_cap * sizeof(int64_t))
                self.log_addr = <int32_t*> realloc(self.log_addr, self.log_cap * self.A * sizeof(int32_t))
                self.log_cmd = <int8_t*> realloc(self.log_cmd, self.log_cap * sizeof(int8_t))
                if self.log_clk == NULL or self.log_addr == NULL or self.log_cmd == NULL:
                    self.error_code = 3
                    self.log_on = False
                    return
            self.log_clk[self.log_n] = clk
            for L in range(self.A):
                self.log_addr[self.log_n * self.A + L] = av[L]
            self.log_cmd[self.log_n] = cmd
            self.log_n += 1

    # ------------------------------------------------------------------ frontend
    cdef bint try_send(self, int32_t r, int64_t clk) noexcept nogil:
        """MemorySystem::send + Controller::send for trace request ``r`` at controller cycle ``clk``."""
        cdef int c = self.req_ctrl(r), b
        cdef int64_t rt
        cdef int32_t q = r
        if self.write_pending(r):
            self.out_forwarded[q] = 1
            self.out_arrive[q] = clk
            self.out_depart[q] = clk + 1
            return True
        b = BUF_WRITE if self.req_write[q] else BUF_READ
        if self.bsize[c * NBUF + b] >= self.qcap[b]:
            self.refused_ctrl = c
            self.refused_stamp = self.ctrl_issues[c]
            return False
        r = self.slot_take()        # from here on r is the request's slot
        if r < 0:
            return False
        self.fill_slot(r, q, clk)
        self.bpush(c, b, r)
        self.out_arrive[q] = clk
        if self.flip_clk[c] > clk:
            # the write mode was flipped ahead for a tick still to come, on queue sizes that this
            # arrival changes: take the flip back, and let that tick decide
            self.write_mode[c] = not self.write_mode[c]
            self.flip_clk[c] = -1
            self.pred_clk[c] = -1
            self.wake[c] = i64min(self.wake[c], clk + 1)
            return True
        if self.wake[c] > clk + 1:
            # The controller sleeps past the next cycle: everything it last looked at is not ready
            # before its wake. Unless the write mode flips, only this request can change that, and
            # only if it joins the queue the mode picks and no priority request blocks.
            if not self.skip_idle or self.write_mode_would_change(c):
                self.wake[c] = clk + 1
            elif self.bsize[c * NBUF + BUF_PRIO] == 0 and b == (BUF_WRITE if self.write_mode[c] else BUF_READ):
                rt = self.entry_ready(c, r, clk)    # a fresh slot: computed and cached exactly
                self.wake[c] = i64max(clk + 1, i64min(self.wake[c], rt))
        return True

    cdef bint idle(self) noexcept nogil:
        cdef int i
        for i in range(self.n_ctrl * NBUF):
            if self.bsize[i]:
                return False
        for i in range(self.n_ctrl):
            if self.prog_head[i] < self.prog_end[i]:
                return False
        return True

    cdef inline int phase_tables(self, bint* front_at, bint* mem_at, int64_t* mem_phase) noexcept nogil:
        """Within one period of clock_ratio x memory_clock_ratio loop steps (at most 64): at which
        phases the frontend ticks, at which the memory ticks, and the latter in order; returns
        their number."""
        cdef int ph, n = 0, f = self.clock_ratio, m = self.mem_ratio
        for ph in range(f * m):
            front_at[ph] = ph % m == 0
            mem_at[ph] = ph % f == 0
            if mem_at[ph]:
                mem_phase[n] = ph
                n += 1
        return n

    cdef inline void tick_due(self, int64_t clk, unsigned long long done) noexcept nogil:
        """Tick, at ``clk``, every controller simulated here whose wake has come (every one
        without ``skip_idle``), except those in the mask ``done``, in index order."""
        cdef unsigned long long due = 0
        cdef int c, k
        if self.n_ctrl <= 64 and self.skip_idle:
            # which controllers are due, without a hard-to-predict branch per controller
            # (a tick changes only its own controller's wake)
            if self.partial:        # only the controllers simulated here
                for k in range(self.n_own):
                    c = self.own_list[k]
                    due |= (<unsigned long long> (self.wake[c] <= clk)) << c
            else:
                for c in range(self.n_ctrl):
                    due |= (<unsigned long long> (self.wake[c] <= clk)) << c
            due &= ~done
            while due:
                c = __builtin_ctzll(due)
                due &= due - 1
                self.tick(c, clk)
        else:
            for c in range(self.n_ctrl):
                if self.wake[c] <= clk or not self.skip_idle:
                    self.tick(c, clk)

    cdef int64_t run_loop(self, int64_t until) noexcept nogil:
        """Ramulator 2.0's main loop (frontend and memory ticks by clock ratio), skipping idle cycles.

        Continues where the last call stopped. ``until`` >= 0: stop after the memory tick of cycle
        ``until`` instead of at the end condition of the run (idle controllers tick on).
        """
        cdef int64_t clk = self.lp_clk, target, mem_ticks_per_period, k
        cdef int f = self.clock_ratio, m = self.mem_ratio, c
        cdef int64_t period = <int64_t> f * m, phase
        cdef int32_t head = self.lp_head
        cdef bint stalled, refused = self.lp_refused
        cdef int64_t mem_phase[64]
        cdef int n_mem_phase = 0
        if period > 64:
            self.error_code = 5
            return 0
        # phase within one period of f * m frontend/memory ticks: which of the two tick there
        cdef bint front_at[64]
        cdef bint mem_at[64]
        n_mem_phase = self.phase_tables(front_at, mem_at, mem_phase)
        mem_ticks_per_period = n_mem_phase
        phase = self.lp_phase
        if until >= 0 and clk >= until:
            return clk
        while True:
            phase += 1
            if phase == period:
                phase = 0
            if front_at[phase]:
                # frontend tick: offer the next request
                if head < self.n_req and self.arrival[head] <= clk \
                        and not (refused and self.ctrl_issues[self.refused_ctrl] == self.refused_stamp):
                    if self.partial and self.ghost[head]:
                        head += 1           # another engine simulates its controller
                        refused = False
                    elif self.try_send(head, clk):
                        head += 1
                        refused = False
                    else:
                        refused = True
                        if self.partial:
                            self.error_code = 6
                            sievesim_flag_set(self.abort_flag)
                            break
                if head >= self.n_req and self.end_on_accept:
                    break
            if mem_at[phase]:
                clk += 1
                self.tick_due(clk, 0)
                if self.error_code:
                    break
                if self.partial and sievesim_flag_get(self.abort_flag):
                    self.error_code = 7
                    break
                if until >= 0:
                    if clk >= until:
                        break
                elif head >= self.n_req and not self.end_on_accept and self.idle():
                    break
                # fast-forward over cycles where no controller can act and the frontend is stuck
                # (only a request refused at the last frontend tick can still be refused)
                stalled = head >= self.n_req
                if not self.skip_idle:
                    stalled = False
                elif not stalled:
                    if self.arrival[head] > clk:
                        stalled = True
                    elif refused:
                        stalled = self.ctrl_issues[self.refused_ctrl] == self.refused_stamp \
                            or not self.can_accept(head)
                if stalled:
                    target = NEVER
                    for c in range(self.n_ctrl):
                        if self.wake[c] < target:
                            target = self.wake[c]
                    if head < self.n_req and self.arrival[head] > clk and self.arrival[head] < target:
                        target = self.arrival[head]
                    if until >= 0 and target > until:
                        target = until      # nothing changes before: only the clock moves
                    if target == NEVER:
                        if head >= self.n_req:
                            break
                        self.error_code = 4   # deadlock: should not happen
                        break
                    if target > clk + 1:
                        # jump to the iteration of the memory tick that produces cycle `target`
                        k = target - 1      # memory ticks already done before it
                        phase = mem_phase[k % mem_ticks_per_period] - 1
                        clk = target - 1
                        continue
        self.clk_end = clk
        self.lp_clk = clk
        self.lp_phase = phase
        self.lp_head = head
        self.lp_refused = refused
        return clk

    cdef int dry_run(self, int32_t head, int k_ticks, int64_t clk, unsigned long long* receiving) noexcept nogil:
        """How many of the next ``k_ticks`` frontend ticks (at cycle ``clk``) would each take a
        request, as far as this run's controllers decide: requests are offered in trace order from
        ``head``; another run's request is taken as accepted; the count stops at the first request
        not yet arrived, or the first of this run's requests its controller would refuse. Changes
        nothing; ``receiving``: a bit per controller (index < 64) that would take one of them."""
        cdef int j = 0, i, n_acc = 0, c, b, same
        cdef int32_t r
        cdef int acc_q[64]
        cdef int64_t acc_key[64]
        cdef bint fwd
        while j < k_ticks and head + j < self.n_req:
            r = head + j
            if self.arrival[r] > clk:
                break
            if not self.ghost[r]:
                c = self.req_ctrl(r)
                if c < 64:
                    receiving[0] |= (<unsigned long long> 1) << c
                fwd = False
                if not self.req_write[r]:
                    fwd = self.wh_find(self.req_key[r]) >= 0
                    for i in range(n_acc):
                        if acc_q[i] == c * NBUF + BUF_WRITE and acc_key[i] == self.req_key[r]:
                            fwd = True
                if not fwd:
                    b = BUF_WRITE if self.req_write[r] else BUF_READ
                    same = 0
                    for i in range(n_acc):
                        if acc_q[i] == c * NBUF + b:
                            same += 1
                    if self.bsize[c * NBUF + b] + same >= self.qcap[b]:
                        break
                    acc_q[n_acc] = c * NBUF + b
                    acc_key[n_acc] = self.req_key[r]
                    n_acc += 1
            j += 1
        return j

    cdef bint run_lockstep(self) noexcept nogil:
        """The frontend-coupled part of a split run (the trace not yet all accepted), exact when
        queues fill: Ramulator's loop, one memory cycle (a step: the frontend ticks up to a memory
        tick, then that tick) at a time. Each run says how many of the step's frontend ticks take a
        request as far as its own controllers decide (``dry_run``) and when they wake next; all
        read all, take the minimum (the first refusal holds the frontend back for everyone), accept
        their own requests up to it and tick their controllers. When no request can be taken, all
        jump together to the earliest wake or arrival. Returns True when the run ended (end on
        acceptance of the last request); else it stops once every request is accepted, for
        run_loop to go on."""
        cdef int64_t clk = self.lp_clk, target, my_wake, g_wake, k
        cdef int f = self.clock_ratio, m = self.mem_ratio, c, ph, k_ticks, stop, g_stop, j, peer
        cdef int64_t period = <int64_t> f * m, phase = self.lp_phase
        cdef int32_t head = self.lp_head
        cdef unsigned long long receiving
        cdef int64_t* slot
        cdef long spins
        cdef int64_t mem_phase[64]
        cdef int n_mem_phase = 0
        cdef bint front_at[64]
        cdef bint mem_at[64]
        if period > 64:
            self.error_code = 5
            sievesim_flag_set(self.abort_flag)
            return False
        n_mem_phase = self.phase_tables(front_at, mem_at, mem_phase)
        while head < self.n_req:
            # the step: frontend ticks after `phase` up to the next memory tick (phase ph)
            k_ticks = 0
            ph = <int> phase
            while True:
                ph += 1
                if ph == period:
                    ph = 0
                if front_at[ph]:
                    k_ticks += 1
                if mem_at[ph]:
                    break
            receiving = 0
            stop = self.dry_run(head, k_ticks, clk, &receiving)
            my_wake = NEVER
            for k in range(self.n_own):
                my_wake = i64min(my_wake, self.wake[self.own_list[k]])
            # publish (step, stop, wake) for this step's parity, then read every run's
            self.xstep += 1
            slot = self.xch + (self.rank * 2 + (self.xstep & 1)) * 8
            slot[1] = stop
            slot[2] = my_wake
            sievesim_publish(slot, self.xstep)
            g_stop = stop
            g_wake = my_wake
            # while the others decide: tick the controllers that no request of this step can reach
            # (they do not depend on the frontend; a step that may end the trace keeps all back)
            if self.n_ctrl <= 64 and head + k_ticks < self.n_req:
                self.tick_due(clk + 1, receiving)
            for peer in range(self.n_peers):
                if peer == self.rank:
                    continue
                slot = self.xch + (peer * 2 + (self.xstep & 1)) * 8
                spins = 0
                while sievesim_read(slot) != self.xstep:
                    if sievesim_flag_get(self.abort_flag):
                        self.error_code = 7
                        self.lp_clk = clk
                        return False
                    spins += 1
                    sievesim_spin(spins)
                if slot[1] < g_stop:
                    g_stop = <int> slot[1]
                if slot[2] < g_wake:
                    g_wake = slot[2]
            # accept this run's requests among the first g_stop offered
            for j in range(g_stop):
                if not self.ghost[head + j] and not self.try_send(head + j, clk):
                    self.error_code = 8     # the dry run said otherwise: a bug
                    sievesim_flag_set(self.abort_flag)
                    self.lp_clk = clk
                    return False
            head += g_stop
            if head >= self.n_req:
                self.lp_head = head
                self.lp_clk = clk
                self.lp_refused = False
                if self.end_on_accept:
                    self.clk_end = clk
                    return True
                # run_loop goes on from this step's memory tick (its frontend ticks have nothing left)
                self.lp_phase = ph - 1 if ph > 0 else period - 1
                return False
            if g_stop == 0 and k_ticks > 0:
                # nothing can be taken before a controller of some run wakes (it alone can free
                # the refusing queue) or the next request arrives: every run jumps there
                target = g_wake
                if self.arrival[head] > clk and self.arrival[head] < target:
                    target = self.arrival[head]
                if target == NEVER:
                    self.error_code = 4
                    sievesim_flag_set(self.abort_flag)
                    self.lp_clk = clk
                    return False
                if target > clk + 1:
                    k = target - 1
                    phase = mem_phase[k % n_mem_phase] - 1
                    clk = target - 1
                    continue
            # the memory tick (a controller ticked early is not due again: a tick wakes it later)
            phase = ph
            clk += 1
            self.tick_due(clk, 0)
            if self.error_code:
                sievesim_flag_set(self.abort_flag)
                break
        self.lp_clk = clk
        self.lp_phase = phase
        self.lp_head = head
        self.lp_refused = False
        return False

    cdef bint can_accept(self, int32_t r) noexcept nogil:
        cdef int c = self.req_ctrl(r)
        cdef int b = BUF_WRITE if self.req_write[r] else BUF_READ
        return self.write_pending(r) or self.bsize[c * NBUF + b] < self.qcap[b]

    cdef inline bint write_pending(self, int32_t r) noexcept nogil:
        """Trace request ``r`` is a read whose address has a write waiting in a write buffer (forwarded)."""
        if self.req_write[r]:
            return False
        return self.wh_find(self.req_key[r]) >= 0

    # ------------------------------------------------------------------ Python face
    def run(self, int64_t until=-1):
        """Simulate until the end condition (or, ``until`` >= 0, to cycle ``until``), from where
        the last call stopped; returns a dict of raw per-request arrays and counters.

        ``refused`` in the result: a partial run (``own``) stopped at a refused request, or
        because another run of its split did (``abort``); its numbers are then incomplete.
        """
        cdef int64_t clk
        cdef bint ended = False
        if self.lockstep and self.lp_head < self.n_req and until >= 0:
            raise ValueError("a lockstep run goes to the end of the trace before it can stop at a cycle")
        with nogil:
            if self.lockstep and self.lp_head < self.n_req:
                ended = self.run_lockstep()
            clk = self.lp_clk if ended or self.error_code else self.run_loop(until)
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
        n = self.n_req
        out = dict(
            clk=int(clk),
            last_issue=int(self.last_issue),
            n_commands=int(self.n_commands),
            n_refresh=int(self.n_refresh),
            arrive=self._out["arrive"],
            depart=self._out["depart"],
            row_class=self._out["row_class"],
            forwarded=self._out["forwarded"],
            pim_done=np.asarray(<int64_t[:self.n_ctrl]> self.prog_done).copy(),
            pim_stall=np.asarray(<int64_t[:self.n_ctrl]> self.prog_stall).copy(),
            pim_counts=np.asarray(<int64_t[:self.n_ctrl * 5]> self.pim_counts).reshape(self.n_ctrl, 5).copy(),
            pim_has_program=(np.asarray(<int64_t[:self.n_ctrl]> self.prog_end)
                             > np.asarray(<int64_t[:self.n_ctrl]> self.prog_start)).copy(),
            refused=self.error_code in (6, 7),
            idle=bool(self.idle()),
        )
        if self.log_on and self.log_n:
            out["log_clk"] = np.asarray(<int64_t[:self.log_n]> self.log_clk).copy()
            out["log_addr"] = np.asarray(<int32_t[:self.log_n * self.A]> self.log_addr).reshape(-1, self.A).copy()
            out["log_cmd"] = np.asarray(<int8_t[:self.log_n]> self.log_cmd).copy()
        elif self.log_on:
            out["log_clk"] = np.zeros(0, dtype=np.int64)
            out["log_addr"] = np.zeros((0, self.A), dtype=np.int32)
            out["log_cmd"] = np.zeros(0, dtype=np.int8)
        return out
