"""Fuzzing the newest surfaces of the input contract (issue 69): one generator per class of failure.

* trace dialects: request traces in every accepted column dialect (CSV or JSON lines, any alias
  in any spelling, extra text columns, any line end) with any value in any field;
* serving API types: ``Requests`` made from arrays of any dtype and value;
* serve-sweep damage: a recorded max-rate search whose ``results.jsonl`` is damaged line by line
  (cut, NUL bytes, garbage, a field of the wrong type or missing), then resumed;
* plot text and numbers: titles, policy and column names with mathtext, any float on the axes;
* outputs on a full disk: any earlier content, any new content, any file-size limit.

Each case keeps the contract: it succeeds with what the invariants say, or raises one of the
project's errors (a ``SievesimError``; ``TypeError`` for a wrong type from Python) whose message
names what is wrong; never another exception, never a hang. Kept small for CI (a few seconds);
``pytest -m fuzz_long tests/test_fuzz_serving.py`` runs many more examples with fresh seeds.
"""
from __future__ import annotations

import json
import math
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sievesim.errors import SievesimError, TraceError
from sievesim.grid import SERVE, expand_grid
from sievesim.serving.tracefile import (ARRIVAL_COLUMNS, MAX_ARRIVAL_S, MAX_TOKENS, OUTPUT_COLUMNS,
                                        PROMPT_COLUMNS)
from sievesim.serving.workload import Requests, read_trace

EXAMPLES, EXAMPLES_LONG = 120, 3000
_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]
_SHORT = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=_HEALTH)
_LONG = settings(max_examples=EXAMPLES_LONG, deadline=None, suppress_health_check=_HEALTH, derandomize=False)


# ------------------------------------------------------------------------------------------------
# trace dialects


def _spelling(name: str) -> st.SearchStrategy[str]:
    """``name`` as a trace may write it: as is, Title Case with spaces, camelCase, dashes, upper."""
    words = name.split("_")
    return st.sampled_from([name, " ".join(w.title() for w in words), words[0] + "".join(w.title() for w in words[1:]),
                            "-".join(words), name.upper(), f" {name} "])


_NUMBERS = st.one_of(
    st.integers(-5, 5000), st.integers(min_value=-(10 ** 30), max_value=10 ** 30),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([MAX_TOKENS, MAX_TOKENS + 1, 2 ** 63, 2 ** 64]),
    st.sampled_from(["1e30", "9.3e18", "1_000", "0x10", " 12 ", "12.0", "12.5", "", "nan", "-0", "1" * 400,
                     "2023-11-16 18:15:46.6805900", "2023-02-30 10:00:00", "2023-11-16 25:00:00",
                     "2023-11-16T18:15:46Z", "2023-11-16 18:15:46+25:00", "\x00", "\u0663", "true"]),
    st.text(max_size=12))
_VALUES = st.one_of(_NUMBERS, st.none(), st.booleans(), st.lists(st.integers(), max_size=3))


@st.composite
def traces(draw: Any) -> tuple[str, bytes]:
    """(suffix, bytes) of a request trace in some dialect, mostly well formed, with damage drawn in."""
    cols = [draw(st.sampled_from(list(ARRIVAL_COLUMNS))), draw(st.sampled_from(PROMPT_COLUMNS)),
            draw(st.sampled_from(OUTPUT_COLUMNS))]
    if draw(st.booleans()):    # a second name of one field, or the same name twice
        cols.append(draw(st.sampled_from(cols + list(PROMPT_COLUMNS) + list(ARRIVAL_COLUMNS))))
    if draw(st.booleans()):
        cols.append("text")
    names = [draw(_spelling(c)) for c in cols]
    n = draw(st.integers(0, 6))
    rows = []
    t = draw(st.integers(0, 10 ** 6))
    for _ in range(n):
        t += draw(st.integers(-1, 3000))
        row = []
        for c in cols:
            if c == "text":
                row.append(draw(st.text(max_size=20)))
            elif draw(st.integers(0, 5)) == 0:
                row.append(draw(_VALUES))
            else:
                row.append(t if c in ARRIVAL_COLUMNS else draw(st.integers(1, 4096)))
        rows.append(row)
    end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    if draw(st.booleans()):
        lines = [json.dumps(dict(zip(names, row))) for row in rows]
        if draw(st.booleans()) and lines:
            i = draw(st.integers(0, len(lines) - 1))
            lines[i] = lines[i][:draw(st.integers(0, len(lines[i])))]
        return ".jsonl", end.join(lines).encode("utf-8", "surrogatepass") if lines else b""
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator=end)
    w.writerow(names)
    for row in rows:
        w.writerow(["" if v is None else v for v in row])
    return ".csv", buf.getvalue().encode("utf-8", "surrogatepass")


