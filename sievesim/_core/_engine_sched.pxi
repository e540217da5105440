# A controller's buffers and its cycle (included by _engine.pyx; declarations in _engine.pxd):
# the read, write, active and priority buffers, the pending-write table for read forwarding, and
# ``tick``, Ramulator 2.0's GenericDRAMController::tick with the FR-FCFS scheduler, plus the
# wake-up rules that let the main loop skip a controller's idle cycles exactly.

cdef inline int64_t wh_home(Engine self, int64_t key) noexcept nogil:
    return <int64_t> ((<unsigned long long> key * 0x9E3779B97F4A7C15ULL) >> self.wh_shift)


cdef inline int64_t wh_find(Engine self, int64_t key) noexcept nogil:
    """Slot of ``key`` among the pending write keys, -1 if none is pending."""
    cdef int64_t i = wh_home(self, key)
    while self.wh_cnt[i]:
        if self.wh_key[i] == key:
            return i
        i = (i + 1) & self.wh_mask
    return -1


cdef inline void wh_add(Engine self, int64_t key) noexcept nogil:
    cdef int64_t i = wh_home(self, key)
    while self.wh_cnt[i]:
        if self.wh_key[i] == key:
            self.wh_cnt[i] += 1
            return
        i = (i + 1) & self.wh_mask
    self.wh_key[i] = key
    self.wh_cnt[i] = 1


cdef inline void wh_remove(Engine self, int64_t key) noexcept nogil:
    """One write of ``key`` left its write buffer; backward-shift deletion keeps probes short."""
    cdef int64_t i = wh_find(self, key), j, home
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
        home = wh_home(self, self.wh_key[j])
        # move j into the hole at i unless its home lies cyclically in (i, j]
        if (j > i and (home <= i or home > j)) or (j < i and (home <= i and home > j)):
            self.wh_key[i] = self.wh_key[j]
            self.wh_cnt[i] = self.wh_cnt[j]
            self.wh_cnt[j] = 0
            i = j


cdef inline int32_t* bptr(Engine self, int c, int b) noexcept nogil:
    return self.buf + (c * NBUF + b) * self.stride


cdef inline void bremove(Engine self, int c, int b, int pos) noexcept nogil:
    cdef int32_t* p = bptr(self, c, b)
    cdef int n = self.bsize[c * NBUF + b]
    if b == BUF_WRITE:
        wh_remove(self, self.key[p[pos]])
    memmove(p + pos, p + pos + 1, (n - pos - 1) * sizeof(int32_t))
    self.bsize[c * NBUF + b] = n - 1


cdef inline bint bpush(Engine self, int c, int b, int32_t r) noexcept nogil:
    cdef int n = self.bsize[c * NBUF + b]
    if n >= self.qcap[b]:
        return False
    bptr(self, c, b)[n] = r
    self.bsize[c * NBUF + b] = n + 1
    if b == BUF_WRITE:
        wh_add(self, self.key[r])
    return True


cdef inline int64_t entry_ready(Engine self, int c, int32_t r, int64_t clk) noexcept nogil:
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
        cmd = row_open_next(self, r, bank)
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
        return entry_ready_generic(self, c, r)
    self.sl[r].cur_cmd = cmd
    self.sl[r].rt = rt
    self.sl[r].epoch = self.bank_epoch[bank]
    self.sl[r].exact = self.ctrl_issues[c]
    return rt


cdef int64_t entry_ready_generic(Engine self, int c, int32_t r) noexcept nogil:
    """entry_ready's computation for any request (through req_prereq and req_ready)."""
    cdef int64_t rt, bank = self.sl[r].bank
    cdef int cmd = req_prereq(self, r)
    rt = req_ready(self, cmd, r)
    self.sl[r].cur_cmd = cmd
    if bank >= 0:
        self.sl[r].rt = rt
        self.sl[r].epoch = self.bank_epoch[bank]
        self.sl[r].exact = self.ctrl_issues[c]
    return rt


cdef inline int best_of(Engine self, int c, int b, int64_t clk, bint* is_ready, int64_t* min_ready) noexcept nogil:
    """FR-FCFS: the oldest ready request, else the oldest; sets each scanned request's next command.

    Read and write queues are in arrival order (appended on arrival, removed in place), so the
    first ready request is the oldest ready one and the scan stops there; the active buffer is
    filled in ACT order and is scanned whole.
    """
    cdef int32_t* p = bptr(self, c, b)
    cdef int n = self.bsize[c * NBUF + b], k, best = -1, cmd
    cdef int32_t r
    cdef int64_t rt, bank
    cdef bint rdy, best_rdy = False, fifo = b != BUF_ACTIVE
    for k in range(n):
        r = p[k]
        rt = entry_ready(self, c, r, clk)
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


