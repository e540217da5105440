"""Llama 4 (Scout, Maverick): the Hugging Face reader against the published parameter counts, the
``llama4-maverick`` preset, chunked attention, and the preset against the real routing trace."""
from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from sievesim.costs import attention_shape
from sievesim.errors import ConfigError
from sievesim.models import chunked_attended_tokens, from_hf_config, get_model, model_to_dict, save_model_toml, \
    load_model_toml

TRACE = Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "llama4_maverick_mmlu.npz"

# text_config of the published config.json files (meta-llama/Llama-4-Scout-17B-16E and
# meta-llama/Llama-4-Maverick-17B-128E-Instruct on Hugging Face), vision_config trimmed.
_TEXT_COMMON = {
    "attention_bias": False, "attention_chunk_size": 8192, "attention_dropout": 0.0, "attn_scale": 0.1,
    "attn_temperature_tuning": 4, "bos_token_id": 200000, "eos_token_id": [200001, 200007, 200008],
    "floor_scale": 8192, "for_llm_compressor": False, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 5120, "initializer_range": 0.02, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
    "model_type": "llama4_text", "no_rope_layers": [], "num_attention_heads": 40, "num_experts_per_tok": 1,
    "num_hidden_layers": 48, "num_key_value_heads": 8, "output_router_logits": False, "pad_token_id": 200018,
    "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "router_aux_loss_coef": 0.001, "router_jitter_noise": 0.0,
    "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 202048,
}
SCOUT = {
    "architectures": ["Llama4ForConditionalGeneration"], "boi_token_index": 200080, "eoi_token_index": 200081,
    "image_token_index": 200092, "model_type": "llama4", "tie_word_embeddings": False,
    "transformers_version": "4.51.0",
    "text_config": dict(_TEXT_COMMON, interleave_moe_layer_step=1, num_local_experts=16, use_qk_norm=True,
                        max_position_embeddings=10485760,
                        rope_scaling={"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                      "original_max_position_embeddings": 8192, "rope_type": "llama3"}),
    "vision_config": {"hidden_size": 1408, "num_hidden_layers": 34, "model_type": "llama4_vision_model"},
}
MAVERICK = {
    "architectures": ["Llama4ForConditionalGeneration"], "boi_token_index": 200080, "eoi_token_index": 200081,
    "image_token_index": 200092, "model_type": "llama4", "tie_word_embeddings": False,
    "transformers_version": "4.51.0.dev0",
    "text_config": dict(_TEXT_COMMON, interleave_moe_layer_step=2, num_local_experts=128, use_qk_norm=False,
                        max_position_embeddings=1048576, rope_scaling=None),
    "vision_config": {"hidden_size": 1408, "num_hidden_layers": 34, "model_type": "llama4_vision_model"},
}
# Model card (huggingface.co/meta-llama/Llama-4-Maverick-17B-128E): "17B (Activated) 109B (Total)" for
# Scout, "17B (Activated) 400B (Total)" for Maverick. The totals include the vision encoder, which
# sievesim does not simulate (language model only).
PUBLISHED = {"scout": (SCOUT, 109e9, 17e9), "maverick": (MAVERICK, 400e9, 17e9)}


@pytest.mark.parametrize("which", sorted(PUBLISHED))
def test_llama4_against_published_counts(which):
    cfg, total, active = PUBLISHED[which]
    spec = from_hf_config(cfg, name=which)
    # Language model only: Maverick 400.71 B (+0.2 %), Scout 107.77 B (-1.1 %: the published 109 B
    # includes the vision encoder and projector).
    assert abs(spec.total_params - total) <= 0.012 * total, spec.total_params
    assert spec.total_params < total + 0.005 * total
    # "17B" is printed to two digits: within one unit of the last digit (17.18 B with the embedding).
    assert abs(spec.active_params_with_embedding - active) <= 1e9, spec.active_params_with_embedding
    assert "verified family" in spec.source and "unverified" not in spec.source


def test_llama4_maverick_structure():
    spec = from_hf_config(MAVERICK, name="m")
    assert spec.num_layers == 48 and spec.num_moe_layers == 24
    assert spec.moe_layer_indices == tuple(range(1, 48, 2))  # interleave step 2: layers 1, 3, ...
    assert spec.dense_intermediate_size == 16384 and spec.moe_intermediate_size == 8192
    assert spec.num_shared_experts == 1 and spec.shared_expert_intermediate_size == 8192
    assert not spec.shared_expert_gate and not spec.router_bias and not spec.qk_norm
    # iRoPE: every 4th layer NoPE with global attention, the rest chunked over 8192 tokens
    assert spec.layers_of_kind("full") == tuple(range(3, 48, 4))
    assert spec.layers_of_kind("chunked") == tuple(i for i in range(48) if (i + 1) % 4)
    assert spec.attention_chunk_size == 8192
    # by hand: a MoE layer holds 128 routed + 1 shared expert of 3*h*I, router h*E, attention, norms
    h, i = 5120, 8192
    attention = h * 40 * 128 * 2 + 2 * h * 8 * 128
    assert spec.layer_params(1) == 129 * 3 * h * i + h * 128 + attention + 2 * h
    assert spec.layer_params(0) == 3 * h * 16384 + attention + 2 * h
    assert spec.active_layer_params(1) == 2 * 3 * h * i + h * 128 + attention + 2 * h


def test_llama4_scout_all_layers_moe():
    spec = from_hf_config(SCOUT, name="s")
    assert spec.num_moe_layers == 48 and spec.num_experts == 16 and spec.dense_intermediate_size == 0


def test_llama4_maverick_preset_equals_config():
    preset = get_model("llama4-maverick")
    read = from_hf_config(MAVERICK, name="llama4-maverick")
    strip = {"source", "name", "ignored_keys"}
    assert {k: v for k, v in dataclasses.asdict(preset).items() if k not in strip} == \
        {k: v for k, v in dataclasses.asdict(read).items() if k not in strip}


def test_llama4_saved_by_transformers_reads_the_same():
    """transformers writes the derived lists (moe_layers, no_rope_layers, layer_types) when it saves."""
    cfg = copy.deepcopy(MAVERICK)
    text = cfg["text_config"]
    text["moe_layers"] = list(range(1, 48, 2))
    text["no_rope_layers"] = [int((i + 1) % 4 != 0) for i in range(48)]
    assert from_hf_config(cfg, name="m") == from_hf_config(MAVERICK, name="m")
    text["layer_types"] = ["chunked_attention" if r else "full_attention" for r in text["no_rope_layers"]]
    assert from_hf_config(cfg, name="m") == from_hf_config(MAVERICK, name="m")
    # a text-only checkpoint (Llama4ForCausalLM) is the text config at top level
    flat = dict(MAVERICK["text_config"], architectures=["Llama4ForCausalLM"], tie_word_embeddings=False)
    assert from_hf_config(flat, name="m") == from_hf_config(MAVERICK, name="m")


def test_llama4_without_chunk_is_global_attention():
    cfg = copy.deepcopy(MAVERICK)
    del cfg["text_config"]["attention_chunk_size"]
    assert set(from_hf_config(cfg, name="m").layer_attention) == {"full"}


def test_llama4_bad_no_rope_layers_named():
    cfg = copy.deepcopy(MAVERICK)
    cfg["text_config"]["no_rope_layers"] = [1, 0]
    with pytest.raises(ConfigError, match=r"no_rope_layers = \[1, 0\]: expected one 0 \(NoPE\) or 1"):
        from_hf_config(cfg, name="m")


def test_chunked_attention_reads_the_current_chunk():
    assert [chunked_attended_tokens(n, 4) for n in range(10)] == [0, 1, 2, 3, 4, 1, 2, 3, 4, 1]
    spec = get_model("llama4-maverick")
    chunked, full = spec.layers_of_kind("chunked")[0], spec.layers_of_kind("full")[0]
    assert spec.kv_tokens_held(chunked, 20000) == 20000 - 2 * 8192
    assert spec.kv_tokens_held(full, 20000) == 20000
    assert spec.kv_tokens_held(chunked, 8192) == 8192 and spec.kv_tokens_held(chunked, 8193) == 1
    per_token = 2 * 8 * 128 * 2
    assert spec.kv_cache_bytes_per_request(20000) == per_token * (12 * 20000 + 36 * (20000 - 16384))
    # the cost model's attention FLOPs follow the same rule
    c, f = attention_shape(spec, chunked), attention_shape(spec, full)
    assert c.total_flops([20000]) == pytest.approx(f.total_flops([20000 - 16384]))
    assert c.total_flops([0, 8192]) == pytest.approx(f.total_flops([8192]))


def test_chunked_toml_round_trip(tmp_path):
    spec = get_model("llama4-maverick")
    save_model_toml(spec, tmp_path / "m.toml")
    assert load_model_toml(tmp_path / "m.toml") == spec
    assert model_to_dict(spec)["attention_chunk_size"] == 8192
    with pytest.raises(ConfigError, match=r"attention_chunk_size = None: expected a positive chunk"):
        spec.replace(attention_chunk_size=None)


@pytest.mark.skipif(not TRACE.is_file(), reason=f"real trace {TRACE} is absent")
def test_preset_agrees_with_the_real_maverick_trace():
    with np.load(TRACE, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        layer_ids = z["layer_ids"].tolist()
        _, moe_layers, k = z["topk_ids"].shape
    spec = get_model("llama4-maverick")
    assert meta["model"].startswith("meta-llama/Llama-4-Maverick-17B-128E")
    assert (spec.num_experts, spec.top_k, spec.num_moe_layers) == (meta["num_experts"], meta["top_k"], moe_layers)
    assert k == spec.top_k and spec.num_shared_experts == meta["shared_experts"]
    assert list(spec.moe_layer_indices) == layer_ids  # the trace's original (odd) layer numbers


def test_pim_attention_of_a_chunked_layer_reads_the_chunk():
    from sievesim.pim.expert import AttentionLayer

    spec = get_model("llama4-maverick")
    chunked = AttentionLayer.from_model(spec, spec.layers_of_kind("chunked")[0])
    full = AttentionLayer.from_model(spec, spec.layers_of_kind("full")[0])
    assert chunked.chunk == 8192 and full.chunk is None
    assert chunked.unit_gemvs(8192 + 100) == full.unit_gemvs(100)
