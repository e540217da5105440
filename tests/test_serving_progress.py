"""Progress of `serve` (issue 68, item 5): the run reports requests finished and simulated time as it
goes; on a terminal a bar per policy shows them, and each policy's row is printed when it ends;
nothing with --quiet or when stdout is not a terminal."""
from __future__ import annotations

import numpy as np
import pytest

from sievesim.cli import main
from sievesim.serving import SchedulerConfig, ServingSimulator, poisson_requests

MODEL = "qwen3-30b-a3b"
ARGS = ["serve", "--model", MODEL, "--rate", "40", "--requests", "150", "--prompt-tokens", "32", "--output-tokens",
        "4", "--max-batch", "16", "--token-budget", "256", "--max-model-len", "4096", "--policy", "sieve,noexp",
        "--error-samples", "0"]


@pytest.mark.parametrize("prefill_gpus", [None, 1])
def test_progress_counts_finished_requests_up_to_all(prefill_gpus):
    sim = ServingSimulator(MODEL, gpus=2, prefill_gpus=prefill_gpus, error_samples=0,
                           scheduler=SchedulerConfig(max_batch=16, token_budget=256), max_model_len=4096)
    q = poisson_requests(40.0, 150, seed=1, prompt_tokens=32, output_tokens=4, lengths=None)
    calls = []
    res = sim.run(q, 40.0, progress=lambda done, t: calls.append((done, t)))
    done, times = np.array([c[0] for c in calls]), np.array([c[1] for c in calls])
    assert len(calls) >= 3 and np.all(np.diff(done) >= 0) and np.all(np.diff(times) >= 0)
    assert calls[-1] == (150, res.log.end_s) and 0 < done[1] < 150


def test_a_bar_per_policy_on_a_terminal_and_rows_as_policies_end(monkeypatch, capsys):
    pytest.importorskip("tqdm")
    import sievesim.progress as progress
    monkeypatch.setattr(progress, "is_terminal", lambda stream: stream is not None)
    assert main(ARGS) == 0
    cap = capsys.readouterr()
    for name in ("sieve", "noexp"):
        assert f"{name} " in cap.err and "s simulated" in cap.err and "/150" in cap.err
    lines = cap.out.splitlines()
    head = next(i for i, x in enumerate(lines) if x.startswith("policy"))
    assert lines[head + 1].startswith("sieve ") and lines[head + 2].startswith("noexp ")
    assert lines[head + 3].startswith("sieve    energy")
    # --quiet: no bar, the same lines
    assert main(ARGS + ["--quiet"]) == 0
    quiet = capsys.readouterr()
    assert "simulated" not in quiet.err and quiet.out.splitlines()[:head + 3] == lines[:head + 3]


def test_no_bar_when_stdout_is_not_a_terminal(capsys):
    assert main(ARGS) == 0                      # pytest's captured stdout is no terminal
    assert "simulated" not in capsys.readouterr().err
