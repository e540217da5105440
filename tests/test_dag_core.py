"""The compiled list scheduler (sievesim/system/_dag_core.pyx) against the Python reference: the same
floats bit for bit (start, end, busy with its key order, makespan) on random graphs with ties and
contention, and on real decode-step graphs."""
from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sievesim.errors import ConfigError
from sievesim.system import dag
from sievesim.system._dag_core import execute_core  # the compiled module must be built
from sievesim.system.dag import Contention, Graph, execute, execute_reference


def _bits(xs):
    return [struct.pack("<d", x) for x in xs]


def assert_same(graph, contention=()):
    """``execute`` and ``execute_reference`` agree bit for bit, and the compiled core ran."""
    assert execute_core(graph.durations, graph.resources, graph.deps, graph.priority, tuple(contention)) is not None
    a, b = execute(graph, contention), execute_reference(graph, contention)
    assert _bits(a.start) == _bits(b.start)
    assert _bits(a.end) == _bits(b.end)
    assert list(a.busy) == list(b.busy)
    assert _bits(a.busy.values()) == _bits(b.busy.values())
    assert struct.pack("<d", a.makespan) == struct.pack("<d", b.makespan)
    assert a.graph is graph
    return a


_POOL = ["r0", "r1", "r2", "r3", "r4"]
# few distinct values so that ends, priorities and rates tie often; 0.1 and 0.3 do not add exactly
_DURATIONS = [0.0, 0.1, 0.3, 0.5, 1.0, 1.0, 2.0, 3.0]
_SLOWDOWNS = [1.0, 1.25, 1.5, 2.0, 3.0, 7.0 / 3.0]


@st.composite
def cases(draw):
    n = draw(st.integers(0, 40))
    g = Graph()
    for i in range(n):
        deps = draw(st.lists(st.integers(0, i - 1), max_size=3)) if i else []
        res = draw(st.lists(st.sampled_from(_POOL), max_size=3, unique=True))
        dur = draw(st.one_of(st.sampled_from(_DURATIONS), st.floats(0.0, 10.0)))
        prio = draw(st.one_of(st.none(), st.integers(0, 4), st.sampled_from([0.5, -1.0])))
        g.add(f"n{i}", dur, res, deps, priority=prio)
    pairs = draw(st.lists(st.tuples(st.sampled_from(_POOL + ["elsewhere"]), st.sampled_from(_POOL),
                                    st.sampled_from(_SLOWDOWNS), st.sampled_from(_SLOWDOWNS)), max_size=4))
    contention = [Contention(a, b, sa, sb) for a, b, sa, sb in pairs if a != b]
    return g, contention


@settings(max_examples=200, deadline=None)
@given(cases())
def test_compiled_matches_the_reference_bit_for_bit(case):
    g, contention = case
    assert_same(g, contention)


def test_contention_reschedules_are_matched():
    # three overlapping contended nodes whose rates change several times
    g = Graph()
    g.add("pim0", 2.0, ["pim"])
    gate = g.add("gate", 0.3, ["gpu"])
    g.add("hbm", 1.1, ["hbm"], [gate])
    g.add("pim1", 0.7, ["pim2"], [gate])
    g.add("both", 0.2, ["hbm2", "gpu"], [gate])
    contention = [Contention("pim", "hbm", 2.0, 4.0), Contention("pim2", "hbm", 1.5, 3.0),
                  Contention("hbm2", "pim", 1.25, 1.1)]
    s = assert_same(g, contention)
    assert s.makespan > 2.0


def test_empty_graph_and_generator_contention():
    assert_same(Graph())
    g = Graph()
    g.add("a", 1.0, ["x"])
    g.add("b", 1.0, ["y"])
    pairs = [Contention("x", "y", 2.0, 2.0)]
    s = execute(g, (c for c in pairs))           # any iterable, consumed once
    assert s.end == execute_reference(g, pairs).end == [2.0, 2.0]


def test_a_cycle_raises_the_reference_error():
    g = Graph()
    g.add("a", 1.0, ["x"])
    g.add("b", 1.0, ["x"], [0])
    g.add("c", 1.0, [], [1])
    g.deps[1] = (0, 2)                           # b <-> c: not something add() lets through
    with pytest.raises(ConfigError) as ref:
        execute_reference(g)
    with pytest.raises(ConfigError) as core:
        execute(g)
    assert str(core.value) == str(ref.value) == "graph has a cycle: 2 nodes never became ready"


