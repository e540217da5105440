"""What a serving search and the SLO options say: a max-rate answer that states what it knows
("at least HI", "below LO"), JSON without Infinity, and times with units (``50ms``), a bare number
refused where it is implausible."""
from __future__ import annotations

import json

import pytest

from sievesim._validate import parse_duration
from sievesim.cli import main
from sievesim.errors import ConfigError
from sievesim.serving.search import describe_answer, next_probe


def test_times_take_units_and_a_bare_implausible_number_is_refused_with_the_unit():
    assert parse_duration("--tpot-slo", "50ms") == pytest.approx(0.05)
    assert parse_duration("--tpot-slo", "1.5 s") == 1.5 and parse_duration("--x", "200us") == pytest.approx(2e-4)
    assert parse_duration("--tpot-slo", "0.05", bare_max=10) == 0.05
    with pytest.raises(ConfigError, match="write the unit, e.g. 50ms"):
        parse_duration("--tpot-slo", "50", bare_max=10)
    for bad in ("50xs", "-1", "nan", "", "1e999", "0"):
        with pytest.raises(ConfigError, match="--tpot-slo"):
            parse_duration("--tpot-slo", bad)


def test_the_serve_command_reads_units_and_exits_2_on_a_bare_50(capsys):
    argv = ["serve", "--model", "qwen3-30b-a3b", "--rate", "5", "--requests", "2", "--prompt-tokens", "8",
            "--output-tokens", "2", "--max-batch", "2", "--token-budget", "32", "--max-model-len", "64",
            "--error-samples", "0", "--gpu-model", "roofline"]
    assert main(argv + ["--tpot-slo", "50ms", "--ttft-slo", "2s"]) == 0
    assert "TPOT <= 0.05 s" in capsys.readouterr().out
    assert main(argv + ["--tpot-slo", "50"]) == 2
    assert "50ms" in capsys.readouterr().err


def test_the_search_answers_say_what_they_know():
    _, below = next_probe(10, 100, 3, {10: False})
    _, above = next_probe(10, 100, 3, {10: True, 100: True})
    assert below["answer"] == "below" and below["max_rate"] is None
    assert above["answer"] == "at_least" and above["bracket"] == [100, None]
    assert describe_answer({**above, "tried": [10, 100]}).startswith("at least 100 requests/s")
    assert describe_answer({**below, "tried": [10]}).startswith("below 10 requests/s")
    _, mid = next_probe(10, 100, 1, {10: True, 100: False, 55.0: True})
    assert mid == {"max_rate": 55.0, "bracket": [55.0, 100], "answer": "between"}


def test_a_search_whose_top_passes_prints_at_least_and_writes_valid_json(tmp_path, capsys):
    out = tmp_path / "search"
    argv = ["serve", "--model", "qwen3-30b-a3b", "--requests", "4", "--prompt-tokens", "8", "--output-tokens", "2",
            "--max-batch", "2", "--token-budget", "32", "--max-model-len", "64", "--error-samples", "0",
            "--max-rate", "0.01:0.02", "--bisect-steps", "1", "--out", str(out)]
    assert main(argv) == 0
    assert "at least 0.02 requests/s" in capsys.readouterr().out

    def no_constants(name):
        raise AssertionError(f"{name} is not JSON")
    found = json.loads((out / "max_rate.json").read_text(), parse_constant=no_constants)
    record = found[0] if isinstance(found, list) else found
    text = json.dumps(record)
    assert "null" in text and "at_least" in text


def test_a_serving_result_prints_in_one_line():
    from sievesim.serving import simulate_serving
    r = simulate_serving("qwen3-30b-a3b", rate=5, requests=5, prompt_tokens=8, output_tokens=2, lengths=None,
                         max_batch=2, token_budget=32, max_model_len=64, error_samples=0, gpu_model="roofline")
    text = repr(r)
    assert "\n" not in text and len(text) < 300 and "5/5 requests finished" in text and "roofline" in text
    assert str(r) == text


