"""Decode attention on PIM: the grouped program (GQA heads share opened rows), the cycle breakdown
from the command log, ``sievesim pim attention`` and its what-if options (docs/pim.md)."""
from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sievesim.cli import main
from sievesim.pim import geometry_for, pim_config
from sievesim.pim.breakdown import COMPONENTS, program_breakdown
from sievesim.pim.expert import AttentionLayer, PIMDevice
from sievesim.pim.program import (OP_MACAB, gemv_program, grouped_gemv_program, plan_gemv, plan_grouped_gemv)
from sievesim.pim.whatif import parse_what_if, what_if_device

from test_pim import _checked

DOC = Path(__file__).resolve().parents[1] / "docs" / "pim.md"
QWEN3 = AttentionLayer("full", kv_heads=4, q_per_kv=8, head_dim=128, value_dim=128)
QWEN35 = AttentionLayer("full", kv_heads=2, q_per_kv=16, head_dim=256, value_dim=256)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(d_in=st.integers(1, 3000), d_out=st.integers(1, 1500), vectors=st.integers(1, 20),
       gb=st.sampled_from([256, 2048, 8192]), acc=st.sampled_from([1, 4, 8, 32]),
       per_mac=st.sampled_from([1, 2, 8]), single=st.booleans())
def test_grouped_programs_obey_every_rule(tmp_path, d_in, d_out, vectors, gb, acc, per_mac, single):
    cfg = pim_config("hbm3e-8000", 1, dual_row_buffer=not single)
    geo = dataclasses.replace(geometry_for(cfg, global_buffer_bytes=gb, accumulators=acc), vectors_per_mac=per_mac)
    plan = plan_grouped_gemv(d_in, d_out, vectors, geo, dict(cfg.timings))
    assert 1 <= plan.heads_per_pass <= min(vectors, acc)
    prog = grouped_gemv_program(plan, geo)
    res, _, violations = _checked(cfg, [prog], tmp_path, None, single)
    assert violations == []
    heads = [min(plan.heads_per_pass, vectors - p * plan.heads_per_pass) for p in range(plan.passes)]
    assert res.macabs == sum(plan.slots * plan.steps * math.ceil(h / per_mac) for h in heads)
    outputs = min(d_out, plan.slots * geo.pus)
    assert res.rdres >= math.ceil(outputs * vectors * geo.result_bytes / geo.burst_bytes)


@pytest.mark.parametrize("d_in, d_out, vectors", [(128, 4096, 8), (128, 1000, 8), (256, 1024, 4), (64, 50, 3)])
def test_grouped_program_is_the_multi_vector_gemv_when_the_heads_fit(d_in, d_out, vectors):
    """Inputs that fit the global buffer: one pass, the heads back to back on every opened column,
    exactly the multi-token GEMV program."""
    dev = PIMDevice()
    geo = dev.geometry
    plan = plan_grouped_gemv(d_in, d_out, vectors, geo, dict(dev.config.timings))
    assert plan.heads_per_pass == vectors and not plan.segmented
    multi = dataclasses.replace(geo, multi_vector=True)
    old = gemv_program(plan_gemv(d_in, d_out, vectors, 1, multi, dict(dev.config.timings)), multi)
    new = grouped_gemv_program(plan, geo)
    assert np.array_equal(old[0], new[0]) and np.array_equal(old[1], new[1])


def test_a_group_of_one_is_the_per_head_program_and_per_head_is_the_old_time():
    dev = PIMDevice()
    mha = dataclasses.replace(QWEN3, kv_heads=32, q_per_kv=1)
    for lens in ([4096] * 8, [100, 2000, 37]):
        assert mha.time_s(dev, lens) == dataclasses.replace(mha, mapping="per_head").time_s(dev, lens)
    # the per-head mapping is the program of every version before 2026-12-03 (issue 21's 60.4 and 58.6 us)
    per_head = dataclasses.replace(QWEN3, mapping="per_head")
    assert per_head.time_s(dev, [4096] * 64) * 1e6 == pytest.approx(60.41014135111112, rel=1e-12)
    assert dataclasses.replace(QWEN35, mapping="per_head").time_s(dev, [4096] * 32) * 1e6 == \
        pytest.approx(58.605883175555554, rel=1e-12)


