"""Output and result files under hostile conditions (issue 69, items 3 and 5): outputs written
atomically (a full disk leaves an earlier file as it was), a sweep directory locked against a
second writer, ``results.jsonl`` read one bounded line at a time with a warning for every line that
is not a point, and a recorded probe or point whose fields have the wrong type run again, never
believed."""
from __future__ import annotations

import fcntl
import json
import os
import resource
import signal
import sys
import tracemalloc
import warnings
from typing import Any

import pytest

from sievesim.cli import main
from sievesim.grid import SERVE, expand_grid
from sievesim.results import LOCK_FILE, MAX_LINE_BYTES, read_results
from sievesim.serve_sweep import MAX_RATE_JSON, max_rate_search
from sievesim.sweep import RESULTS_JSONL, run_grid

SERVE_ARGS = ["serve", "--model", "qwen3-30b-a3b", "--rate", "5", "--requests", "3", "--prompt-tokens", "8",
              "--output-tokens", "2", "--max-batch", "2", "--token-budget", "32", "--max-model-len", "64",
              "--error-samples", "0", "--gpu-model", "roofline", "--policy", "sieve"]


def _main_with_file_size_limit(argv: list[str], limit: int) -> tuple[int, str]:
    """``main(argv)`` in a forked child whose files may not grow past ``limit`` bytes (a full disk:
    writes past it fail with EFBIG); its exit status and stderr."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            sys.stderr = os.fdopen(w, "w")
            sys.stdout = open(os.devnull, "w")      # the printed rows are not the file under test
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
            try:
                rc = main(argv)
            except BaseException:  # noqa: BLE001 - a traceback is a failure the parent sees
                import traceback
                traceback.print_exc()
                rc = 99
            sys.stderr.flush()
        finally:
            os._exit(rc if isinstance(rc, int) else 98)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        err = fh.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), err


@pytest.mark.parametrize("option", ["--requests-csv", "--timeline-csv", "--plot"])
def test_a_full_disk_leaves_an_earlier_serve_output_as_it_was(tmp_path, option):
    target = tmp_path / ("out.png" if option == "--plot" else "out.csv")
    target.write_bytes(b"EARLIER CONTENT\n" * 8)
    rc, err = _main_with_file_size_limit(SERVE_ARGS + [option, str(target)], 200)
    assert rc == 2 and "Traceback" not in err and str(target) in err and "unchanged" in err, err
    assert target.read_bytes() == b"EARLIER CONTENT\n" * 8
    assert [p.name for p in tmp_path.iterdir()] == [target.name]        # no temporary file left behind


def _rows_file(tmp_path, n: int = 3) -> Any:
    f = tmp_path / "results.jsonl"
    f.write_text("".join(json.dumps({"point_id": f"p{i}", "policy": "sieve", "rate": i + 1.0,
                                     "goodput_requests_per_s": 0.5 * i}) + "\n" for i in range(n)))
    return f


def test_plot_out_over_a_full_disk_leaves_the_earlier_picture(tmp_path):
    src = _rows_file(tmp_path)
    target = tmp_path / "p.png"
    target.write_bytes(b"EARLIER")
    rc, err = _main_with_file_size_limit(["plot", str(src), "--out", str(target)], 300)
    assert rc == 2 and "Traceback" not in err and "p.png" in err, err
    assert target.read_bytes() == b"EARLIER"


def test_a_second_sweep_into_a_directory_in_use_is_refused_naming_it(tmp_path, capsys):
    out = tmp_path / "sweep"
    out.mkdir()
    args = ["sweep", "--model", "qwen3-30b-a3b", "--point", "estimate", "--jobs", "1", "--quiet", "--batch", "1,2",
            "--out", str(out)]
    fd = os.open(out / LOCK_FILE, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)           # another process's sweep, as the kernel sees it
        os.pwrite(fd, b"4242\n", 0)
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(out) in err and "another sweep is writing" in err and "4242" in err, err
        assert not (out / RESULTS_JSONL).exists()
    finally:
        os.close(fd)
    assert main(args) == 0
    assert len(read_results(out)) == 2


def test_results_padded_with_nul_bytes_are_read_in_bounded_memory_with_a_warning(tmp_path):
    f = _rows_file(tmp_path)
    with open(f, "ab") as fh:
        fh.write(b"\x00" * (3 * MAX_LINE_BYTES) + b"\n")        # one line far past the bound
        fh.write(json.dumps({"point_id": "late", "rate": 9.0, "goodput_requests_per_s": 1.0}).encode() + b"\n")
        fh.write(b"\x00" * (24 * 2**20))                       # padding without a newline
    tracemalloc.start()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rows = read_results(f)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [r["point_id"] for r in rows] == ["p0", "p1", "p2", "late"]
    assert peak < 8 * MAX_LINE_BYTES, peak        # the file is 28 MiB: never held whole
    said = [str(w.message) for w in caught]
    assert any(f"{f}: line 4 is longer than {MAX_LINE_BYTES} bytes" in s for s in said), said
    assert any(f"{f}: line 6 has no newline at its end" in s for s in said), said


@pytest.mark.parametrize("line, problem", [
    (b"[1, 2]", "JSON but not an object (a list)"), (b"5", "JSON but not an object (a int)"),
    (b"null", "JSON but not an object (a null)"), (b"\x00\x00\x00", "not JSON (a NUL byte at column 1)"),
    (b'{"point_id": "x"\x00}', "not JSON (a NUL byte at column 17)"),
])
def test_a_line_that_is_not_a_point_is_skipped_with_a_warning_naming_file_and_line(tmp_path, capsys, line, problem):
    f = _rows_file(tmp_path, 2)
    with open(f, "ab") as fh:
        fh.write(line + b"\n")
    with pytest.warns(UserWarning, match=f"line 3 is {problem.replace('(', '[(]').replace(')', '[)]')}"):
        assert len(read_results(f)) == 2
    assert main(["plot", str(f), "--out", str(tmp_path / "p.png")]) == 0
    assert f"{f}: line 3 is {problem}" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------
# resumed records: a probe whose fields have the wrong type is served again


def probe(settings: dict[str, Any]) -> dict[str, Any]:
    """A stand-in for serve_point: the SLOs are met up to 120 requests/s."""
    met = settings["rate"] <= 120
    return {"requests_served": 30, "slo_attainment": 1.0 if met else 0.0, "meets_slos": met,
            "goodput_requests_per_s": settings["rate"] if met else 0.0, "ttft_p90_s": 0.1, "tpot_p90_s": 0.001}


class _Counted:
    def __init__(self) -> None:
        self.calls: list[float] = []
        self.__qualname__ = self.__name__ = "probe"
        self.__module__ = probe.__module__

    def __call__(self, settings: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(settings["rate"])
        return probe(settings)


GROUP = expand_grid([{"model": ["qwen3-30b-a3b"], "requests": [30]}], SERVE)


@pytest.mark.parametrize("damage", [
    {"meets_slos": "false"}, {"meets_slos": None}, {"meets_slos": 0}, {"meets_slos": ...},
    {"slo_attainment": "1"}, {"goodput_requests_per_s": float("inf")}, {"requests_served": None},
    {"ttft_p90_s": -1.0}, {"rate": 999.0},
])
def test_a_damaged_probe_is_served_again_with_a_warning_never_believed(tmp_path, damage):
    out = tmp_path / "search"
    ref = max_rate_search(GROUP, out, lo=20, hi=200, steps=2, point_fn=_Counted())
    assert (ref[0]["max_rate"], ref[0]["answer"]) == (110.0, "between")
    jsonl = out / RESULTS_JSONL
    lines = jsonl.read_text().splitlines()
    at = next(i for i, s in enumerate(lines) if json.loads(s)["rate"] == 200.0)
    row = json.loads(lines[at])
    for k, v in damage.items():
        row.pop(k) if v is ... else row.__setitem__(k, v)
    lines[at] = json.dumps(row)
    jsonl.write_text("\n".join(lines) + "\n")
    again = _Counted()
    with pytest.warns(UserWarning, match=f"{jsonl}: line {at + 1} is .*; skipped; its point runs again"):
        records = max_rate_search(GROUP, out, lo=20, hi=200, steps=2, point_fn=again)
    assert again.calls == [200.0]
    assert records == ref
    assert json.loads((out / MAX_RATE_JSON).read_text()) == ref


def test_a_step_row_whose_setting_is_not_its_points_runs_again(tmp_path):
    points = expand_grid([{"model": ["qwen3-30b-a3b"], "batch": [1, 2]}])
    fn = _Step()
    run_grid(points, tmp_path, point_fn=fn, progress=None)
    jsonl = tmp_path / RESULTS_JSONL
    rows = [json.loads(s) for s in jsonl.read_text().splitlines()]
    rows[1]["batch"] = 7          # its point_id still says batch 2
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    again = _Step()
    with pytest.warns(UserWarning, match="line 2 is a row whose batch"):
        summary = run_grid(points, tmp_path, point_fn=again, progress=None)
    assert (summary.skipped, summary.ran) == (1, 1) and again.calls == [2]


class _Step:
    def __init__(self) -> None:
        self.calls: list[int] = []
        self.__qualname__ = self.__name__ = "step"
        self.__module__ = __name__

    def __call__(self, settings: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(settings["batch"])
        return {"step_time_s": 0.001 * settings["batch"]}


def test_a_search_through_a_process_pool_keeps_its_own_directory_lock(tmp_path):
    """Forked workers share the lock's descriptor: they close their copies, so the search's next
    round can take the lock again (the pool outlives each round)."""
    import concurrent.futures as cf
    import multiprocessing

    with cf.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        records = max_rate_search(GROUP, tmp_path / "s", lo=20, hi=200, steps=2, point_fn=probe, executor=pool)
    assert (records[0]["max_rate"], records[0]["answer"]) == (110.0, "between")


# ------------------------------------------------------------------------------------------------
# --max-work stops a serving sweep (nothing estimates a serving point before it runs)


def slow_probe(settings: dict[str, Any]) -> dict[str, Any]:
    import time
    time.sleep(0.15)
    return probe(settings)


def test_a_serve_sweep_past_the_work_limit_stops_and_resumes(tmp_path, capsys):
    from sievesim._validate import work_limit
    from sievesim.errors import ConfigError

    points = expand_grid([{"model": ["qwen3-30b-a3b"], "requests": [30], "rate": [float(r) for r in range(1, 9)]}],
                         SERVE)
    with work_limit(0.4), pytest.raises(ConfigError, match=r"--max-work = '0.4 s': expected more time for this "
                                                           r"sweep: .* of its 8 points are done"):
        run_grid(points, tmp_path, point_fn=slow_probe, progress=None, kind=SERVE)
    done = len(read_results(tmp_path))
    assert 1 <= done < 8
    summary = run_grid(points, tmp_path, point_fn=slow_probe, progress=None, kind=SERVE)
    assert (summary.skipped, summary.ran) == (done, 8 - done)


@pytest.mark.parametrize("points, err, needle", [
    ([{"model": "qwen3-30b-a3b"}], "ConfigError", "batch = None"), ([{"batch": 4}], "ConfigError", "model = None"),
    ([{"model": "qwen3-30b-a3b", "batch": "4"}], "ConfigError", "batch = '4'"),
    ([{"model": "qwen3-30b-a3b", "batch": 4, "bogus": 1}], "ConfigError", "bogus"),
    ([None], "TypeError", r"points\[0\] = None"), (None, "TypeError", "points = None"), (5, "TypeError", "points = 5"),
])
def test_check_points_with_partial_settings_names_what_is_wrong(points, err, needle):
    from sievesim.sweep import check_points
    with pytest.raises(Exception, match=needle) as info:
        check_points(points)
    assert type(info.value).__name__ == err
    check_points([{"model": "qwen3-30b-a3b", "batch": 4}])       # the rest from the defaults
