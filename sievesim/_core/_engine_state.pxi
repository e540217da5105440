# Trace requests and slots (included by _engine.pyx; declarations in _engine.pxd).
# Every request in a buffer, from the trace or a maintenance request (refresh, closed-row PRE),
# lives in a slot: its address vector, its node offsets per level (``Slot.nodes``) and its cached
# ready time. Slots are bounded by the buffers' capacities, so the hot loop's working set does not
# grow with the trace.

cdef inline int req_ctrl(Engine self, int32_t r) noexcept nogil:
    """Controller of trace request ``r``: flat index of its address down to the controller level
    (a window of keys alone: given in ``req_c``, or worked out from the key)."""
    cdef int64_t flat = 0
    cdef int L
    cdef int32_t* av
    if self.req_addr == NULL:
        return self.req_c[r] if self.req_c_all else key_ctrl(self, self.req_key[r])
    av = self.req_addr + <int64_t> r * self.A
    for L in range(self.ctrl_level + 1):
        flat = flat * self.counts[L] + av[L]
    return <int> flat


cdef inline void key_vector(Engine self, int64_t key, int32_t* av) noexcept nogil:
    """The address vector of byte address ``key`` (>= 0) by the plan of :meth:`Engine.map_keys`:
    what sievesim.dram.mapping gives a linear mapper's address (also past the capacity, wrapped)."""
    cdef int k, lv
    cdef int64_t rest = key >> self.kmap_tx_shift
    if self.kmap_bits:
        # each level a bit field of its own: no chain of shifts from one level to the next
        for k in range(self.A):
            av[k] = <int32_t> ((key >> self.kmap_lpos[k]) & self.kmap_lmask[k])
        return
    for k in range(self.A):
        lv = self.kmap_level[k]
        if self.kmap_shift[k] >= 0:
            av[lv] = <int32_t> (rest & self.kmap_lmask[lv])
            rest = rest >> self.kmap_shift[k]
        else:
            av[lv] = <int32_t> (rest % (self.kmap_lmask[lv] + 1))
            rest = rest // (self.kmap_lmask[lv] + 1)


cdef inline int key_ctrl(Engine self, int64_t key) noexcept nogil:
    """req_ctrl of byte address ``key`` (>= 0) by the plan of :meth:`Engine.map_keys`."""
    cdef int64_t flat = 0
    cdef int L
    cdef int32_t av[MAX_ADDR]
    if self.kmap_bits:
        for L in range(self.ctrl_level + 1):
            flat = flat * self.counts[L] + ((key >> self.kmap_lpos[L]) & self.kmap_lmask[L])
        return <int> flat
    key_vector(self, key, av)
    for L in range(self.ctrl_level + 1):
        flat = flat * self.counts[L] + av[L]
    return <int> flat


cdef void ghosts_of_keys(Engine self) noexcept nogil:
    """set_ghosts for a window of keys alone whose controller levels are bit fields (kmap_bits):
    key_ctrl of every request, with the plan in locals (the flags are bytes, and a byte store may
    alias any field of the engine, which the compiler would then load again for each request)."""
    cdef int64_t pos[MAX_ADDR]
    cdef int64_t mask[MAX_ADDR]
    cdef int64_t mult[MAX_ADDR]
    cdef int L, n_lv = self.ctrl_level + 1
    cdef Py_ssize_t r, n = self.n_req
    cdef int64_t key, c
    cdef const int64_t* keys = self.req_key
    cdef const int8_t* own = self.own
    cdef int8_t* ghost = self.ghost
    cdef int32_t* req_c = self.req_c
    cdef bint keep = self.lockstep
    # key_ctrl's flat index as a sum: level L's field times the counts of the levels after it
    for L in range(n_lv - 1, -1, -1):
        pos[L] = self.kmap_lpos[L]
        mask[L] = self.kmap_lmask[L]
        mult[L] = 1 if L == n_lv - 1 else mult[L + 1] * self.counts[L + 1]
    for r in range(n):
        key = keys[r]
        c = 0
        for L in range(n_lv):
            c += ((key >> pos[L]) & mask[L]) * mult[L]
        ghost[r] = not own[c]
        if keep:
            req_c[r] = <int32_t> c


cdef inline int32_t slot_take(Engine self) noexcept nogil:
    if self.slot_free_top == 0:
        self.error_code = 1
        return -1
    self.slot_free_top -= 1
    return self.slot_free[self.slot_free_top]


cdef inline void slot_give(Engine self, int32_t s) noexcept nogil:
    self.slot_free[self.slot_free_top] = s
    self.slot_free_top += 1


