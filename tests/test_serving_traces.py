"""Request traces under hostile input (issue 69, item 2): every field bounded, every column read
once, every error naming the file, the line and the column; and the ``Requests`` a Python user
builds checked the same way (a NaN arrival used to hang the run)."""
from __future__ import annotations

import time

import numpy as np
import pytest

from sievesim.cli import main
from sievesim.errors import ConfigError, TraceError
from sievesim.serving.tracefile import MAX_FIELD_CHARS
from sievesim.serving.workload import Requests, read_trace

H = "arrival_s,prompt_tokens,output_tokens"


def _write(tmp_path, name, text):
    f = tmp_path / name
    f.write_bytes(text.encode()) if isinstance(text, str) else f.write_bytes(text)
    return f


@pytest.mark.parametrize("name, text", [
    ("cr.csv", H + "\r0,10,5\r1.5,12,6\r"),
    ("cr.jsonl", '{"arrival_s":0,"prompt_tokens":10,"output_tokens":5}\r'
                 '{"arrival_s":1.5,"prompt_tokens":12,"output_tokens":6}\r'),
    ("crlf.csv", H + "\r\n0,10,5\r\n1.5,12,6\r\n"),
    ("text.csv", H + ',text\n0,10,5,"' + "x" * 200_000 + '"\n1.5,12,6,"a\rb\nc"\n'),
    ("agree.csv", "arrival_s,arrival_ms,prompt_tokens,input_tokens,output_tokens\n10,5000,10,10,5\n11.5,6500,12,12,6\n"),
])
def test_line_ends_long_text_and_agreeing_names_are_read(tmp_path, name, text):
    q = read_trace(str(_write(tmp_path, name, text)))
    assert q.arrival_s.tolist() == [0.0, 1.5]
    assert q.prompt_tokens.tolist() == [10, 12] and q.output_tokens.tolist() == [5, 6]


def test_a_ten_megabyte_prompt_text_and_header_column_are_read(tmp_path):
    q = read_trace(str(_write(tmp_path, "t.csv", "x" * 10_000_000 + "," + H + ',text\n1,0,3,4,"'
                              + "word\n" * 2_000_000 + '"\n')))
    assert q.prompt_tokens.tolist() == [3] and q.output_tokens.tolist() == [4]


AZ = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-02-28 10:00:00,5,5\n"


@pytest.mark.parametrize("text, needle", [
    (AZ + "2023-02-30 10:00:00,5,5\n", "line 3: timestamp = '2023-02-30 10:00:00': expected a date and time that exists"),
    (AZ + "2023-02-28 25:00:00,5,5\n", "line 3: timestamp = '2023-02-28 25:00:00': expected a date and time that exists"),
    (AZ + "2023-02-28 11:00:00 junk,5,5\n", "line 3: timestamp = '2023-02-28 11:00:00 junk': expected a date and time"),
    (AZ + "3600,5,5\n", "line 3: timestamp = '3600': expected a date and time"),
    (H + "\n0,1e30,5\n", "line 2: prompt_tokens = '1e30': expected an integer from 1 to 16777216"),
    (H + "\n0,9.3e18,5\n", "line 2: prompt_tokens = '9.3e18'"),
    (H + "\n0,16777216,5\n0,16777217,5\n", "line 3: prompt_tokens = '16777217'"),
    (H + "\n0,5,99999999\n", "line 2: output_tokens = '99999999'"),
    (H + "\n0,2500000000000000000,2500000000000000000\n", "line 2: prompt_tokens = '2500000000000000000'"),
    ('{"arrival_s":0,"prompt_tokens":%s,"output_tokens":2}\n' % ("9" * 400), "line 1: prompt_tokens = 9999"),
    ('{"arrival_s":0,"prompt_tokens":3,"output_tokens":1e400}\n', "line 1: output_tokens = inf"),
    (H + "\n0,10,5\n1e17,10,5\n", "line 3: arrival_s = '1e17': expected a number of seconds from 0 to 1e+12"),
    (H + "\n0,10,5\nnan,10,5\n", "line 3: arrival_s = 'nan'"),
    (H + "\n0,1_000,5\n", "line 2: prompt_tokens = '1_000'"),
    (H + "\n0,10,5\n2,10,5\n1,10,5\n", "line 4: arrival_s = '1': expected arrivals in order"),
    ("arrival_s,prompt_tokens,Prompt Tokens,output_tokens\n0,1,1,3\n", "line 1: column prompt_tokens given twice"),
    ('{"arrival_s":0,"prompt_tokens":3,"promptTokens":3,"output_tokens":2}\n', "line 1: column prompt_tokens given twice"),
    ("arrival_s,prompt_tokens,input_tokens,output_tokens\n0,1,1,3\n1,5,6,3\n",
     "line 3: prompt_tokens = 5 and input_tokens = 6 disagree"),
    ("arrival_s,arrival_ms,prompt_tokens,output_tokens\n0,0,1,3\n1,2000,5,3\n", "line 3: arrival_s and arrival_ms disagree"),
    ('{"arrival_s":0,"prompt_tokens":3,"output_tokens":2}\n{"arrival_s":1,"prompt_tokens":3,"input_tokens":4,'
     '"output_tokens":2}\n', "line 2: column input_tokens is not in the first row"),
    ('{"arrival_s":' + "[" * 100_000 + "]" * 100_000 + "}\n", "line 1: not a JSON object"),
    (H + ',text\n0,1,1,"' + "x" * (MAX_FIELD_CHARS + 1) + '"\n', f"line 2: a field longer than {MAX_FIELD_CHARS}"),
])
def test_a_bad_field_names_the_file_line_and_column(tmp_path, text, needle):
    f = _write(tmp_path, "t.jsonl" if text.startswith("{") else "t.csv", text)
    t0 = time.perf_counter()
    with pytest.raises(TraceError) as info:
        read_trace(str(f))
    assert time.perf_counter() - t0 < 5
    msg = str(info.value)
    assert msg.startswith(f"{f}: ") and needle in msg and len(msg) < 400, msg