def _check_trace(case: tuple[str, bytes]) -> None:
    suffix, data = case
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / f"t{suffix}"
        f.write_bytes(data)
        t0 = time.perf_counter()
        try:
            q = read_trace(str(f))
        except SievesimError as exc:
            msg = str(exc)
            assert msg.startswith(str(f)) and "\n" not in msg and len(msg) < 1000, msg
            assert isinstance(exc, TraceError) or "UTF-8" in msg, msg
            return
        finally:
            assert time.perf_counter() - t0 < 5
    assert len(q) >= 1 and q.arrival_s[0] == 0.0
    assert np.all(np.isfinite(q.arrival_s)) and np.all(np.diff(q.arrival_s) >= 0) and q.arrival_s[-1] <= MAX_ARRIVAL_S
    for a in (q.prompt_tokens, q.output_tokens):
        assert a.dtype == np.int64 and a.min() >= 1 and a.max() <= MAX_TOKENS


@_SHORT
@given(case=traces())
def test_trace_dialects(case):
    _check_trace(case)


@pytest.fixture
def long_profile(request):
    """Skip unless the long profile was asked for (``pytest -m fuzz_long``)."""
    if "fuzz_long" not in (request.config.getoption("markexpr") or "").replace("not fuzz_long", ""):
        pytest.skip("long fuzz profile: run with -m fuzz_long")


@pytest.mark.fuzz_long
@_LONG
@given(case=traces())
def test_trace_dialects_long(long_profile, case):
    _check_trace(case)


# ------------------------------------------------------------------------------------------------
# serving API types

_ARRAYS = st.one_of(
    st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10 ** 7)), max_size=5),
    st.lists(st.integers(min_value=-(2 ** 63), max_value=2 ** 63 - 1), max_size=5),
    st.sampled_from([None, "trace.csv", 5, [[1, 2]], [True, False], ["a"], []]))


def _check_requests(arrays: list[Any]) -> None:
    try:
        parts = [a if a is None or isinstance(a, (str, int)) else np.asarray(a) for a in arrays]
    except (ValueError, OverflowError):
        return
    try:
        q = Requests(*parts)
    except (SievesimError, TypeError) as exc:
        assert "=" in str(exc) and "expected" in str(exc), str(exc)
        return
    assert np.all(np.isfinite(q.arrival_s)) and np.all(np.diff(q.arrival_s) >= 0)
    assert q.prompt_tokens.min() >= 1 and q.output_tokens.max() <= MAX_TOKENS


@_SHORT
@given(arrays=st.lists(_ARRAYS, min_size=3, max_size=3))
def test_requests_from_any_arrays(arrays):
    _check_requests(arrays)


# ------------------------------------------------------------------------------------------------
# serve-sweep damage: a recorded search, damaged, then resumed


def probe(settings: dict[str, Any]) -> dict[str, Any]:
    """A stand-in for serve_point: the SLOs are met up to 120 requests/s."""
    met = settings["rate"] <= 120
    return {"requests_served": 30, "slo_attainment": 1.0 if met else 0.0, "meets_slos": met,
            "goodput_requests_per_s": settings["rate"] if met else 0.0, "ttft_p90_s": 0.1, "tpot_p90_s": 0.001}