@pytest.mark.parametrize("layer, lens, before", [
    (QWEN3, [100, 2000, 37], 2.8815966182905982e-06),
    (QWEN3, [3000, 1000, 777, 4096] * 20, 6.0404119377777784e-05),
    # 1.5507813333333334e-04 at 222d591; since issue 71 the value GEMVs' streamed input (5000 tokens
    # through a 2 KB buffer) meets each weight row once (docs/pim.md, section 2)
    (QWEN3, [5000] * 96, 0.00014699213333333334),
    (AttentionLayer("mla", kv_heads=1, q_per_kv=16, head_dim=576, value_dim=512), [3000, 1000, 777, 4096],
     1.2269252984444444e-05),
])
def test_per_head_mapping_with_whole_units_is_the_program_before_2026_12_03(layer, lens, before):
    """Times of commit 222d591 (before the grouped mapping and the token balance)."""
    old = dataclasses.replace(layer, mapping="per_head", balance="units")
    assert old.time_s(PIMDevice(), lens) == pytest.approx(before, rel=1e-12)


def test_a_piece_costs_about_30_tokens_of_work_whatever_its_length():
    """docs/pim.md section 7: the placement's fixed cost per piece (query writes, result rows)."""
    from sievesim.pim.expert import _cost_line
    fixed, per_token = _cost_line(QWEN3, PIMDevice())
    assert 25 < fixed / per_token < 35


def test_long_requests_are_cut_so_no_pseudo_channel_waits_on_one():
    """One request of 60 000 tokens among short ones: whole units leave it on one pseudo-channel;
    the token balance cuts it, and the busiest pseudo-channel holds about an equal share."""
    dev = PIMDevice()
    lens = [60000] + [500] * 63
    units = dataclasses.replace(QWEN3, balance="units")
    _, busiest_units = units.placement(dev, lens)
    _, busiest = QWEN3.placement(dev, lens)
    share = sum(lens) * QWEN3.kv_heads / dev.unit_pcs("gpu")
    assert max(busiest_units) == 60000 and sum(busiest) < 1.2 * share
    assert QWEN3.time_s(dev, lens) < 0.4 * units.time_s(dev, lens)
    # equal requests that fill the pseudo-channels evenly: the same placement either way
    for lens in ([4096] * 64, [4096] * 128, [1000] * 16):
        assert QWEN3.placement(dev, lens) == units.placement(dev, lens)


@pytest.mark.parametrize("group", [2, 4, 8, 16])
def test_heads_of_a_group_open_the_rows_fewer_times(group):
    dev = PIMDevice()
    grouped = dataclasses.replace(QWEN3, q_per_kv=group)
    per_head = dataclasses.replace(grouped, mapping="per_head")
    lens = [2048] * 64
    g, p = grouped.breakdown(dev, lens), per_head.breakdown(dev, lens)
    for name in ("scores", "values"):
        assert g["commands"][name]["ACTAB"] < p["commands"][name]["ACTAB"]
        assert g["commands"][name]["MACAB"] == pytest.approx(p["commands"][name]["MACAB"], rel=1e-12)  # same work
    assert g["total_s"] < p["total_s"]


LAYERS = [QWEN3, QWEN35, dataclasses.replace(QWEN3, kind="sliding", window=128),
          AttentionLayer("linear", kv_heads=32, head_dim=128, value_dim=128),
          AttentionLayer("mla", kv_heads=1, q_per_kv=16, head_dim=576, value_dim=512)]