def test_inputs_the_core_cannot_promise_fall_back_to_the_reference():
    g = Graph()
    g.add("a", 1.0, ["x"], priority=math.nan)
    g.add("b", 1.0, ["x"], priority=2.0)
    assert execute_core(g.durations, g.resources, g.deps, g.priority, ()) is None
    assert execute(g).start == execute_reference(g).start
    g = Graph()
    g.add("a", 1.0, ["x"])
    g.priority[0] = 2 ** 60 + 1                  # an int that a double cannot hold
    assert execute_core(g.durations, g.resources, g.deps, g.priority, ()) is None
    g = Graph()
    g.add("a", 1.0, ["x"])
    g.durations[0] = math.inf                    # inf - inf would make a NaN event time
    g.add("b", 1.0, ["y"])
    assert execute(g).end == execute_reference(g).end
    g = Graph()
    g.add("a", 1.0, ["x"])
    g.durations[0] = 3                           # an exact int: the core takes it
    s = assert_same(g)
    assert s.end == [3.0]


def test_without_the_compiled_core_execute_is_the_reference(monkeypatch):
    g = Graph()
    g.add("a", 1.0, ["x"])
    monkeypatch.setattr(dag, "_execute_core", None)
    assert execute(g).end == [1.0]


@pytest.fixture(scope="module")
def qwen3_step():
    from sievesim.system.step import StepSimulator

    sim = StepSimulator("qwen3-30b-a3b", gpus=1, batch=16)
    return sim.run_step()["schedule"].graph, sim.contention


def test_a_real_decode_step_graph(qwen3_step):
    g, contention = qwen3_step
    assert len(g) > 100
    assert_same(g, contention)
    assert_same(g, ())


def test_a_multi_gpu_decode_step_graph_with_contention():
    from sievesim.system.step import StepSimulator

    sim = StepSimulator("gpt-oss-120b", gpus=4, batch=64)          # Sieve, PIM/HBM contention
    assert sim.contention
    raw = sim.run_step()
    g = raw["schedule"].graph
    s = assert_same(g, sim.contention)
    assert s.makespan == raw["schedule"].makespan


@st.composite
def collective_cases(draw):
    """Graphs with collectives: runs of nodes that pass one list of more than eight earlier ids
    (the compiled add stores one tuple for them, the compiled core waits on it as one group), some
    runs broken by a node between them, on few resources and durations so that ends tie."""
    g = Graph()
    for i in range(draw(st.integers(9, 14))):
        g.add(f"head{i}", draw(st.sampled_from(_DURATIONS)), draw(st.lists(st.sampled_from(_POOL), max_size=2,
                                                                           unique=True)))
    for block in range(draw(st.integers(1, 5))):
        n = len(g)
        ids = draw(st.lists(st.integers(0, n - 1), min_size=9, max_size=min(n, 16)))
        shared = list(ids)
        for j in range(draw(st.integers(1, 6))):
            if draw(st.integers(0, 4)) == 0:    # a node between the collective's nodes
                g.add(f"b{block}-aside{j}", draw(st.sampled_from(_DURATIONS)), [draw(st.sampled_from(_POOL))],
                      [draw(st.integers(0, len(g) - 1))])
            g.add(f"b{block}-c{j}", draw(st.sampled_from(_DURATIONS)),
                  draw(st.lists(st.sampled_from(_POOL), max_size=2, unique=True)), shared,
                  priority=draw(st.one_of(st.none(), st.integers(0, 4))))
        for j in range(draw(st.integers(0, 3))):
            g.add(f"b{block}-after{j}", draw(st.sampled_from(_DURATIONS)), [draw(st.sampled_from(_POOL))],
                  [draw(st.integers(0, len(g) - 1))])
    pairs = draw(st.lists(st.tuples(st.sampled_from(_POOL), st.sampled_from(_POOL),
                                    st.sampled_from(_SLOWDOWNS), st.sampled_from(_SLOWDOWNS)), max_size=3))
    return g, [Contention(a, b, sa, sb) for a, b, sa, sb in pairs if a != b]


@settings(max_examples=200, deadline=None)
@given(collective_cases())
def test_collectives_waiting_as_one_group_keep_the_reference_schedule(case):
    """A collective's nodes share one dependency tuple and the compiled core waits on it once (a
    group): the schedule is still the reference's, bit for bit, with ties and contention."""
    g, contention = case
    assert_same(g, contention)
    assert_same(g, ())


def test_a_step_of_twelve_gpus_in_two_micro_batches_shares_its_collectives_tuples():
    """A real step with collectives over 12 GPUs (groups in the compiled core) and two micro-batches
    sharing the links: the reference's schedule."""
    from sievesim.system.step import StepSimulator

    sim = StepSimulator("gpt-oss-120b", gpus=12, batch=96, microbatches=2, redundant_experts=4)
    g = sim.run_step()["schedule"].graph
    assert sum(1 for a, b in zip(g.deps, g.deps[1:]) if a is b and len(a) > 8) > 100
    assert_same(g, sim.contention)


# ---------------------------------------------------------------------------------------------
# Graph.add compiled (_graph_add.graph_add) against Graph._add_reference
# ---------------------------------------------------------------------------------------------
import numpy as np  # noqa: E402

