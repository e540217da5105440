# The frontend and the main loop (included by _engine.pyx; declarations in _engine.pxd):
# ``try_send`` offers a trace request to its controller, ``run_loop`` is Ramulator 2.0's loop of
# frontend and memory ticks by clock ratio with idle cycles skipped, and ``run_lockstep`` runs one
# part of a split (sievesim._core.parallel) in lockstep with the others while the frontend is
# coupled to them.

cdef extern from *:
    int __builtin_ctzll(unsigned long long) nogil

cdef extern from *:
    """
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #endif
    /* bit c set where wake[c] <= clk, for the n <= 64 controllers: two at a time by the sign of
       wake - (clk + 1) (no overflow: every wake and clock lies below 2**62) */
    static inline unsigned long long sievesim_due_mask(const int64_t *wake, int n, int64_t clk) {
        unsigned long long due = 0;
        int c = 0;
    #if defined(__SSE2__)
        __m128i t = _mm_set1_epi64x(clk + 1);
        for (; c + 2 <= n; c += 2) {
            __m128i d = _mm_sub_epi64(_mm_loadu_si128((const __m128i *) (wake + c)), t);
            due |= (unsigned long long) _mm_movemask_pd(_mm_castsi128_pd(d)) << c;
        }
    #endif
        for (; c < n; c++)
            due |= (unsigned long long) (wake[c] <= clk) << c;
        return due;
    }
    """
    unsigned long long sievesim_due_mask(int64_t* wake, int n, int64_t clk) nogil

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
    #include <time.h>
    #include <limits.h>
    #ifdef __linux__
    #include <linux/futex.h>
    #include <sys/syscall.h>
    #include <unistd.h>
    #endif
    /* lockstep exchange between the runs of a split. slot[0]: the step, published with release
       order and read with acquire order, so what was written before the publication is seen after
       it; the first 32 bits of slot[3]: the step's low half, the word a waiting run sleeps on; of
       slot[4]: how many runs sleep on it. A publication wakes the sleepers (a system call only when
       there are any); a sleeper counts itself before it looks at the word, the publisher stores the
       word before it looks at the count (both sequentially consistent), so no wake-up is lost. */
    static inline void sievesim_publish(int64_t *p, int64_t v) {
        int32_t *word = (int32_t *) (p + 3);
        __atomic_store_n(p, v, __ATOMIC_RELEASE);
        __atomic_store_n(word, (int32_t) v, __ATOMIC_SEQ_CST);
        if (__atomic_load_n((int32_t *) (p + 4), __ATOMIC_SEQ_CST) > 0) {
    #ifdef __linux__
            syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    #endif
        }
    }
    static inline int64_t sievesim_read(int64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    static inline void sievesim_pause(void) {
    #if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
    #endif
    }
    static inline int64_t sievesim_now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000000000LL + ts.tv_nsec;
    }
    /* give the core up until slot p publishes step v, for at most 1 ms (the caller polls its abort
       flag between sleeps); elsewhere than Linux, one sched_yield */
    static inline void sievesim_sleep_until(int64_t *p, int64_t v) {
    #ifdef __linux__
        int32_t *word = (int32_t *) (p + 3), *sleepers = (int32_t *) (p + 4), seen;
        struct timespec ts = {0, 1000000};
        __atomic_add_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
        seen = __atomic_load_n(word, __ATOMIC_SEQ_CST);
        if (seen != (int32_t) v)
            syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
        __atomic_sub_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
    #else
        (void) p; (void) v;
        sched_yield();
    #endif
    }
    """
    void sievesim_publish(int64_t* p, int64_t v) nogil
    int64_t sievesim_read(int64_t* p) nogil
    void sievesim_pause() nogil
    int64_t sievesim_now_ns() nogil
    void sievesim_sleep_until(int64_t* p, int64_t v) nogil

cdef enum:
    # lockstep waiting: spin this many pauses (tens of microseconds), then sleep on the slot
    LOCKSTEP_SPINS = 2000
    # a run gives the lockstep up (error 9) once it has slept more than 1 / LOCKSTEP_SLEEP_SHARE of
    # its time in it, after at least Engine.grace_ns: the runs' threads do not all have a core
    LOCKSTEP_SLEEP_SHARE = 4


cdef bint try_send(Engine self, int32_t r, int64_t clk) noexcept nogil:
    """MemorySystem::send + Controller::send for trace request ``r`` at controller cycle ``clk``."""
    cdef int c = req_ctrl(self, r), b
    cdef int64_t rt
    cdef int32_t q = r
    if write_pending(self, r):
        if self.streaming:
            self.st_forwarded += 1
            record_depart(self, clk + 1, clk, True)
            return True
        self.out_forwarded[q] = 1
        self.out_arrive[q] = clk
        self.out_depart[q] = clk + 1
        return True
    b = BUF_WRITE if self.req_write[q] else BUF_READ
    if self.bsize[c * NBUF + b] >= self.qcap[b]:
        self.refused_ctrl = c
        self.refused_stamp = self.ctrl_issues[c]
        return False
    r = slot_take(self)        # from here on r is the request's slot
    if r < 0:
        return False
    fill_slot(self, r, q, clk)
    bpush(self, c, b, r)
    if not self.streaming:
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
        if not self.skip_idle or write_mode_would_change(self, c):
            self.wake[c] = clk + 1
        elif self.bsize[c * NBUF + BUF_PRIO] == 0 and b == (BUF_WRITE if self.write_mode[c] else BUF_READ):
            rt = entry_ready(self, c, r, clk)    # a fresh slot: computed and cached exactly
            self.wake[c] = i64max(clk + 1, i64min(self.wake[c], rt))
    return True


cdef bint can_accept(Engine self, int32_t r) noexcept nogil:
    cdef int c = req_ctrl(self, r)
    cdef int b = BUF_WRITE if self.req_write[r] else BUF_READ
    return write_pending(self, r) or self.bsize[c * NBUF + b] < self.qcap[b]


cdef inline bint write_pending(Engine self, int32_t r) noexcept nogil:
    """Trace request ``r`` is a read whose address has a write waiting in a write buffer (forwarded)."""
    if self.req_write[r]:
        return False
    return wh_find(self, self.req_key[r]) >= 0


cdef bint idle(Engine self) noexcept nogil:
    cdef int i
    for i in range(self.n_ctrl * NBUF):
        if self.bsize[i]:
            return False
    for i in range(self.n_ctrl):
        if self.prog_head[i] < self.prog_end[i]:
            return False
    return True


cdef inline int phase_tables(Engine self, bint* front_at, bint* mem_at, int64_t* mem_phase) noexcept nogil:
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


cdef inline void tick_due(Engine self, int64_t clk, unsigned long long done) noexcept nogil:
    """Tick, at ``clk``, every controller simulated here whose wake has come (every one
    without ``skip_idle``), except those in the mask ``done``, in index order."""
    cdef unsigned long long due
    cdef int c
    if self.n_ctrl <= 64 and self.skip_idle:
        # which controllers are due, without a hard-to-predict branch per controller (a tick
        # changes only its own controller's wake); only those simulated here
        due = sievesim_due_mask(self.wake, self.n_ctrl, clk) & self.own_mask & ~done
        while due:
            c = __builtin_ctzll(due)
            due &= due - 1
            tick(self, c, clk)
    else:
        for c in range(self.n_ctrl):
            if self.wake[c] <= clk or not self.skip_idle:
                tick(self, c, clk)


cdef int64_t run_loop(Engine self, int64_t until) noexcept nogil:
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
    cdef bint more = self.streaming and not self.eof     # requests beyond this window will come
    if period > 64:
        self.error_code = 5
        return 0
    # phase within one period of f * m frontend/memory ticks: which of the two tick there
    cdef bint front_at[64]
    cdef bint mem_at[64]
    n_mem_phase = phase_tables(self, front_at, mem_at, mem_phase)
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
                elif try_send(self, head, clk):
                    head += 1
                    refused = False
                else:
                    refused = True
                    if self.partial:
                        self.error_code = 6
                        sievesim_flag_set(self.abort_flag)
                        break
            elif more and head >= self.n_req:
                # the window is consumed: stop before this tick, which Engine.feed's next window
                # takes up (the state saved below makes the next call start with this phase)
                phase = phase - 1 if phase > 0 else period - 1
                break
            if head >= self.n_req and self.end_on_accept and not more:
                break
        if mem_at[phase]:
            clk += 1
            tick_due(self, clk, 0)
            if self.error_code:
                break
            if self.partial and sievesim_flag_get(self.abort_flag):
                self.error_code = 7
                break
            if until >= 0:
                if clk >= until:
                    break
            elif head >= self.n_req and not more and not self.end_on_accept and idle(self):
                break
            # fast-forward over cycles where no controller can act and the frontend is stuck
            # (only a request refused at the last frontend tick can still be refused)
            stalled = head >= self.n_req
            if not self.skip_idle or (stalled and more):
                stalled = False     # (more requests to come: the next iteration stops for them)
            elif not stalled:
                if self.arrival[head] > clk:
                    stalled = True
                elif refused:
                    stalled = self.ctrl_issues[self.refused_ctrl] == self.refused_stamp \
                        or not can_accept(self, head)
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


cdef int dry_run(Engine self, int32_t head, int k_ticks, int64_t clk, unsigned long long* receiving) noexcept nogil:
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
            c = req_ctrl(self, r)
            if c < 64:
                receiving[0] |= (<unsigned long long> 1) << c
            fwd = False
            if not self.req_write[r]:
                fwd = wh_find(self, self.req_key[r]) >= 0
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


cdef bint run_lockstep(Engine self) noexcept nogil:
    """lockstep_steps, its time added up over calls (a streamed lockstep stops for each window)."""
    cdef int64_t t_start = sievesim_now_ns() - self.lock_ns
    cdef bint ended = lockstep_steps(self, t_start)
    self.lock_ns = sievesim_now_ns() - t_start
    return ended


cdef bint lockstep_steps(Engine self, int64_t t_start) noexcept nogil:
    """The frontend-coupled part of a split run (the trace not yet all accepted), exact when
    queues fill: Ramulator's loop, one memory cycle (a step: the frontend ticks up to a memory
    tick, then that tick) at a time. Each run says how many of the step's frontend ticks take a
    request as far as its own controllers decide (``dry_run``) and when they wake next; all
    read all, take the minimum (the first refusal holds the frontend back for everyone), accept
    their own requests up to it and tick their controllers. When no request can be taken, all
    jump together to the earliest wake or arrival. Returns True when the run ended (end on
    acceptance of the last request); else it stops once every request is accepted, for
    run_loop to go on. A run waits for the others by spinning LOCKSTEP_SPINS pauses, then
    sleeping on their slot (futex, woken by the publication), so a thread without a core leaves
    it to others; when sleeping takes more than a quarter of its time (after a grace period), it
    gives up (error 9) and stops the split: the caller runs the trace on one thread. Streamed
    (more windows to come): a step whose look-ahead would cross the window's end is not started
    (``lp_wait``; every run stops at the same step, they all see the same windows) until
    Engine.feed puts the requests left in front of the next window."""
    cdef int64_t clk = self.lp_clk, target, my_wake, g_wake, k
    cdef int f = self.clock_ratio, m = self.mem_ratio, c, ph, k_ticks, stop, g_stop, j, peer
    cdef int64_t period = <int64_t> f * m, phase = self.lp_phase
    cdef int32_t head = self.lp_head
    cdef unsigned long long receiving
    cdef int64_t* slot
    cdef long spins
    cdef int64_t t_sleep
    cdef bint more = self.streaming and not self.eof
    cdef int64_t mem_phase[64]
    cdef int n_mem_phase = 0
    cdef bint front_at[64]
    cdef bint mem_at[64]
    if period > 64:
        self.error_code = 5
        sievesim_flag_set(self.abort_flag)
        return False
    n_mem_phase = phase_tables(self, front_at, mem_at, mem_phase)
    while head < self.n_req or more:
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
        if more and head + k_ticks > self.n_req:
            self.lp_wait = True     # the dry run would miss requests of the next window
            break
        receiving = 0
        stop = dry_run(self, head, k_ticks, clk, &receiving)
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
            tick_due(self, clk + 1, receiving)
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
                if spins <= LOCKSTEP_SPINS:
                    sievesim_pause()
                    continue
                # the peer is late by far more than a step's work: it has no core now
                t_sleep = sievesim_now_ns()
                sievesim_sleep_until(slot, self.xstep)
                self.slept_ns += sievesim_now_ns() - t_sleep
                if self.grace_ns >= 0 and t_sleep - t_start >= self.grace_ns \
                        and self.slept_ns * LOCKSTEP_SLEEP_SHARE > t_sleep - t_start:
                    # waiting costs more than the split saves: one thread will do it better
                    self.error_code = 9
                    sievesim_flag_set(self.abort_flag)
                    self.lp_clk = clk
                    return False
            if slot[1] < g_stop:
                g_stop = <int> slot[1]
            if slot[2] < g_wake:
                g_wake = slot[2]
        # accept this run's requests among the first g_stop offered
        for j in range(g_stop):
            if not self.ghost[head + j] and not try_send(self, head + j, clk):
                self.error_code = 8     # the dry run said otherwise: a bug
                sievesim_flag_set(self.abort_flag)
                self.lp_clk = clk
                return False
        head += g_stop
        if head >= self.n_req and not more:
            self.in_lockstep = False
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
        tick_due(self, clk, 0)
        if self.error_code:
            sievesim_flag_set(self.abort_flag)
            break
    if head >= self.n_req and not more:
        self.in_lockstep = False    # (a last window with nothing left: run_loop goes on)
    self.lp_clk = clk
    self.lp_phase = phase
    self.lp_head = head
    self.lp_refused = False
    return False
