# cython: language_level=3
"""Declarations of the DRAM command engine (sievesim/_core/_engine.pyx): the buffer and command
enums, the slot a queued request lives in, and the Engine's attributes. The engine's code is in
_engine.pyx (its Python face) and the files it includes, one per concern:

- _engine_state.pxi: trace requests and the slots that hold them in buffers
- _engine_banks.pxi: the bank state machine and timing checks (ready times, prerequisites, issue)
- _engine_sched.pxi: a controller's buffers and its FR-FCFS tick
- _engine_pim.pxi: PIM programs
- _engine_log.pxi: the command log
- _engine_loop.pxi: the frontend and the main loop (alone, or in lockstep with the runs of a split)

The internals are C functions on an ``Engine`` (``cdef ... f(Engine self, ...) noexcept nogil``)
rather than cdef methods: Cython allows no ``include`` inside a class body, and direct calls keep
the inlining the hot loop relies on.
"""
from libc.stdint cimport int64_t, int32_t, int8_t

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


cdef class Engine:
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
    cdef int32_t* ctrl_prefix     # (n_ctrl, A): controller c's node address, -1 below it (PIM ops, refresh)
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
    # the wakes by cycle (see _engine_loop.pxi, "the wheel"): bit c of wheel[t & 63] is set for
    # a wake at t within 64 cycles of wheel_next, the next cycle tick_due takes up; later wakes
    # are bits of far_mask, the earliest of them far_min
    cdef bint wheel_on
    cdef unsigned long long wheel[64]
    cdef unsigned long long far_mask
    cdef int64_t far_min
    cdef int64_t wheel_next
    cdef int64_t* next_refresh
    # ---- trace requests (inputs read where they are; outputs per request)
    cdef int n_req
    cdef int32_t* req_addr        # (n_req, A) address vectors; NULL: computed from the keys (kmap)
    # a linear mapper's split of a byte address into its vector (Engine.map_keys), for windows
    # given as keys alone: the levels in turn, each a shift and a mask (a power-of-two radix) or a
    # division (kmap_shift -1); the bits above the last level dropped
    cdef bint kmap_on, kmap_bits         # kmap_bits: every radix a power of two (kmap_lpos below)
    cdef int kmap_tx_shift
    cdef int64_t kmap_lpos[MAX_ADDR]    # kmap_bits: by level, where its bits start in the address
    cdef int64_t kmap_lmask[MAX_ADDR]   # by level: its radix - 1
    cdef int kmap_level[MAX_ADDR]       # by step: the level the step takes
    cdef int64_t kmap_shift[MAX_ADDR]   # by step: log2 of its radix, -1 where not a power of two
    cdef int64_t* req_key         # (n_req,) physical address (read forwarding)
    cdef unsigned char* req_write # (n_req,)
    cdef int64_t* arrival         # (n_req,) earliest frontend cycle
    # ---- streaming (``stream=True``, see Engine.feed): the trace comes in windows, each consumed
    # whole before the next replaces it (head restarts at 0); per-request outputs become counters
    cdef bint streaming, eof
    cdef object _window           # keeps the current window's arrays alive
    cdef int64_t st_class[3]      # trace requests whose first command was a row hit, miss, conflict
    cdef int64_t st_forwarded     # reads forwarded from a pending write
    cdef int64_t st_served, st_read_served, st_lat_sum, st_max_depart
    cdef int64_t* dep_ring        # (dep_cap, 3): depart, latency, is-read of the latest departures
    cdef int64_t dep_n, dep_cap
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
    # ---- bank-state residency (energy's background power; counted on state changes, not per
    # cycle): per unit (a node of the residency level: the pseudo-channel where the standard has
    # one, else the controller), how many row buffers are open, since when some are, the cycles
    # closed intervals with some open lasted; refresh: cycles of tRFC begun, end of the last
    cdef int64_t res_bpu, res_units, res_ref_busy
    cdef int32_t* res_open
    cdef int64_t* res_since
    cdef int64_t* res_cycles
    cdef int64_t* res_ref_cycles
    cdef int64_t* res_ref_end
    cdef int error_code
    cdef bint skip_idle
    # ---- a run of some controllers only (see sievesim._core.parallel): requests to the others
    # are accepted without effect; a refused request ends the run (error_code 6), since in the
    # whole system it would hold the frontend back for every controller
    cdef int8_t* own              # (n_ctrl,) 1: simulated here
    cdef int32_t* own_list        # the controllers simulated here, in index order
    cdef int n_own
    cdef unsigned long long own_mask  # bit c: controller c (< 64) simulated here
    cdef int8_t* ghost            # (n_req,) 1: the request goes to a controller not simulated here
    cdef bint req_c_all           # req_c holds every request's controller (given, or a lockstep's)
    cdef int32_t* req_c           # (n_req,) a lockstep run's: each request's controller
    cdef bint partial
    cdef int32_t* abort_flag      # shared between the runs of one split: set by the run that fails
    # lockstep (see run_lockstep): the runs of a split share ``xch`` (see lockstep_exchange): per
    # run, its progress (the last cycle whose step it has decided), a ring of its steps' stops
    # by cycle, and for its controllers' read and write queues a promise L = accepted so far +
    # free slots (it only grows): as long as fewer requests than L have been accepted, the queue
    # takes the next one, so another run can decide it without waiting
    cdef bint lockstep
    cdef int64_t* xch
    cdef int rank, n_peers
    cdef int64_t ring_mask        # ring size - 1 (cycles a run may run ahead of the slowest)
    cdef int64_t runs_off, run_stride, l_off, ring_off   # offsets in xch (int64 words)
    cdef int64_t* ctrl_rank       # (n_ctrl,) in xch: the run that simulates each controller
    cdef int64_t* cum             # (n_ctrl, 2): requests accepted so far per read / write queue
    cdef int64_t* lcache          # (n_ctrl, 2): the others' promises as last read (valid lower bounds)
    cdef int64_t* lpub            # (n_ctrl, 2): this run's promises as last published
    cdef int64_t peer_floor       # a cycle every other run's progress has reached (a lower bound)
    cdef int64_t slept_ns         # time this run slept waiting for the others (ns)
    cdef int64_t grace_ns         # lockstep: give up when contended after this long (ns; -1 never)
    cdef int64_t lock_ns          # time spent in run_lockstep so far, over all calls (ns)
    cdef bint in_lockstep         # the lockstep has requests left (a streamed one: more may come)
    cdef bint lp_wait             # a streamed lockstep stopped at a step whose look-ahead crosses the window
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