GROUP = expand_grid([{"model": ["qwen3-30b-a3b"], "requests": [30]}], SERVE)
_WRONG = st.sampled_from(["false", "true", None, 0, 1, -1.0, float("inf"), float("nan"), [], {}, "x", ...])
_FIELDS = ("meets_slos", "requests_served", "slo_attainment", "goodput_requests_per_s", "ttft_p90_s", "tpot_p90_s",
           "point_id", "rate")


@st.composite
def damages(draw: Any) -> list[tuple[int, str, Any]]:
    return draw(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(("field", "cut", "nul", "garbage")),
                                   st.tuples(st.sampled_from(_FIELDS), _WRONG)), min_size=1, max_size=3))


def _damage(line: str, how: str, what: tuple[str, Any]) -> str:
    if how == "cut":
        return line[:len(line) // 2]
    if how == "nul":
        return line[:5] + "\x00" + line[5:]
    if how == "garbage":
        return json.dumps([1, 2]) if len(line) % 2 else "null"
    from sievesim.sweep import RESULT_FIELDS

    try:
        row = json.loads(line)
    except ValueError:
        return line
    if not isinstance(row, dict):
        return line
    key, value = what
    if value is ...:
        row.pop(key, None)
        return json.dumps(row)
    ok = RESULT_FIELDS["serve"].get(key, (lambda v: False, ""))[0]
    row[key] = "x" if ok(value) else value     # a value of the right type is believed: damage the type
    return json.dumps(row)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, list[dict[str, Any]]]:
    from sievesim.serve_sweep import max_rate_search

    out = tmp_path_factory.mktemp("search")
    return out, max_rate_search(GROUP, out, lo=20, hi=200, steps=2, point_fn=probe)


@settings(max_examples=15, deadline=None, suppress_health_check=_HEALTH)
@given(damage=damages())
def test_a_damaged_search_resumes_to_the_intact_answer(recorded, damage):
    import shutil

    from sievesim.serve_sweep import max_rate_search

    src, ref = recorded
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "s"
        shutil.copytree(src, out)
        jsonl = out / "results.jsonl"
        lines = jsonl.read_text().splitlines()
        for i, how, what in damage:
            lines[i] = _damage(lines[i], how, what)
        jsonl.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert max_rate_search(GROUP, out, lo=20, hi=200, steps=2, point_fn=probe) == ref


# ------------------------------------------------------------------------------------------------
# plot text and numbers

_TEXT = st.one_of(st.text(max_size=12), st.sampled_from([r"$\foo$", "$", "$$", r"\$", r"$\bad$", "$x^{", "a$b$c",
                                                          r"$\frac{1}{0}$", "%s", "{}"]))
_FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([1e308, -1e308, 1e300, 1e200, 1e90, 1e-90, 1e-300, 0.0, 10 ** 400, -(10 ** 400), 3]))


def _drawable(y: Any, logy: bool) -> bool:
    try:
        y = float(y)
    except OverflowError:
        return False
    if logy:      # a log axis keeps the decades matplotlib can tick
        return 1e-90 <= y <= 1e90
    return math.isfinite(y) and abs(y) <= 1e300


@settings(max_examples=15, deadline=None, suppress_health_check=_HEALTH)
@given(title=_TEXT, policies=st.lists(_TEXT, min_size=1, max_size=3), column=_TEXT,
       ys=st.lists(_FLOATS, min_size=1, max_size=4), logy=st.booleans())
@example(title="", policies=["p"], column="y", ys=[8.048e134, 1e300], logy=True)     # a tick past 1e308 overflowed
@example(title="", policies=["p"], column="y", ys=[1e200, 1e300], logy=True)
def test_plot_any_text_and_any_number(title, policies, column, ys, logy):
    pytest.importorskip("matplotlib")
    from sievesim.plotting import plot_results, save_plot

    col = column or "y"
    rows = [{"rate": float(i), col: y, "policy": policies[i % len(policies)]} for i, y in enumerate(ys)]
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fig = plot_results(rows, x="rate", y=col, logy=logy, title=title)
        except SievesimError as exc:
            assert "expected" in str(exc)
            return
        save_plot(fig, Path(d) / "p.svg")
        assert (Path(d) / "p.svg").stat().st_size > 0
    kept = [y for y in ys if _drawable(y, logy)]
    assert sum(len(line.get_xdata()) for ax in fig.axes for line in ax.get_lines()) == len(kept)


