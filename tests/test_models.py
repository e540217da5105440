"""Model specs: presets against published parameter counts, HF config.json parsing, TOML round trip,
and the errors users get for bad input."""
from __future__ import annotations

import dataclasses
import json
import math

import pytest

from sievesim.errors import ConfigError
from sievesim.models import (
    ModelSpec,
    from_hf_config,
    get_model,
    list_models,
    load_model_toml,
    model_from_dict,
    model_to_dict,
    save_model_toml,
)

PRESETS = ["gpt-oss-120b", "gpt-oss-20b", "qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3-next-80b-a3b",
           "qwen3.5-397b-a17b", "mixtral-8x7b", "mixtral-8x22b", "deepseek-v3", "deepseek-r1", "deepseek-v3.1"]

# Published figures (../shared/reference/facts.md section 1b), in billions, as printed by their
# publishers, and the convention each publisher uses for "active": OpenAI and DeepSeek leave the
# input embedding out, Qwen and Mistral count it.
#            name                 total  active  active counts the input embedding?
PUBLISHED = {
    "gpt-oss-120b":        (116.8, "5.1", False),
    "gpt-oss-20b":         (20.9, "3.6", False),
    "qwen3-30b-a3b":       (30.5, "3.3", True),
    "qwen3-235b-a22b":     (235.0, "22", True),
    "qwen3-next-80b-a3b":  (80.0, "3", True),
    "qwen3.5-397b-a17b":   (397.0, "17", True),
    "mixtral-8x7b":        (46.7, "12.9", True),
    "mixtral-8x22b":       (141.0, "39", True),
    "deepseek-v3":         (671.0, "37", False),
    "deepseek-r1":         (671.0, "37", False),      # its README's model table
    "deepseek-v3.1":       (671.0, "37", False),      # its model card's table
}

# Independent per-tensor counts of facts.md section 1b ("computed" columns, [I]): params per expert (M),
# total (B), active without the input embedding (B).
COMPUTED_IN_FACTS = {
    "gpt-oss-120b": (24.89, 116.83, 5.13),
    "gpt-oss-20b": (24.89, 20.91, 3.61),
    "qwen3-30b-a3b": (4.72, 30.53, 3.04),
    "qwen3-235b-a22b": (18.87, 235.1, 21.6),
    "qwen3-next-80b-a3b": (3.15, 79.7, 3.56),
    "qwen3.5-397b-a17b": (12.58, 396.4, 16.3),
    "mixtral-8x7b": (176.2, 46.70, 12.75),
    "mixtral-8x22b": (302.0, 140.6, 39.0),
    "deepseek-v3": (44.04, 671.0, 36.6),
    "deepseek-r1": (44.04, 671.0, 36.6),      # facts.md's column is "DeepSeek-V3/R1"
    "deepseek-v3.1": (44.04, 671.0, 36.6),    # built on the V3 base checkpoint (test below)
}


def test_every_named_preset_exists():
    assert set(PRESETS) <= set(list_models())
    assert list_models() == sorted(list_models())


@pytest.mark.parametrize("name", PRESETS)
def test_total_params_within_one_percent_of_published(name):
    spec = get_model(name)
    published_total = PUBLISHED[name][0] * 1e9
    assert abs(spec.total_params - published_total) <= 0.01 * published_total, spec.total_params


@pytest.mark.parametrize("name", PRESETS)
def test_active_params_match_published(name):
    """Within 1 %, or -- where the publisher rounded to two significant digits, so that the figure
    itself is coarser than 1 % -- within one unit of the last printed digit."""
    spec = get_model(name)
    _, text, with_embedding = PUBLISHED[name]
    published = float(text) * 1e9
    unit = 10 ** (-len(text.split(".")[1]) if "." in text else 0) * 1e9
    active = spec.active_params_with_embedding if with_embedding else spec.active_params
    assert abs(active - published) <= max(0.01 * published, unit), (active, published)


@pytest.mark.parametrize("name", PRESETS)
def test_counts_match_independent_per_tensor_count_within_one_percent(name):
    spec = get_model(name)
    ppe, total, active = COMPUTED_IN_FACTS[name]
    assert spec.params_per_expert == pytest.approx(ppe * 1e6, rel=0.01)
    assert spec.total_params == pytest.approx(total * 1e9, rel=0.01)
    assert spec.active_params == pytest.approx(active * 1e9, rel=0.01)


