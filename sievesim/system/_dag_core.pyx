# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The list scheduler of :mod:`sievesim.system.dag` in C: the same algorithm as
:func:`sievesim.system.dag.execute_reference`, with the same floats bit for bit.

Resource names are interned to ints (graph resources first, in order of first appearance, so the busy
dict keeps the reference's key order), dependencies and children live in CSR arrays, the two heaps
are C arrays of structs compared lexicographically like the reference's tuples ((end, priority, id,
version) and (priority, id); both total orders on the live entries, so any binary heap pops the same
sequence), and a ready node that found a resource held is parked on that resource's singly linked
list. Every floating-point operation is the reference's, in its order (the extension is compiled with
``-ffp-contract=off``, so no multiply-add is fused).

:func:`execute_core` returns ``None`` where it cannot promise the reference's floats: a priority that
is NaN, a duration, priority or slowdown that is neither a float nor an int of at most 2**53 in
magnitude, a node that names a resource twice, a dependency id outside the graph, or an event time
that comes out NaN, or graph fields that are not lists. The caller then runs the reference.
"""
from libc.stdlib cimport malloc, realloc, free

from sievesim.errors import ConfigError


cdef extern from "Python.h":
    bint PyFloat_Check(object o)
    bint PyLong_Check(object o)


cdef struct Event:
    double t
    double prio
    Py_ssize_t id
    Py_ssize_t ver


cdef struct Ready:
    double prio
    Py_ssize_t id


cdef inline bint ev_lt(const Event* a, const Event* b) noexcept nogil:
    if a.t != b.t:
        return a.t < b.t
    if a.prio != b.prio:
        return a.prio < b.prio
    if a.id != b.id:
        return a.id < b.id
    return a.ver < b.ver


cdef inline bint rd_lt(const Ready* a, const Ready* b) noexcept nogil:
    if a.prio != b.prio:
        return a.prio < b.prio
    return a.id < b.id


cdef struct EventHeap:
    Event* data
    Py_ssize_t size
    Py_ssize_t cap


cdef int ev_push(EventHeap* h, double t, double prio, Py_ssize_t i, Py_ssize_t ver) except -1:
    cdef Py_ssize_t k, parent
    cdef Event* grown
    cdef Event e
    if h.size == h.cap:
        grown = <Event*> realloc(h.data, 2 * h.cap * sizeof(Event))
        if grown == NULL:
            raise MemoryError()
        h.data = grown
        h.cap *= 2
    e.t = t
    e.prio = prio
    e.id = i
    e.ver = ver
    k = h.size
    h.size += 1
    while k > 0:
        parent = (k - 1) >> 1
        if ev_lt(&e, &h.data[parent]):
            h.data[k] = h.data[parent]
            k = parent
        else:
            break
    h.data[k] = e
    return 0


cdef inline Event ev_pop(EventHeap* h) noexcept nogil:
    cdef Event top = h.data[0]
    cdef Event last
    cdef Py_ssize_t k = 0, c, n
    h.size -= 1
    n = h.size
    if n > 0:
        last = h.data[n]
        while True:
            c = 2 * k + 1
            if c >= n:
                break
            if c + 1 < n and ev_lt(&h.data[c + 1], &h.data[c]):
                c += 1
            if ev_lt(&h.data[c], &last):
                h.data[k] = h.data[c]
                k = c
            else:
                break
        h.data[k] = last
    return top


cdef inline void rd_push(Ready* heap, Py_ssize_t* size, double prio, Py_ssize_t i) noexcept nogil:
    # at most one entry per node: the caller sizes the array to the node count
    cdef Ready e
    cdef Py_ssize_t k = size[0], parent
    e.prio = prio
    e.id = i
    size[0] += 1
    while k > 0:
        parent = (k - 1) >> 1
        if rd_lt(&e, &heap[parent]):
            heap[k] = heap[parent]
            k = parent
        else:
            break
    heap[k] = e


cdef inline Py_ssize_t rd_pop(Ready* heap, Py_ssize_t* size) noexcept nogil:
    cdef Py_ssize_t top = heap[0].id
    cdef Ready last
    cdef Py_ssize_t k = 0, c, n
    size[0] -= 1
    n = size[0]
    if n > 0:
        last = heap[n]
        while True:
            c = 2 * k + 1
            if c >= n:
                break
            if c + 1 < n and rd_lt(&heap[c + 1], &heap[c]):
                c += 1
            if rd_lt(&heap[c], &last):
                heap[k] = heap[c]
                k = c
            else:
                break
        heap[k] = last
    return top


cdef bint _exact(object x):
    """A value whose arithmetic and comparisons as a C double are the reference's."""
    if PyFloat_Check(x):
        return True
    return PyLong_Check(x) and -9007199254740992 <= x <= 9007199254740992


