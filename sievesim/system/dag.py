"""A dependency-graph executor that knows nothing of MoE.

A :class:`Graph` holds nodes, each with a duration (seconds of work at full speed), the resources
it holds while it runs (names; every resource serves one node at a time) and the nodes it depends
on. :func:`execute` runs a list scheduler over it: whenever a node's dependencies have finished
and all its resources are free, it starts; among several such nodes the one with the lower
priority value starts first (then the one added first), and a node that cannot start does not
hold back a later one whose resources are free. Nodes never give up their resources before they
end (non-preemptive), and they take all of them at once, so the schedule cannot deadlock.

**Contention.** Two resources can be declared to slow each other down (:class:`Contention`):
while a node holding ``a`` and another node holding ``b`` run at the same time, the first
progresses at ``1 / slowdown_a`` of its speed and the second at ``1 / slowdown_b``. The executor
tracks each running node's remaining work, so a node that overlaps a contending node for part of
its life is slowed for exactly that part. Without contention every node takes its duration.

Everything is deterministic: ties are broken by priority, then by insertion order.

**Two implementations.** :func:`execute_reference` is the scheduler in plain Python: the
reference. :func:`execute` runs the same algorithm compiled (``sievesim/system/_dag_core.pyx``)
and returns the same floats bit for bit (same start and end of every node, the same busy dict in
the same key order); ``tests/test_dag_core.py`` holds the two to that. Where the compiled core
cannot promise it (inputs that :meth:`Graph.add` would not produce, such as a NaN priority), or
when the package runs from an unbuilt source tree, :func:`execute` runs the reference.
"""
from __future__ import annotations

import contextlib
import gc
import heapq
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Sequence

from ..errors import ConfigError, field_error

try:  # compiled with the package (setup.py); execute_reference below computes the same schedule
    from ._dag_core import execute_core as _execute_core
    from ._graph_add import graph_add as _graph_add
except ImportError:  # pragma: no cover - only when running from an unbuilt source tree
    _execute_core = _graph_add = None

__all__ = ["Graph", "Contention", "Schedule", "execute", "execute_reference", "cyclic_gc_paused"]

_INF = float("inf")


@dataclass(frozen=True)
class Contention:
    """Resources ``a`` and ``b`` share something (e.g. the buses of one set of HBM stacks): a node
    holding ``a`` runs ``slowdown_a`` times slower while a node holding ``b`` runs, and vice versa."""

    a: str
    b: str
    slowdown_a: float = 1.0
    slowdown_b: float = 1.0

    def __post_init__(self) -> None:
        for name in ("slowdown_a", "slowdown_b"):
            value = getattr(self, name)
            if not (value >= 1.0 and value < float("inf")):
                raise field_error(f"contention {self.a}/{self.b} {name}", value, "a finite factor >= 1")
        if self.a == self.b:
            raise field_error("contention", self.a, "two different resources")


