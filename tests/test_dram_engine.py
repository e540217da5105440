"""The request-mode engine: hand-computed timings, the independent checker, properties, errors."""
from __future__ import annotations

import collections
import re
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sievesim.cli import main
from sievesim.dram.config import BUILTIN_CONFIGS, get_config
from sievesim.dram.engine import simulate, write_command_log
from sievesim.dram.traces import RequestTrace
from sievesim.errors import ConfigError

from dram_checker import check, read_log

FAMILY = {"hbm3": "jedec", "hbm2": "jedec", "ramulator2-hbm3": "ramulator2", "ramulator2-hbm2": "ramulator2"}


def _trace(addrs, writes=None, arrival=None):
    n = len(addrs)
    return RequestTrace.from_arrays(np.zeros(n, int) if arrival is None else arrival, np.asarray(addrs),
                                    np.zeros(n, bool) if writes is None else np.asarray(writes))


def _run_checked(config, trace, tmp_path):
    res = simulate(config, trace, log_commands=True)
    path = tmp_path / "log.csv"
    write_command_log(res, config, path)
    log = read_log(path)
    return res, log, check(log, FAMILY[config.standard.name])


# ---------------------------------------------------------------- hand-computed cases
def test_single_read_to_closed_bank_hbm3_6400():
    c = get_config("hbm3-6400")
    t = c.timings
    res = simulate(c, _trace([0]), log_commands=True)
    # arrives at cycle 0, ACT at cycle 1, RD nRCDRD later, data nCL + nBL after the RD
    rd_cycle = 1 + t["nRCDRD"]
    assert list(res.command_log["cycle"]) == [1, rd_cycle]
    assert res.cycles == rd_cycle + t["nCL"] + t["nBL"]
    assert res.avg_read_latency_cycles == rd_cycle + t["nCL"] + t["nBL"]
    assert (res.row_hits, res.row_misses, res.row_conflicts) == (0, 1, 0)


def test_row_conflict_needs_precharge_hbm3e_8000():
    c = get_config("hbm3e-8000")
    t = c.timings
    row_stride = c.tx_bytes * c.address_radix[-1] * int(np.prod(c.address_radix[:-2]))  # next row, same bank (RoBaRaCoCh)
    res = simulate(c, _trace([0, row_stride]), log_commands=True)
    names = [res.command_log["names"][k] for k in res.command_log["command"]]
    assert names == ["ACT", "RD", "PRE", "ACT", "RD"]
    cyc = list(res.command_log["cycle"])
    assert cyc[1] - cyc[0] == t["nRCDRD"]
    assert cyc[2] - cyc[0] == max(t["nRAS"], cyc[1] - cyc[0] + t["nRTPL"])
    assert cyc[3] - cyc[2] == t["nRP"]
    assert (res.row_misses, res.row_conflicts) == (1, 1)