cdef struct State:
    # per node
    double* dur
    double* prio
    double* remaining
    double* mark
    double* rate
    double* start
    double* end
    Py_ssize_t* version
    Py_ssize_t* waiting
    Py_ssize_t* res_ptr      # n + 1: resources of node i are res_ids[res_ptr[i]:res_ptr[i + 1]]
    Py_ssize_t* res_ids
    Py_ssize_t* child_ptr    # n + 1
    Py_ssize_t* child_ids
    Py_ssize_t* park_next
    Py_ssize_t* seen         # stamp of the last affected() walk that listed the node
    char* contended
    # per resource
    Py_ssize_t* holder       # -1: free
    Py_ssize_t* park_head    # -1: nobody parked
    Py_ssize_t* part_ptr     # nres + 1: partners of r are part_ids/part_slow[part_ptr[r]:part_ptr[r + 1]]
    Py_ssize_t* part_ids
    double* part_slow
    double* busy
    # scratch
    Py_ssize_t* affected     # the nodes affected() lists (at most n)
    Ready* ready
    Py_ssize_t ready_size
    EventHeap events
    Py_ssize_t stamp
    double now
    bint nan


cdef inline double current_rate(State* s, Py_ssize_t i) noexcept nogil:
    cdef double slow = 1.0, sl
    cdef Py_ssize_t a, b, r, j
    for a in range(s.res_ptr[i], s.res_ptr[i + 1]):
        r = s.res_ids[a]
        for b in range(s.part_ptr[r], s.part_ptr[r + 1]):
            j = s.holder[s.part_ids[b]]
            sl = s.part_slow[b]
            if j != -1 and j != i and sl > slow:
                slow = sl
    return 1.0 / slow


cdef int reschedule(State* s, Py_ssize_t i) except -1:
    cdef double new = current_rate(s, i), t
    if new == s.rate[i]:
        return 0
    s.remaining[i] -= (s.now - s.mark[i]) * s.rate[i]
    if s.remaining[i] < 0.0:
        s.remaining[i] = 0.0
    s.mark[i] = s.now
    s.rate[i] = new
    s.version[i] += 1
    t = s.now + s.remaining[i] / new
    if t != t:
        s.nan = True
    ev_push(&s.events, t, s.prio[i], i, s.version[i])
    return 0


cdef Py_ssize_t affected(State* s, Py_ssize_t node, Py_ssize_t skip) noexcept nogil:
    """Fill ``s.affected`` with the holders of the partners of ``node``'s resources (other than
    ``skip``), each once, in the reference's order; returns how many."""
    cdef Py_ssize_t a, b, r, j, count = 0
    s.stamp += 1
    for a in range(s.res_ptr[node], s.res_ptr[node + 1]):
        r = s.res_ids[a]
        for b in range(s.part_ptr[r], s.part_ptr[r + 1]):
            j = s.holder[s.part_ids[b]]
            if j != -1 and j != skip and s.seen[j] != s.stamp:
                s.seen[j] = s.stamp
                s.affected[count] = j
                count += 1
    return count


cdef int reschedule_affected(State* s, Py_ssize_t node) except -1:
    cdef Py_ssize_t k, count = affected(s, node, node)
    for k in range(count):
        reschedule(s, s.affected[k])
    return 0


cdef int try_start(State* s) except -1:
    cdef Py_ssize_t i, a, r, held
    cdef double t
    while s.ready_size > 0:
        i = rd_pop(s.ready, &s.ready_size)
        held = -1
        for a in range(s.res_ptr[i], s.res_ptr[i + 1]):
            r = s.res_ids[a]
            if s.holder[r] != -1:
                held = r
                break
        if held != -1:
            s.park_next[i] = s.park_head[held]
            s.park_head[held] = i
            continue
        for a in range(s.res_ptr[i], s.res_ptr[i + 1]):
            s.holder[s.res_ids[a]] = i
        s.start[i] = s.now
        s.remaining[i] = s.dur[i]
        s.mark[i] = s.now
        if s.contended[i]:
            s.rate[i] = current_rate(s, i)
            t = s.now + s.remaining[i] / s.rate[i]
            if t != t:
                s.nan = True
            ev_push(&s.events, t, s.prio[i], i, s.version[i])
            reschedule_affected(s, i)
        else:
            t = s.now + s.remaining[i]
            if t != t:
                s.nan = True
            ev_push(&s.events, t, s.prio[i], i, 0)
    return 0