@pytest.mark.parametrize("extra, named", [
    (["--trace", "{trace}", "--requests-csv", "{trace}"], "--requests-csv"),          # would overwrite its input
    (["--trace", "{trace}", "--requests-csv", "{out}", "--timeline-csv", "{out}"], "--timeline-csv"),
    (["--trace", "{trace}", "--cv", "4"], "--cv"),
    (["--trace", "{trace}", "--lengths", "math-500"], "--lengths"),
    (["--trace", "{trace}", "--prompt-tokens", "8"], "--prompt-tokens"),
    (["--rate", "2", "--max-rate", "1:4"], "--rate"),
    (["--rate", "2", "--pimoe-unit", "stack"], "--pimoe-unit"),
    (["--rate", "2", "--prompt-tokens", "8", "--output-tokens", "2", "--lengths", "bogus"], "--lengths"),
])
def test_options_that_would_be_ignored_or_would_destroy_an_input_exit_2(tmp_path, capsys, extra, named):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,8,2\n0.1,8,2\n")
    before = trace.read_bytes()
    argv = ["serve", "--model", "qwen3-30b-a3b", "--requests", "2", "--max-batch", "2"] + [
        x.format(trace=trace, out=tmp_path / "o.csv") for x in extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err
    assert trace.read_bytes() == before


@pytest.mark.parametrize("argv, says", [
    (["--requests", "0", "--rate", "1"], "requests one serving run serves"),
    (["--requests", "3", "--max-rate", "1:2", "--bisect-steps", "99"], "halvings of a max-rate bracket"),
])
def test_bounds_say_what_they_bound(capsys, argv, says):
    assert main(["serve", "--model", "qwen3-30b-a3b"] + argv) == 2
    err = capsys.readouterr().err
    assert says in err and "DRAM" not in err and "decode steps" not in err


@pytest.mark.parametrize("name, ok", [("p.svg", True), ("p.pdf", True), ("p.txt", False), ("p.jpg", True),
                                      ("p.pgf", False)])
def test_serve_plot_takes_the_plot_formats_and_refuses_others_before_serving(tmp_path, capsys, name, ok):
    pytest.importorskip("matplotlib")
    argv = ["serve", "--model", "qwen3-30b-a3b", "--rate", "2", "--requests", "3", "--prompt-tokens", "8",
            "--output-tokens", "2", "--max-batch", "2", "--token-budget", "32", "--max-model-len", "64",
            "--error-samples", "0", "--gpu-model", "roofline", "--plot", str(tmp_path / name)]
    assert main(argv) == (0 if ok else 2)
    err = capsys.readouterr().err
    assert (tmp_path / name).exists() == ok and "Traceback" not in err
    if not ok:
        assert "--plot" in err and ".png, .svg, .pdf" in err


@pytest.mark.parametrize("kw, err, named", [
    ({"gpus": 2.5}, ConfigError, "gpus = 2.5"), ({"gpus": "2"}, ConfigError, "gpus = '2'"),
    ({"gpus": True}, ConfigError, "gpus = True"), ({"seed": 1.5}, ConfigError, "seed = 1.5"),
    ({"exact": "yes"}, ConfigError, "exact = 'yes'"), ({"top_k": 2.9}, ConfigError, "top_k = 2.9"),
    ({"model": None}, TypeError, "model = None"), ({"model": 5}, TypeError, "model = 5"),
])
def test_the_serving_api_names_a_wrong_type(kw, err, named):
    from sievesim.serving import simulate_serving
    args = dict(model="qwen3-30b-a3b", rate=5, requests=3, prompt_tokens=8, output_tokens=2, lengths=None,
                max_batch=2, token_budget=32, max_model_len=64, error_samples=0)
    args.update(kw)
    with pytest.raises(err, match=named.replace("(", r"\(")):
        simulate_serving(args.pop("model"), **args)


def test_run_takes_requests_and_a_positive_rate():
    from sievesim.serving import ServingSimulator, SchedulerConfig, poisson_requests
    sim = ServingSimulator("qwen3-30b-a3b", scheduler=SchedulerConfig(2, 32, None), max_model_len=64,
                           error_samples=0, gpu_model="roofline")
    q = poisson_requests(5.0, 3, prompt_tokens=8, output_tokens=2, lengths=None, seed=0)
    for bad in (None, "trace.csv"):
        with pytest.raises(TypeError, match="expected a Requests"):
            sim.run(bad)
    for rate in (-1, float("nan")):
        with pytest.raises(ConfigError, match="rate"):
            sim.run(q, rate)
    with pytest.raises(TypeError, match="scheduler = 'fast'"):
        ServingSimulator("qwen3-30b-a3b", scheduler="fast")