def test_reads_spread_over_bank_groups_reach_the_data_bus_peak():
    # 32 pseudo-channels take one read per nBL = 2 cycles each when consecutive reads alternate bank
    # groups (nCCDS); the frontend must offer 16 requests per memory cycle (clock ratio 32).
    c = get_config("hbm3e-8000").replace(clock_ratio=32)
    n = 64 * 1024
    i = np.arange(n)
    vec = np.zeros((n, 7), dtype=np.int32)
    vec[:, 0], vec[:, 1], vec[:, 3], vec[:, 6] = i % 16, (i // 16) % 2, (i // 32) % 4, (i // 128) % 32
    trace = RequestTrace(is_write=np.zeros(n, bool), arrival=np.zeros(n, np.int64), addr_vectors=vec)
    res = simulate(c, trace)
    assert res.row_hits / n > 0.99
    assert 0.9 * c.peak_bandwidth_gbps < res.bandwidth_gbps <= c.peak_bandwidth_gbps


def test_refresh_is_issued_every_nrefi_on_jedec_and_never_on_ramulator_mirror():
    c = get_config("hbm3-6400")
    n = 3000
    arrival = np.linspace(0, 5 * c.timings["nREFI"], n).astype(int)
    res = simulate(c, _trace(np.arange(n) * 64 * c.tx_bytes % c.capacity_bytes, arrival=arrival))
    assert res.refreshes == c.num_controllers * (res.cycles // c.timings["nREFI"])
    mirror = get_config("ramulator2-hbm3").replace(end="completed")
    assert simulate(mirror, _trace(np.arange(200) * 64, arrival=np.arange(200) * 100)).refreshes == 0


# ---------------------------------------------------------------- checker and properties
addr_strategy = st.integers(min_value=0, max_value=4 * 1024 * 1024 - 1)


@st.composite
def request_traces(draw):
    n = draw(st.integers(1, 300))
    locality = draw(st.sampled_from(["random", "rows", "stream"]))
    base = draw(st.lists(addr_strategy, min_size=1, max_size=8))
    if locality == "random":
        addrs = draw(st.lists(addr_strategy, min_size=n, max_size=n))
    elif locality == "rows":
        picks = draw(st.lists(st.integers(0, len(base) - 1), min_size=n, max_size=n))
        offs = draw(st.lists(st.integers(0, 15), min_size=n, max_size=n))
        addrs = [base[p] + 64 * o for p, o in zip(picks, offs)]
    else:
        addrs = [base[0] + 32 * i for i in range(n)]
    writes = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    burst = draw(st.sampled_from([0, 1, 4, 50]))
    arrival = np.cumsum(draw(st.lists(st.integers(0, burst), min_size=n, max_size=n))) if burst else np.zeros(n, int)
    return np.asarray(addrs, dtype=np.int64), np.asarray(writes), arrival.astype(np.int64)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tr=request_traces(),
       name=st.sampled_from(["hbm3-6400", "hbm3e-8000", "hbm2-2000", "ramulator2-hbm3", "ramulator2-hbm2"]),
       mapper=st.sampled_from(["RoBaRaCoCh", "ChRaBaRoCo", "MOP4CLXOR"]),
       policy=st.sampled_from(["open", "closed"]),
       clock_ratio=st.sampled_from([1, 8]))
def test_random_traces_obey_every_rule(tmp_path, tr, name, mapper, policy, clock_ratio):
    c = get_config(name)
    if mapper == "MOP4CLXOR" and any(r & (r - 1) for r in c.address_radix):
        mapper = "RoBaRaCoCh"
    c = c.replace(mapper=mapper, row_policy=policy, row_policy_cap=2, clock_ratio=clock_ratio, end="completed")
    addrs, writes, arrival = tr
    trace = _trace(addrs % c.capacity_bytes, writes, arrival)
    res, log, violations = _run_checked(c, trace, tmp_path)
    assert violations == []
    # every request served exactly once: RD per non-forwarded read, WR per write, same addresses
    ra = res.request_arrays
    vec = [tuple(v) for v in ra["addr_vectors"]]
    cols = [r[1:8] for r in log.rows]
    names = [r[8] for r in log.rows]
    lv = c.standard.levels
    pick = [("channel", 0), ("pseudochannel", 1), ("sid", 2), ("bankgroup", 3), ("bank", 4), ("row", 5), ("column", 6)]
    def key(v):
        return tuple(v[lv.index(n)] for n, _ in pick if n in lv)
    def logkey(r):
        return tuple(r[i] for n, i in pick if n in lv)
    served_reads = collections.Counter(logkey(r) for r, m in zip(cols, names) if m in ("RD", "RDA"))
    served_writes = collections.Counter(logkey(r) for r, m in zip(cols, names) if m in ("WR", "WRA"))
    want_reads = collections.Counter(key(v) for v, w, f in zip(vec, writes, ra["forwarded"]) if not w and not f)
    want_writes = collections.Counter(key(v) for v, w in zip(vec, writes) if w)
    assert served_reads == want_reads
    assert served_writes == want_writes
    assert (ra["depart"] >= ra["arrive"]).all() and (ra["arrive"] >= arrival).all()
    # refresh cadence: the k-th REFab of each pseudo-channel is issued within one nREFI of its due cycle
    if c.standard.refresh:
        nrefi = c.timings["nREFI"]
        per_pc = collections.defaultdict(list)
        for r in log.rows:
            if r[8] == "REFab":
                per_pc[(r[1], r[2])].append(r[0])
        for times in per_pc.values():
            for k, cyc in enumerate(times, start=1):
                assert k * nrefi <= cyc < (k + 1) * nrefi


def test_checker_catches_violations(tmp_path):
    c = get_config("hbm3-6400")
    res, log, violations = _run_checked(c, _trace(np.arange(200) * 4096), tmp_path)
    assert violations == []
    rows = list(log.rows)
    i = next(k for k, r in enumerate(rows) if r[8] == "RD")
    r = rows[i]
    rows[i] = (r[0] - 1,) + r[1:]          # one cycle too early after its ACT
    log.rows = rows
    assert any("nRCD" in v or "needs" in v for v in check(log, "jedec"))
    log.rows = [x for x in log.rows if x[8] != "ACT" or x is not rows[0]]
    log.rows = log.rows[1:] if log.rows[0][8] == "ACT" else log.rows
    assert any("bank holds row None" in v for v in check(log, "jedec"))


def test_skipping_idle_cycles_changes_nothing():
    rng = np.random.default_rng(3)
    for name in ("hbm3e-8000", "ramulator2-hbm3"):
        for cr in (1, 8):
            c = get_config(name).replace(clock_ratio=cr, end="completed")
            n = 3000
            t = _trace(rng.integers(0, c.capacity_bytes // 64, n) * 64 % c.capacity_bytes, rng.random(n) < 0.3,
                       np.sort(rng.integers(0, 4 * n, n)))
            a = simulate(c, t, log_commands=True)
            b = simulate(c, t, log_commands=True, skip_idle=False)
            assert a.cycles == b.cycles and a.commands == b.commands
            for k in ("cycle", "addr", "command"):
                assert np.array_equal(a.command_log[k], b.command_log[k])


@settings(max_examples=40, deadline=None)
@given(tr=request_traces(),
       name=st.sampled_from(["hbm3-6400", "hbm2-2000", "ramulator2-hbm3"]),
       policy=st.sampled_from(["open", "closed"]),
       cap=st.integers(1, 3),
       clock_ratio=st.sampled_from([1, 3, 8]),
       end=st.sampled_from(["completed", "accepted"]))
def test_every_shortcut_matches_ticking_every_cycle(tr, name, policy, cap, clock_ratio, end):
    # skip_idle=False visits every controller every cycle and takes none of the engine's shortcuts
    # (wake prediction, arrival wake-ups, exact ready-time caches); the command logs must agree
    c = get_config(name).replace(row_policy=policy, row_policy_cap=cap, clock_ratio=clock_ratio, end=end)
    addrs, writes, arrival = tr
    trace = _trace(addrs % c.capacity_bytes, writes, arrival)
    a = simulate(c, trace, log_commands=True)
    b = simulate(c, trace, log_commands=True, skip_idle=False)
    assert a.cycles == b.cycles and a.commands == b.commands
    for k in ("cycle", "addr", "command"):
        assert np.array_equal(a.command_log[k], b.command_log[k])
    assert np.array_equal(a.request_arrays["depart"], b.request_arrays["depart"])
    assert np.array_equal(a.request_arrays["forwarded"], b.request_arrays["forwarded"])


@pytest.mark.parametrize("name", ["ramulator2-hbm3", "hbm3-6400"])
def test_skipping_idle_cycles_changes_nothing_under_write_pressure(name):
    from sievesim.dram.synthetic import make_trace
    c = get_config(name).replace(clock_ratio=8, end="completed")
    for kind in ("random", "hotrow"):
        t = make_trace(kind, 20000, c, seed=3, write_fraction=0.35)
        a = simulate(c, t, log_commands=True)
        b = simulate(c, t, log_commands=True, skip_idle=False)
        assert a.cycles == b.cycles
        for k in ("cycle", "addr", "command"):
            assert np.array_equal(a.command_log[k], b.command_log[k])


def test_deterministic_bit_for_bit():
    c = get_config("hbm3e-8000")
    from sievesim.dram.synthetic import make_trace
    a = simulate(c, make_trace("hotrow", 5000, c, seed=7)).to_dict()
    b = simulate(c, make_trace("hotrow", 5000, c, seed=7)).to_dict()
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b


def test_to_dict_copies_no_array():
    """``to_dict`` (what ``--json`` prints) takes the scalars field by field: the request arrays
    and the command log are left alone (dataclasses.asdict deep-copied them: 84 MB at 2M requests)."""
    import dataclasses

    class NoCopy:
        def __deepcopy__(self, memo):
            raise AssertionError("deep-copied")

    c = get_config("hbm3e-8000")
    from sievesim.dram.synthetic import make_trace
    r = simulate(c, make_trace("random", 300, c, seed=1), log_commands=True)
    expected = {k: v for k, v in vars(r).items()
                if k not in ("command_log", "request_arrays", "command_counts", "threads_note")}
    r.request_arrays = {"depart": NoCopy()}
    r.command_log = {"cycle": NoCopy()}
    assert r.to_dict() == expected
    assert [f.name for f in dataclasses.fields(r)][:3] == list(r.to_dict())[:3]


# ---------------------------------------------------------------- configuration files
def test_toml_config_round_trip(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('name = "x"\nbase = "hbm3-6400"\n[org]\nchannel = 4\n[timing]\nnCL = 24\n'
                 '[controller]\nmapper = "ChRaBaRoCo"\nrow_policy = "closed"\n')
    c = get_config(p)
    assert c.org["channel"] == 4 and c.timings["nCL"] == 24 and c.mapper == "ChRaBaRoCo"
    assert c.row_policy == "closed" and c.num_controllers == 8


RAMULATOR_YAML = """
Frontend:
  impl: LoadStoreTrace
  path: trace.txt
  clock_ratio: 8
  Translation:
    impl: NoTranslation
    max_addr: 2147483648
MemorySystem:
  impl: GenericDRAM
  clock_ratio: 1
  DRAM:
    impl: HBM3
    org:
      preset: HBM3_8Gb
      channel: 8
    timing:
      preset: HBM3_2Gbps
  Controller:
    impl: Generic
    Scheduler:
      impl: FRFCFS
    RefreshManager:
      impl: AllBank
    RowPolicy:
      impl: OpenRowPolicy
    plugins:
  AddrMapper:
    impl: RoBaRaCoCh
"""


def test_ramulator_yaml_matches_builtin_mirror(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text(RAMULATOR_YAML)
    c = get_config(p)
    ref = get_config("ramulator2-hbm3")
    assert c.standard is ref.standard and dict(c.org) == dict(ref.org) and dict(c.timings) == dict(ref.timings)
    assert c.clock_ratio == 8 and c.end == "accepted"


@pytest.mark.parametrize("edit, field", [
    (("    RowPolicy:\n      impl: OpenRowPolicy\n", "    RowPolicy:\n      impl: OpenRowPolicy\n      cap: 4\n"), "RowPolicy.cap"),
    (("impl: FRFCFS", "impl: BLISS"), "Scheduler.impl"),
    (("preset: HBM3_2Gbps", "preset: HBM3_9Gbps"), "timing.preset"),
    (("      channel: 8\n", "      channel: 8\n      rank: 2\n"), "org.rank"),
    (("    plugins:\n", "    plugins:\n      - ControllerPlugin:\n          impl: CommandCounter\n"),
     "plugins[0].ControllerPlugin.path"),
    (("    plugins:\n", "    plugins:\n      - ControllerPlugin:\n          impl: RFMManager\n"),
     "plugins[0].ControllerPlugin.impl = 'RFMManager'"),
])
def test_unsupported_ramulator_keys_are_named(tmp_path, edit, field):
    p = tmp_path / "r.yaml"
    p.write_text(RAMULATOR_YAML.replace(*edit))
    with pytest.raises(ConfigError, match=re.escape(field)):
        get_config(p)


# ---------------------------------------------------------------- bad input on the CLI
def _cli(args, capsys):
    code = main(args)
    return code, capsys.readouterr()


@pytest.mark.parametrize("content, expect", [
    ("LD 0x40\nLOAD 0x80\n", ":2: 'LOAD 0x80'"),
    ("LD 0x40\nLD\n", ":2: 'LD'"),
    ("ST 0xzz\n", ":1: 'ST 0xzz'"),
    ("LD 0xffffffffffff\n", "below the capacity"),
])
def test_bad_trace_lines_exit_2(tmp_path, capsys, content, expect):
    p = tmp_path / "t.trace"
    p.write_text(content)
    code, out = _cli(["dram", "run", str(p), "--config", "hbm3-6400"], capsys)
    assert code == 2 and expect in out.err and "Traceback" not in out.err


@pytest.mark.parametrize("toml, expect", [
    ('standard = "hbm3"\n[org]\npreset = "HBM3_16Gb_8hi"\n[timing]\npreset = "HBM3_7000"\n', "timing.preset = 'HBM3_7000'"),
    ('base = "hbm3-6400"\n[timing]\nnRCDRD = -3\n', "timing.nRCDRD = -3"),
    ('standard = "hbm3"\n[org]\npreset = "HBM3_16Gb_8hi"\n[timing]\nnCL = 20\n', "timing.rate = None"),
    ('base = "hbm3-6400"\n[org]\nrow = 1000\n', "org.row = 1000"),
    ('base = "hbm3-6400"\n[controller]\nmapper = "RoRaBaChCo"\n', "mapper = 'RoRaBaChCo'"),
])
def test_bad_configs_exit_2(tmp_path, capsys, toml, expect):
    p = tmp_path / "c.toml"
    p.write_text(toml)
    code, out = _cli(["dram", "run", "synthetic:random:10", "--config", str(p)], capsys)
    assert code == 2 and expect in out.err, out.err


def test_unknown_preset_suggests_names(capsys):
    code, out = _cli(["dram", "run", "synthetic:random:10", "--config", "hbm3e-800"], capsys)
    assert code == 2 and "hbm3e-8000" in out.err


def test_cli_json_and_command_log(tmp_path, capsys):
    log = tmp_path / "cmds.csv"
    code, out = _cli(["dram", "run", "synthetic:stream:2000", "--config", "hbm3-6400", "--json",
                      "--log-commands", str(log)], capsys)
    assert code == 0
    d = json.loads(out.out)
    for k in ("cycles", "reads", "writes", "row_hits", "row_misses", "row_conflicts", "avg_read_latency_cycles"):
        assert k in d
    lines = log.read_text().splitlines()
    timings = json.loads(lines[0][len("# timings: "):])
    for k in ("nBL", "nCL", "nCWL", "nRCDRD", "nRCDWR", "nRP", "nRAS", "nRC", "nWR", "nRTPS", "nRTPL",
              "nCCDS", "nCCDL", "nRRDS", "nRRDL", "nWTRS", "nWTRL", "nRTW", "nFAW", "nRFC", "nREFI"):
        assert isinstance(timings[k], int)
    assert lines[2] == "cycle,channel,pseudo_channel,sid,bankgroup,bank,row,column,command"
    assert len(lines) - 3 == d["commands"]


def test_every_builtin_config_runs():
    for name, make in BUILTIN_CONFIGS.items():
        c = make()
        from sievesim.dram.synthetic import make_trace
        r = simulate(c, make_trace("random", 500, c, seed=1))
        assert r.reads + r.writes == 500 and r.cycles > 0


@pytest.mark.parametrize("name", ["hbm3-6400", "ramulator2-hbm2"])
@pytest.mark.parametrize("policy", ["open", "closed"])
def test_pure_python_reference_gives_the_same_cycles(name, policy):
    from sievesim.dram.reference import reference_cycles
    from sievesim.dram.synthetic import make_trace
    c = get_config(name).replace(row_policy=policy, row_policy_cap=2, clock_ratio=4, end="completed")
    t = make_trace("hotrow", 600, c, seed=5, write_fraction=0.3)
    assert reference_cycles(c, t) == simulate(c, t).cycles


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.booleans(), st.integers(0, 2**60), st.sampled_from(["hex", "HEX", "dec"])),
                     min_size=0, max_size=50),
       crlf=st.booleans(), final_newline=st.booleans())
def test_compiled_trace_parser_reads_what_the_format_says(tmp_path, rows, crlf, final_newline):
    from sievesim.dram.traces import read_loadstore_trace
    fmt = {"hex": lambda v: f"0x{v:x}", "HEX": lambda v: f"0X{v:X}", "dec": str}
    text = ("\r\n" if crlf else "\n").join(f"{'ST' if w else 'LD'} {fmt[f](v)}" for w, v, f in rows)
    if rows and final_newline:
        text += "\r\n" if crlf else "\n"
    p = tmp_path / "t.trace"
    p.write_bytes(text.encode())
    t = read_loadstore_trace(p)
    assert list(t.addresses) == [v for _, v, _ in rows]
    assert list(t.is_write) == [w for w, _, _ in rows]


def test_read_of_a_pending_write_is_forwarded_and_only_then():
    # a write waits in the write buffer (read mode, reads queued); a read of its address is answered
    # from it at once; a read of another address, and a read after the write has left, are not
    c = get_config("ramulator2-hbm3")
    tx = c.tx_bytes
    a, b = 0, 1 << 20
    t = RequestTrace.from_arrays([0, 0, 0, 0, 5000], [b, a, a, b + tx, a], [False, True, False, False, False])
    r = simulate(c.replace(end="completed"), t)
    fwd = r.request_arrays["forwarded"].tolist()
    assert fwd == [0, 0, 1, 0, 0]
    assert r.forwarded_reads == 1
    dep, arr = r.request_arrays["depart"], r.request_arrays["arrive"]
    assert dep[2] == arr[2] + 1


@pytest.mark.parametrize("ratio", [65, 100])
def test_clock_ratio_the_engine_cannot_track_is_a_named_error(capsys, ratio):
    with pytest.raises(ConfigError, match="clock_ratio"):
        get_config("hbm3-6400").replace(clock_ratio=ratio)
    code, out = _cli(["dram", "run", "synthetic:random:10", "--config", "hbm3-6400", "--clock-ratio", str(ratio)],
                     capsys)
    assert code == 2 and f"--clock-ratio = {ratio}" in out.err and "Traceback" not in out.err


@pytest.mark.parametrize("name, policy, expect", [
    ("ramulator2-hbm3", "open", {"ACT", "PRE", "RD", "WR"}),          # no refresh on the mirror
    # refresh closes PIM rows too (PREAB), though no PIM program runs
    ("hbm3-6400", "open", {"ACT", "PRE", "PREA", "RD", "WR", "REFab", "PREAB"}),
    ("hbm3-6400", "closed", {"ACT", "PRE", "PREA", "RD", "WR", "REFab", "PREAB"}),
])
def test_issue_rows_keep_only_commands_the_run_can_issue(name, policy, expect):
    from sievesim._core import Engine
    from sievesim.dram.engine import _to_vectors
    from sievesim.dram.synthetic import make_trace
    c = get_config(name).replace(row_policy=policy)
    spec = c.compile()
    t = make_trace("random", 10, c, seed=1)
    vecs, keys = _to_vectors(c, t)
    e = Engine(spec, vecs, keys, t.is_write, t.arrival)
    assert {spec["command_names"][k] for k in e.live_commands()} == expect
    e.run()
    with pytest.raises(RuntimeError, match="before the run"):
        e.set_issue_rows(())