# ------------------------------------------------------------------------------------------------
# outputs on a full disk: the file holds the earlier content or the new one, never a part


def _write_in_child(writer: str, path: Path, content: bytes, limit: int) -> int:
    """Write ``content`` to ``path`` with ``writer`` in a forked child whose files may not grow past
    ``limit`` bytes; the child's exit status (0 written, 2 refused, 3 anything else)."""
    import os
    import resource
    import signal

    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
            if writer == "csv":
                from sievesim.serving.metrics import write_csv
                write_csv(str(path), [{"x": content.decode("latin1")}])
            elif writer == "results":
                from sievesim.results import write_atomic
                write_atomic(path, content)
            else:
                from sievesim._outputs import write_output
                write_output(path, content, "output")
            code = 0
        except SievesimError:
            code = 2
        except BaseException:  # noqa: BLE001 - anything else is a failure the parent sees
            code = 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@settings(max_examples=20, deadline=None, suppress_health_check=_HEALTH)
@given(writer=st.sampled_from(["csv", "results", "output"]), old=st.binary(max_size=300),
       new=st.binary(min_size=1, max_size=3000), limit=st.integers(0, 4000))
def test_a_full_disk_never_leaves_part_of_a_file(writer, old, new, limit):
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "out.csv"
        f.write_bytes(old)
        code = _write_in_child(writer, f, new, limit)
        assert code in (0, 2)
        assert [p.name for p in Path(d).iterdir()] == ["out.csv"]         # no temporary file left
        got = f.read_bytes()
        if code == 2:                   # refused: the earlier file as it was
            assert got == old
            return
        if writer == "csv":             # written: all of the new content
            from sievesim.serving.metrics import write_csv
            write_csv(str(Path(d) / "want.csv"), [{"x": new.decode("latin1")}])
            new = (Path(d) / "want.csv").read_bytes()
        assert got == new and len(got) <= limit


# ------------------------------------------------------------------ the serving API's types
#: A valid small serving run (two short requests on one GPU) and, for each keyword, what to break.
_API_OK: dict[str, Any] = {"model": "qwen3-30b-a3b", "hardware": "b200", "gpus": 1, "policy": "noexp", "rate": 5.0,
                           "requests": 2, "prompt_tokens": 8, "output_tokens": 2, "seed": 0, "max_batch": 8,
                           "token_budget": 64, "cv": 1.0, "attainment": 0.9, "tpot_slo_s": 0.05,
                           "exact": False, "block_size": 16, "memory_utilization": 0.9, "error_samples": 0}
_WRONG_TYPES = st.sampled_from([None, "2", "sieve", 2.5, True, b"x", [], [1], {}, math.nan, -1, math.inf, 1e300,
                                2**70, object()])


@settings(max_examples=40, deadline=None, suppress_health_check=_HEALTH)
@given(field=st.sampled_from(sorted(_API_OK)), value=_WRONG_TYPES)
def test_the_serving_api_names_the_field_of_a_wrong_value(field, value):
    """``simulate_serving`` with one keyword of a wrong type or out of range: a SievesimError or a
    TypeError naming that keyword, or (a value that is valid there) a finished run, never an error
    from deep inside."""
    from sievesim.serving import simulate_serving

    kw = dict(_API_OK, **{field: value})
    model, hardware = kw.pop("model"), kw.pop("hardware")
    try:
        res = simulate_serving(model, hardware, **kw)
    except (SievesimError, TypeError) as exc:
        names = {field, field.removesuffix("_s"), {"tpot_slo_s": "tpot"}.get(field, field)}
        assert any(n in str(exc) for n in names), f"{field} = {value!r}: {type(exc).__name__}: {exc}"
    else:
        assert res.to_dict()["finished_requests"] == len(res.requests), (field, value)
