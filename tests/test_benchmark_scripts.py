"""The whole-process measurement scripts the DRAM docs cite run and print their tables (tiny sizes)."""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest
from conftest import load_script

BENCH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


def _run(*argv: str) -> str:
    done = subprocess.run([sys.executable, str(BENCH / argv[0]), *argv[1:]], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.skipif(not (BENCH / "process_floor.py").exists(), reason="benchmarks/ not in this checkout")
def test_process_floor_prints_every_row():
    out = _run("process_floor.py", "--repeat", "1")
    for row in ("python -c pass", "sievesim dram run, 1000 requests", "as python -m sievesim",
                "with the interpreter's teardown"):
        assert re.search(rf"\| [^|]*{re.escape(row)}[^|]* \| \d+ \| \d+ \| [\d.]+ \|", out), (row, out)


@pytest.mark.skipif(not (BENCH / "startup_beside.py").exists(), reason="benchmarks/ not in this checkout")
def test_startup_beside_prints_the_three_cases():
    out = _run("startup_beside.py", "--repeat", "1", "--requests", "3000")
    for mode in ("alone", "reader", "hashing"):
        assert re.search(rf"\| {mode} \| [\d.]+ \| [\d.]+ \|", out), out


@pytest.mark.skipif(not (BENCH / "split_phases.py").exists(), reason="benchmarks/ not in this checkout")
def test_split_phases_prints_every_phase(tmp_path):
    from sievesim.dram.config import get_config
    from sievesim.dram.synthetic import make_trace
    from sievesim.dram.traces import write_loadstore_trace

    t = make_trace("random", 3000, get_config("ramulator2-hbm3"), seed=1, write_fraction=0.3)
    write_loadstore_trace(tmp_path / "t.trace", t.addresses, t.is_write)
    out = _run("split_phases.py", str(tmp_path / "t.trace"), "--config", "ramulator2-hbm3", "--repeat", "1",
               "--threads", "2")
    for row in ("imports", "set-up", "runs", "run 0: taking pieces", "run 1: the rest", "total"):
        assert re.search(rf"\| {re.escape(row)} \| [\d.]+ \|", out), (row, out)


@pytest.mark.skipif(not (BENCH / "queue_occupancy.py").exists(), reason="benchmarks/ not in this checkout")
def test_queue_occupancy_fills_the_controllers_faster_at_a_higher_clock_ratio():
    out = _run("queue_occupancy.py", "--requests", "3000", "--clock-ratios", "1,8")
    rows = {}
    for ratio in (1, 8):
        m = re.search(rf"^\| {ratio} \| 3000 \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| 32 \| ([\d.]+) \|$",
                      out, re.M)
        assert m, out
        rows[ratio] = [float(x) for x in m.groups()]
    for per_request, held, reads, writes, alone in rows.values():
        assert 1 <= per_request <= 4
        assert abs(held - (reads + writes)) <= 0.011 and reads > 0 and writes > 0
        assert 0 <= alone <= 100
    # the frontend offers 8 requests per memory cycle instead of 1: the queues fill, and a
    # request is less often alone in its controller
    assert rows[8][1] > 4 * rows[1][1]
    assert rows[8][4] <= rows[1][4]


def _served_alone(arrival, ctrl_of_request) -> float:
    import numpy as np

    from sievesim.dram.config import get_config
    from sievesim.dram.traces import RequestTrace

    mod = load_script(BENCH / "queue_occupancy.py")
    config = get_config("ramulator2-hbm3")
    levels = config.standard.levels
    vecs = np.zeros((len(arrival), len(levels)), dtype=np.int32)
    vecs[:, levels.index("channel")] = ctrl_of_request
    vecs[:, levels.index("row")] = np.arange(len(arrival))      # a new row each time: misses
    trace = RequestTrace(is_write=np.zeros(len(arrival), dtype=bool), arrival=np.asarray(arrival, dtype=np.int64),
                         addr_vectors=vecs)
    return mod.occupancy(config, trace)["served alone (%)"]


@pytest.mark.skipif(not (BENCH / "queue_occupancy.py").exists(), reason="benchmarks/ not in this checkout")
def test_queue_occupancy_counts_a_request_alone_only_with_its_controller_to_itself():
    # far apart: each is served before the next arrives
    assert _served_alone([0, 1000, 2000, 3000], [0, 0, 0, 0]) == 100.0
    # two at once for one controller: neither is alone; a third, later, for another controller is
    assert _served_alone([0, 0, 1000], [0, 0, 1]) == pytest.approx(100 / 3)
    # the same two on different controllers: both alone
    assert _served_alone([0, 0], [0, 1]) == 100.0


@pytest.mark.skipif(not (BENCH / "profile_engine.py").exists(), reason="benchmarks/ not in this checkout")
def test_profile_engine_times_the_run_it_profiles():
    plain = _run("profile_engine.py", "random", "8", "2000")
    timed = _run("profile_engine.py", "random", "8", "2000", "--time", "2")
    # the timed runs simulate what the profiled run does: same cycles and commands
    assert timed.startswith(plain.strip() + "; run "), (plain, timed)
    m = re.search(r"; run ([\d.e-]+) s \(fastest of 2\), ([\d.]+) ns per request$", timed.strip())
    assert m, timed
    seconds, per_request_ns = float(m.group(1)), float(m.group(2))
    assert seconds > 0 and abs(per_request_ns - seconds / 2000 * 1e9) <= 0.001 * per_request_ns + 0.05


@pytest.mark.skipif(not (BENCH / "profile_engine.py").exists(), reason="benchmarks/ not in this checkout")
@pytest.mark.parametrize("given", [["x"], ["0"], []])
def test_profile_engine_refuses_a_bad_number_of_timed_runs(given):
    done = subprocess.run([sys.executable, str(BENCH / "profile_engine.py"), "random", "8", "200", "--time", *given],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "--time: expected a number of runs >= 1, got" in done.stderr
    assert (repr(given[0]) if given else "'nothing'") in done.stderr


def _side_by_side_row(tmp_path: pathlib.Path, ramulator: pathlib.Path) -> tuple[dict[str, str], str]:
    """The one row of a tiny whole-process side by side, by column name, and the script's output."""
    out = _run("ramulator_side_by_side.py", "--whole-process", "--ramulator", str(ramulator),
               "--requests", "3000", "--kinds", "random", "--clock-ratios", "1", "--devices", "HBM3",
               "--channels", "4", "--repeat", "1", "--workdir", str(tmp_path))
    header, rule, row = [line for line in out.splitlines() if line.startswith("|")]
    names = [c.strip() for c in header.strip("|").split("|")]
    assert len(names) == len(rule.strip("|").split("|")) == len(row.strip("|").split("|")), out
    return dict(zip(names, (c.strip() for c in row.strip("|").split("|")))), out


@pytest.mark.skipif(not (BENCH / "ramulator_side_by_side.py").exists(), reason="benchmarks/ not in this checkout")
def test_side_by_side_whole_process_without_ramulator_prints_its_row(tmp_path):
    cells, out = _side_by_side_row(tmp_path, tmp_path / "no-such-binary")
    assert cells["Ramulator s"] == "-" and cells["cycles identical"] == "yes", out
    # without a Ramulator binary every ratio to it is left blank, not made up
    assert cells["Ramulator / sievesim default"] == cells["Ramulator / simulating"] == "-", out
    whole = float(cells["sievesim default s (threads)"].split()[0])
    simulating = float(cells["of it simulating s"])
    # the simulation is a part of the whole process
    assert 0 < simulating < whole, out


@pytest.mark.skipif(not (BENCH / "ramulator_side_by_side.py").exists(), reason="benchmarks/ not in this checkout")
def test_side_by_side_whole_process_ratios_are_ramulators_time_over_each_column(tmp_path):
    # a stand-in for the Ramulator binary: a process of a known length that reports some cycles
    fake = tmp_path / "fake-ramulator"
    fake.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(0.4)\nprint('memory_system_cycles: 1')\n")
    fake.chmod(0o755)
    cells, out = _side_by_side_row(tmp_path, fake)
    ram = float(cells["Ramulator s"])
    assert ram >= 0.4 and cells["cycles identical"] == "NO", out
    for column, divisor in (("Ramulator / sievesim default", cells["sievesim default s (threads)"].split()[0]),
                            ("Ramulator / sievesim 1 thread", cells["sievesim `--threads 1` s"]),
                            ("Ramulator / simulating", cells["of it simulating s"])):
        ratio, d = float(cells[column].rstrip("x")), float(divisor)
        # printed to 0.1x from times printed to 0.01 s (0.001 s for the simulation)
        slack = 0.05 + (ram / d) * (0.005 / ram + (0.0005 if column.endswith("simulating") else 0.005) / d)
        assert abs(ratio - ram / d) <= slack, (column, out)


@pytest.mark.skipif(not (BENCH / "profile_engine.py").exists(), reason="benchmarks/ not in this checkout")
def test_profile_engine_split_runs_simulate_the_whole_run():
    whole = _run("profile_engine.py", "random", "1", "3000", "--time", "1")
    pattern = r"^random clock ratio 1: 3000 requests, (\d+) cycles, (\d+) commands; run [\d.e-]+ s{} \(fastest of 1\)"
    m = re.match(pattern.format(""), whole)
    assert m, whole
    for runs in ("2", "8"):
        split = _run("profile_engine.py", "random", "1", "3000", "--time", "1", "--split", runs)
        # the runs together issue every command of the whole run, and stop at its cycle
        assert re.match(pattern.format(f" in {runs} runs one after another"), split).groups() == m.groups(), split


@pytest.mark.skipif(not (BENCH / "profile_engine.py").exists(), reason="benchmarks/ not in this checkout")
@pytest.mark.parametrize("given", ["0", "9", "x"])
def test_profile_engine_refuses_a_split_beyond_the_controllers(given):
    done = subprocess.run([sys.executable, str(BENCH / "profile_engine.py"), "random", "1", "200", "--time", "1",
                           "--split", given], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"--split: expected a number of runs from 1 to 8 (the controllers), got {given!r}" in done.stderr


@pytest.mark.skipif(not (BENCH / "profile_engine.py").exists(), reason="benchmarks/ not in this checkout")
def test_profile_engine_refuses_a_split_it_would_not_time():
    done = subprocess.run([sys.executable, str(BENCH / "profile_engine.py"), "random", "1", "200", "--split", "2"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "--split: expected with --time K" in done.stderr and done.stdout == ""


@pytest.mark.skipif(not (BENCH / "profile_engine.py").exists(), reason="benchmarks/ not in this checkout")
def test_profile_engine_times_one_run_of_a_two_way_split():
    pattern = r"^random clock ratio 1: 3000 requests, (\d+) cycles, (\d+) commands; run [\d.e-]+ s{} \(fastest of 1\)"
    whole = re.match(pattern.format(""), _run("profile_engine.py", "random", "1", "3000", "--time", "1"))
    half = re.match(pattern.format(r" \(--own half\)"),
                    _run("profile_engine.py", "random", "1", "3000", "--time", "1", "--own", "half"))
    none = re.match(pattern.format(r" \(--own none\)"),
                    _run("profile_engine.py", "random", "1", "3000", "--time", "1", "--own", "none"))
    assert whole and half and none
    # the timed half issues the commands of half the controllers, the untimed one the same
    plain = _run("profile_engine.py", "random", "1", "3000", "--own", "half")
    assert plain.strip() == f"random clock ratio 1: 3000 requests, {half.group(1)} cycles, {half.group(2)} commands"
    assert 0 < int(half.group(2)) < int(whole.group(2)) and int(none.group(2)) == 0
    # every run walks the whole frontend: the same cycles
    assert whole.group(1) == half.group(1) == none.group(1)


@pytest.mark.skipif(not (BENCH / "profile_engine.py").exists(), reason="benchmarks/ not in this checkout")
@pytest.mark.parametrize(("given", "message"), [
    (["--own", "x"], "--own: expected half or none, got 'x'"),
    (["--own"], "--own: expected half or none, got 'nothing'"),
    (["--time", "1", "--split", "2", "--own", "half"], "--own: expected without --split"),
    (["--setup", "--own", "none"], "--own: expected without --setup"),
])
def test_profile_engine_refuses_an_own_it_would_not_run(given, message):
    done = subprocess.run([sys.executable, str(BENCH / "profile_engine.py"), "random", "1", "200", *given],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert message in done.stderr and done.stdout == ""


@pytest.mark.skipif(not (BENCH / "profile_engine.py").exists(), reason="benchmarks/ not in this checkout")
@pytest.mark.parametrize("given", [["--own", "half"], ["--time", "1", "--own", "half"], ["--time", "1", "--split", "2"]])
def test_profile_engine_refuses_a_run_of_a_split_that_met_a_full_queue(given):
    # at clock ratio 8 the queues fill within a few thousand requests: a run of a split stops there
    done = subprocess.run([sys.executable, str(BENCH / "profile_engine.py"), "random", "8", "20000", *given],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    option = "--own" if "--own" in given else "--split"
    assert f"{option}: a queue filled and the run stopped there" in done.stderr and done.stdout == ""