cdef void* _alloc(Py_ssize_t count, size_t size, list blocks) except NULL:
    cdef void* p = malloc((count if count > 0 else 1) * size)
    if p == NULL:
        raise MemoryError()
    blocks.append(<size_t> p)
    return p


# dependency tuples longer than this, shared by nodes, become one group (execute_core)
cdef Py_ssize_t _GROUP_MIN = 8


cdef inline int _group_role(object ds, object last):
    """0: a node with its own edges; 1: a new group's first member; 2: a member of the group before."""
    if type(ds) is not tuple or len(<tuple>ds) <= _GROUP_MIN:
        return 0
    return 2 if ds is last else 1


cdef int _add_edges(State* s, object ds, Py_ssize_t to, Py_ssize_t n, Py_ssize_t cap, Py_ssize_t* edge_from,
                    Py_ssize_t* edge_to, Py_ssize_t* k) except -2:
    """Edges from every id of ``ds`` to ``to`` (node, or group n + g); -1: an id not a node's."""
    cdef Py_ssize_t p
    for dep in ds:
        if not PyLong_Check(dep) or k[0] >= cap:
            return -1
        try:
            p = dep
        except OverflowError:
            return -1
        if p < 0 or p >= n:
            return -1
        edge_from[k[0]] = p
        edge_to[k[0]] = to
        s.child_ptr[p + 1] += 1
        s.waiting[to] += 1
        k[0] += 1
    return 0


