# The frontend and the main loop (included by _engine.pyx; declarations in _engine.pxd):
# ``try_send`` offers a trace request to its controller, ``run_loop`` is Ramulator 2.0's loop of
# frontend and memory ticks by clock ratio with idle cycles skipped, and ``run_lockstep`` runs one
# part of a split (sievesim._core.parallel) in lockstep with the others while the frontend is
# coupled to them.

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
    /* lockstep exchange between the runs of a split. slot[0]: a run's progress, published with
       release order and read with acquire order, so what was written before the publication is
       seen after it; the first 32 bits of slot[3]: its low half, the word a waiting run sleeps on;
       of slot[4]: how many runs sleep on it. A publication wakes the sleepers (a system call only when
       there are any); a sleeper counts itself before it looks at the word. The publisher stores
       the word and then looks at the count without a fence between (a fence on every step cost
       more than all the waiting): in a window of nanoseconds both can miss each other, but the
       kernel compares the word again when the sleeper calls in, and at worst the sleeper wakes
       at its 1 ms timeout. */
    static inline void sievesim_publish(int64_t *p, int64_t v) {
        int32_t *word = (int32_t *) (p + 3);
        __atomic_store_n(p, v, __ATOMIC_RELEASE);
        __atomic_store_n(word, (int32_t) v, __ATOMIC_RELEASE);
        if (__atomic_load_n((int32_t *) (p + 4), __ATOMIC_RELAXED) > 0) {
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
    static inline void sievesim_store(int64_t *p, int64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
    /* give the core up while slot p still holds ``old`` (the word: its low half), for at most
       1 ms (the caller polls its abort flag between sleeps); elsewhere than Linux, one sched_yield */
    static inline void sievesim_sleep_unchanged(int64_t *p, int64_t old) {
    #ifdef __linux__
        int32_t *word = (int32_t *) (p + 3), *sleepers = (int32_t *) (p + 4);
        struct timespec ts = {0, 1000000};
        __atomic_add_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(word, __ATOMIC_SEQ_CST) == (int32_t) old)
            syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, (int32_t) old, &ts, NULL, 0);
        __atomic_sub_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
    #else
        (void) p; (void) old;
        sched_yield();
    #endif
    }
    """
    void sievesim_publish(int64_t* p, int64_t v) nogil
    int64_t sievesim_read(int64_t* p) nogil
    void sievesim_pause() nogil
    int64_t sievesim_now_ns() nogil
    void sievesim_store(int64_t* p, int64_t v) nogil
    void sievesim_sleep_unchanged(int64_t* p, int64_t old) nogil

cdef enum:
    # lockstep waiting: spin this many pauses (tens of microseconds), then sleep on the slot
    LOCKSTEP_SPINS = 2000
    # a run gives the lockstep up (error 9) once it has slept more than 1 / LOCKSTEP_SLEEP_SHARE of
    # its time in it, after at least Engine.grace_ns: the runs' threads do not all have a core.
    # (A third, not a quarter: a lockstep is 1.5-1.8x one thread, so a third asleep still beats
    # it; at a quarter, a few stalls of milliseconds early on gave it up on free cores now and then)
    LOCKSTEP_SLEEP_SHARE = 3
    # a lockstep run publishes its promises every this many steps
    PROMISE_STEPS = 8


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
        set_wake(self, c, i64min(self.wake[c], clk + 1))
        return True
    if self.wake[c] > clk + 1:
        # The controller sleeps past the next cycle: everything it last looked at is not ready
        # before its wake. Unless the write mode flips, only this request can change that, and
        # only if it joins the queue the mode picks and no priority request blocks.
        if not self.skip_idle or write_mode_would_change(self, c):
            set_wake(self, c, clk + 1)
        elif self.bsize[c * NBUF + BUF_PRIO] == 0 and b == (BUF_WRITE if self.write_mode[c] else BUF_READ):
            rt = entry_ready(self, c, r, clk)    # a fresh slot: computed and cached exactly
            set_wake(self, c, i64max(clk + 1, i64min(self.wake[c], rt)))
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


cdef inline void tick_due(Engine self, int64_t clk, unsigned long long done, bint again) noexcept nogil:
    """Tick, at ``clk``, every controller simulated here whose wake has come (every one
    without ``skip_idle``), except those in the mask ``done``, in index order; ``again``: a
    second call at this cycle follows (it ticks those left, and those woken for it meanwhile)."""
    cdef unsigned long long due
    cdef int c
    cdef int s = <int> (clk & 63)
    if self.wheel_on:
        # the controllers filed under this cycle (see "the wheel", _engine_state.pxi); a tick
        # changes only its own controller's wake, and files it at a later cycle
        if self.far_min - clk < 64:
            wheel_bring_near(self, clk)
        due = self.wheel[s] & self.own_mask & ~done
        self.wheel[s] &= ~due
        self.wheel_next = clk if again else clk + 1
        while due:
            c = __builtin_ctzll(due)
            due &= due - 1
            if self.wake[c] <= clk:     # (else a stale bit: the controller is filed under its wake)
                tick(self, c, clk)
    elif self.n_ctrl <= 64 and self.skip_idle:
        # a few controllers: which are due, without a hard-to-predict branch per controller
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
    wheel_rebuild(self, clk + 1)
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
            tick_due(self, clk, 0, False)
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
                if target <= clk:
                    # every controller due was just ticked, so every wake lies ahead: a wake left
                    # behind is a bug, which an error shows (stepping on would never end)
                    self.error_code = 4
                    break
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


cdef inline int64_t* run_slot(Engine self, int run) noexcept nogil:
    """Run ``run``'s part of the lockstep exchange: its progress slot, then promises and ring."""
    return self.xch + self.runs_off + run * self.run_stride


cdef int dry_run(Engine self, int32_t head, int k_ticks, int64_t clk, unsigned long long* receiving,
                 int* first_unknown, int* known_stop) noexcept nogil:
    """How many of the next ``k_ticks`` frontend ticks (at cycle ``clk``) would each take a
    request, as far as this run's controllers decide: requests are offered in trace order from
    ``head``; another run's request is taken as accepted; the count stops at the first request
    not yet arrived, or the first of this run's requests its controller would refuse. Changes
    nothing but the cached promises; ``receiving``: a bit per controller (index < 64) of this run
    that would take one of them; ``first_unknown[p]``: lowered to the position of run p's first
    request whose acceptance p's promise does not guarantee (its queue may be full), and
    ``known_stop[p]`` set to p's stop at this step if p has decided it already."""
    cdef int j = 0, i, n_acc = 0, n_peer = 0, c, b, same, q, p
    cdef int32_t r
    cdef int acc_q[64]
    cdef int64_t acc_key[64]
    cdef int peer_q[64]
    cdef int64_t need, v
    cdef int64_t* slot
    cdef bint fwd
    while j < k_ticks and head + j < self.n_req:
        r = head + j
        if self.arrival[r] > clk:
            break
        c = self.req_c[r]
        if self.ghost[r]:
            # another run's: accepted for sure while fewer requests than its promise have reached
            # the queue (accepted before this step, plus those before it in this look-ahead)
            q = 2 * c + (1 if self.req_write[r] else 0)
            same = 0
            for i in range(n_peer):
                if peer_q[i] == q:
                    same += 1
            need = self.cum[q] + same
            p = <int> self.ctrl_rank[c]
            if need >= self.lcache[q] and first_unknown[p] > j:
                slot = run_slot(self, p)
                v = sievesim_read(slot + self.ring_off + (clk & self.ring_mask))
                if (v >> 7) == clk:
                    # the run has decided this step already: its stop, exactly
                    known_stop[p] = <int> (v & 127)
                    first_unknown[p] = j
                else:
                    # its latest promise, if it has not decided this step yet (a promise read
                    # before a progress below clk was made at a cycle <= clk, so it holds now)
                    v = sievesim_read(slot + self.l_off + q)
                    if sievesim_read(slot) < clk and v > self.lcache[q]:
                        self.lcache[q] = v
                    if need >= self.lcache[q]:
                        first_unknown[p] = j
            peer_q[n_peer] = q
            n_peer += 1
        else:
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


cdef inline void publish_promises(Engine self) noexcept nogil:
    """This run's promises, at the start of a step: per read and write queue of its controllers,
    L = requests accepted so far + free slots. Arrivals leave L as it is, departures and forwarded
    reads raise it, so the queue takes every request up to L whenever it comes."""
    cdef int k, c, b
    cdef int64_t L
    cdef int64_t* lp = run_slot(self, self.rank) + self.l_off
    for k in range(self.n_own):
        c = self.own_list[k]
        for b in range(2):
            L = self.cum[2 * c + b] + self.qcap[b] - self.bsize[c * NBUF + b]
            if L != self.lpub[2 * c + b]:
                self.lpub[2 * c + b] = L
                sievesim_store(lp + 2 * c + b, L)


cdef inline int peer_stop(Engine self, int run, int64_t cycle) noexcept nogil:
    """Run ``run``'s stop at ``cycle``, a step it has decided: its record, or -1 for a cycle it
    skipped (a stop of 0: the frontend was held by a refusal of its own there, or no request
    had arrived)."""
    cdef int64_t v = sievesim_read(run_slot(self, run) + self.ring_off + (cycle & self.ring_mask))
    if (v >> 7) == cycle:
        return <int> (v & 127)
    return -1


cdef bint wait_for(Engine self, int run, int64_t cycle, int64_t t_start) noexcept nogil:
    """Wait until run ``run`` has decided its step at ``cycle``: spin LOCKSTEP_SPINS pauses, then
    sleep on its progress (futex, woken by its next publication), so a thread without a core
    leaves it to others. False when the split stops: another run failed (error 7), or this one
    slept more than a third of its time, after a grace period (error 9: the runs' threads do
    not all have a core; the caller runs the trace on one thread)."""
    cdef int64_t* slot = run_slot(self, run)
    cdef int64_t seen, t_sleep, outside
    cdef long spins = 0
    while True:
        seen = sievesim_read(slot)
        if seen >= cycle:
            return True
        if sievesim_flag_get(self.abort_flag):
            self.error_code = 7
            return False
        spins += 1
        if spins <= LOCKSTEP_SPINS:
            sievesim_pause()
            continue
        # the run is late by far more than a step's work: it has no core now, or it is out of
        # the lockstep, taking its next window (not contention: that sleep is not counted)
        t_sleep = sievesim_now_ns()
        outside = sievesim_read(slot + 2)
        sievesim_sleep_unchanged(slot, seen)
        if not outside:
            self.slept_ns += sievesim_now_ns() - t_sleep
        if self.grace_ns >= 0 and t_sleep - t_start >= self.grace_ns \
                and self.slept_ns * LOCKSTEP_SLEEP_SHARE > t_sleep - t_start:
            self.error_code = 9
            sievesim_flag_set(self.abort_flag)
            return False


cdef bint run_lockstep(Engine self) noexcept nogil:
    """lockstep_steps, its time added up over calls (a streamed lockstep stops for each window)."""
    cdef int64_t t_start = sievesim_now_ns() - self.lock_ns
    cdef bint ended = lockstep_steps(self, t_start)
    self.lock_ns = sievesim_now_ns() - t_start
    return ended


cdef bint lockstep_steps(Engine self, int64_t t_start) noexcept nogil:
    """The frontend-coupled part of a split run (the trace not yet all accepted), exact when
    queues fill: Ramulator's loop, one memory cycle (a step: the frontend ticks up to a memory
    tick, then that tick) at a time, each run deciding every step the same way.

    A step's frontend ticks take requests in trace order up to the first refusal. Each run works
    out how far its own controllers would take them (``dry_run``) and records that stop by cycle
    in its ring, then publishes its progress. Another run's request is decided without asking
    that run while the run's promise for the queue covers it (``publish_promises``); only when a
    request of another run before this run's own stop is not covered does it read that run's
    stop for the step, waiting until it has decided it. All take the minimum, accept their own
    requests up to it and tick their controllers. So the runs agree only where a queue may be
    full, and may be up to a ring of cycles apart. When no request can be taken, a run jumps to
    its next controller wake or the next arrival when the refusal is its own (the cycles between
    count as stops of 0 for the others), else steps one cycle. Returns True when the run ended
    (end on acceptance of the last request); else it stops once every request is accepted, for
    run_loop to go on. Streamed (more windows to come): a step whose look-ahead would cross the
    window's end is not started (``lp_wait``; every run stops at that same step, since all decide
    alike) until Engine.feed puts the requests left in front of the next window."""
    cdef int64_t clk = self.lp_clk, target, my_wake, k, front_next, floor
    cdef int f = self.clock_ratio, m = self.mem_ratio, c, ph, k_ticks, stop, g_stop, j, p, run, best, s
    cdef int64_t period = <int64_t> f * m, phase = self.lp_phase
    cdef int32_t head = self.lp_head, r
    cdef unsigned long long receiving
    cdef int64_t* me = run_slot(self, self.rank)
    cdef bint ticked_early
    cdef int promise_age = PROMISE_STEPS
    cdef bint more = self.streaming and not self.eof
    cdef int first_unknown[64]
    cdef int known_stop[64]
    cdef int64_t mem_phase[64]
    cdef int n_mem_phase = 0
    cdef bint front_at[64]
    cdef bint mem_at[64]
    if period > 64:
        self.error_code = 5
        sievesim_flag_set(self.abort_flag)
        return False
    n_mem_phase = phase_tables(self, front_at, mem_at, mem_phase)
    wheel_rebuild(self, clk + 1)
    sievesim_store(me + 2, 0)
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
            sievesim_store(me + 2, 1)       # out of the lockstep for input (see wait_for)
            break
        if clk - self.peer_floor > self.ring_mask - 2:
            # the rings hold ring_mask + 1 cycles: stay that close to the slowest run
            floor = NEVER
            for run in range(self.n_peers):
                if run != self.rank:
                    if not wait_for(self, run, clk - self.ring_mask + 2, t_start):
                        self.lp_clk = clk
                        return False
                    floor = i64min(floor, sievesim_read(run_slot(self, run)))
            self.peer_floor = floor
        promise_age += 1
        if promise_age >= PROMISE_STEPS:
            # (fresher promises decide a little more alone, but each publication makes the
            # others' next read of it miss their cache)
            publish_promises(self)
            promise_age = 0
        receiving = 0
        for run in range(self.n_peers):
            first_unknown[run] = 64
            known_stop[run] = -1
        stop = dry_run(self, head, k_ticks, clk, &receiving, first_unknown, known_stop)
        my_wake = NEVER
        for k in range(self.n_own):
            my_wake = i64min(my_wake, self.wake[self.own_list[k]])
        if my_wake <= clk:
            # (as in run_loop: every due controller was ticked, so a wake left behind is a bug)
            self.error_code = 4
            sievesim_flag_set(self.abort_flag)
            self.lp_clk = clk
            return False
        sievesim_store(me + self.ring_off + (clk & self.ring_mask), clk * 128 + stop)
        sievesim_publish(me, clk)
        # the stops of runs whose requests before this one's stop no promise covers, nearest first
        g_stop = stop
        ticked_early = False
        while True:
            run = -1
            best = g_stop
            for p in range(self.n_peers):
                if first_unknown[p] < best:
                    best = first_unknown[p]
                    run = p
            if run < 0:
                break
            first_unknown[run] = 64
            if known_stop[run] >= 0:
                s = known_stop[run]
            else:
                if sievesim_read(run_slot(self, run)) < clk:
                    # while the other decides: tick the controllers that no request of this step
                    # can reach (they do not depend on the frontend; a step that may end the
                    # trace keeps all back)
                    if not ticked_early and self.n_ctrl <= 64 and head + k_ticks < self.n_req:
                        tick_due(self, clk + 1, receiving, True)
                        ticked_early = True
                    if not wait_for(self, run, clk, t_start):
                        self.lp_clk = clk
                        return False
                s = peer_stop(self, run, clk)
                if s < 0:
                    if sievesim_read(run_slot(self, run)) == NEVER and sievesim_read(run_slot(self, run) + 1) < clk:
                        # the run took every request before this cycle, this one has not: they
                        # disagree, a bug
                        self.error_code = 8
                        sievesim_flag_set(self.abort_flag)
                        self.lp_clk = clk
                        return False
                    s = 0           # a cycle the run skipped: the frontend was held there
            if s < g_stop:
                g_stop = s
        # accept this run's requests among the first g_stop offered; count every run's
        for j in range(g_stop):
            r = head + j
            c = self.req_c[r]
            self.cum[2 * c + (1 if self.req_write[r] else 0)] += 1
            if not self.ghost[r] and not try_send(self, r, clk):
                self.error_code = 8     # the dry run said otherwise: a bug
                sievesim_flag_set(self.abort_flag)
                self.lp_clk = clk
                return False
        head += g_stop
        if head >= self.n_req and not more:
            # every request is taken: no run needs this one's stops any more (were one to wait for
            # them all the same, from a bug, it would read stops of 0 rather than wait forever)
            sievesim_store(me + 1, clk)         # the last step it decided
            sievesim_publish(me, NEVER)
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
            # nothing can be taken: until the next request arrives; or, refused by this run's
            # controller, until one of them ticks (then the cycles between are stops of 0 for the
            # others); refused by another run's, this one cannot tell, and steps
            if self.arrival[head] > clk:
                front_next = self.arrival[head]
            elif self.ghost[head]:
                front_next = clk + 1
            else:
                front_next = NEVER
            target = i64min(my_wake, front_next)
            if target == NEVER:
                self.error_code = 4
                sievesim_flag_set(self.abort_flag)
                self.lp_clk = clk
                return False
            if target > clk + 1:
                sievesim_publish(me, target - 2)
                k = target - 1
                phase = mem_phase[k % n_mem_phase] - 1
                clk = target - 1
                continue
        # the memory tick (a controller ticked early is not due again: a tick wakes it later)
        phase = ph
        clk += 1
        tick_due(self, clk, 0, False)
        if self.error_code:
            sievesim_flag_set(self.abort_flag)
            break
    if head >= self.n_req and not more:
        sievesim_store(me + 1, clk)
        sievesim_publish(me, NEVER)
        self.in_lockstep = False    # (a last window with nothing left: run_loop goes on)
    self.lp_clk = clk
    self.lp_phase = phase
    self.lp_head = head
    self.lp_refused = False
    return False
