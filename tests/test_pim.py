"""PIM on the engine: programs obey every rule, physical bounds, token scaling, dual row buffers."""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sievesim.cli import main
from sievesim.dram.engine import write_command_log
from sievesim.dram.traces import RequestTrace
from sievesim.pim import gemv_program, geometry_for, pim_config, plan_gemv, run_programs
from sievesim.pim.expert import EnginePimCost, PIMDevice, gemv

from dram_checker import check, read_log


class _Logged:
    def __init__(self, res):
        self.command_log = res.command_log


def _checked(cfg, programs, tmp_path, background=None, single=False):
    res = run_programs(cfg, programs, background=background, log_commands=True)
    path = tmp_path / "pim.csv"
    write_command_log(_Logged(res), cfg, path)
    log = read_log(path)
    return res, log, check(log, "jedec", single_buffer=single)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(d_in=st.integers(1, 6000), d_out=st.integers(1, 3000), tokens=st.integers(1, 9),
       pcs=st.sampled_from([1, 2, 32, 256]), banks_per_pu=st.sampled_from([1, 2, 4]),
       gb=st.sampled_from([256, 2048, 8192]), single=st.booleans(), reads=st.integers(0, 300),
       config=st.sampled_from(["hbm3e-8000", "hbm3-6400"]))