@pytest.mark.parametrize("name", ["deepseek-r1", "deepseek-v3.1"])
def test_deepseek_r1_and_v31_are_deepseek_v3s_shapes(name):
    """Both are trained from DeepSeek-V3's base checkpoint (R1's README, V3.1's model card): the same
    spec field for field but the name and the source line."""
    spec, v3 = get_model(name), get_model("deepseek-v3")
    assert spec.name == name and "DeepSeek-V3's architecture" in spec.source
    assert dataclasses.replace(spec, name=v3.name, source=v3.source) == v3


def test_counts_are_derived_not_stored():
    spec = get_model("mixtral-8x7b")
    assert "total_params" not in model_to_dict(spec)
    bigger = spec.replace(num_experts=16)
    # 8 more experts per layer, 32 layers, plus 8 more router columns per layer.
    assert bigger.total_params - spec.total_params == 32 * 8 * (spec.params_per_expert + spec.hidden_size)
    assert bigger.active_params - spec.active_params == 32 * 8 * spec.hidden_size


def test_mixtral_8x7b_by_hand():
    s = get_model("mixtral-8x7b")
    h, i, v = 4096, 14336, 32000
    attn = h * 4096 + 2 * h * 1024 + 4096 * h
    layer = attn + 2 * h + h * 8 + 8 * 3 * h * i
    assert s.params_per_expert == 3 * h * i
    assert s.total_params == 2 * v * h + 32 * layer + h
    assert s.active_params == v * h + 32 * (attn + 2 * h + h * 8 + 2 * 3 * h * i) + h
    assert s.bytes_per_expert == 2 * 3 * h * i
    assert s.kv_bytes_per_token(0) == 2 * 8 * 128 * 2


def test_layer_structure_of_hybrid_models():
    oss = get_model("gpt-oss-120b")
    assert oss.layer_attention[:4] == ("sliding", "full", "sliding", "full")
    assert oss.sliding_window == 128 and oss.num_moe_layers == 36
    assert oss.kv_tokens_held(0, 4096) == 128 and oss.kv_tokens_held(1, 4096) == 4096

    q35 = get_model("qwen3.5-397b-a17b")
    assert q35.layer_attention.count("linear") == 45 and q35.layer_attention.count("full") == 15
    assert q35.layer_attention[3] == "full" and q35.layer_attention[0] == "linear"
    assert q35.kv_bytes_per_token(0) == 0
    assert q35.kv_bytes_per_token(3) == 2 * 2 * 256 * 2
    # Gated DeltaNet state: 64 value heads x 128 x 128 fp32 + conv (2*16*128 + 64*128) x 3 bf16.
    assert q35.linear_state_bytes_per_layer == 64 * 128 * 128 * 4 + (2 * 16 * 128 + 64 * 128) * 3 * 2
    assert q35.linear_state_bytes_per_request == 45 * q35.linear_state_bytes_per_layer
    assert q35.kv_cache_bytes_per_request(1000) == 15 * 1000 * 2048 + q35.linear_state_bytes_per_request

    ds = get_model("deepseek-v3")
    assert ds.layer_mlp[:4] == ("dense", "dense", "dense", "moe")
    assert ds.num_moe_layers == 58 and ds.moe_layer_indices[0] == 3
    assert set(ds.layer_attention) == {"mla"}
    assert ds.kv_bytes_per_token(10) == (512 + 64) * 2
    assert len(ds.kv_bytes_per_token_per_layer) == 61
    assert ds.shared_expert_params == 3 * 7168 * 2048
    assert ds.active_layer_params(0) == ds.layer_params(0)  # dense layer: everything is active


def test_with_top_k_overrides_config_value():
    q = get_model("qwen3-30b-a3b")
    assert q.top_k == 8  # the config's value, not the paper's 4
    q4 = q.with_top_k(4)
    assert q4.top_k == 4 and q4.total_params == q.total_params
    assert q.active_params - q4.active_params == 48 * 4 * q.params_per_expert
    assert get_model("qwen3-30b-a3b", top_k=4) == q4
    with pytest.raises(ConfigError, match=r"top_k = 129"):
        q.with_top_k(129)
    with pytest.raises(ConfigError, match=r"top_k = 0"):
        q.with_top_k(0)


def test_expert_dtype_override():
    s = get_model("gpt-oss-120b")
    mx = s.replace(expert_dtype_bytes=0.53125)
    assert mx.bytes_per_expert == pytest.approx(s.params_per_expert * 0.53125)
    assert mx.total_bytes < s.total_bytes == 2 * s.total_params


