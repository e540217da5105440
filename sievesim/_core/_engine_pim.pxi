# PIM programs (``Engine.load_pim_programs``): per controller, a sequence of ops [prog_start,
# prog_end), each an all-bank command (MACAB, GWRITE, RDRES, PREAB) to a row and column of the
# controller's node; the next op goes before new reads and writes, its prerequisites (ACTAB,
# PREAB, PREA) issued first. Counters: pim_counts per controller (ACTAB, PREAB, MACAB, GWRITE,
# RDRES), prog_done (cycle the program's last result has arrived), prog_stall (refresh waits).

cdef inline void pim_address(Engine self, int c, int64_t op, int32_t* av) noexcept nogil:
    """Address of PIM op ``op`` of controller ``c``: the controller's node, all banks below it."""
    memcpy(av, self.ctrl_prefix + c * self.A, self.A * sizeof(int32_t))
    av[self.row_lv] = self.prog_rowcol[2 * op]
    av[self.row_lv + 1] = self.prog_rowcol[2 * op + 1]


cdef inline int pim_slot(Engine self, int cmd) noexcept nogil:
    if cmd == self.cmd_actab: return 0
    if cmd == self.cmd_preab: return 1
    if cmd == self.cmd_macab: return 2
    if cmd == self.cmd_gwrite: return 3
    return 4


cdef inline int64_t pim_next(Engine self, int c, int32_t* av, int* cmd) noexcept nogil:
    """Controller ``c``'s next PIM op: its address into ``av``, the command that must issue next
    for it into ``cmd``; returns the earliest cycle that command can issue."""
    cdef int64_t op = self.prog_head[c]
    pim_address(self, c, op, av)
    cmd[0] = prereq(self, self.prog_final[op], av)
    return i64max(ready_time(self, cmd[0], av), self.prog_release[c])


cdef inline void pim_issue(Engine self, int c, int cmd, int32_t* av, int64_t clk) noexcept nogil:
    """Controller ``c`` issues ``cmd`` of its PIM program to ``av`` at ``clk``: counters, the
    program's progress, and the controller's next wake."""
    cdef int next_cmd
    cdef int64_t rt
    issue(self, cmd, av, clk, -1)
    self.ctrl_issues[c] += 1
    self.pim_counts[c * 5 + pim_slot(self, cmd)] += 1
    if cmd == self.cmd_rdres:
        self.prog_result[c] = clk + self.read_latency     # its data reaches the GPU then
    if cmd == self.prog_final[self.prog_head[c]]:
        self.prog_head[c] += 1
        if self.prog_head[c] == self.prog_end[c]:
            # the program is over when its last command is and its last result has arrived
            self.prog_done[c] = i64max(self.prog_result[c], clk + (
                self.read_latency if cmd == self.cmd_rdres else
                (self.write_latency if cmd == self.cmd_gwrite else 0)))
    set_wake(self, c, clk + 1)
    if self.prog_head[c] < self.prog_end[c] and queues_empty(self, c):
        # only the program is left: sleep until its next command can issue (or refresh)
        rt = pim_next(self, c, av, &next_cmd)     # av is free again
        set_wake(self, c, i64max(clk + 1, i64min(rt, self.next_refresh[c])))