@pytest.mark.parametrize("layer", LAYERS, ids=lambda a: a.kind + str(a.q_per_kv))
@pytest.mark.parametrize("mapping", ["grouped", "per_head"])
@pytest.mark.parametrize("refresh", ["mean", "aligned"])
def test_the_breakdown_adds_up_to_the_attention_time(layer, mapping, refresh):
    dev = PIMDevice(refresh=refresh)
    lay = dataclasses.replace(layer, mapping=mapping)
    lens = [3000, 1000, 777, 4096]
    bd = lay.breakdown(dev, lens)
    assert bd["total_s"] == pytest.approx(lay.time_s(dev, lens), rel=1e-12)
    programs = sum(sum(c.values()) for c in bd["programs"].values()) * dev.tck_s
    assert programs == pytest.approx(bd["pim_s"], rel=1e-12)
    assert programs + bd["softmax_s"] + bd["sync_s"] == pytest.approx(bd["total_s"], rel=1e-12)
    for name, comps in bd["programs"].items():
        assert set(comps) == set(COMPONENTS) and min(comps.values()) >= 0
        assert sum(comps.values()) == pytest.approx(bd["cycles"][name], rel=1e-12)
        # the MAC component is the issue floor of the MAC commands (less only where a GWRITE follows at once)
        assert comps["mac"] <= bd["commands"][name]["MACAB"] * dev.config.timings["nCCDAB"] + 1e-9
        assert 0 < bd["mac_useful_share"][name] <= 1


def test_refresh_and_rows_land_in_their_components():
    """A program longer than a refresh interval: refresh holds about nRFC per REFab; without
    refresh (aligned, shorter than nREFI) it holds nothing."""
    dev = PIMDevice()
    bd = QWEN3.breakdown(dev, [4096] * 64)
    t = dev.config.timings
    for name in ("scores", "values"):
        comps, n = bd["programs"][name], bd["commands"][name]
        assert n["REFab"] > 1
        # every refresh met blocks nRFC (the last may reach past the end), plus closing and re-opening a row
        assert (n["REFab"] - 1) * t["nRFC"] <= comps["refresh"] <= (n["REFab"] + 1) * (t["nRFC"] + t["nRP"] + t["nRCDRD"])
        assert comps["row"] >= n["ACTAB"] * t["nRCDRD"] * 0.9
    short = PIMDevice(refresh="aligned")
    bd = QWEN3.breakdown(short, [256] * 64)
    assert all(c["refresh"] == 0 for c in bd["programs"].values())


def test_program_breakdown_refuses_a_run_without_a_log():
    from sievesim.errors import SievesimError
    dev = PIMDevice()
    res = dev.run(grouped_gemv_program(plan_grouped_gemv(128, 256, 4, dev.geometry), dev.geometry), 1)
    with pytest.raises(SievesimError, match="log_commands"):
        program_breakdown(res, dev.config)


def test_more_vectors_per_mac_command_divide_the_mac_commands():
    dev = PIMDevice()
    lens = [4096] * 64
    base = QWEN3.breakdown(dev, lens)
    wide = QWEN3.breakdown(what_if_device(dev, {"vectors": 8}), lens)
    for name in ("scores", "values"):
        assert wide["commands"][name]["MACAB"] * 8 == pytest.approx(base["commands"][name]["MACAB"], rel=0.13)
    assert wide["total_s"] < 0.4 * base["total_s"]


def test_what_if_parsing():
    assert parse_what_if("macs=32,vectors=8") == {"macs": 32, "vectors": 8}
    assert parse_what_if(" accumulators = 64 , buffer=4096") == {"accumulators": 64, "buffer": 4096}
    dev = what_if_device(PIMDevice(), {"vectors": 4})
    assert (dev.vectors_per_mac, dev.accumulators, dev.global_buffer_bytes) == (4, 32, 8192)
    dev = what_if_device(PIMDevice(), {"vectors": 4, "accumulators": 8})
    assert dev.accumulators == 8
    from sievesim.errors import SievesimError
    for bad in ("", "macs", "macs=", "macs=0", "macs=-1", "macs=1.5", "vectors=257", "foo=1", "macs=16,macs=32",
                "macs=16,", "buffer=16"):
        with pytest.raises(SievesimError, match="--what-if"):
            parse_what_if(bad)
    with pytest.raises(SievesimError, match="divisor"):
        what_if_device(PIMDevice(), {"macs": 48})
    with pytest.raises(SievesimError, match="vectors_per_mac"):
        PIMDevice(vectors_per_mac=0)