def test_a_ten_megabyte_header_without_the_columns_is_a_short_error(tmp_path):
    with pytest.raises(TraceError, match="no arrival time column") as info:
        read_trace(str(_write(tmp_path, "t.csv", "x" * 10_000_000 + "\n1\n")))
    assert len(str(info.value)) < 700


@pytest.mark.parametrize("text", [
    AZ + "2023-02-30 10:00:00,5,5\n",
    H + "\n0,2500000000000000000,2500000000000000000\n",      # the int64 sum that hung the run
    "x" * 300_000 + "\n1\n",                                  # past csv's own 128 KiB field limit
])
def test_the_cli_exits_2_with_one_line(tmp_path, capsys, text):
    f = _write(tmp_path, "t.csv", text)
    assert main(["serve", "--model", "qwen3-30b-a3b", "--trace", str(f), "--max-batch", "4",
                 "--token-budget", "64", "--error-samples", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err and str(f) in err, err


@pytest.mark.parametrize("arrays, err, needle", [
    (([0.0, np.nan], [1, 1], [1, 1]), ConfigError, r"arrival_s\[1\] = nan"),
    (([1.0, 0.0], [1, 1], [1, 1]), ConfigError, r"arrival_s\[1\] = 0.0: expected arrivals in order"),
    (([-1.0], [1], [1]), ConfigError, r"arrival_s\[0\] = -1.0"),
    (([np.inf], [1], [1]), ConfigError, r"arrival_s\[0\] = inf"),
    (([0.0], [0], [1]), ConfigError, r"prompt_tokens\[0\] = 0"),
    (([0.0], [-64], [1]), ConfigError, r"prompt_tokens\[0\] = -64"),
    (([0.0], [2**62], [2**62]), ConfigError, r"prompt_tokens\[0\] = 4611686018427387904"),
    (([0.0], [1.0], [1]), TypeError, "prompt_tokens = .*float64"),
    (([0.0], [1], [2.5]), TypeError, "output_tokens = .*float64"),
    (([0.0, 1.0], [1], [1]), ConfigError, "of one length"),
    ((None, [1], [1]), TypeError, "arrival_s = None"),
])
def test_requests_made_in_python_are_checked(arrays, err, needle):
    with pytest.raises(err, match=needle):
        Requests(*[None if a is None else np.asarray(a) for a in arrays])


def test_a_nan_arrival_no_longer_reaches_the_simulator():
    from sievesim.serving import ServingSimulator, SchedulerConfig

    sim = ServingSimulator("qwen3-30b-a3b", scheduler=SchedulerConfig(2, 32, None), max_model_len=64,
                           error_samples=0, gpu_model="roofline")
    good = Requests(np.array([0.0, 0.1]), np.array([8, 8]), np.array([2, 2]))
    assert sim.run(good).to_dict()["finished_requests"] == 2
    with pytest.raises(ConfigError, match="arrival_s"):
        sim.run(Requests(np.array([0.0, np.nan]), np.array([8, 8]), np.array([2, 2])))