def test_pim_programs_obey_every_rule(tmp_path, d_in, d_out, tokens, pcs, banks_per_pu, gb, single, reads, config):
    cfg = pim_config(config, 1, dual_row_buffer=not single)
    geo = geometry_for(cfg, banks_per_pu=banks_per_pu, global_buffer_bytes=gb)
    plan = plan_gemv(d_in, d_out, tokens, pcs, geo, dict(cfg.timings))
    prog = gemv_program(plan, geo)
    background = None
    if reads:   # the GPU reads other rows of the same banks while the PIM computes
        rng = np.random.default_rng(reads)
        addrs = rng.integers(0, cfg.capacity_bytes // cfg.tx_bytes, reads) * cfg.tx_bytes
        background = RequestTrace.from_arrays(np.sort(rng.integers(0, 4 * reads, reads)), addrs, rng.random(reads) < 0.2)
    res, log, violations = _checked(cfg, [prog], tmp_path, background, single)
    assert violations == []
    assert res.macabs == plan.tokens * plan.macs_per_token
    names = [r[8] for r in log.rows]
    assert names.count("RD") + names.count("WR") == reads
    assert res.cycles >= res.macabs * cfg.timings["nCCDAB"] - cfg.timings["nCCDAB"]


def _bound_cycles(cfg, plan, geo, res):
    """docs/pim.md: row period, data-bus bursts and refresh losses for a one-token GEMV."""
    t = cfg.timings
    s = geo.steps_per_row
    rows = math.ceil(plan.slots * plan.steps_per_output / s)
    period = max(max(t["nRCDRD"] + (s - 1) * t["nCCDAB"] + t["nRTPL"], t["nRAS"]) + t["nRP"], t["nRC"])
    bursts = (res.gwrites + res.rdres) * t["nBL"]
    busy = rows * period + bursts
    per_refresh = t["nRFC"] + t["nRP"] + t["nRCDRD"] + t["nRTPL"]
    refreshes = busy // (t["nREFI"] - per_refresh)
    return busy + refreshes * per_refresh


@pytest.mark.parametrize("config", ["hbm3e-8000", "hbm3-6400"])
def test_large_gemv_utilization_matches_the_row_switch_and_refresh_bound(config):
    cfg = pim_config(config)
    geo = geometry_for(cfg)
    plan = plan_gemv(1024, 48 * 600, 1, 1, geo, dict(cfg.timings))   # 600 outputs per PU, 2 rows each
    res = run_programs(cfg, [gemv_program(plan, geo)])
    bound = res.macabs * cfg.timings["nCCDAB"] / _bound_cycles(cfg, plan, geo, res)
    assert res.refreshes > 10
    assert abs(res.macab_utilization - bound) / bound < 0.05, (res.macab_utilization, bound)


def test_expert_time_grows_with_tokens_and_two_tokens_cost_less_than_twice_one():
    cost = EnginePimCost(PIMDevice(multi_vector_pu=True), 4096, 1024)      # tokens share opened rows
    times = [cost.expert_time_s(n) for n in (1, 2, 4, 8, 16, 32)]
    assert all(a < b for a, b in zip(times, times[1:]))
    assert times[1] / times[0] < 2.0


def test_dual_row_buffers_let_pim_and_gpu_reads_share_banks():
    rng = np.random.default_rng(0)
    times = {}
    for dual in (True, False):
        cfg = pim_config("hbm3e-8000", 1, dual_row_buffer=dual)
        geo = geometry_for(cfg)
        plan = plan_gemv(1024, 48 * 40, 4, 1, geo, dict(cfg.timings))
        n = 2000
        bg = RequestTrace.from_arrays(np.arange(n) * 4, rng.integers(0, cfg.capacity_bytes // 32, n) * 32,
                                      np.zeros(n, bool))
        res = run_programs(cfg, [gemv_program(plan, geo)], background=bg)
        times[dual] = max(res.per_unit_busy_cycles)
    assert times[True] < times[False]


def test_a_sequence_of_experts_shares_one_hand_over_and_sees_the_refresh_isolated_runs_expect():
    counts = [8] * 24
    for refresh in ("mean", "aligned"):
        dev = PIMDevice(refresh=refresh)
        cost = EnginePimCost(dev, 4096, 1024)
        together = cost.experts_time_s(counts)
        apart = sum(cost.expert_time_s(n) for n in counts) + dev.sync_latency_s   # one hand-over per layer
        alone = sum(cost.expert_time_s(n, hand_over=True) for n in counts)
        assert together < alone
        if refresh == "mean":       # isolated runs priced at their expected refresh: the same total
            assert together == pytest.approx(apart, rel=0.02)
        else:                       # aligned isolated runs never meet a refresh; the long program does
            assert together > 1.05 * apart


def test_activation_on_pim_saves_the_round_trip():
    gpu_act = EnginePimCost(PIMDevice(), 4096, 1024)
    pim_act = EnginePimCost(PIMDevice(activation_on_pim=True), 4096, 1024)
    assert pim_act.expert_time_s(4) < gpu_act.expert_time_s(4)


@pytest.mark.parametrize("dual", [True, False])
def test_pim_skipping_idle_cycles_changes_nothing(dual):
    cfg = pim_config("hbm3e-8000", 2, dual_row_buffer=dual)
    geo = geometry_for(cfg)
    progs = [gemv_program(plan_gemv(1024, 48 * 30, 3, 1, geo, dict(cfg.timings)), geo),
             gemv_program(plan_gemv(700, 900, 2, 1, geo, dict(cfg.timings)), geo)]
    rng = np.random.default_rng(2)
    bg = RequestTrace.from_arrays(np.sort(rng.integers(0, 20000, 500)),
                                  rng.integers(0, cfg.capacity_bytes // 32, 500) * 32, rng.random(500) < 0.3)
    a = run_programs(cfg, progs, background=bg, log_commands=True)
    b = run_programs(cfg, progs, background=bg, log_commands=True, skip_idle=False)
    assert a.cycles == b.cycles and a.refresh_stall_cycles == b.refresh_stall_cycles
    for k in ("cycle", "addr", "command"):
        assert np.array_equal(a.command_log[k], b.command_log[k])


def test_identical_programs_are_simulated_once():
    dev = PIMDevice()
    a = gemv(dev, 2048, 1536, 3, 256)
    b = gemv(dev, 2048, 1536, 3, 256)
    assert a is b


def test_expert_parallel_unit_is_slower_than_tensor_parallel():
    cost = EnginePimCost(PIMDevice(), 2048, 768)
    assert cost.expert_time_on_unit_s(2, "pseudo_channel") > cost.expert_time_on_unit_s(2, "stack") \
        > cost.expert_time_s(2)


def test_attention_grows_with_context_and_batch_and_respects_layer_kinds():
    from sievesim.models import get_model
    from sievesim.pim.expert import AttentionLayer
    dev = PIMDevice()
    full = AttentionLayer("full", kv_heads=2, q_per_kv=16, head_dim=256, value_dim=256)
    assert full.time_s(dev, [512] * 8) < full.time_s(dev, [4096] * 8)
    assert full.time_s(dev, [1024] * 8) < full.time_s(dev, [1024] * 600)
    # row reuse across the query heads of a group: fewer activations
    assert gemv(dev, 256, 1024, 16, 1).activations < 16 * gemv(dev, 256, 1024, 1, 1).activations
    sliding = dataclasses.replace(full, kind="sliding", window=128)
    assert sliding.time_s(dev, [4096] * 8) == sliding.time_s(dev, [128] * 8)
    model = get_model("qwen3.5-397b-a17b")
    kinds = {model.layer_attention[i] for i in range(model.num_layers)}
    assert kinds == {"linear", "full"}
    lin = AttentionLayer.from_model(model, model.layer_attention.index("linear"))
    assert lin.time_s(dev, [100] * 8) == lin.time_s(dev, [100000] * 8) > 0     # fixed-size state
    gpt = get_model("gpt-oss-120b")
    sw = AttentionLayer.from_model(gpt, gpt.layer_attention.index("sliding"))
    assert sw.window == 128 and sw.time_s(dev, [8192]) == sw.time_s(dev, [128])


def test_cli_pim_gemv_and_expert_json(capsys, tmp_path):
    assert main(["pim", "gemv", "--d-in", "2048", "--d-out", "1536", "--tokens", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    for k in ("cycles", "time_ns", "macab_utilization", "activations", "refresh_stall_cycles"):
        assert k in d
    assert main(["pim", "expert", "--model", "qwen3-30b-a3b", "--tokens", "4", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["cycles"] > 0 and 0 < d["macab_utilization"] <= 1
    log = tmp_path / "log.csv"
    assert main(["pim", "gemv", "--d-in", "512", "--d-out", "96", "--log-commands", str(log)]) == 0
    assert check(read_log(log), "jedec") == []


@pytest.mark.parametrize("args, expect", [
    (["pim", "gemv", "--d-in", "0", "--d-out", "8"], "--d-in = 0"),
    (["pim", "expert", "--model", "qwen3-30b", "--tokens", "1"], "qwen3-30b"),
    (["pim", "gemv", "--d-in", "8", "--d-out", "8", "--hardware", "b300"], "b300"),
])
def test_cli_bad_input_exits_2(capsys, args, expect):
    assert main(args) == 2
    assert expect in capsys.readouterr().err


def test_policies_priced_by_the_engine(tmp_path, capsys):
    counts = tmp_path / "counts.json"
    counts.write_text(json.dumps([14, 12, 1, 1, 0, 2, 1] + [0] * 121))
    args = ["policy", "decide", "--model", "qwen3-30b-a3b", "--counts", str(counts), "--batch", "16",
            "--context-len", "2048", "--json"]
    assert main(args + ["--pim-cost", "engine"]) == 0
    engine = json.loads(capsys.readouterr().out)
    assert main(args) == 0
    roofline = json.loads(capsys.readouterr().out)
    assert engine["t_pim_s"] != roofline["t_pim_s"]
    assert set(engine["pim_experts"]) | set(engine["gpu_experts"]) == {0, 1, 2, 3, 5, 6}


def test_ema_cost_table_learns_engine_times_and_oracle_verifies_on_the_engine():
    from sievesim.costs import PimCostTable, build_context
    from sievesim.hardware import get_hardware
    from sievesim.models import get_model
    from sievesim.policies import Oracle
    model, hw = get_model("qwen3-30b-a3b"), get_hardware("b200")
    engine = EnginePimCost.for_model(model, hw)
    counts = np.array([9, 7, 3, 2, 1, 1, 1, 1] + [0] * 120)
    roofline_ctx = build_context(model, hw, 1, 16, counts=counts, context_lens=1024)
    table = PimCostTable(roofline_ctx.pim, alpha=0.5)
    for n in (1, 2, 3, 7, 9):                     # one step's observations
        table.update(("expert", n), engine.expert_time_s(n))
    for n in (1, 2, 3, 7, 9):
        assert table.expert_time_s(n) == engine.expert_time_s(n)
    assert table.expert_time_s(4) == roofline_ctx.pim.expert_time_s(4)   # unseen: roofline fallback
    table.update(("expert", 1), 2 * engine.expert_time_s(1))
    assert table.expert_time_s(1) == pytest.approx(1.5 * engine.expert_time_s(1))
    ctx = build_context(model, hw, 1, 16, counts=counts, context_lens=1024, pim=engine)
    verify = lambda part: engine.partition_pim_time_s(part, [1024] * 16)
    part = Oracle(verify=verify, candidates=3).decide(counts, ctx)
    assert len(part.info["verified"]) == 3
    assert min(part.info["verified"].values()) == part.info["verified"][part.info["cut"]]


def test_cli_oracle_verified_on_the_engine(tmp_path, capsys):
    counts = tmp_path / "counts.json"
    counts.write_text(json.dumps([14, 12, 1, 1, 0, 2, 1] + [0] * 121))
    assert main(["policy", "decide", "--model", "qwen3-30b-a3b", "--counts", str(counts), "--batch", "16",
                 "--context-len", "1024", "--policy", "oracle", "--verify-engine", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    verified = d["verified_t_total_s"]
    assert len(verified) == 3 and len(d["gpu_experts"]) in map(int, verified)
    assert verified[str(len(d["gpu_experts"]))] == min(verified.values())


def test_the_engine_refuses_program_ops_that_are_no_command():
    """load_pim_programs checks every op in its one pass over them (which also finds the commands
    the programs use, for the issue rows): an index outside the standard's commands is named."""
    from sievesim._core import Engine

    cfg = pim_config("hbm3e-8000")
    spec = cfg.compile()
    z = (np.zeros((0, spec["addr_len"]), np.int32), np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, np.int64))
    n_cmd = len(spec["cmd_scope"])
    for bad in (n_cmd, -1):
        e = Engine(spec | {"nRFC": int(cfg.timings["nRFC"])}, *z)
        ops = np.asarray([spec["cmd_gwrite"], spec["cmd_macab"], bad], np.int32)
        with pytest.raises(ValueError, match=rf"ops\[2\] = {bad}: expected a command index from 0 to {n_cmd - 1}"):
            e.load_pim_programs(np.asarray([[0, 3]]), ops, np.zeros((3, 2), np.int32))
    e = Engine(spec | {"nRFC": int(cfg.timings["nRFC"])}, *z)
    e.load_pim_programs(np.asarray([[0, 0]]), np.zeros(0, np.int32), np.zeros((0, 2), np.int32))   # none: fine