def _cli(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_pim_attention_regression(capsys):
    rc, out, _ = _cli(capsys, "pim", "attention", "--model", "qwen3-30b-a3b", "--batch", "64", "--context", "4096",
                      "--json")
    assert rc == 0
    r = json.loads(out)
    assert (r["kind"], r["kv_heads"], r["group"], r["requests_per_gpu"], r["mapping"]) == ("full", 4, 8, 64, "grouped")
    assert r["pim_us"] == pytest.approx(51.73, abs=0.01)
    assert r["gpu_us"] == pytest.approx(67.17, abs=0.01)
    assert r["roofline_us"] == pytest.approx(33.55, abs=0.01)
    parts = sum(sum(c.values()) for c in r["components_us"].values()) + r["softmax_us"] + r["sync_us"]
    assert parts == pytest.approx(r["pim_us"], rel=1e-12)
    rc, out, _ = _cli(capsys, "pim", "attention", "--model", "qwen3-30b-a3b", "--mapping", "per-head", "--json")
    assert rc == 0 and json.loads(out)["pim_us"] == pytest.approx(60.41, abs=0.01)
    rc, out, _ = _cli(capsys, "pim", "attention", "--model", "qwen3-30b-a3b")
    assert rc == 0
    for label in ("MAC commands", "row activations", "GWRITE", "result readout", "refresh", "GPU softmax",
                  "GPU-PIM hand-over", "**total**", "roofline", "GPU 67.17 us"):
        assert label in out


def test_cli_pim_attention_needs(capsys):
    rc, out, _ = _cli(capsys, "pim", "attention", "--model", "qwen3-30b-a3b", "--needs", "--groups", "4,16",
                      "--macs", "16", "--vectors", "1,2", "--json")
    assert rc == 0
    rows = json.loads(out)["needs"]
    assert [(r["group"], r["vectors"]) for r in rows] == [(4, 1), (4, 2), (16, 1), (16, 2)]
    t = {(r["group"], r["vectors"]): r["pim_us"] for r in rows}
    assert t[(4, 2)] < t[(4, 1)] < t[(16, 2)] < t[(16, 1)]
    assert len({r["gpu_us"] for r in rows}) == 1          # the GPU reads the same KV cache at any group size


@pytest.mark.parametrize("argv, field", [
    (["--what-if", "macs=0"], "--what-if macs"), (["--what-if", "bogus"], "--what-if"),
    (["--what-if", "macs=48"], "--what-if macs"), (["--batch", "63", "--gpus", "2"], "--batch"),
    (["--layer", "4000"], "--layer"), (["--context", "0"], "--context"), (["--mapping", "rows"], "--mapping"),
    (["--needs", "--groups", "0"], "--groups"), (["--needs", "--macs", "48"], "--macs"),
    (["--needs", "--vectors", "x"], "--vectors"),
])
def test_cli_pim_attention_refuses_bad_values(capsys, argv, field):
    rc, out, err = _cli(capsys, "pim", "attention", "--model", "qwen3-30b-a3b", *argv)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and field in err


def test_cli_pim_attention_needs_refuses_a_layer_without_gqa(capsys):
    rc, _, err = _cli(capsys, "pim", "attention", "--model", "qwen3.5-397b-a17b", "--layer", "0", "--needs")
    assert rc == 2 and "--needs" in err


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet="macsvetorbufl=,0123456789 -", max_size=30))
def test_any_what_if_text_is_accepted_or_refused_in_one_line(capsys, text):
    rc, _, err = _cli(capsys, "pim", "attention", "--model", "qwen3-30b-a3b", "--batch", "4", "--context", "64",
                      "--what-if", text, "--json")
    assert rc in (0, 2)
    if rc == 2:
        assert len(err.strip().splitlines()) == 1


