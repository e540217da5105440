"""Rack scale (docs/system.md, "Rack scale"): the scale study's rows and the published deployment
beside ours are what the commands print."""
from __future__ import annotations

import pathlib

import pytest

HERE = pathlib.Path(__file__).resolve().parent
DOC = (HERE.parent / "docs" / "system.md").read_text()


def test_a_scale_study_row_in_the_docs_is_what_the_command_prints():
    from sievesim.benchmarks.scale_study import row
    line = row("deepseek-v3", 16, "ib", 0, per_gpu=8)
    assert line in DOC, line


@pytest.mark.slow
def test_a_kimi_k2_row_on_a_rack_in_the_docs_is_what_the_command_prints():
    """The other model, the other topology and the larger batch per GPU: Kimi-K2 on 16 GPUs of an
    NVL72 at 64 requests per GPU."""
    from sievesim.benchmarks.scale_study import row
    line = row("kimi-k2", 16, "nvl72", 0, per_gpu=64)
    assert line in DOC, line


def test_a_point_that_does_not_fit_says_so_in_its_row():
    from sievesim.benchmarks.scale_study import row
    line = row("kimi-k2", 8, "nvl72", 0, per_gpu=64)
    assert line.startswith("| kimi-k2 | 8 | nvl72 | 0 | 64 | does not fit (") and "GiB of HBM per GPU" in line


def test_the_study_refuses_a_bad_option(capsys):
    from sievesim.benchmarks.scale_study import main
    with pytest.raises(SystemExit) as exc:
        main(["--topologies", "torus"])
    assert exc.value.code == 2
    assert "--topologies: 'torus' is not one of ib, nvl72" in capsys.readouterr().err


@pytest.mark.slow
def test_deepseeks_published_deployment_beside_ours_within_a_quarter():
    """DeepSeek-V3 on 144 H800s as DeepSeek's decode deployment runs it; docs/system.md shows these lines."""
    from sievesim.benchmarks.scale_study import deepseek_published_point, published_lines
    p = deepseek_published_point()
    for line in published_lines(p):
        assert line in DOC, line
    assert 0.75 <= p["tokens_per_s_per_gpu"] / p["published_tokens_per_s_per_gpu"] <= 1.25
