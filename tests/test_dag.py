"""The dependency-graph executor on hand-made graphs with known makespans, and properties of its
schedules on random graphs."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sievesim.errors import SievesimError
from sievesim.system.dag import Contention, Graph, execute


def test_chain_takes_the_sum_of_its_durations():
    g = Graph()
    a = g.add("a", 1.0, ["x"])
    b = g.add("b", 2.0, ["y"], [a])
    g.add("c", 0.5, ["x"], [b])
    s = execute(g)
    assert s.start == [0.0, 1.0, 3.0]
    assert s.makespan == pytest.approx(3.5)


def test_fork_on_separate_resources_runs_in_parallel_and_joins():
    g = Graph()
    root = g.add("root", 1.0, ["gpu"])
    left = g.add("left", 3.0, ["pim"], [root])
    right = g.add("right", 2.0, ["link"], [root])
    join = g.add("join", 1.0, ["gpu"], [left, right])
    s = execute(g)
    assert s.start[left] == s.start[right] == 1.0
    assert s.start[join] == 4.0 and s.makespan == 5.0
    assert s.busy == {"gpu": 2.0, "pim": 3.0, "link": 2.0}


def test_a_shared_resource_serialises_in_priority_order():
    g = Graph()
    late = g.add("late", 2.0, ["hbm"], priority=5)
    early = g.add("early", 1.0, ["hbm"], priority=1)
    s = execute(g)
    assert s.start[early] == 0.0 and s.start[late] == 1.0
    assert s.makespan == 3.0
    assert [i for _, _, i in s.intervals("hbm")] == [early, late]


def test_ties_start_in_insertion_order():
    g = Graph()
    first = g.add("first", 1.0, ["r"])
    second = g.add("second", 1.0, ["r"])
    g.priority[second] = g.priority[first]
    s = execute(g)
    assert s.start[first] == 0.0 and s.start[second] == 1.0


def test_a_blocked_node_does_not_hold_back_a_later_one_whose_resources_are_free():
    g = Graph()
    busy = g.add("busy", 4.0, ["a"])
    blocked = g.add("needs a and b", 1.0, ["a", "b"])
    free = g.add("needs b", 1.0, ["b"])
    s = execute(g)
    assert s.start[free] == 0.0          # backfilled while `blocked` waits for a
    assert s.start[blocked] == 4.0 and s.start[busy] == 0.0


def test_nodes_without_resources_start_when_ready():
    g = Graph()
    a = g.add("a", 1.0, ["x"])
    lat = g.add("latency", 0.25, [], [a])
    b = g.add("b", 1.0, ["x"], [lat])
    s = execute(g)
    assert s.start[b] == 1.25 and s.makespan == 2.25


def test_contention_slows_both_nodes_for_exactly_the_overlap():
    g = Graph()
    pim = g.add("pim", 2.0, ["pim"])
    gate = g.add("gate", 1.0, ["gpu"])
    hbm = g.add("hbm", 1.0, ["hbm"], [gate])
    s = execute(g, [Contention("pim", "hbm", slowdown_a=2.0, slowdown_b=4.0)])
    # pim alone for 1 s (1 s of work left), then both: pim at 1/2, hbm at 1/4 speed.
    # pim finishes its remaining 1 s at t = 3 (hbm has done 0.5 s of work), hbm alone after that.
    assert s.end[pim] == pytest.approx(3.0)
    assert s.end[hbm] == pytest.approx(3.5)
    assert s.busy["hbm"] == pytest.approx(2.5)


def test_contention_without_overlap_changes_nothing():
    g = Graph()
    a = g.add("a", 1.0, ["pim"])
    g.add("b", 1.0, ["hbm"], [a])
    s = execute(g, [Contention("pim", "hbm", 3.0, 3.0)])
    assert s.makespan == 2.0


@pytest.mark.parametrize("kwargs", [dict(duration=-1.0), dict(duration=math.inf), dict(duration=math.nan)])
def test_bad_durations_are_refused(kwargs):
    with pytest.raises(SievesimError, match="duration"):
        Graph().add("x", **kwargs)


def test_a_dependency_on_a_later_node_is_refused():
    g = Graph()
    with pytest.raises(SievesimError, match="not a node added before"):
        g.add("x", 1.0, deps=[0])


def test_contention_factors_are_checked():
    with pytest.raises(SievesimError, match="slowdown_a"):
        Contention("a", "b", slowdown_a=0.5)
    with pytest.raises(SievesimError, match="two different"):
        Contention("a", "a")


_RES = ["r0", "r1", "r2", "r3"]


@st.composite
def graphs(draw):
    n = draw(st.integers(1, 30))
    g = Graph()
    for i in range(n):
        deps = draw(st.lists(st.integers(0, i - 1), max_size=3)) if i else []
        res = draw(st.lists(st.sampled_from(_RES), max_size=2, unique=True))
        dur = draw(st.sampled_from([0.0, 0.5, 1.0, 1.5, 3.0]))
        g.add(f"n{i}", dur, res, deps, priority=draw(st.integers(0, 5)))
    contention = draw(st.sampled_from([(), (Contention("r0", "r1", 2.0, 1.5),)]))
    return g, contention


@settings(max_examples=200, deadline=None)
@given(graphs())
def test_schedules_respect_dependencies_resources_and_bounds(case):
    g, contention = case
    s = execute(g, contention)
    eps = 1e-9
    for i, deps in enumerate(g.deps):
        assert all(s.start[i] >= s.end[d] - eps for d in deps)
        assert s.end[i] - s.start[i] >= g.durations[i] - eps
        if not contention:
            assert s.end[i] - s.start[i] == pytest.approx(g.durations[i])
    for r in _RES:
        iv = s.intervals(r)
        assert all(b[0] >= a[1] - eps for a, b in zip(iv, iv[1:])), r
        # lower bound: a resource's total work
        assert s.makespan >= sum(g.durations[i] for _, _, i in iv) - eps
    # lower bound: the critical path
    longest = [0.0] * len(g)
    for i, deps in enumerate(g.deps):
        longest[i] = g.durations[i] + max((longest[d] for d in deps), default=0.0)
    assert s.makespan >= max(longest) - eps
    # work-conserving: a node that waited past its ready time found one of its resources held
    # throughout (checked at every start/end instant inside the wait)
    instants = sorted(set(s.start) | set(s.end))
    for i, deps in enumerate(g.deps):
        ready = max((s.end[d] for d in deps), default=0.0)
        for t in (x for x in instants if ready - eps <= x < s.start[i] - eps):
            held = [r for r in g.resources[i]
                    if any(s.start[j] <= t + eps and s.end[j] > t + eps for _, _, j in s.intervals(r) if j != i)]
            assert held, (i, t)
    # deterministic
    again = execute(g, contention)
    assert again.start == s.start and again.end == s.end
