"""The serving memo's attention correction (issue 24): a batch whose contexts spread, or whose GPUs
read unequal tokens, costs more than the memo's even batch at the mean context; the correction must
bring the memo to the exact step, and closer than the even batch alone."""
from __future__ import annotations

import numpy as np
import pytest

from sievesim.hardware import get_hardware
from sievesim.models import get_model
from sievesim.serving.pricing import CV_GRID, IterationPricer, spread_contexts

MODEL = "qwen3-30b-a3b"


@pytest.mark.parametrize("n,mean,cv", [(1, 300, 1.0), (40, 500, 0.0), (40, 500, 0.5), (200, 2000, 1.0), (64, 100, 2.0)])
def test_spread_contexts_have_the_mean_and_the_cv(n, mean, cv):
    lens = spread_contexts(n, mean, cv)
    assert lens.shape == (n,) and lens.dtype == np.int64 and lens.min() >= 1
    assert abs(lens.mean() - mean) <= 0.02 * mean + 1
    if n > 1:
        # quantiles of a gamma at n points: a little below the CV asked for (the tail beyond the last one)
        assert lens.std() / lens.mean() == pytest.approx(cv, abs=0.02 + 0.25 * cv)
    assert np.array_equal(lens, spread_contexts(n, mean, cv))          # a fixed shape: priced once


def _errors(pricer, batches):
    """|memo - exact| / exact with and without the attention correction, per batch."""
    with_corr, without = [], []
    none = np.zeros(0, dtype=np.int64)
    for ctx, gpu in batches:
        exact = pricer.exact_s(ctx, gpu, none, none, none)
        memo = pricer.memo_s(ctx, gpu, none, none, none)
        corr = pricer.attention_correction_s(ctx, gpu)
        with_corr.append(abs(memo - exact) / exact)
        without.append(abs(memo - corr - exact) / exact)
    return np.array(with_corr), np.array(without)


@pytest.fixture(scope="module")
def model_hw():
    return get_model(MODEL), get_hardware("b200")


def test_the_correction_prices_the_spread_of_contexts(model_hw):
    """One GPU, 40 requests with contexts spread as served requests' are (CV about 0.8)."""
    pricer = IterationPricer(*model_hw, gpus=1, policy="sieve", max_batch=64, max_prefill_tokens=256,
                             max_context=4096)
    rng = np.random.default_rng(3)
    batches = [(np.maximum(1, rng.lognormal(np.log(400), 0.7, 40).astype(np.int64)), np.zeros(40, dtype=np.int64))
               for _ in range(3)]
    with_corr, without = _errors(pricer, batches)
    # single iterations differ by their routing draws too (about 1 %)
    assert with_corr.mean() < 0.01 and with_corr.max() < 0.025
    assert with_corr.mean() < 0.5 * without.mean()


def test_the_memo_prices_the_gpu_that_holds_the_most(model_hw):
    """Two GPUs, one holding the long requests: a layer waits for that GPU's attention."""
    pricer = IterationPricer(*model_hw, gpus=2, policy="sieve", max_batch=64, max_prefill_tokens=256,
                             max_context=4096, gpu_model="roofline")    # no fixed costs to dilute the attention
    ctx = np.concatenate([np.full(16, 1500), np.full(16, 100)]).astype(np.int64)
    gpu = np.repeat([0, 1], 16).astype(np.int64)
    none = np.zeros(0, dtype=np.int64)
    assert pricer.context_coordinate(ctx, gpu) == 1500.0
    exact = pricer.exact_s(ctx, gpu, none, none, none)
    even = pricer.exact_s(np.full(32, 800), np.arange(32) % 2, none, none, none)     # the same mean context
    assert exact > 1.1 * even
    assert abs(pricer.memo_s(ctx, gpu, none, none, none) - exact) / exact < 0.04


