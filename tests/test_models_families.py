"""MoE families read from their own config.json (issue 70): each against its publisher's total and
active parameters, against an independent per-tensor count of its checkpoint, and through one
decode step (the hybrid, sparse-attention and per-kind-attention families: tests/test_models_hybrid.py).

The config files (tests/data/hf_configs/) are public copies; docs/models.md ("Families") names the
source of each.
"""
from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sievesim.errors import ConfigError
from sievesim.models import ModelSpec, UnverifiedFamilyWarning, VERIFIED_FAMILIES, from_hf_config

DATA = Path(__file__).parent / "data" / "hf_configs"


def _file(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


# ---------------------------------------------------------------------- configs as published
#: Each model and its config.json under tests/data/hf_configs/ (docs/models.md names the source of each).
FILES = {
    "Kimi-K2-Instruct": "moonshotai--Kimi-K2-Instruct",
    "Kimi-K2.5": "moonshotai--Kimi-K2.5",
    "GLM-4.5": "zai-org--GLM-4.5",
    "GLM-4.5-Air": "zai-org--GLM-4.5-Air",
    "MiniMax-M2.5": "MiniMaxAI--MiniMax-M2.5",
    "Ling-lite-1.5": "inclusionAI--Ling-lite-1.5",
    "OLMoE-1B-7B": "allenai--OLMoE-1B-7B-0924",
    "Qwen1.5-MoE-A2.7B": "Qwen--Qwen1.5-MoE-A2.7B",
    "Qwen2-57B-A14B": "Qwen--Qwen2-57B-A14B",
    "DeepSeekMoE-16B": "deepseek-ai--deepseek-moe-16b-base",
    "Qwen3-Coder-480B-A35B": "Qwen--Qwen3-Coder-480B-A35B-Instruct",
}
OLMOE = _file(FILES["OLMoE-1B-7B"])
DEEPSEEK_MOE_16B = _file(FILES["DeepSeekMoE-16B"])


def _configs() -> dict[str, dict]:
    return {name: _file(stem) for name, stem in FILES.items()}


# Published figures, in billions, as printed (model cards and technical reports; docs/models.md),
# whether the publisher's "active" counts the input embedding (None: both readings must hold), and
# the GPUs (B200) one decode step is simulated on. None of these publishers states its convention;
# the one given is the reading its figure matches (Qwen's, as for the Qwen presets, counts it).
#   name                 total   active  with emb.  GPUs
PUBLISHED = {
    "Kimi-K2-Instruct":  (1000.0, "32", None, 16),     # model card: 1 trillion total, 32 billion activated
    "Kimi-K2.5":         (1000.0, "32", None, 16),     # model card: 1T total, 32B activated (language model)
    "GLM-4.5":           (355.0, "32", False, 8),
    "GLM-4.5-Air":       (106.0, "12", False, 2),
    "MiniMax-M2.5":      (230.0, "10", False, 4),      # MiniMax-M2 family: 230B total, 10B activated
    "Ling-lite-1.5":     (16.8, "2.75", True, 1),
    "OLMoE-1B-7B":       (6.9, "1.3", True, 1),        # OLMoE paper: 6.9B total, 1.3B active
    "Qwen1.5-MoE-A2.7B": (14.3, "2.7", True, 1),
    "Qwen2-57B-A14B":    (57.0, "14", True, 2),
    "DeepSeekMoE-16B":   (16.4, "2.8", True, 1),       # DeepSeekMoE paper: 16.4B total, 2.8B activated
    "Qwen3-Coder-480B-A35B": (480.0, "35", True, 8),   # model card: 480B total, 35B activated
}


def _read(name: str) -> ModelSpec:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # Kimi-K2.5's compressed-tensors int4 is not read: bf16 (a warning)
        return from_hf_config(_configs()[name], name=name)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_total_within_three_percent_of_published(name):
    spec = _read(name)
    published = PUBLISHED[name][0] * 1e9
    assert abs(spec.total_params - published) <= 0.03 * published, (spec.total_params / 1e9, PUBLISHED[name][0])


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_active_matches_published(name):
    """Within 3 %, or within one unit of the last printed digit where the figure is coarser than
    that; when the publisher does not say whether "active" counts the input embedding, both
    readings must hold."""
    spec = _read(name)
    _, text, with_embedding, _ = PUBLISHED[name]
    published = float(text) * 1e9
    unit = 10 ** (-len(text.split(".")[1]) if "." in text else 0) * 1e9
    readings = {True: [spec.active_params_with_embedding], False: [spec.active_params],
                None: [spec.active_params, spec.active_params_with_embedding]}[with_embedding]
    for active in readings:
        assert abs(active - published) <= max(0.03 * published, unit), (active / 1e9, text)


# ---------------------------------------------------------------------- independent per-tensor count
def _tensors(cfg: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor of the checkpoint the config describes, with its shape, following the family's
    modelling code (transformers or the checkpoint's own): written from the config alone, without
    sievesim."""
    cfg = cfg.get("text_config", cfg)
    mt = cfg["model_type"]
    h, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    nq = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nq)
    d = cfg.get("head_dim") or h // nq
    E = cfg.get("num_experts") or cfg.get("n_routed_experts") or cfg.get("num_local_experts")
    inter = cfg.get("moe_intermediate_size") or cfg["intermediate_size"]
    if mt == "minimax_m2":
        inter = cfg["intermediate_size"]
    first_dense = cfg.get("first_k_dense_replace", 0)
    out: dict[str, tuple[int, ...]] = {"embed_tokens": (V, h), "norm": (h,)}
    if not cfg.get("tie_word_embeddings", False):
        out["lm_head"] = (V, h)
    for i in range(L):
        p = f"layers.{i}."
        out[p + "input_layernorm"] = (h,)
        out[p + "post_attention_layernorm"] = (h,)
        if "kv_lora_rank" in cfg:            # DeepSeek-V3 MLA (Kimi-K2)
            qr, kr = cfg["q_lora_rank"], cfg["kv_lora_rank"]
            nope, rope, v = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
            out.update({p + "q_a_proj": (qr, h), p + "q_a_layernorm": (qr,), p + "q_b_proj": (nq * (nope + rope), qr),
                        p + "kv_a_proj_with_mqa": (kr + rope, h), p + "kv_a_layernorm": (kr,),
                        p + "kv_b_proj": (nq * (nope + v), kr), p + "o_proj": (h, nq * v)})
        elif mt == "bailing_moe":            # fused query_key_value, output "dense"
            out[p + "query_key_value"] = ((nq + 2 * nkv) * d, h)
            out[p + "dense"] = (h, nq * d)
        else:
            out.update({p + "q_proj": (nq * d, h), p + "k_proj": (nkv * d, h), p + "v_proj": (nkv * d, h),
                        p + "o_proj": (h, nq * d)})
            if mt in ("qwen2_moe",) or (mt == "glm4_moe" and cfg.get("attention_bias")):
                out.update({p + "q_proj.bias": (nq * d,), p + "k_proj.bias": (nkv * d,), p + "v_proj.bias": (nkv * d,)})
            if mt == "glm4_moe" and cfg.get("use_qk_norm"):
                out.update({p + "q_norm": (d,), p + "k_norm": (d,)})
            if mt.startswith("qwen3"):         # Qwen3: per-head q/k norms
                out.update({p + "q_norm": (d,), p + "k_norm": (d,)})
            if mt in ("olmoe", "minimax_m2"):  # norms over all heads
                out.update({p + "q_norm": (nq * d,), p + "k_norm": (nkv * d,)})
        if i < first_dense:
            out.update({p + "mlp." + w: s for w, s in (("gate_proj", (cfg["intermediate_size"], h)),
                                                       ("up_proj", (cfg["intermediate_size"], h)),
                                                       ("down_proj", (h, cfg["intermediate_size"])))})
            continue
        out[p + "gate"] = (E, h)
        if cfg.get("topk_method") == "noaux_tc" or mt == "glm4_moe" or cfg.get("use_routing_bias"):
            out[p + "gate.e_score_correction_bias"] = (E,)
        for e in range(E):
            out.update({f"{p}experts.{e}.gate_proj": (inter, h), f"{p}experts.{e}.up_proj": (inter, h),
                        f"{p}experts.{e}.down_proj": (h, inter)})
        n_shared = cfg.get("n_shared_experts") or cfg.get("num_shared_experts") or 0
        shared = n_shared * cfg.get("moe_intermediate_size", 0)
        if mt == "qwen2_moe":
            shared = cfg["shared_expert_intermediate_size"]
            out[p + "shared_expert_gate"] = (1, h)
        if shared:
            out.update({p + "shared.gate_proj": (shared, h), p + "shared.up_proj": (shared, h),
                        p + "shared.down_proj": (h, shared)})
    return out


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_total_equals_an_independent_per_tensor_count(name):
    tensors = _tensors(_configs()[name])
    assert _read(name).total_params == sum(math.prod(s) for s in tensors.values())


def test_small_weights_are_counted():
    """What issue 70 found dropped or added without a word: the router bias of noaux_tc models whose
    model_type is not deepseek*, OLMoE's q/k norms, an output bias Qwen1.5-MoE does not have."""
    kimi = _read("Kimi-K2-Instruct")
    assert kimi.router_bias and kimi.router_params == 7168 * 384 + 384
    glm = _read("GLM-4.5")
    assert glm.router_bias and glm.qkv_bias and not glm.attention_bias and glm.qk_norm
    assert glm.attention_params_per_layer(0) == 5120 * 96 * 128 * 2 + 2 * 5120 * 8 * 128 + (96 + 16) * 128 + 2 * 128
    olmoe = _read("OLMoE-1B-7B")
    assert olmoe.qk_norm and olmoe.qk_norm_over_heads
    assert olmoe.attention_params_per_layer(0) == 4 * 2048 * 2048 + 2 * 2048
    qwen = _read("Qwen1.5-MoE-A2.7B")
    assert qwen.qkv_bias and not qwen.attention_bias   # q/k/v biases, no output bias
    assert qwen.attention_params_per_layer(0) == 4 * 2048 * 2048 + 3 * 2048
    minimax = _read("MiniMax-M2.5")
    assert minimax.router_bias and minimax.qk_norm_over_heads and minimax.num_mtp_layers == 3


def test_family_structure():
    kimi = _read("Kimi-K2-Instruct")
    assert kimi.layer_attention == ("mla",) * 61 and kimi.num_dense_layers == 1 and kimi.num_shared_experts == 1
    assert kimi.kv_bytes_per_token(0) == (512 + 64) * 2
    glm = _read("GLM-4.5")
    assert glm.num_dense_layers == 3 and glm.num_mtp_layers == 1 and glm.kv_bytes_per_token(5) == 2 * 8 * 128 * 2
    ling = _read("Ling-lite-1.5")
    assert ling.num_moe_layers == 28 and (ling.num_shared_experts, ling.shared_expert_intermediate_size) == (2, 1408)
    dsmoe = _read("DeepSeekMoE-16B")
    assert dsmoe.layer_attention == ("full",) * 28 and dsmoe.moe_layer_indices == tuple(range(1, 28))
    assert dsmoe.dense_intermediate_size == 10944 and not dsmoe.router_bias
    qwen2 = _read("Qwen2-57B-A14B")
    assert qwen2.shared_expert_gate and qwen2.shared_expert_intermediate_size == 20480


def test_kimi_k25_reads_as_kimi_k2_and_lists_the_generation_defaults_it_ignores():
    k2, k25 = _read("Kimi-K2-Instruct"), _read("Kimi-K2.5")
    storage = ("name", "source", "ignored_keys", "expert_format", "weight_format", "expert_dtype_bytes",
               "weight_dtype_bytes")   # K2 ships FP8 (read), K2.5 int4 compressed-tensors (not read: bf16)
    shape = lambda s: {k: v for k, v in vars(s).items() if k not in storage}  # noqa: E731
    assert shape(k25) == shape(k2) and k2.expert_format == "fp8-block" and k25.expert_format is None
    ignored = dict(k25.ignored_keys)
    for key in ("num_beams", "num_return_sequences", "repetition_penalty", "return_dict", "temperature",
                "top_p", "do_sample", "max_length"):
        assert "generation default" in ignored[key] or "bookkeeping" in ignored[key], key
    assert "rotary position" in ignored["rope_scaling"] and "tokenizer id" in ignored["pad_token_id"]
    # read keys are not listed: the quantisation is read (a warning says its method gives bf16)
    assert not {"quantization_config", "n_routed_experts", "kv_lora_rank", "topk_method"} & set(ignored)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_families_are_verified(name):
    cfg = _configs()[name]
    model_type = cfg.get("text_config", cfg)["model_type"]
    assert model_type in VERIFIED_FAMILIES
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnverifiedFamilyWarning)
        warnings.filterwarnings("ignore", message=".*quantization_config")
        spec = from_hf_config(cfg, name=name)
    assert "unverified" not in spec.source
    # every key of the published file is read, handled, or known to change nothing in a decode step
    assert [k for k, why in spec.ignored_keys if why.startswith("not read")] == []


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_one_decode_step_is_finite(name):
    from sievesim.system.step import simulate_step

    gpus = PUBLISHED[name][3]
    result = simulate_step(_read(name), "b200", gpus=gpus, policy="gpu-only", batch=gpus, steps=1, warmup=0)
    assert math.isfinite(result.step_time_s) and result.step_time_s > 0


# ---------------------------------------------------------------------- what is refused, by name
def test_gemma4_top_k_experts_is_read_not_reported_missing():
    """Gemma 4's top-k is top_k_experts (its reading: tests/test_models_hybrid.py); without it the
    refusal names it."""
    assert from_hf_config(_file("google--gemma-4-26B-A4B"), name="g").top_k == 8
    cfg = _file("google--gemma-4-26B-A4B")
    del cfg["text_config"]["top_k_experts"]
    with pytest.raises(ConfigError, match=r"top_k_experts = '<missing>'"):
        from_hf_config(cfg, name="g")


def test_moe_layer_freq_as_a_list_per_layer():
    """MiMo-V2 gives moe_layer_freq as one 0 (dense) or 1 (MoE) per layer: read as such."""
    layers = _file("XiaomiMiMo--MiMo-V2-Flash")["moe_layer_freq"]
    spec = from_hf_config(dict(DEEPSEEK_MOE_16B, num_hidden_layers=48, first_k_dense_replace=0,
                               moe_layer_freq=layers), name="m")
    assert spec.moe_layer_indices == tuple(range(1, 48))
    with pytest.raises(ConfigError, match=r"moe_layer_freq = \[0, 1, 2\]: expected an integer, or one 0 \(dense\)"):
        from_hf_config(dict(DEEPSEEK_MOE_16B, num_hidden_layers=3, moe_layer_freq=[0, 1, 2]), name="m")


# ---------------------------------------------------------------------- a corrupted structural key
def _structural_keys(cfg: dict) -> list[str]:
    """The keys of a family's config that decide its structure: the known structural keys and
    every key the reader checks (sizes, counts, switches, per-layer lists)."""
    from sievesim.models.hf_keys import _HF_BOOL_KEYS, _HF_INT_KEYS, _HF_LIST_KEYS, _HF_STR_KEYS, STRUCTURAL_KEYS

    lm = cfg.get("text_config", cfg)
    decisive = set(STRUCTURAL_KEYS) | set(_HF_INT_KEYS) | set(_HF_BOOL_KEYS) | set(_HF_LIST_KEYS) | set(_HF_STR_KEYS)
    return sorted(k for k, v in lm.items() if k in decisive and v is not None)


_CORRUPTIONS = (-1, -4096, 2.5, "two", {"value": 1}, [-1], True)


@given(data=st.data())
@settings(max_examples=300, deadline=None)
def test_a_corrupted_structural_key_is_refused_by_name(data):
    name = data.draw(st.sampled_from(sorted(PUBLISHED)))
    cfg = json.loads(json.dumps(_configs()[name]))
    lm = cfg.get("text_config", cfg)
    key = data.draw(st.sampled_from(_structural_keys(cfg)))
    bad = data.draw(st.sampled_from([c for c in _CORRUPTIONS if type(c) is not type(lm[key])]))
    lm[key] = bad
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ConfigError) as exc:
            from_hf_config(cfg, name=name)
    assert key in str(exc.value), (name, key, bad, str(exc.value))


def test_every_structural_key_corrupted_is_refused_by_name():
    """The whole space the hypothesis test samples: every family, every decisive key, every corruption."""
    missed = []
    for name in sorted(PUBLISHED):
        for key in _structural_keys(_configs()[name]):
            for bad in _CORRUPTIONS:
                cfg = json.loads(json.dumps(_configs()[name]))
                lm = cfg.get("text_config", cfg)
                if type(bad) is type(lm[key]):
                    continue
                lm[key] = bad
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        from_hf_config(cfg, name=name)
                    missed.append((name, key, bad, "read"))
                except ConfigError as exc:
                    if key not in str(exc):
                        missed.append((name, key, bad, str(exc)))
    assert not missed


# ---------------------------------------------------------------------- keys by effect
def test_keys_without_effect_are_accepted_and_listed_in_an_unverified_family():
    """An unverified family is read when its other keys are known to change nothing in a decode
    step (MiniCPM's scaling constants, Ling's norm_head, generation defaults, tokenizer ids)."""
    cfg = dict(OLMOE, model_type="my_moe", dim_model_base=256, scale_emb=12, scale_depth=1.4, norm_head=True,
               num_beams=1, max_length=20, image_token_id=7)
    with pytest.warns(UnverifiedFamilyWarning):
        spec = from_hf_config(cfg, name="m")
    ignored = dict(spec.ignored_keys)
    assert {"dim_model_base", "scale_emb", "scale_depth", "norm_head", "num_beams", "max_length", "image_token_id",
            "rope_theta", "clip_qkv"} <= set(ignored)
    assert "num_experts" not in ignored and "hidden_size" not in ignored      # read keys are not "ignored"
    assert ignored["clip_qkv"] and "switches nothing on" not in ignored["num_beams"]
    # a key that could change the structure still refuses, naming it
    with pytest.raises(ConfigError, match=r"moe_expert_groups = '<not understood>'"):
        from_hf_config(dict(cfg, moe_expert_groups=4), name="m")


def test_model_show_json_lists_ignored_keys(tmp_path, capsys):
    from sievesim.cli import main

    path = tmp_path / "Kimi-K2.5" / "config.json"
    path.parent.mkdir()
    path.write_text((DATA / "moonshotai--Kimi-K2.5.json").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["model", "show", str(path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["ignored_keys"]["num_beams"].startswith("generation default")
    assert shown["ignored_keys"]["repetition_penalty"].startswith("generation default")
    assert "n_routed_experts" not in shown["ignored_keys"] and shown["num_experts"] == 384
    # a TOML written from it carries the shapes, not the reading's provenance
    assert main(["model", "show", str(path), "--toml"]) == 0
    assert "ignored_keys" not in capsys.readouterr().out


@pytest.mark.parametrize("name", ["Kimi-K2-Instruct", "GLM-4.5", "Ling-lite-1.5", "Qwen1.5-MoE-A2.7B",
                                  "DeepSeekMoE-16B"])
def test_expert_width_is_never_taken_from_the_dense_width(name):
    """These families keep intermediate_size for dense layers: without moe_intermediate_size the
    reading stops, naming it, even where the two happen to be equal (Ling-lite-1.5)."""
    cfg = json.loads(json.dumps(_configs()[name]))
    del cfg.get("text_config", cfg)["moe_intermediate_size"]
    with pytest.raises(ConfigError, match=r"moe_intermediate_size = '<missing>'"):
        from_hf_config(cfg, name=name)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_toml_round_trip_keeps_the_family_weights(name, tmp_path):
    from sievesim.models import load_model_toml, save_model_toml

    spec = _read(name)
    path = tmp_path / "m.toml"
    save_model_toml(spec, path)
    again = load_model_toml(path)
    assert again == spec and again.total_params == spec.total_params and again.ignored_keys == ()


def test_kimi_k2_preset_is_the_reading_of_its_config_in_bf16():
    from sievesim.models import get_model

    preset = get_model("kimi-k2")
    read = _read("Kimi-K2-Instruct")
    assert read.expert_format == "fp8-block"       # the checkpoint's FP8 (quantization_config)
    bf16 = read.replace(name="kimi-k2", expert_format=None, weight_format=None, expert_dtype_bytes=None,
                        weight_dtype_bytes=None)
    assert preset == bf16 and preset.total_bytes == 2 * preset.total_params


def test_an_ungated_activation_is_refused_by_name():
    """A family's MLP is gated (gate, up, down) unless its reader says otherwise: a relu2 MLP has two
    matrices (Nemotron-H reads its own: tests/test_models_hybrid.py)."""
    with pytest.raises(ConfigError, match=r"hidden_act = 'relu2': expected the activation of a gated MLP"):
        from_hf_config(dict(OLMOE, hidden_act="relu2"), name="m")
    with pytest.raises(ConfigError, match=r"mlp_hidden_act = 'relu2'"):
        from_hf_config(dict(OLMOE, mlp_hidden_act="relu2"), name="m")


def test_minimax_attention_list_all_softmax_is_read_a_lightning_layer_is_refused():
    """MiniMax-M2.7 writes attn_type_list (all 1: softmax attention); its shapes are M2.5's. A 0
    (MiniMax-Text-01's lightning attention) is not modelled and refuses, naming the key."""
    m27 = from_hf_config(_file("MiniMaxAI--MiniMax-M2.7"), name="m")
    m25 = from_hf_config(_file("MiniMaxAI--MiniMax-M2.5"), name="m")
    assert m27 == m25 and "attn_type_list" not in dict(m27.ignored_keys)
    cfg = _file("MiniMaxAI--MiniMax-M2.7")
    cfg["attn_type_list"][0] = 0
    with pytest.raises(ConfigError, match=r"attn_type_list = .*expected 1 \(softmax attention\) for each of the 62"):
        from_hf_config(cfg, name="m")


def test_qwen3_use_qk_norm_and_qkv_bias_keys():
    """Qwen3-Coder's config says use_qk_norm (Qwen3 attention always has its per-head norms) and
    qkv_bias false; a qkv_bias no Qwen3 reading uses, switched on, refuses by name."""
    coder = _read("Qwen3-Coder-480B-A35B")
    assert coder.qk_norm and not coder.qk_norm_over_heads and not coder.qkv_bias
    cfg = _file(FILES["Qwen3-Coder-480B-A35B"])
    with pytest.raises(ConfigError, match=r"qkv_bias \(biases on the q/k/v projections\) = '<not handled>'"):
        from_hf_config(dict(cfg, qkv_bias=True), name="q")


# ---------------------------------------------------------------------- the presets' own files
PRESET_FILES = {
    "gpt-oss-120b": "openai--gpt-oss-120b", "gpt-oss-20b": "openai--gpt-oss-20b",
    "qwen3-30b-a3b": "Qwen--Qwen3-30B-A3B", "qwen3-235b-a22b": "Qwen--Qwen3-235B-A22B",
    "qwen3.5-397b-a17b": "Qwen--Qwen3.5-397B-A17B", "mixtral-8x7b": "mistralai--Mixtral-8x7B-v0.1",
    "mixtral-8x22b": "mistralai--Mixtral-8x22B-v0.1", "deepseek-v3": "deepseek-ai--DeepSeek-V3",
    "llama4-maverick": "meta-llama--Llama-4-Maverick-17B-128E-Instruct",
}


@pytest.mark.parametrize("preset", sorted(PRESET_FILES))
def test_presets_published_configs_read_to_the_preset_with_every_key_accounted_for(preset):
    """The full published config.json of each preset's model reads to the preset's parameter count,
    and every key it carries is read, handled, or known to change nothing in a decode step (none
    left "not read")."""
    from sievesim.models import get_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = from_hf_config(DATA / f"{PRESET_FILES[preset]}.json", name=preset)
    assert spec.total_params == get_model(preset).total_params
    assert [k for k, why in spec.ignored_keys if why.startswith("not read")] == []


def test_ling_biases():
    """Ling's fused q/k/v projection carries biases when use_qkv_bias; biases on its output projection
    and MLPs (use_bias) are not modelled and refuse by name."""
    ling = _file(FILES["Ling-lite-1.5"])
    spec = from_hf_config(dict(ling, use_qkv_bias=True), name="l")
    assert spec.qkv_bias and spec.attention_params_per_layer(0) == _read("Ling-lite-1.5").attention_params_per_layer(0) \
        + (16 + 2 * 4) * 128
    with pytest.raises(ConfigError, match=r"use_bias = True: expected false"):
        from_hf_config(dict(ling, use_bias=True), name="l")
