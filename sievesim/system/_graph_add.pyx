# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""``Graph.add`` of :mod:`sievesim.system.dag` in C: the same checks, errors and stored values as
``Graph._add_reference`` (a step adds tens of thousands of nodes, and each call was mostly
interpreter); ``tests/test_dag_core.py`` holds the two to that."""
from sievesim.errors import ConfigError

cdef double _INF_C = float("inf")


cdef inline bint _same_items(list now, tuple then):
    if len(now) != len(then):
        return False
    for k in range(len(then)):
        if now[k] is not then[k]:
            return False
    return True


def graph_add(self, name, duration, resources=(), deps=(), *, priority=None, **meta):
    """Add a node; returns its id. ``duration`` in seconds (>= 0); ``deps`` are ids of nodes
    added before; ``priority`` defaults to the insertion order (lower starts first);
    ``meta`` is kept for reports (e.g. ``layer=3, gpu=0, kind="attention"``).

    :meth:`sievesim.system.dag.Graph.add` compiled: the same checks, errors and stored values as
    ``Graph._add_reference`` (a step adds thousands of nodes, and each call was mostly interpreter)."""
    cdef Py_ssize_t nid = len(<list>self.names)
    cdef Py_ssize_t d_int
    cdef double d
    cdef tuple dep_ids
    cdef bint ok
    if type(duration) is float:
        d = duration
        ok = d >= 0.0 and d < _INF_C
    else:
        ok = duration >= 0.0 and duration < float("inf")
    if not ok:
        from sievesim.errors import field_error
        raise field_error(f"duration of node {name!r}", duration, "a finite time >= 0 [s]")
    # the same list again, holding the same objects (a collective's nodes: G ids each, G times): its
    # checked tuple again, the same stored value without a set and a check per id
    cdef tuple last = self._last_deps
    if deps is last[0] and type(deps) is list and _same_items(<list>deps, <tuple>last[1]):
        return _append_node(self, name, duration, resources, last[2], nid, priority, meta)
    dep_ids = tuple(deps)
    items = dep_ids if type(deps) is list and len(dep_ids) > 8 else None
    if len(dep_ids) > 1:
        dep_ids = tuple(set(dep_ids))
    if dep_ids:
        ok = True
        for dep in dep_ids:
            if type(dep) is not int:
                ok = False
                break
            d_int = dep
            if d_int < 0 or d_int >= nid:
                ok = False
                break
        if not ok and (min(dep_ids) < 0 or max(dep_ids) >= nid):
            bad = next(x for x in dep_ids if not 0 <= x < nid)
            raise ConfigError(f"node {name!r} depends on {bad}, which is not a node added before it")
    if items is not None:
        self._last_deps = (deps, items, dep_ids)
    return _append_node(self, name, duration, resources, dep_ids, nid, priority, meta)


cdef object _append_node(self, name, duration, resources, tuple dep_ids, Py_ssize_t nid, priority, dict meta):
    """The rest of :func:`graph_add` once the node's dependencies are checked: its resources, then
    every list of the graph appended."""
    # the same few resource tuples come back node after node: check each once
    cdef dict seen = self._resource_tuples
    res = seen.get(resources) if type(resources) is tuple else None
    if res is None:
        res = tuple(resources)
        if len(set(res)) != len(res):
            res = tuple(dict.fromkeys(res))
        if type(resources) is tuple:
            seen[resources] = res
    (<list>self.names).append(name)
    (<list>self.durations).append(duration if type(duration) is float else float(duration))
    (<list>self.resources).append(res)
    (<list>self.deps).append(dep_ids)
    (<list>self.priority).append(float(nid) if priority is None else float(priority))
    (<list>self.meta).append(meta)
    return nid
