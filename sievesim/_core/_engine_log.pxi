# The command log (``log_commands=True``): every issued command's cycle, address vector and
# command index, in issue order, in buffers that grow by doubling (freed with the engine).

cdef inline void log_command(Engine self, int cmd, int32_t* av, int64_t clk) noexcept nogil:
    """Append ``cmd`` to ``av`` at ``clk`` to the log; out of memory: error 3, the log stops."""
    cdef int L
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


cdef dict log_arrays(Engine self):
    """The log as arrays (copies): ``log_clk`` (cycles), ``log_addr`` (n, A), ``log_cmd``."""
    if self.log_n:
        return dict(log_clk=np.asarray(<int64_t[:self.log_n]> self.log_clk).copy(),
                    log_addr=np.asarray(<int32_t[:self.log_n * self.A]> self.log_addr).reshape(-1, self.A).copy(),
                    log_cmd=np.asarray(<int8_t[:self.log_n]> self.log_cmd).copy())
    return dict(log_clk=np.zeros(0, dtype=np.int64), log_addr=np.zeros((0, self.A), dtype=np.int32),
                log_cmd=np.zeros(0, dtype=np.int8))