cdef inline void fill_slot(Engine self, int32_t s, int32_t r, int64_t clk) noexcept nogil:
    """Slot ``s`` takes trace request ``r`` arriving at ``clk``: type, command, address, node offsets."""
    cdef int L
    cdef int64_t flat = 0
    cdef int32_t* av
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
    if self.req_addr == NULL:
        # a window of keys alone: the vector worked out here, for this run's requests only
        av = self.addr + s * self.A
        key_vector(self, self.req_key[r], av)
        self.aptr[s] = av
    elif self.streaming:
        # the window moves on while the request waits: the slot keeps its own copy
        av = self.req_addr + <int64_t> r * self.A
        for L in range(self.A):
            self.addr[s * self.A + L] = av[L]
        self.aptr[s] = self.addr + s * self.A
    else:
        av = self.req_addr + <int64_t> r * self.A
        self.aptr[s] = av
    self.sl[s].row = av[self.row_lv]
    # set_nodes without its broadcast test: a trace request addresses every level (measured:
    # calling set_nodes here costs 1-2 % more instructions per request)
    for L in range(self.n_lv):
        flat = flat * self.counts[L] + av[L]
        nodes[L] = <int32_t> ((self.node_off[L] + flat) * self.n_cmd)
    self.sl[s].bank = <int32_t> flat


cdef void set_nodes(Engine self, int32_t r) noexcept nogil:
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


cdef inline void record_depart(Engine self, int64_t depart, int64_t arrive, bint is_read) noexcept nogil:
    """Streaming: a trace request is served at ``depart`` (accepted at ``arrive``): the counters,
    and the ring of the latest departures (those after the last cycle of an ``end = "accepted"``
    run are taken out at the end, see Engine.stream_totals)."""
    cdef int64_t* e = self.dep_ring + 3 * (self.dep_n % self.dep_cap)
    self.st_served += 1
    if is_read:
        self.st_read_served += 1
        self.st_lat_sum += depart - arrive
    if depart > self.st_max_depart:
        self.st_max_depart = depart
    e[0] = depart
    e[1] = depart - arrive
    e[2] = is_read
    self.dep_n += 1


cdef extern from *:
    int __builtin_ctzll(unsigned long long) nogil


# ---- the wheel: which controllers are due at a cycle, without looking at every wake each cycle.
# inside the loops, wake[c] is only written through set_wake, which also files c under its wake: in
# wheel[t & 63] for a wake t less than 64 cycles after wheel_next (the next cycle tick_due takes
# up), else in far_mask (far_min: the earliest). A bit may be stale (the wake moved since, and
# set_wake filed the controller again under the new one): tick_due checks each bit against
# wake[] and drops a stale one. Every finite wake has a bit under its own cycle (or in far_mask,
# moved into the wheel before that cycle comes), so the controllers ticked are exactly those
# whose wake has come. Jumps only go to the earliest wake, so no filed cycle is skipped; each
# run of the loops files every wake afresh first.

cdef enum:
    WHEEL_MIN_CONTROLLERS = 8


cdef inline void wheel_file(Engine self, int c, int64_t t) noexcept nogil:
    """File controller ``c`` (wake ``t``) in the wheel, or far (a wake of NEVER: nowhere)."""
    cdef int64_t d = t - self.wheel_next
    if d < 64:
        self.wheel[(t if d > 0 else self.wheel_next) & 63] |= (<unsigned long long> 1) << c
    elif t < NEVER:
        self.far_mask |= (<unsigned long long> 1) << c
        if t < self.far_min:
            self.far_min = t


cdef inline void set_wake(Engine self, int c, int64_t t) noexcept nogil:
    """Controller ``c`` wakes at cycle ``t`` (filed in the wheel when it is on)."""
    self.wake[c] = t
    if self.wheel_on:
        wheel_file(self, c, t)


cdef void wheel_rebuild(Engine self, int64_t next_clk) noexcept nogil:
    """File every controller simulated here afresh; ``next_clk``: the next cycle tick_due takes up."""
    cdef int c, k
    # (with fewer controllers, looking at each wake costs less than filing it)
    self.wheel_on = WHEEL_MIN_CONTROLLERS <= self.n_ctrl <= 64 and self.skip_idle
    if not self.wheel_on:
        return
    for k in range(64):
        self.wheel[k] = 0
    self.far_mask = 0
    self.far_min = NEVER
    self.wheel_next = next_clk
    for c in range(self.n_ctrl):
        if (self.own_mask >> c) & 1:
            wheel_file(self, c, self.wake[c])


cdef void wheel_bring_near(Engine self, int64_t clk) noexcept nogil:
    """Move the far wakes that lie within 64 cycles of ``clk`` into the wheel."""
    cdef unsigned long long far = self.far_mask
    cdef int c
    cdef int64_t t
    self.far_mask = 0
    self.far_min = NEVER
    while far:
        c = __builtin_ctzll(far)
        far &= far - 1
        t = self.wake[c]
        if t - clk < 64:
            self.wheel[(t if t > clk else clk) & 63] |= (<unsigned long long> 1) << c
        elif t < NEVER:
            self.far_mask |= (<unsigned long long> 1) << c
            if t < self.far_min:
                self.far_min = t