def execute_core(durations, resources, deps, priority, contention):
    """``(start, end, busy)`` of :func:`sievesim.system.dag.execute_reference` on the graph given by
    its lists, or ``None`` where the result could differ from the reference's (see the module
    docstring). Raises :class:`~sievesim.errors.ConfigError` on a cycle, as the reference does."""
    cdef Py_ssize_t n = len(durations), i, k, a, b, r, nres, ngraph, total = 0, cap = 0
    cdef Py_ssize_t done = 0, c, p, nxt
    cdef double dt
    cdef State s
    cdef Event ev
    cdef list blocks = []
    cdef dict index = {}
    cdef list names = []
    cdef list pairs = []
    cdef Py_ssize_t* edge_from
    cdef Py_ssize_t* edge_to
    cdef Py_ssize_t* cursor
    cdef Py_ssize_t g
    if not (type(durations) is list and type(resources) is list and type(deps) is list
            and type(priority) is list):
        return None
    if len(resources) != n or len(deps) != n or len(priority) != n:
        return None
    # nodes that share one dependency tuple of more than _GROUP_MIN ids, with no other such tuple
    # between them (a collective's G nodes after every GPU's node before it: G^2 edges), wait on one
    # group instead: it counts the tuple's ends and releases its members in the same event, so every
    # schedule is the same
    cdef Py_ssize_t groups = 0, members = 0
    cdef int role
    cdef object last_group = None
    for i in range(n):
        total += len(resources[i])
        ds = deps[i]
        role = _group_role(ds, last_group)
        if role:
            last_group = ds
        members += role > 0
        groups += role == 1
        if role != 2:
            cap += len(ds)
    s.events.data = NULL
    try:
        s.dur = <double*> _alloc(n, sizeof(double), blocks)
        s.prio = <double*> _alloc(n, sizeof(double), blocks)
        s.remaining = <double*> _alloc(n, sizeof(double), blocks)
        s.mark = <double*> _alloc(n, sizeof(double), blocks)
        s.rate = <double*> _alloc(n, sizeof(double), blocks)
        s.start = <double*> _alloc(n, sizeof(double), blocks)
        s.end = <double*> _alloc(n, sizeof(double), blocks)
        s.version = <Py_ssize_t*> _alloc(n, sizeof(Py_ssize_t), blocks)
        s.waiting = <Py_ssize_t*> _alloc(n + groups, sizeof(Py_ssize_t), blocks)
        s.res_ptr = <Py_ssize_t*> _alloc(n + 1, sizeof(Py_ssize_t), blocks)
        s.res_ids = <Py_ssize_t*> _alloc(total, sizeof(Py_ssize_t), blocks)
        s.child_ptr = <Py_ssize_t*> _alloc(n + groups + 1, sizeof(Py_ssize_t), blocks)
        s.child_ids = <Py_ssize_t*> _alloc(cap + members, sizeof(Py_ssize_t), blocks)
        s.park_next = <Py_ssize_t*> _alloc(n, sizeof(Py_ssize_t), blocks)
        s.seen = <Py_ssize_t*> _alloc(n, sizeof(Py_ssize_t), blocks)
        s.contended = <char*> _alloc(n, sizeof(char), blocks)
        s.affected = <Py_ssize_t*> _alloc(n, sizeof(Py_ssize_t), blocks)
        s.ready = <Ready*> _alloc(n, sizeof(Ready), blocks)
        # nodes: durations, priorities and resources, interned in order of first appearance (the
        # busy dict's key order); a node that names a resource twice makes the reference fail
        k = 0
        for i in range(n):
            d = durations[i]
            pv = priority[i]
            if not (_exact(d) and _exact(pv)):
                return None
            s.dur[i] = <double> d
            s.prio[i] = <double> pv
            if s.prio[i] != s.prio[i]:
                return None
            s.res_ptr[i] = k
            s.seen[i] = 0
            s.version[i] = 0
            s.rate[i] = 1.0
            s.remaining[i] = 0.0
            s.mark[i] = 0.0
            s.start[i] = 0.0
            s.end[i] = 0.0
            s.park_next[i] = -1
            res = resources[i]
            if len(res) != 0:
                for name in res:
                    got = index.get(name)
                    if got is None:
                        r = len(names)
                        index[name] = r
                        names.append(name)
                    else:
                        r = got
                    for a in range(s.res_ptr[i], k):
                        if s.res_ids[a] == r:
                            return None
                    if k >= total:              # a resource tuple that changed size under us
                        return None
                    s.res_ids[k] = r
                    k += 1
        s.res_ptr[n] = k
        if k != total:
            return None
        ngraph = len(names)
        for cont in contention:
            sa = cont.slowdown_a
            sb = cont.slowdown_b
            if not (_exact(sa) and _exact(sb)):
                return None
            for name in (cont.a, cont.b):
                if name not in index:
                    index[name] = len(names)
                    names.append(name)
            pairs.append((index[cont.a], index[cont.b], <double> sa, <double> sb))
        nres = len(names)
        s.holder = <Py_ssize_t*> _alloc(nres, sizeof(Py_ssize_t), blocks)
        s.park_head = <Py_ssize_t*> _alloc(nres, sizeof(Py_ssize_t), blocks)
        s.part_ptr = <Py_ssize_t*> _alloc(nres + 1, sizeof(Py_ssize_t), blocks)
        s.part_ids = <Py_ssize_t*> _alloc(2 * len(pairs), sizeof(Py_ssize_t), blocks)
        s.part_slow = <double*> _alloc(2 * len(pairs), sizeof(double), blocks)
        s.busy = <double*> _alloc(nres, sizeof(double), blocks)
        s.events.cap = 2 * n + 16
        s.events.size = 0
        s.events.data = <Event*> malloc(s.events.cap * sizeof(Event))
        if s.events.data == NULL:
            raise MemoryError()
        s.ready_size = 0
        s.stamp = 0
        s.now = 0.0
        s.nan = False
        # partners of each resource in CSR, each list in the order of the contention pairs
        for r in range(nres + 1):
            s.part_ptr[r] = 0
        for pr in pairs:
            s.part_ptr[<Py_ssize_t> pr[0] + 1] += 1
            s.part_ptr[<Py_ssize_t> pr[1] + 1] += 1
        for r in range(nres):
            s.part_ptr[r + 1] += s.part_ptr[r]
        for r in range(nres):
            s.holder[r] = s.part_ptr[r]      # fill cursor (reset below)
        for pr in pairs:
            a = pr[0]
            b = pr[1]
            s.part_ids[s.holder[a]] = b
            s.part_slow[s.holder[a]] = pr[2]
            s.holder[a] += 1
            s.part_ids[s.holder[b]] = a
            s.part_slow[s.holder[b]] = pr[3]
            s.holder[b] += 1
        for r in range(nres):
            s.holder[r] = -1
            s.park_head[r] = -1
            s.busy[r] = 0.0
        # contended: a node holding a resource that has a partner
        for i in range(n):
            s.contended[i] = 0
            for a in range(s.res_ptr[i], s.res_ptr[i + 1]):
                r = s.res_ids[a]
                if s.part_ptr[r + 1] > s.part_ptr[r]:
                    s.contended[i] = 1
                    break
        # dependencies: waiting counts (duplicates count, as in the reference) and children in CSR
        # over the nodes and then the groups (group g is source n + g): edge e runs from
        # edge_from[e] to edge_to[e]; a group's member waits on the group alone
        edge_from = <Py_ssize_t*> _alloc(cap + members, sizeof(Py_ssize_t), blocks)
        edge_to = <Py_ssize_t*> _alloc(cap + members, sizeof(Py_ssize_t), blocks)
        for i in range(n + groups + 1):
            s.child_ptr[i] = 0
        k = 0
        g = n - 1
        last_group = None
        for i in range(n):
            ds = deps[i]
            s.waiting[i] = 0
            role = _group_role(ds, last_group)
            if role:
                last_group = ds
            if role == 1:       # a new group: its edges, then its first member
                g += 1
                s.waiting[g] = 0
                if _add_edges(&s, ds, g, n, cap + members, edge_from, edge_to, &k) < 0:
                    return None
            if role:
                edge_from[k] = g
                edge_to[k] = i
                s.child_ptr[g + 1] += 1
                s.waiting[i] = 1
                k += 1
            elif _add_edges(&s, ds, i, n, cap + members, edge_from, edge_to, &k) < 0:
                return None
        if k != cap + members or g != n + groups - 1:
            return None
        for i in range(n + groups):
            s.child_ptr[i + 1] += s.child_ptr[i]
        cursor = <Py_ssize_t*> _alloc(n + groups, sizeof(Py_ssize_t), blocks)
        for i in range(n + groups):
            cursor[i] = s.child_ptr[i]
        for a in range(k):
            p = edge_from[a]
            s.child_ids[cursor[p]] = edge_to[a]
            cursor[p] += 1
        for i in range(n):
            s.seen[i] = 0
        for i in range(n):
            if s.waiting[i] == 0:
                rd_push(s.ready, &s.ready_size, s.prio[i], i)

        # the event loop, in the reference's order: release the resources (the nodes parked on them
        # become ready again), reschedule the contended nodes this end speeds up, release the
        # children, start what can start
        try_start(&s)
        if s.nan:
            return None
        while s.events.size > 0:
            ev = ev_pop(&s.events)
            i = ev.id
            if ev.ver != s.version[i]:
                continue
            s.now = ev.t
            s.end[i] = ev.t
            done += 1
            for a in range(s.res_ptr[i], s.res_ptr[i + 1]):
                r = s.res_ids[a]
                s.holder[r] = -1
                p = s.park_head[r]
                s.park_head[r] = -1
                while p != -1:
                    nxt = s.park_next[p]
                    s.park_next[p] = -1
                    rd_push(s.ready, &s.ready_size, s.prio[p], p)
                    p = nxt
            if s.contended[i]:
                reschedule_affected(&s, i)
            for a in range(s.child_ptr[i], s.child_ptr[i + 1]):
                c = s.child_ids[a]
                s.waiting[c] -= 1
                if s.waiting[c] == 0:
                    if c < n:
                        rd_push(s.ready, &s.ready_size, s.prio[c], c)
                    else:       # a group: its last dependency ended, release its members now
                        for b in range(s.child_ptr[c], s.child_ptr[c + 1]):
                            p = s.child_ids[b]
                            s.waiting[p] -= 1
                            if s.waiting[p] == 0:
                                rd_push(s.ready, &s.ready_size, s.prio[p], p)
            try_start(&s)
            if s.nan:
                return None
        if done != n:
            raise ConfigError(f"graph has a cycle: {n - done} nodes never became ready")
        start = [s.start[i] for i in range(n)]
        end = [s.end[i] for i in range(n)]
        # busy: summed in node order, like the reference
        for i in range(n):
            dt = s.end[i] - s.start[i]
            for a in range(s.res_ptr[i], s.res_ptr[i + 1]):
                r = s.res_ids[a]
                s.busy[r] = s.busy[r] + dt
        busy = {names[r]: s.busy[r] for r in range(ngraph)}
        return start, end, busy
    finally:
        free(s.events.data)
        for block in blocks:
            free(<void*> <size_t> block)