_ADD_DURATIONS = [0.0, 1e-6, 2.5, 3, True, np.float64(0.5), np.int64(2), -1.0, -0.0, math.nan, math.inf, "1"]
_ADD_DEPS = [0, 1, 2, 5, -1, True, np.int64(1), 1.0]


def _outcome(graph, method, *args, **kw):
    try:
        return ("ok", method(graph, *args, **kw))
    except Exception as e:  # the same exception type and message either way
        return (type(e).__name__, str(e))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_ADD_DURATIONS),
                          st.one_of(st.lists(st.sampled_from(_POOL), max_size=3).map(tuple),
                                    st.lists(st.sampled_from(_POOL), max_size=3)),
                          st.lists(st.sampled_from(_ADD_DEPS), max_size=3),
                          st.one_of(st.none(), st.sampled_from([0, 2.5, np.float64(1.0)])),
                          st.dictionaries(st.sampled_from(["gpu", "kind", "layer"]), st.integers(0, 3), max_size=2)),
                max_size=12))
def test_compiled_add_stores_and_refuses_as_the_reference(calls):
    """Every stored field (values, types, tuple orders) and every error is the reference's."""
    compiled, reference = Graph(), Graph()
    assert Graph.add is not Graph._add_reference    # the compiled add is in use
    for i, (dur, res, deps, prio, meta) in enumerate(calls):
        a = _outcome(compiled, Graph.add, f"n{i}", dur, res, deps, priority=prio, **meta)
        b = _outcome(reference, Graph._add_reference, f"n{i}", dur, res, deps, priority=prio, **meta)
        assert a == b
    for field in ("names", "durations", "resources", "deps", "priority", "meta"):
        got, want = getattr(compiled, field), getattr(reference, field)
        assert got == want
        assert [type(x) for x in got] == [type(x) for x in want]
    assert _bits(compiled.durations) == _bits(reference.durations)


def test_compiled_add_on_a_real_step_gives_the_same_graph(monkeypatch):
    """A decode step built with the reference add is the same graph, node for node."""
    from sievesim.system.step import StepSimulator

    graphs = []
    for add in (Graph.add, Graph._add_reference):
        monkeypatch.setattr(Graph, "add", add)
        sim = StepSimulator("gpt-oss-120b", gpus=4, batch=32)
        graphs.append(sim.run_step()["schedule"].graph)
    a, b = graphs
    for field in ("names", "durations", "resources", "deps", "priority"):
        assert getattr(a, field) == getattr(b, field)
    assert [sorted(m) for m in a.meta] == [sorted(m) for m in b.meta]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["add", "append", "pop", "replace", "same value", "bad id", "new list"]),
                min_size=1, max_size=25), st.integers(9, 14))
def test_one_dependency_list_passed_again_and_changed_between_adds(ops, width):
    """A collective's G nodes pass one list of G ids in turn; the compiled add reuses its checked
    tuple only while the list holds the same objects: a list changed in between (an id appended,
    removed, replaced, an equal int that is another object, an id not added yet) is checked and
    stored as the reference stores it, errors included."""
    compiled, reference = Graph(), Graph()
    for g in (compiled, reference):
        for i in range(40):
            Graph._add_reference(g, f"base{i}", 1.0)
    shared = list(range(width))
    for j, op in enumerate(ops):
        if op == "append":
            shared.append(len(shared) + 3)
        elif op == "pop" and shared:
            shared.pop()
        elif op == "replace" and shared:
            shared[0] = 30 - shared[0] % 7
        elif op == "same value" and shared:
            shared[-1] = int(str(shared[-1]))          # equal, maybe another object
        elif op == "bad id":
            shared.append(10**6)
        elif op == "new list":
            shared = list(shared)
        a = _outcome(compiled, Graph.add, f"n{j}", 0.5, ("r",), shared)
        b = _outcome(reference, Graph._add_reference, f"n{j}", 0.5, ("r",), shared)
        assert a == b
        if op == "bad id":
            shared.pop()
    for field in ("names", "durations", "resources", "deps", "priority", "meta"):
        assert getattr(compiled, field) == getattr(reference, field)


@pytest.mark.parametrize("enabled", [True, False])
def test_a_step_pauses_the_cyclic_collector_and_leaves_it_as_it_found_it(enabled):
    """``run_step`` builds its graph with the cyclic collector off and restores its state after,
    also when the step raises."""
    import gc

    from sievesim.system.step import StepSimulator

    sim = StepSimulator("qwen3-30b-a3b", gpus=1, batch=4)
    seen = []
    original = sim._run_step

    def spy(grow_contexts):
        seen.append(gc.isenabled())
        return original(grow_contexts)

    sim._run_step = spy
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        sim.run_step()
        assert seen == [False] and gc.isenabled() == enabled
        sim._run_step = lambda grow_contexts: 1 / 0
        with pytest.raises(ZeroDivisionError):
            sim.run_step()
        assert gc.isenabled() == enabled
    finally:
        (gc.enable if was else gc.disable)()