def _doc_numbers(section: str) -> str:
    text = DOC.read_text()
    start = text.index(section)
    return text[start: text.index("\n## ", start + 1) if "\n## " in text[start + 1:] else len(text)]


def test_the_numbers_in_docs_pim_attention_are_what_the_command_prints(capsys):
    """docs/pim.md section 7 quotes `sievesim pim attention`; its totals must be the command's."""
    section = _doc_numbers("## 7. Decode attention")
    for argv in (["--model", "qwen3-30b-a3b", "--batch", "64", "--context", "4096"],
                 ["--model", "qwen3.5-397b-a17b", "--batch", "256", "--gpus", "8", "--context", "4096"]):
        for old in ([], ["--mapping", "per-head", "--balance", "units"]):
            rc, out, _ = _cli(capsys, "pim", "attention", *argv, *old, "--json")
            r = json.loads(out)
            for value in (r["pim_us"], r["gpu_us"]):
                assert f"{value:.2f}" in section, (argv, old, value)
    for old in ([], ["--mapping", "per-head", "--balance", "units"]):      # the two breakdown tables, row by row
        rc, out, _ = _cli(capsys, "pim", "attention", "--model", "qwen3-30b-a3b", "--batch", "64", "--context",
                          "4096", *old)
        rows = [line for line in out.splitlines() if line.startswith("| ") and not line.startswith("| other")]
        assert len(rows) == 9 and all(line in section for line in rows), old
    rc, out, _ = _cli(capsys, "pim", "attention", "--model", "qwen3-30b-a3b", "--needs", "--macs", "16,32",
                      "--vectors", "1,2,4,8")
    summary = [line for line in out.splitlines() if line.startswith("group ")]
    assert summary and all(line in section for line in summary)
    rows = [line for line in out.splitlines() if line.startswith("| ") and "GQA" not in line]
    rc, out35, _ = _cli(capsys, "pim", "attention", "--model", "qwen3.5-397b-a17b", "--batch", "256", "--gpus", "8",
                        "--needs", "--macs", "16,32", "--vectors", "1,2,4,8", "--json")
    t35 = {(r["group"], r["macs"], r["vectors"]): r for r in json.loads(out35)["needs"]}
    for key, ratio in (((4, 16, 1), None), ((8, 16, 1), "0.77x"), ((8, 16, 2), None), ((16, 16, 2), "0.85x"),
                       ((16, 16, 4), "0.50x")):
        assert f"{t35[key]['pim_us']:.2f} us" in section, key
        if ratio:
            assert f"{t35[key]['pim_over_gpu']:.2f}x" == ratio
    assert all(line in out for line in section.splitlines() if line.startswith("| 4 |")
               or line.startswith("| 8 |") or line.startswith("| 16 |"))
    assert rows
    # per-head at 222d591: MATH-500 263.88 us, HH-RLHF 27.78 us; with the GEMV layout of issue 71
    # 251.88 and 26.36 us (all four in the doc)
    assert "263.88" in section and "27.78" in section
    for preset, before, after in (("math-500", "251.88", "53.98"), ("hh-rlhf", "26.36", "10.17")):
        base = ["pim", "attention", "--model", "qwen3-30b-a3b", "--batch", "64", "--context-preset", preset, "--json"]
        assert f"{json.loads(_cli(capsys, *base)[1])['pim_us']:.2f}" == after
        old = json.loads(_cli(capsys, *base, "--mapping", "per-head", "--balance", "units")[1])["pim_us"]
        assert f"{old:.2f}" == before and before in section and after in section
    assert re.search(r"\| \*\*total\*\* \|", section)