cdef void set_watermarks(Engine self) noexcept nogil:
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


cdef inline bint write_mode_would_change(Engine self, int c) noexcept nogil:
    cdef int w = self.bsize[c * NBUF + BUF_WRITE], rd = self.bsize[c * NBUF + BUF_READ]
    if not self.write_mode[c]:
        return w >= self.wr_enter or rd == 0
    return w < self.wr_leave and rd != 0


cdef inline void set_write_mode(Engine self, int c) noexcept nogil:
    if write_mode_would_change(self, c):
        self.write_mode[c] = not self.write_mode[c]


cdef int new_maintenance(Engine self, int c, int kind, int32_t* av_src) noexcept nogil:
    cdef int32_t r
    cdef int L
    r = slot_take(self)
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
    set_nodes(self, r)
    if not bpush(self, c, BUF_PRIO, r):
        self.error_code = 2
        return -1
    return r


cdef bint tick(Engine self, int c, int64_t clk) noexcept nogil:
    """Ramulator 2.0 GenericDRAMController::tick for controller ``c`` at cycle ``clk``.

    Returns True when a command was issued.
    """
    cdef int32_t av_ref[MAX_ADDR]
    cdef int32_t av_pim[MAX_ADDR]
    cdef int L, pos = -1, src = -1, k, cmd, n_act
    cdef bint pim = False
    cdef int32_t r = -1, o
    cdef int32_t* p
    cdef int32_t* ra
    cdef int32_t* oa
    cdef bint found = False, rdy = False, match
    cdef int64_t min_ready = NEVER, lo, hi, b, bank, rt
    # refresh manager
    if self.refresh_interval > 0 and clk == self.next_refresh[c]:
        self.next_refresh[c] += self.refresh_interval
        memcpy(av_ref, self.ctrl_prefix + c * self.A, self.A * sizeof(int32_t))
        r = new_maintenance(self, c, T_REFRESH, av_ref)
        if r >= 0:
            self.arrive[r] = clk
        self.n_refresh += 1
    if self.pred_clk[c] == clk and self.pred_stamp[c] == self.ctrl_issues[c] \
            and self.bsize[c * NBUF + BUF_PRIO] == 0 and self.prog_head[c] == self.prog_end[c] \
            and not write_mode_would_change(self, c):
        # nothing changed since the prediction but arrivals at the queues' ends: no active
        # request is ready, and the predicted request is the oldest ready one of the queue
        found = True
        src = self.pred_src[c]
        pos = self.pred_pos[c]
        min_ready = clk         # if the closing rule holds it back, look again next cycle
    # 2.1 active buffer
    elif self.bsize[c * NBUF + BUF_ACTIVE] > 0:
        pos = best_of(self, c, BUF_ACTIVE, clk, &rdy, &min_ready)
        if rdy:
            found = True
            src = BUF_ACTIVE
    if not found:
        # 2.2.1 priority buffer: its head blocks everything until it can issue
        if self.bsize[c * NBUF + BUF_PRIO] > 0:
            r = bptr(self, c, BUF_PRIO)[0]
            cmd = req_prereq(self, r)
            self.sl[r].cur_cmd = cmd
            rt = req_ready(self, cmd, r)
            if clk >= rt:
                found = True
                src = BUF_PRIO
                pos = 0
            else:
                # the head blocks the read and write queues: only it and the active buffer count
                schedule_wake(self, c, clk, i64min(min_ready, rt))
                return False
        if not found and self.prog_head[c] < self.prog_end[c]:
            # PIM program: its next op goes before new reads and writes
            rt = pim_next(self, c, av_pim, &cmd)
            if clk >= rt:
                found = True
                pim = True
            elif rt < min_ready:
                min_ready = rt
        if not found:
            set_write_mode(self, c)
            src = BUF_WRITE if self.write_mode[c] else BUF_READ
            if self.bsize[c * NBUF + src] > 0:
                pos = best_of(self, c, src, clk, &rdy, &min_ready)
                found = rdy
    if pim:
        ra = av_pim
    elif found:
        r = bptr(self, c, src)[pos]
        cmd = self.sl[r].cur_cmd
        ra = self.aptr[r]
    if found:
        # 2.3 never close a row that a request in the active buffer has opened
        if self.cmd_flags[cmd] & F_CLOSING:
            p = bptr(self, c, BUF_ACTIVE)
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
        schedule_wake(self, c, clk, min_ready)
        return False
    if pim:
        pim_issue(self, c, cmd, ra, clk)
        return True
    # row policy (closed: close a bank after row_cap column accesses)
    if self.closed_row:
        if self.cmd_flags[cmd] & (F_CLOSING | F_REFRESHING):
            bank_range(self, ra, self.cmd_scope[cmd] if self.cmd_scope[cmd] < self.n_lv else self.n_lv - 1, &lo, &hi)
            for b in range(lo, hi):
                self.col_access[b] = 0
        elif self.cmd_flags[cmd] & F_ACCESSING:
            bank = self.sl[r].bank if self.sl[r].bank >= 0 else bank_of(self, ra)
            self.col_access[bank] += 1
            if self.col_access[bank] >= self.row_cap:
                new_maintenance(self, c, T_CLOSE, ra)
                self.col_access[bank] = 0
    # statistics: row hit / miss / conflict of a request's first command
    if self.row_class[r] < 0 and self.sl[r].rtype <= T_WRITE:
        o = self.open_row[self.sl[r].bank]
        self.row_class[r] = 0 if o == ra[self.row_lv] else (2 if o >= 0 else 1)
        if self.streaming:
            self.st_class[self.row_class[r]] += 1
        else:
            self.out_row_class[self.slot_req[r]] = self.row_class[r]
    issue(self, cmd, ra, clk, r)
    self.ctrl_issues[c] += 1
    if cmd == self.sl[r].final_cmd:
        if self.sl[r].rtype == T_READ:
            if self.streaming:
                record_depart(self, clk + self.read_latency, self.arrive[r], True)
            else:
                self.out_depart[self.slot_req[r]] = clk + self.read_latency
        elif self.sl[r].rtype == T_WRITE:
            if self.streaming:
                record_depart(self, clk + self.write_latency, self.arrive[r], False)
            else:
                self.out_depart[self.slot_req[r]] = clk + self.write_latency
        elif self.sl[r].rtype == T_REFRESH and self.prog_head[c] < self.prog_end[c] \
                and self.prog_head[c] > self.prog_start[c]:
            # a running PIM program waited from the refresh request until tRFC is over
            self.prog_stall[c] += clk - self.arrive[r] + self.n_rfc
        bremove(self, c, src, pos)
        slot_give(self, r)
    elif self.cmd_flags[cmd] & F_OPENING:
        if bpush(self, c, BUF_ACTIVE, r):
            bremove(self, c, src, pos)
    set_wake(self, c, next_wake_after_issue(self, c, clk))
    return True