# ---------------------------------------------------------------------- TOML
@pytest.mark.parametrize("name", PRESETS)
def test_toml_round_trip(name, tmp_path):
    spec = get_model(name)
    p1, p2 = tmp_path / "a.toml", tmp_path / "b.toml"
    save_model_toml(spec, p1)
    back = load_model_toml(p1)
    assert back == spec
    save_model_toml(back, p2)
    assert p1.read_text() == p2.read_text()
    assert get_model(str(p1)) == spec


def test_toml_explicit_layer_lists(tmp_path):
    spec = get_model("deepseek-v3")
    d = model_to_dict(spec, compact=False)
    assert len(d["layer_attention"]) == 61 and d["layer_mlp"][:3] == ["dense"] * 3
    assert model_from_dict(d) == spec
    irregular = spec.replace(layer_attention=("full",) * 60 + ("mla",))
    save_model_toml(irregular, tmp_path / "x.toml")
    assert "layer_attention" in (tmp_path / "x.toml").read_text()
    assert load_model_toml(tmp_path / "x.toml") == irregular


def _base(**over):
    d = dict(name="t", num_layers=2, attention="full", hidden_size=64, num_attention_heads=4, num_kv_heads=2,
             num_experts=8, top_k=2, moe_intermediate_size=32, vocab_size=100)
    d.update(over)
    return d


def test_head_dim_defaults_to_hidden_over_heads_and_explicit_wins():
    assert model_from_dict(_base()).head_dim == 16
    assert model_from_dict(_base(head_dim=40)).head_dim == 40


@pytest.mark.parametrize("over, field, value", [
    ({"hidden_size": -64}, "hidden_size", "-64"),
    ({"num_experts": "8"}, "num_experts", "'8'"),
    ({"top_k": 9}, "top_k", "9"),
    ({"num_attention_heads": 5}, "num_attention_heads", "5"),   # 64 % 5 != 0 and no head_dim
    ({"num_kv_heads": 3, "head_dim": 16}, "num_kv_heads", "3"),
    ({"moe_intermediate_size": 0}, "moe_intermediate_size", "0"),
    ({"dtype_bytes": -2}, "dtype_bytes", "-2"),
    ({"tie_word_embeddings": "yes"}, "tie_word_embeddings", "'yes'"),
    ({"attention": "fulll"}, "attention", "'fulll'"),
    ({"attention": "sliding"}, "sliding_window", "None"),
    ({"dense_layers": [5]}, "dense_layers", r"\[5\]"),
    ({"dense_layers": [0, 1]}, "layer_mlp", ""),
    ({"hidden_sise": 3}, "hidden_sise", ""),
])
def test_bad_fields_name_field_and_value(over, field, value):
    with pytest.raises(ConfigError, match=rf"{field} = {value}"):
        model_from_dict(_base(**over))


def test_missing_field_is_named():
    d = _base()
    del d["vocab_size"]
    with pytest.raises(ConfigError, match=r"vocab_size = '<missing>'"):
        model_from_dict(d)


def test_unknown_field_suggests_nearest():
    with pytest.raises(ConfigError, match="did you mean hidden_size"):
        model_from_dict(_base(hidden_sise=3))


def test_unknown_preset_suggests_nearest():
    with pytest.raises(ConfigError, match=r"model = 'qwen3-30b'.*nearest: .*qwen3-30b-a3b"):
        get_model("qwen3-30b")