def test_an_even_batch_needs_no_correction(model_hw):
    pricer = IterationPricer(*model_hw, gpus=2, policy="sieve", max_batch=64, max_prefill_tokens=256,
                             max_context=4096)
    ctx, gpu = np.full(8, 700, dtype=np.int64), np.arange(8, dtype=np.int64) % 2
    assert pricer.context_coordinate(ctx, gpu) == 700.0
    assert pricer.attention_correction_s(ctx, gpu) == 0.0
    assert CV_GRID[0] == 0.0


def test_the_prompts_coordinate():
    pricer = IterationPricer(get_model(MODEL), get_hardware("b200"), gpus=2, policy="sieve", max_batch=16,
                             max_prefill_tokens=2048, max_context=4096)
    z = np.zeros(8, dtype=np.int64)
    assert pricer.prompts_coordinate(np.full(8, 256), z) == 1 / 8
    assert pricer.prompts_coordinate(np.array([700]), np.array([1])) == 1.0
    # the GPU with the most prefill tokens decides: one chunk of 300 there, two small ones elsewhere
    assert pricer.prompts_coordinate(np.array([300, 50, 60]), np.array([0, 1, 1])) == 1.0
    assert pricer.prompts_coordinate(np.array([300, 100, 100]), np.array([1, 0, 0])) == 1.0
    assert pricer.prompts_coordinate(np.array([200, 100, 100]), np.array([0, 0, 1])) == pytest.approx(
        (200 ** 2 + 100 ** 2) / 300 ** 2)
    assert pricer.p_grid[:4] == [1, 2, 4, 8] and pricer.p_grid[-1] >= 2048


@pytest.mark.parametrize("gpus", [1, 2])
def test_prompts_arriving_together_are_priced_as_prompts_not_one_long_one(gpus):
    """8 prompts of 256 tokens at one instant: one prefill iteration of 2,048 tokens. The memo prices
    it within 1 % of the exact step (one long prompt per GPU, the grid point it was priced as before,
    costs 3 % more on one GPU, 1.8 % on two)."""
    from sievesim.serving import SchedulerConfig, ServingSimulator
    from sievesim.serving.workload import Requests

    q = Requests(np.zeros(8), np.full(8, 256, dtype=np.int64), np.full(8, 2, dtype=np.int64), "burst")
    cfg = SchedulerConfig(max_batch=16, token_budget=2048)
    ttft = {}
    for exact in (False, True):
        sim = ServingSimulator(MODEL, gpus=gpus, policy="sieve", scheduler=cfg, exact=exact, error_samples=0,
                               max_model_len=4096)
        ttft[exact] = float(np.mean(sim.run(q).ttft))
        if not exact:
            p = sim.pricer
            none = np.zeros(0, dtype=np.int64)
            k = p.t_grid.index(2048)
            one_long = p.point_s(0, 0, k, 0, 0)        # the grid point of one prompt per GPU
            pf_gpu = np.arange(8) % gpus
            assert p.memo_s(none, none, np.full(8, 256), np.zeros(8, dtype=np.int64), pf_gpu) == ttft[False]
    assert abs(ttft[False] - ttft[True]) / ttft[True] < 0.01
    assert (one_long - ttft[True]) / ttft[True] > {1: 0.03, 2: 0.015}[gpus]     # what the memo gave before


def test_the_batch_grid_below_the_gpus_is_every_count_up_to_nine_gpus_then_about_19_percent_apart():
    from sievesim.serving.pricing import batch_grid
    assert batch_grid(8, 256)[:10] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 16]
    assert batch_grid(9, 64)[:11] == list(range(10)) + [18]
    rack = batch_grid(72, 256)
    below = [b for b in rack if 0 < b < 72]
    assert below[:8] == list(range(1, 9)) and below[-1] == 71 and len(below) == 20
    steps = [b / a for a, b in zip(below[7:], below[8:])]
    assert all(1.05 < s <= 1.26 for s in steps), steps
    assert rack[rack.index(72):] == [72 * p for p in range(1, 9)]
