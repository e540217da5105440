"""Request lengths: decode context lengths (KV-cache sizes) and colocated prefill+decode batches.

A :class:`LengthPreset` describes a dataset by two clipped log-normal laws: prompt tokens and
output (generated) tokens per request. In a continuous batch at steady state, the requests present
in a decode step are a *length-biased* sample (a request that generates T tokens is present in T
steps), and each is at a uniformly random point of its output. So the context of a decode request
is ``prompt + U * output`` with ``output`` drawn from the length-biased law (for a log-normal
LN(mu, s) the length-biased law is LN(mu + s^2, s)) and U ~ Uniform(0, 1).

The preset numbers are estimates, not measurements (no per-token length table of these datasets
was available to the project): they are chosen to have the *character* the Sieve paper relies on
(HH-RLHF: multi-turn dialogues, longer prompts than answers; MATH-500: short problem statements
and long reasoning outputs). Sources and reasoning: docs/workloads.md, "Request lengths". Every
field can be changed by building a :class:`LengthPreset`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import field_error

__all__ = ["LengthPreset", "LENGTH_PRESETS", "get_length_preset", "decode_context_lengths",
           "ColocatedBatch", "colocated_batch", "max_prefills"]


@dataclass(frozen=True)
class LengthPreset:
    """Clipped log-normal prompt and output lengths (tokens) of a dataset.

    Attributes:
        name: preset name.
        prompt_median, prompt_sigma, prompt_min, prompt_max: prompt tokens ~ clip(LN(ln median,
            sigma), min, max).
        output_median, output_sigma, output_min, output_max: generated tokens, same form.
        source: where the numbers come from.
    """

    name: str
    prompt_median: float
    prompt_sigma: float
    prompt_min: int
    prompt_max: int
    output_median: float
    output_sigma: float
    output_min: int
    output_max: int
    source: str = ""

    def __post_init__(self) -> None:
        for f in ("prompt_median", "output_median"):
            if not getattr(self, f) > 0:
                raise field_error(f"lengths.{self.name}.{f}", getattr(self, f), "a positive number of tokens")
        for f in ("prompt_sigma", "output_sigma"):
            if not getattr(self, f) >= 0:
                raise field_error(f"lengths.{self.name}.{f}", getattr(self, f), "a spread >= 0")
        if not 1 <= self.prompt_min <= self.prompt_max:
            raise field_error(f"lengths.{self.name}.prompt_min", self.prompt_min, f"1 <= prompt_min <= prompt_max = {self.prompt_max}")
        if not 1 <= self.output_min <= self.output_max:
            raise field_error(f"lengths.{self.name}.output_min", self.output_min, f"1 <= output_min <= output_max = {self.output_max}")

    def sample_prompts(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """(n,) int64 prompt lengths (tokens)."""
        x = rng.lognormal(np.log(self.prompt_median), self.prompt_sigma, n)
        return np.clip(np.rint(x), self.prompt_min, self.prompt_max).astype(np.int64)

    def sample_outputs(self, n: int, rng: np.random.Generator, *, length_biased: bool = False) -> np.ndarray:
        """(n,) int64 output lengths; ``length_biased``: as seen among running requests."""
        mu = np.log(self.output_median) + (self.output_sigma ** 2 if length_biased else 0.0)
        x = rng.lognormal(mu, self.output_sigma, n)
        return np.clip(np.rint(x), self.output_min, self.output_max).astype(np.int64)

    def mean_output(self) -> float:
        """Mean output tokens of the unclipped law (exp(mu + s^2 / 2))."""
        return float(self.output_median * np.exp(self.output_sigma ** 2 / 2))


LENGTH_PRESETS: dict[str, LengthPreset] = {
    # Anthropic HH-RLHF (Bai et al. 2022; the paper's routing traces, Ganguli et al. 2022):
    # multi-turn human/assistant dialogues; the prompt is the dialogue so far.
    "hh-rlhf": LengthPreset("hh-rlhf", prompt_median=180, prompt_sigma=0.9, prompt_min=8,
                            prompt_max=4096, output_median=220, output_sigma=0.8, output_min=1,
                            output_max=2048,
                            source="estimate [I]: multi-turn dialogues of a few hundred tokens, "
                                   "chat answers of a few hundred tokens (docs/workloads.md)"),
    # MATH-500 (Lightman et al. 2023 subset of MATH): short problem statements, long reasoning
    # outputs from thinking models (Epoch AI 2025: reasoning models answer with ~8x the tokens of
    # non-reasoning models on MATH level 5 / GPQA / AIME-like benchmarks).
    "math-500": LengthPreset("math-500", prompt_median=90, prompt_sigma=0.5, prompt_min=16,
                             prompt_max=1024, output_median=2500, output_sigma=0.8, output_min=64,
                             output_max=32768,
                             source="estimate [I]: ~100-token problems, thousands of reasoning "
                                    "tokens (docs/workloads.md)"),
}


def get_length_preset(name: str) -> LengthPreset:
    """A preset of :data:`LENGTH_PRESETS` by name."""
    try:
        return LENGTH_PRESETS[name.lower()]
    except KeyError:
        raise field_error("lengths preset", name, "one of " + ", ".join(LENGTH_PRESETS)) from None


def decode_context_lengths(preset: LengthPreset | str, batch_size: int,
                           rng: np.random.Generator) -> np.ndarray:
    """(B,) int64 context tokens (KV-cache length) of the B requests of a decode step.

    Each is ``prompt + floor(U * output)`` with a length-biased ``output`` (see module doc).
    """
    p = get_length_preset(preset) if isinstance(preset, str) else preset
    if batch_size < 0:
        raise field_error("batch_size", batch_size, "an integer >= 0")
    prompt = p.sample_prompts(batch_size, rng)
    out = p.sample_outputs(batch_size, rng, length_biased=True)
    done = np.floor(rng.random(batch_size) * out).astype(np.int64)
    return prompt + done


def max_prefills(batch_size: int) -> int:
    """Prefill requests colocated with a decode batch in the paper's Figure 11: up to 2 for
    B <= 32 and up to 8 for B >= 64 (2 for 32 < B < 64, which the paper does not use)."""
    return 8 if batch_size >= 64 else 2


@dataclass(frozen=True)
class ColocatedBatch:
    """One step that mixes decode tokens with prefill chunks.

    Attributes:
        decode_context: (B,) context tokens of the decode requests (each contributes 1 token).
        prefill_lengths: (P,) prompt tokens of each prefill request (each contributes all of them).
    """

    decode_context: np.ndarray
    prefill_lengths: np.ndarray

    @property
    def decode_tokens(self) -> int:
        return int(self.decode_context.size)

    @property
    def prefill_tokens(self) -> int:
        return int(self.prefill_lengths.sum())

    @property
    def total_tokens(self) -> int:
        """Tokens routed through the MoE layers in this step (B + sum of prefill lengths)."""
        return self.decode_tokens + self.prefill_tokens


def colocated_batch(preset: LengthPreset | str, batch_size: int, *, num_prefill: int | None = None,
                    prefill_len: int | None = None, seed: int = 0) -> ColocatedBatch:
    """A colocated step: ``batch_size`` decode requests + ``num_prefill`` prefills.

    ``num_prefill`` defaults to :func:`max_prefills` (batch_size); ``prefill_len`` fixes every
    prefill at L tokens (the paper's setting), else prompt lengths come from the preset.
    """
    p = get_length_preset(preset) if isinstance(preset, str) else preset
    rng = np.random.default_rng(seed)
    n_pf = max_prefills(batch_size) if num_prefill is None else num_prefill
    if n_pf < 0:
        raise field_error("num_prefill", n_pf, "an integer >= 0")
    if prefill_len is not None and prefill_len < 1:
        raise field_error("prefill_len", prefill_len, "an integer >= 1 (tokens)")
    ctx = decode_context_lengths(p, batch_size, rng)
    pf = (np.full(n_pf, prefill_len, dtype=np.int64) if prefill_len is not None
          else p.sample_prompts(n_pf, rng))
    return ColocatedBatch(decode_context=ctx, prefill_lengths=pf)