cdef int64_t next_wake_after_issue(Engine self, int c, int64_t clk) noexcept nogil:
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
    p = bptr(self, c, BUF_ACTIVE)
    for k in range(n):
        rt = entry_ready(self, c, p[k], nxt)
        if rt <= nxt:
            return nxt
        if rt < t:
            t = rt
    if self.bsize[c * NBUF + BUF_PRIO] > 0:
        # the head blocks the queues until it issues (an issue): the mode is not looked at before
        r = bptr(self, c, BUF_PRIO)[0]
        rt = req_ready(self, req_prereq(self, r), r)
        return i64max(nxt, i64min(t, rt))
    if write_mode_would_change(self, c):
        if self.next_refresh[c] <= nxt:
            return nxt
        flip_ahead(self, c, nxt)
    b = BUF_WRITE if self.write_mode[c] else BUF_READ
    n = self.bsize[c * NBUF + b]
    p = bptr(self, c, b)
    for k in range(n):
        rt = entry_ready(self, c, p[k], nxt)
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


cdef inline void flip_ahead(Engine self, int c, int64_t at) noexcept nogil:
    """Flip controller ``c``'s write mode now for its tick at ``at``.

    Only for a tick that reaches the read/write stage (nothing in the active buffer ready at
    ``at``, no priority request, no PIM program, no refresh due): it flips the mode there, as the
    switch is a function of the queue sizes, unless a request arrives first; try_send then
    takes the flip back and wakes the controller at ``at``.
    """
    self.write_mode[c] = not self.write_mode[c]
    self.flip_clk[c] = at


cdef inline bint queues_empty(Engine self, int c) noexcept nogil:
    cdef int32_t* n = self.bsize + c * NBUF
    return (n[0] | n[1] | n[2] | n[3]) == 0


cdef inline void schedule_wake(Engine self, int c, int64_t clk, int64_t min_ready) noexcept nogil:
    """Controller ``c`` issued nothing at ``clk``: sleep until a queued command can be ready.

    ``min_ready`` is the earliest ready cycle over everything this tick looked at: the active
    buffer (scanned whole), the priority head, and the read or write queue chosen by the write
    mode (scanned whole when nothing in it was ready). The other queue cannot be chosen before
    queue sizes change, which needs an issue or an arrival, and both wake the controller.
    """
    cdef int64_t t = min_ready
    if self.next_refresh[c] < t:
        t = self.next_refresh[c]
    set_wake(self, c, i64max(t, clk + 1))