def test_bad_toml_file(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("name = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_model_toml(p)
    with pytest.raises(ConfigError, match="path"):
        load_model_toml(tmp_path / "absent.toml")


def test_spec_is_frozen_and_hashable():
    s = get_model("gpt-oss-20b")
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.top_k = 2  # type: ignore[misc]
    assert hash(s) == hash(get_model("gpt-oss-20b"))


# ---------------------------------------------------------------------- Hugging Face config.json
# Field values as published in each model's config.json (facts.md section 1a), trimmed to the fields
# sievesim reads plus a few it must ignore.
HF_CONFIGS = {
    "gpt-oss-20b": {
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "num_hidden_layers": 24,
        "hidden_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
        "num_local_experts": 32, "num_experts_per_tok": 4, "experts_per_token": 4, "intermediate_size": 2880,
        "vocab_size": 201088, "tie_word_embeddings": False, "sliding_window": 128, "attention_bias": True,
        "layer_types": ["sliding_attention", "full_attention"] * 12, "swiglu_limit": 7.0,
        "quantization_config": {"quant_method": "mxfp4"}, "torch_dtype": "bfloat16",
    },
    "qwen3-30b-a3b": {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "num_hidden_layers": 48,
        "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
        "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768, "intermediate_size": 6144,
        "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 151936, "tie_word_embeddings": False,
        "sliding_window": None, "use_sliding_window": False, "max_window_layers": 48, "norm_topk_prob": True,
    },
    "qwen3-next-80b-a3b": {
        "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "num_hidden_layers": 48,
        "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
        "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 512, "intermediate_size": 5120,
        "shared_expert_intermediate_size": 512, "decoder_sparse_step": 1, "mlp_only_layers": [],
        "full_attention_interval": 4, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
        "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
        "vocab_size": 151936, "tie_word_embeddings": False, "partial_rotary_factor": 0.25,
    },
    "qwen3.5-397b-a17b": {
        "architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
        "tie_word_embeddings": False, "vision_config": {"depth": 27, "hidden_size": 1152},
        "text_config": {
            "model_type": "qwen3_5_moe_text", "num_hidden_layers": 60, "hidden_size": 4096,
            "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 256, "attn_output_gate": True,
            "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 1024,
            "shared_expert_intermediate_size": 1024, "mlp_only_layers": [], "full_attention_interval": 4,
            "layer_types": ["linear_attention"] * 3 + ["full_attention"],  # replaced below (60 entries)
            "linear_num_key_heads": 16, "linear_num_value_heads": 64, "linear_key_head_dim": 128,
            "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "vocab_size": 248320,
            "mtp_num_hidden_layers": 1, "mamba_ssm_dtype": "float32",
        },
    },
    "mixtral-8x22b": {
        "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "num_hidden_layers": 56,
        "hidden_size": 6144, "num_attention_heads": 48, "num_key_value_heads": 8, "num_local_experts": 8,
        "num_experts_per_tok": 2, "intermediate_size": 16384, "vocab_size": 32000, "sliding_window": None,
        "tie_word_embeddings": False, "rope_theta": 1e6,
    },
    "deepseek-v3": {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "num_hidden_layers": 61,
        "hidden_size": 7168, "num_attention_heads": 128, "num_key_value_heads": 128, "n_routed_experts": 256,
        "num_experts_per_tok": 8, "n_shared_experts": 1, "moe_intermediate_size": 2048,
        "intermediate_size": 18432, "first_k_dense_replace": 3, "moe_layer_freq": 1, "q_lora_rank": 1536,
        "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "vocab_size": 129280, "tie_word_embeddings": False, "topk_method": "noaux_tc", "n_group": 8,
        "topk_group": 4, "scoring_func": "sigmoid", "num_nextn_predict_layers": 1,
    },
}
HF_CONFIGS["qwen3.5-397b-a17b"]["text_config"]["layer_types"] = (
    ["linear_attention"] * 3 + ["full_attention"]) * 15
# Fields that describe the checkpoint's storage rather than its shape, and may legitimately differ.
_IGNORED = {"name", "source", "state_dtype_bytes", "ignored_keys"}


def _shape(spec: ModelSpec) -> dict:
    return {k: v for k, v in dataclasses.asdict(spec).items() if k not in _IGNORED}


@pytest.mark.parametrize("name", sorted(HF_CONFIGS))
def test_hf_config_parses_to_the_preset(name, tmp_path):
    path = tmp_path / name / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(HF_CONFIGS[name]))
    spec = from_hf_config(path)
    assert spec.name == name
    preset = get_model(name)
    if name.startswith("gpt-oss"):      # the checkpoint's MXFP4 experts (quantization_config); the preset is the paper's BF16
        preset = preset.with_formats({"experts": "mxfp4"})
    assert _shape(spec) == _shape(preset)
    assert get_model(str(path)) == spec          # by file
    assert get_model(str(path.parent)) == spec   # by directory
    assert from_hf_config(HF_CONFIGS[name], name=name) == spec  # by dict


def test_hf_qwen35_state_dtype_from_config():
    spec = from_hf_config(HF_CONFIGS["qwen3.5-397b-a17b"], name="q")
    assert spec.state_dtype_bytes == 4.0
    assert spec.linear_state_bytes_per_request == get_model("qwen3.5-397b-a17b").linear_state_bytes_per_request


def test_hf_mlp_only_layers_and_sparse_step():
    cfg = dict(HF_CONFIGS["qwen3-30b-a3b"], num_hidden_layers=6, mlp_only_layers=[0], decoder_sparse_step=2)
    spec = from_hf_config(cfg, name="q")
    # layer i is MoE iff i not in mlp_only_layers and (i + 1) % step == 0
    assert spec.layer_mlp == ("dense", "moe", "dense", "moe", "dense", "moe")
    assert spec.dense_intermediate_size == 6144


def test_hf_moe_layer_freq():
    cfg = dict(HF_CONFIGS["deepseek-v3"], num_hidden_layers=8, first_k_dense_replace=2, moe_layer_freq=2)
    spec = from_hf_config(cfg, name="d")
    assert spec.moe_layer_indices == (2, 4, 6)


def test_hf_deepseek_v2_lite_without_q_lora():
    cfg = dict(HF_CONFIGS["deepseek-v3"], q_lora_rank=None, num_hidden_layers=27, hidden_size=2048,
               num_attention_heads=16, num_key_value_heads=16, n_routed_experts=64, num_experts_per_tok=6,
               n_shared_experts=2, moe_intermediate_size=1408, intermediate_size=10944,
               first_k_dense_replace=1, vocab_size=102400, topk_method="greedy", model_type="deepseek_v2")
    spec = from_hf_config(cfg, name="v2-lite")
    assert spec.q_lora_rank == 0 and spec.num_shared_experts == 2 and spec.num_moe_layers == 26
    assert spec.attention_params_per_layer(0) == (2048 * 16 * 192 + 2048 * 576 + 512 + 512 * 16 * 256
                                                   + 16 * 128 * 2048)
    # DeepSeek-V2-Lite: 15.7B total, 2.4B active (model card); 2.4 is printed to one decimal.
    assert spec.total_params == pytest.approx(15.7e9, rel=0.01)
    assert abs(spec.active_params - 2.4e9) <= 0.1e9


def test_hf_mixtral_head_dim_from_hidden_and_sliding_window():
    cfg = dict(HF_CONFIGS["mixtral-8x22b"], sliding_window=4096)
    spec = from_hf_config(cfg, name="m")
    assert spec.head_dim == 128 and set(spec.layer_attention) == {"sliding"} and spec.sliding_window == 4096


def test_hf_explicit_head_dim_wins():
    cfg = dict(HF_CONFIGS["mixtral-8x22b"], head_dim=64)
    assert from_hf_config(cfg, name="m").head_dim == 64


def test_hf_dense_model_is_refused():
    dense = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32,
             "hidden_size": 4096, "num_attention_heads": 32, "intermediate_size": 14336, "vocab_size": 128256}
    with pytest.raises(ConfigError, match=r"num_experts / num_local_experts / n_routed_experts.*looks dense"):
        from_hf_config(dense, name="llama")


