"""serve's default arrival window (docs/serving.md, "The default arrival window"): given neither
--requests nor --arrival-window, a first run of 100 requests sizes a window that reaches the
steady state; the second run's figures are those of the same requests served directly."""
from __future__ import annotations

import json
import math

from sievesim.cli import main
from sievesim.commands.serve import DEFAULT_REQUESTS, DEFAULT_WINDOW_SERVICE_TIMES

# 500 requests/s of 16 + 32 tokens: 100 requests arrive in 0.2 s, the first 10 % in 0.02 s, less
# than a request's time in service, so the first run misses its window
FAST = ["serve", "--model", "qwen3-30b-a3b", "--prompt-tokens", "16", "--output-tokens", "32", "--max-batch", "64",
        "--token-budget", "512", "--max-model-len", "128", "--error-samples", "0", "--gpu-model", "roofline"]
VOLATILE = ("wall_s", "pricing", "arrival_window_s", "arrival_window_default")


def _json(capsys, argv):
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_short_default_run_is_served_again_over_a_window_that_reaches_the_steady_state(capsys):
    first = _json(capsys, FAST + ["--rate", "500", "--requests", str(DEFAULT_REQUESTS)])
    assert not first["window"]["reached"]
    d = _json(capsys, FAST + ["--rate", "500"])
    span = first["window"]["suggested_arrival_window_s"] * DEFAULT_WINDOW_SERVICE_TIMES / 10
    assert d["arrival_window_default"] is True and d["arrival_window_s"] == span
    assert d["requests"] == math.ceil(500 * span) > DEFAULT_REQUESTS
    assert d["window"]["reached"]
    direct = _json(capsys, FAST + ["--rate", "500", "--requests", str(d["requests"])])
    assert direct["arrival_window_default"] is False and direct["arrival_window_s"] is None
    for x in (d, direct):
        for key in VOLATILE:
            x.pop(key)
    assert d == direct          # the warm memo of the first run changes no figure


def test_a_default_run_that_reaches_its_window_is_the_answer(capsys):
    d = _json(capsys, FAST + ["--rate", "200"])
    assert d["requests"] == DEFAULT_REQUESTS and d["window"]["reached"]
    assert d["arrival_window_default"] is False and d["arrival_window_s"] is None


def test_given_requests_or_a_window_are_served_as_given(capsys):
    assert _json(capsys, FAST + ["--rate", "500", "--requests", "40"])["requests"] == 40
    d = _json(capsys, FAST + ["--rate", "500", "--arrival-window", "0.1"])
    assert d["requests"] == 50 and d["arrival_window_s"] == 0.1          # rate x window
    assert d["arrival_window_default"] is False


def test_the_text_says_the_window_was_chosen(capsys):
    assert main(FAST + ["--rate", "500", "--quiet"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("arrival window:"))
    assert "by default" in line and f"{DEFAULT_WINDOW_SERVICE_TIMES} median service times" in line
    assert "--requests or --arrival-window" in line
