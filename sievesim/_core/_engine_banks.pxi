# The bank state machine and timing checks (included by _engine.pyx; declarations in
# _engine.pxd). The compiled standard's timing rows ``(level, preceding) -> (following, latency,
# window, sibling)`` become per-node ready times: ``ready[node * n_cmd + cmd]`` is the first cycle
# ``cmd`` may issue to ``node``; a command's ready time is the maximum over the nodes on its path.
# Issuing pushes the rows' ready times (``update_timing*``) and moves the bank states
# (``update_states``); ``prereq`` is the state machine's answer to "what must issue first".

cdef inline int64_t ready_time(Engine self, int cmd, int32_t* av) noexcept nogil:
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


cdef inline int64_t req_ready(Engine self, int cmd, int32_t r) noexcept nogil:
    """ready_time for a queued request, through its precomputed node offsets."""
    cdef int64_t rt = -1, v
    cdef int L
    cdef int32_t* nodes = self.sl[r].nodes
    cdef int64_t* rd = self.ready + cmd
    cdef int depth = self.cmd_check[cmd]
    if self.sl[r].bank < 0:
        return ready_time(self, cmd, self.aptr[r])
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


cdef inline int row_open_next(Engine self, int32_t r, int64_t bank) noexcept nogil:
    """Next command of request ``r`` whose final command needs its row open in ``bank`` (a
    plain row buffer): ACT, PRE or the final command itself, chosen by selects rather than
    branches, since which of the three it is, is hard to predict."""
    cdef int32_t row = self.open_row[bank]
    cdef int cmd = self.sl[r].final_cmd if row == self.sl[r].row else self.cmd_pre
    return self.cmd_act if row < 0 else cmd


cdef inline int req_prereq(Engine self, int32_t r) noexcept nogil:
    """Next command of request ``r`` (prerequisite rule of its final command)."""
    cdef int cmd = self.sl[r].final_cmd
    if self.cmd_prereq[cmd] == P_ROW_OPEN and self.sl[r].bank >= 0 and (self.dual_buf or self.cmd_actab < 0):
        return row_open_next(self, r, self.sl[r].bank)
    return prereq(self, cmd, self.aptr[r])


cdef inline void apply_rows(Engine self, int L, int64_t node, int cmd, int64_t clk, bint sibling) noexcept nogil:
    """Push the ready times that ``cmd`` at ``clk`` imposes on ``node`` (level ``L``)."""
    apply_at(self, L * self.n_cmd + cmd, node * self.n_cmd, cmd, clk, sibling)


cdef inline void apply_at(Engine self, int k, int64_t off, int cmd, int64_t clk, bint sibling) noexcept nogil:
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
        apply_window(self, k, off, cmd, clk)


cdef inline void apply_window(Engine self, int k, int64_t off, int cmd, int64_t clk) noexcept nogil:
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


cdef inline void update_timing_req(Engine self, int cmd, int32_t r, int64_t clk) noexcept nogil:
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
        apply_window(self, self.wlv_level[t] * self.n_cmd + cmd, nodes[self.wlv_level[t]], cmd, clk)


cdef void update_timing(Engine self, int cmd, int32_t* av, int64_t clk) noexcept nogil:
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
                    apply_rows(self, L2, base + j + self.node_off[L2], cmd, clk, False)
            return
        parent = idx
        idx = idx * self.counts[L] + av[L]
        if not self.has_rows[L * self.n_cmd + cmd]:
            continue
        if L > 0 and self.has_sibling[L * self.n_cmd + cmd]:
            for c in range(self.counts[L]):
                if c != av[L]:
                    apply_rows(self, L, self.node_off[L] + parent * self.counts[L] + c, cmd, clk, True)
        apply_rows(self, L, self.node_off[L] + idx, cmd, clk, False)


cdef inline int64_t bank_of(Engine self, int32_t* av) noexcept nogil:
    cdef int64_t idx = 0
    cdef int L
    for L in range(self.n_lv):
        idx = idx * self.counts[L] + av[L]
    return idx


cdef inline void bank_range(Engine self, int32_t* av, int level, int64_t* lo, int64_t* hi) noexcept nogil:
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


cdef inline void res_buffer_opens(Engine self, int64_t b, int64_t clk) noexcept nogil:
    """Residency: a row buffer of bank ``b``'s unit opens at ``clk`` (the unit is active from
    its first open buffer on)."""
    cdef int64_t u = b // self.res_bpu
    if self.res_open[u] == 0:
        self.res_since[u] = clk
    self.res_open[u] += 1


cdef inline void res_buffer_closes(Engine self, int64_t b, int64_t clk) noexcept nogil:
    """Residency: a row buffer of bank ``b``'s unit closes at ``clk``; the last one closes the
    unit's active interval (``clk`` - its start cycles)."""
    cdef int64_t u = b // self.res_bpu
    self.res_open[u] -= 1
    if self.res_open[u] == 0:
        self.res_cycles[u] += clk - self.res_since[u]


