"""The Chrome trace of a step: one event per node on one track, its work in args, a flow per
dependency, HBM and PIM counters."""
from __future__ import annotations

import json

import pytest

from sievesim.cli import main
from sievesim.hardware import get_hardware
from sievesim.system import simulate_step
from sievesim.system.chrome import chrome_trace


@pytest.fixture(scope="module")
def step():
    # the paper's roofline: a step with experts on both sides (what the trace's arguments are checked on)
    return simulate_step("qwen3-30b-a3b", gpus=2, batch=8, policy="sieve", warmup=1, gpu_model="roofline")


@pytest.fixture(scope="module")
def trace(step):
    return chrome_trace(step.schedule)


def _by_ph(trace, ph):
    return [e for e in trace["traceEvents"] if e["ph"] == ph]


def test_every_node_once_on_one_track_and_tracks_never_overlap(step, trace):
    nodes = step.nodes()
    slices = _by_ph(trace, "X")
    assert sorted(e["args"]["id"] for e in slices) == list(range(len(nodes)))
    decision_tid = 4
    tracks: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for e in slices:
        tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for (pid, tid), spans in tracks.items():
        if tid == decision_tid:
            continue
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert start >= end - 1e-6, (pid, tid)
    two = [e for e in slices if len(e["args"]["resources"]) == 2]
    assert two and all(e["tid"] in (0, 3) for e in two)          # gpu+hbm on gpu, tx+rx on tx


def test_the_work_is_in_the_args(trace):
    slices = _by_ph(trace, "X")
    pim = [e for e in slices if e["cat"] == "pim_experts"]
    assert pim and all(e["args"]["engine_cycles"] > 0 and e["args"]["tokens"] > 0 and e["args"]["experts"]
                       for e in pim)
    gemm = [e for e in slices if e["cat"] == "gemm"]
    assert gemm and all(e["args"]["flops"] > 0 and e["args"]["bytes"] > 0 for e in gemm)
    assert all(max(e["args"]["experts"]) >= 64 for e in pim + gemm if e["pid"] == 1)    # global ids
    assert all("layer" in e["args"] and "microbatch" in e["args"] for e in slices)


def test_a_flow_arrow_per_dependency(step, trace):
    starts, ends = _by_ph(trace, "s"), _by_ph(trace, "f")
    assert len(starts) == len(ends) == sum(len(n.depends_on) for n in step.nodes())
    assert sorted(e["id"] for e in starts) == sorted(e["id"] for e in ends)
    slices = {(e["pid"], e["tid"], e["ts"]) for e in _by_ph(trace, "X")}
    assert all((e["pid"], e["tid"], e["ts"]) in slices for e in starts + ends)     # bound to a slice
    assert all(e["bp"] == "e" for e in ends)
    assert not _by_ph(chrome_trace(step.schedule, flows=False), "s")


def test_counters_hbm_bandwidth_and_pim_busy(step, trace):
    counters = _by_ph(trace, "C")
    hw = get_hardware("b200")
    peak = hw.gpu.hbm_bandwidth_bytes_per_s / 1e9
    hbm = [e for e in counters if e["name"] == "HBM GB/s"]
    assert hbm and max(e["args"]["GB/s"] for e in hbm) <= peak * (1 + 1e-9)
    assert any(e["args"]["GB/s"] > 0 for e in hbm)
    for gpu in (0, 1):
        pim = sorted((e["ts"], e["args"]["busy"]) for e in counters if e["name"] == "PIM busy" and e["pid"] == gpu)
        assert {v for _, v in pim} <= {0.0, 1.0}
        busy_us = sum(t1 - t0 for (t0, v), (t1, _) in zip(pim, pim[1:]) if v == 1.0)
        assert busy_us == pytest.approx(step.busy_s["pim"][gpu] * 1e6, rel=1e-9)


def test_run_writes_valid_json(tmp_path, capsys):
    path = tmp_path / "step.json"
    assert main(["run", "--model", "qwen3-30b-a3b", "--batch", "4", "--policy", "pimoe", "--warmup", "0",
                 "--chrome-trace", str(path)]) == 0
    data = json.loads(path.read_text())
    assert {e["ph"] for e in data["traceEvents"]} == {"M", "X", "s", "f", "C"}