class Graph:
    """Nodes with durations [s], held resources and dependencies (see the module docstring)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.durations: list[float] = []
        self.resources: list[tuple[str, ...]] = []
        self.deps: list[tuple[int, ...]] = []
        self.priority: list[float] = []
        self.meta: list[dict[str, Any]] = []
        self._resource_tuples: dict[tuple[str, ...], tuple[str, ...]] = {}
        # the dependency list the compiled add checked last: (the object passed, its items, the
        # stored tuple); a collective's G nodes pass one list of G ids in turn
        self._last_deps: tuple[Any, tuple[int, ...], tuple[int, ...]] = (None, (), ())

    def __len__(self) -> int:
        return len(self.names)

    def _add_reference(self, name: str, duration: float, resources: Sequence[str] = (), deps: Iterable[int] = (),
                       *, priority: float | None = None, **meta: Any) -> int:
        """Add a node; returns its id. ``duration`` in seconds (>= 0); ``deps`` are ids of nodes
        added before; ``priority`` defaults to the insertion order (lower starts first);
        ``meta`` is kept for reports (e.g. ``layer=3, gpu=0, kind="attention"``).

        :meth:`add` is this method compiled (``_graph_add.graph_add``: the same checks, errors and
        stored values), where the package was built."""
        if not (duration >= 0.0 and duration < _INF):
            raise field_error(f"duration of node {name!r}", duration, "a finite time >= 0 [s]")
        nid = len(self.names)
        dep_ids = tuple(deps)
        if len(dep_ids) > 1:
            dep_ids = tuple(set(dep_ids))
        if dep_ids and (min(dep_ids) < 0 or max(dep_ids) >= nid):
            bad = next(d for d in dep_ids if not 0 <= d < nid)
            raise ConfigError(f"node {name!r} depends on {bad}, which is not a node added before it")
        # the same few resource tuples come back node after node: check each once
        res = self._resource_tuples.get(resources) if type(resources) is tuple else None
        if res is None:
            res = tuple(resources)
            if len(set(res)) != len(res):
                res = tuple(dict.fromkeys(res))
            if type(resources) is tuple:
                self._resource_tuples[resources] = res
        self.names.append(name)
        self.durations.append(float(duration))
        self.resources.append(res)
        self.deps.append(dep_ids)
        self.priority.append(float(nid) if priority is None else float(priority))
        self.meta.append(meta)
        return nid

    #: Add a node (see :meth:`_add_reference`); compiled where the package was built.
    add = _add_reference if _graph_add is None else _graph_add


@dataclass
class Schedule:
    """The result of :func:`execute`: start and end time of every node [s]."""

    graph: Graph
    start: list[float]
    end: list[float]
    #: Busy time of every resource [s] (sum over the nodes that held it).
    busy: dict[str, float] = field(default_factory=dict)

    @property
    def makespan(self) -> float:
        """End of the last node [s] (0 for an empty graph)."""
        return max(self.end, default=0.0)

    def intervals(self, resource: str) -> list[tuple[float, float, int]]:
        """``(start, end, node)`` of the nodes that held ``resource``, in start order."""
        out = [(self.start[i], self.end[i], i) for i, res in enumerate(self.graph.resources) if resource in res]
        return sorted(out)


def execute(graph: Graph, contention: Sequence[Contention] = ()) -> Schedule:
    """Run the list scheduler over ``graph``; see the module docstring for the rules. The compiled
    core: the same schedule as :func:`execute_reference`, bit for bit."""
    contention = tuple(contention)
    if _execute_core is not None:
        out = _execute_core(graph.durations, graph.resources, graph.deps, graph.priority, contention)
        if out is not None:
            start, end, busy = out
            return Schedule(graph, start, end, busy)
    return execute_reference(graph, contention)


def execute_reference(graph: Graph, contention: Sequence[Contention] = ()) -> Schedule:
    """The list scheduler in plain Python: the reference that :func:`execute`'s compiled core
    matches bit for bit (see the module docstring)."""
    n = len(graph)
    durations, resources, deps, prio = graph.durations, graph.resources, graph.deps, graph.priority
    children: list[list[int]] = [[] for _ in range(n)]
    waiting = [0] * n
    for i, ds in enumerate(deps):
        waiting[i] = len(ds)
        for d in ds:
            children[d].append(i)
    # contention partners of each resource: resource -> [(partner, my slowdown)]
    partners: dict[str, list[tuple[str, float]]] = {}
    for c in contention:
        partners.setdefault(c.a, []).append((c.b, c.slowdown_a))
        partners.setdefault(c.b, []).append((c.a, c.slowdown_b))

    holder: dict[str, int] = {}
    start = [0.0] * n
    end = [0.0] * n
    # running nodes: remaining work [s at full speed] at time `mark`, current rate, version
    remaining = [0.0] * n
    mark = [0.0] * n
    rate = [1.0] * n
    version = [0] * n
    events: list[tuple[float, float, int, int, int]] = []   # (end, priority, id, version, _)
    ready: list[tuple[float, int]] = [(prio[i], i) for i in range(n) if waiting[i] == 0]
    heapq.heapify(ready)
    now = 0.0
    done = 0

    def current_rate(i: int) -> float:
        slow = 1.0
        for r in resources[i]:
            for p, s in partners.get(r, ()):
                j = holder.get(p)
                if j is not None and j != i and s > slow:
                    slow = s
        return 1.0 / slow

    def reschedule(i: int) -> None:
        new = current_rate(i)
        if new == rate[i]:
            return
        remaining[i] -= (now - mark[i]) * rate[i]
        if remaining[i] < 0.0:
            remaining[i] = 0.0
        mark[i] = now
        rate[i] = new
        version[i] += 1
        heapq.heappush(events, (now + remaining[i] / new, prio[i], i, version[i], 0))

    def affected(res: Sequence[str], skip: int) -> list[int]:
        out = []
        for r in res:
            for p, _ in partners.get(r, ()):
                j = holder.get(p)
                if j is not None and j != skip and j not in out:
                    out.append(j)
        return out

    contended = [bool(partners) and any(r in partners for r in res) for res in resources]

    # a ready node that found a resource held waits on that resource's list until it is released
    # (it cannot start before then), so each event looks only at nodes that might start
    parked: dict[str, list[tuple[float, int]]] = {}

    def try_start() -> None:
        while ready:
            item = heapq.heappop(ready)
            i = item[1]
            res = resources[i]
            busy = None
            for r in res:
                if r in holder:
                    busy = r
                    break
            if busy is not None:
                parked.setdefault(busy, []).append(item)
                continue
            for r in res:
                holder[r] = i
            start[i] = now
            remaining[i] = durations[i]
            mark[i] = now
            if contended[i]:
                rate[i] = current_rate(i)
                heapq.heappush(events, (now + remaining[i] / rate[i], prio[i], i, version[i], 0))
                for j in affected(res, i):
                    reschedule(j)
            else:
                heapq.heappush(events, (now + remaining[i], prio[i], i, 0, 0))

    try_start()
    while events:
        t, _, i, ver, _ = heapq.heappop(events)
        if ver != version[i]:
            continue
        now = t
        end[i] = t
        done += 1
        for r in resources[i]:
            del holder[r]
            waiting_here = parked.pop(r, None)
            if waiting_here:
                for item in waiting_here:
                    heapq.heappush(ready, item)
        if contended[i]:
            for j in affected(resources[i], i):
                reschedule(j)
        for c in children[i]:
            waiting[c] -= 1
            if waiting[c] == 0:
                heapq.heappush(ready, (prio[c], c))
        try_start()
    if done != n:  # pragma: no cover - add() only accepts edges to earlier nodes
        raise ConfigError(f"graph has a cycle: {n - done} nodes never became ready")
    return Schedule(graph, start, end, _busy_by_resource(resources, start, end))


def _busy_by_resource(resources: Sequence[tuple[str, ...]], start: list[float], end: list[float]) -> dict[str, float]:
    """Busy time [s] of every resource: the sum over the nodes that held it, in first-use order."""
    busy: dict[str, float] = {}
    for i, res in enumerate(resources):
        for r in res:
            busy[r] = busy.get(r, 0.0) + (end[i] - start[i])
    return busy


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a large graph is built and run: its tens of thousands
    of new containers (dependency tuples, lists) would set off several collections on the way, each
    scanning them again; paused, the next collection afterwards scans them once. Reference counting
    still frees what is dropped, and the collector is on again afterwards if it was on before."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