@pytest.mark.parametrize("key, value, match", [
    ("hidden_size", None, r"hidden_size = '<missing>'"),
    ("hidden_size", "2048", r"hidden_size = '2048'"),
    ("num_hidden_layers", -1, r"num_hidden_layers = -1"),
    ("num_experts_per_tok", 200, r"top_k = 200: expected at most num_experts = 128"),
    ("moe_intermediate_size", None, r"intermediate_size = '<missing>'"),
])
def test_hf_bad_fields(key, value, match):
    cfg = dict(HF_CONFIGS["qwen3-30b-a3b"])
    if value is None:
        del cfg[key]
        if key == "moe_intermediate_size":
            del cfg["intermediate_size"]
    else:
        cfg[key] = value
    with pytest.raises(ConfigError, match=match):
        from_hf_config(cfg, name="q")


def test_hf_heads_must_divide_hidden_without_head_dim():
    cfg = dict(HF_CONFIGS["mixtral-8x22b"], num_attention_heads=50)
    with pytest.raises(ConfigError, match=r"num_attention_heads = 50: expected a divisor of hidden_size = 6144"):
        from_hf_config(cfg, name="m")


def test_hf_unknown_layer_type():
    cfg = dict(HF_CONFIGS["gpt-oss-20b"], layer_types=["sliding_attention", "weird"] * 12)
    with pytest.raises(ConfigError, match=r"layer_types\[1, 3, 5, .*\(12 layers\)\] = 'weird'"):
        from_hf_config(cfg, name="g")


def test_hf_missing_linear_field_named():
    cfg = dict(HF_CONFIGS["qwen3-next-80b-a3b"])
    del cfg["linear_num_value_heads"]
    with pytest.raises(ConfigError, match=r"linear_num_value_heads = '<missing>'"):
        from_hf_config(cfg, name="n")


def test_hf_bad_json(tmp_path):
    p = tmp_path / "config.json"
    p.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        from_hf_config(p)


def test_params_are_integers():
    for name in PRESETS:
        s = get_model(name)
        assert isinstance(s.total_params, int) and isinstance(s.active_params, int)
        assert math.isclose(s.bytes_per_expert, s.params_per_expert * 2)