cdef inline void update_states(Engine self, int cmd, int32_t* av, int64_t bank, int64_t clk) noexcept nogil:
    """Bank states after ``cmd`` to ``av`` at ``clk``; ``bank``: its bank index when known (-1:
    derive it). Residency counters follow each change of a row buffer between closed and open."""
    cdef int act = self.cmd_action[cmd]
    cdef int64_t lo, hi, b, node
    if act == A_OPEN:
        b = bank if bank >= 0 else bank_of(self, av)
        if self.open_row[b] < 0:
            res_buffer_opens(self, b, clk)
        self.open_row[b] = av[self.row_lv]
        self.bank_epoch[b] += 1
    elif act == A_CLOSE:
        b = bank if bank >= 0 else bank_of(self, av)
        if self.open_row[b] >= 0:
            res_buffer_closes(self, b, clk)
        self.open_row[b] = -1
        self.bank_epoch[b] += 1
    elif act == A_CLOSE_ALL:
        bank_range(self, av, self.cmd_scope[cmd], &lo, &hi)
        for b in range(lo, hi):
            if self.open_row[b] >= 0:
                res_buffer_closes(self, b, clk)
            self.open_row[b] = -1
            self.bank_epoch[b] += 1
    elif act == A_PIM_OPEN or act == A_PIM_CLOSE:
        node = node_at(self, av, self.cmd_scope[cmd])
        # a shared row buffer makes every bank's prerequisite depend on the PIM row
        bank_range(self, av, self.cmd_scope[cmd], &lo, &hi)
        # residency: the PIM row is one more open buffer in each unit below its node
        if (self.pim_row[node] < 0) != (act == A_PIM_CLOSE):
            b = lo
            while b < hi:
                if act == A_PIM_OPEN:
                    res_buffer_opens(self, b, clk)
                else:
                    res_buffer_closes(self, b, clk)
                b += self.res_bpu
        self.pim_row[node] = av[self.row_lv] if act == A_PIM_OPEN else -1
        for b in range(lo, hi):
            self.bank_epoch[b] += 1
    elif cmd == self.cmd_ref and self.res_ref_busy > 0:
        # refresh: every bank of the units below its node busy for tRFC (DRAMPower counts
        # them active); the rows are closed (its prerequisite), so this adds no overlap
        bank_range(self, av, self.cmd_scope[cmd], &lo, &hi)
        b = lo
        while b < hi:
            self.res_ref_cycles[b // self.res_bpu] += self.res_ref_busy
            self.res_ref_end[b // self.res_bpu] = clk + self.res_ref_busy
            b += self.res_bpu


cdef inline int64_t node_at(Engine self, int32_t* av, int level) noexcept nogil:
    """Flat node index (into per-node arrays) of the node ``av`` addresses at ``level``."""
    cdef int64_t idx = 0
    cdef int L
    for L in range(level + 1):
        idx = idx * self.counts[L] + av[L]
    return self.node_off[level] + idx


cdef inline bint any_bank_open(Engine self, int32_t* av, int level) noexcept nogil:
    cdef int64_t lo, hi, b
    bank_range(self, av, level, &lo, &hi)
    for b in range(lo, hi):
        if self.open_row[b] >= 0:
            return True
    return False


cdef inline int prereq(Engine self, int cmd, int32_t* av) noexcept nogil:
    cdef int kind = self.cmd_prereq[cmd]
    cdef int32_t r
    cdef int pim_level
    if kind == P_ROW_OPEN:
        if not self.dual_buf and self.cmd_actab >= 0:
            if self.pim_row[node_at(self, av, self.cmd_scope[self.cmd_actab])] >= 0:
                return self.cmd_preab
        r = self.open_row[bank_of(self, av)]
        if r < 0:
            return self.cmd_act
        if r == av[self.row_lv]:
            return cmd
        return self.cmd_pre
    if kind == P_ALL_CLOSED:
        if any_bank_open(self, av, self.cmd_scope[cmd]):
            return self.cmd_prea
        if self.cmd_actab >= 0 and self.pim_row[node_at(self, av, self.cmd_scope[self.cmd_actab])] >= 0:
            return self.cmd_preab
        return cmd
    if kind == P_PIM_ROW_OPEN:
        pim_level = self.cmd_scope[cmd]
        if not self.dual_buf and any_bank_open(self, av, pim_level):
            return self.cmd_prea
        r = self.pim_row[node_at(self, av, pim_level)]
        if r < 0:
            return self.cmd_actab
        if r == av[self.row_lv]:
            return cmd
        return self.cmd_preab
    return cmd


cdef void issue(Engine self, int cmd, int32_t* av, int64_t clk, int32_t r) noexcept nogil:
    """Issue ``cmd`` at ``clk``; ``r``: the request it serves (-1: PIM op), for its node offsets."""
    if r >= 0 and self.sl[r].bank >= 0 and not self.cmd_has_sibling[cmd]:
        update_timing_req(self, cmd, r, clk)
    else:
        update_timing(self, cmd, av, clk)
    update_states(self, cmd, av, self.sl[r].bank if r >= 0 else -1, clk)
    self.n_commands += 1
    self.last_issue = clk
    if self.log_on:
        log_command(self, cmd, av, clk)
