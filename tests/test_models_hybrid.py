"""Architectures beyond attention + MoE, read from their own config.json (issue 70): Nemotron-H's hybrid
Mamba-2 / attention / MoE blocks, multi-token-prediction layers (their weights, and MTP decoding
holding them). Each family against its publisher's totals, an independent per-tensor count written
from the config alone, and a finite decode step.

The config files (tests/data/hf_configs/) are public copies; docs/models.md names the source of each.
"""
from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pytest

from sievesim.errors import ConfigError
from sievesim.models import ModelSpec, from_hf_config, get_model, load_model_toml, save_model_toml

DATA = Path(__file__).parent / "data" / "hf_configs"
NEMOTRON = "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"


def _file(stem: str) -> dict:
    return json.loads((DATA / f"{stem}.json").read_text())


def _nemotron(**changes) -> ModelSpec:
    return from_hf_config(dict(_file(NEMOTRON), **changes), name="nemotron-3-nano")


# ---------------------------------------------------------------------- Nemotron-H
def _nemotron_tensors(cfg: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor of a Nemotron-H checkpoint with its shape, following modeling_nemotron_h.py
    (NemotronHBlock: a norm and one mixer per character of hybrid_override_pattern), written from
    the config alone."""
    h, V = cfg["hidden_size"], cfg["vocab_size"]
    nh, hd, N, G, K = (cfg["mamba_num_heads"], cfg["mamba_head_dim"], cfg["ssm_state_size"], cfg["n_groups"],
                       cfg["conv_kernel"])
    inner, conv_dim = nh * hd, nh * hd + 2 * G * N
    nq, nkv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    E, I, S = cfg["n_routed_experts"], cfg["moe_intermediate_size"], cfg["moe_shared_expert_intermediate_size"]
    out: dict[str, tuple[int, ...]] = {"embeddings": (V, h), "norm_f": (h,), "lm_head": (V, h)}
    for i, c in enumerate(cfg["hybrid_override_pattern"]):
        p = f"layers.{i}."
        out[p + "norm"] = (h,)
        if c == "M":
            out.update({p + "in_proj": (2 * inner + 2 * G * N + nh, h), p + "conv1d.weight": (conv_dim, 1, K),
                        p + "conv1d.bias": (conv_dim,), p + "dt_bias": (nh,), p + "A_log": (nh,), p + "D": (nh,),
                        p + "norm.weight": (inner,), p + "out_proj": (h, inner)})
        elif c == "*":
            out.update({p + "q_proj": (nq * d, h), p + "k_proj": (nkv * d, h), p + "v_proj": (nkv * d, h),
                        p + "o_proj": (h, nq * d)})
        elif c == "E":
            out.update({p + "gate.weight": (E, h), p + "gate.e_score_correction_bias": (E,),
                        p + "shared_experts.up_proj": (S, h), p + "shared_experts.down_proj": (h, S)})
            for e in range(E):
                out.update({f"{p}experts.{e}.up_proj": (I, h), f"{p}experts.{e}.down_proj": (h, I)})
    return out


def test_nemotron_h_against_published_totals_and_a_per_tensor_count():
    """NVIDIA's Nemotron 3 Nano report and model card: 31.6B total, 3.2B active (3.6B with the
    embedding); the total equals the per-tensor count of its checkpoint."""
    spec = _nemotron()
    assert abs(spec.total_params - 31.6e9) <= 0.03 * 31.6e9
    assert abs(spec.active_params - 3.2e9) <= 0.03 * 3.2e9
    assert abs(spec.active_params_with_embedding - 3.6e9) <= 0.03 * 3.6e9
    assert spec.total_params == sum(math.prod(s) for s in _nemotron_tensors(_file(NEMOTRON)).values())
    assert "verified family" in spec.source
    assert [k for k, why in spec.ignored_keys if why.startswith("not read")] == []


def test_nemotron_h_layers_state_and_mlps():
    """52 blocks: 23 Mamba-2, 6 attention, 23 MoE; each mixer with the MoE block after it is one
    layer (29 layers, 6 of them without an MLP); the Mamba state is fixed per request."""
    spec = _nemotron()
    assert spec.num_layers == 29 and spec.layer_attention.count("mamba") == 23
    assert spec.layer_attention.count("full") == 6 and spec.num_moe_layers == 23
    assert spec.layer_mlp.count("none") == 6 and spec.num_dense_layers == 0
    assert spec.layer_attention[:4] == ("mamba", "mamba", "mamba", "full")
    assert spec.layer_mlp[:4] == ("moe", "moe", "none", "moe")
    assert not spec.mlp_gated and spec.params_per_expert == 2 * 2688 * 1856 and spec.router_bias
    assert (spec.num_shared_experts, spec.shared_expert_intermediate_size) == (1, 3712)
    # SSM state 64 heads x 64 x 128 in fp32 (mamba_ssm_cache_dtype), conv state (4096 + 2*8*128) x 3 in bf16
    assert spec.state_dtype_bytes == 4.0
    assert spec.mamba_state_bytes_per_layer == 64 * 64 * 128 * 4 + (4096 + 2 * 8 * 128) * 3 * 2
    assert spec.linear_state_bytes_per_request == 23 * spec.mamba_state_bytes_per_layer
    assert spec.kv_bytes_per_token_all_layers == 6 * 2 * 2 * 128 * 2
    assert spec.kv_cache_bytes_per_request(1000) == 1000 * 6 * 2 * 2 * 128 * 2 + 23 * spec.mamba_state_bytes_per_layer
    assert spec.kv_tokens_held(0, 1000) == 0 and spec.kv_tokens_held(3, 1000) == 1000


def test_nemotron_h_decode_step_on_gpu_and_with_attention_on_pim():
    from sievesim.system.step import simulate_step

    spec = _nemotron()
    for policy in ("gpu-only", "sieve"):
        result = simulate_step(spec, "b200", gpus=DOC_ROWS[NEMOTRON][3], policy=policy, batch=8, steps=1, warmup=0)
        assert math.isfinite(result.step_time_s) and result.step_time_s > 0, policy


def test_mamba_layer_costs_read_and_write_its_state():
    """On the GPU a Mamba layer moves its state in and out once per request, whatever the context;
    on PIM it is priced as the linear layers are, one unit per SSM head."""
    from sievesim.costs import attention_shape
    from sievesim.hardware import get_hardware
    from sievesim.pim.attention import AttentionLayer
    from sievesim.pim.expert import EnginePimCost
    from sievesim.system import gpu_ops

    spec = _nemotron()
    short = gpu_ops.decode_attention_on_gpu(spec, 0, [10] * 4)
    long = gpu_ops.decode_attention_on_gpu(spec, 0, [10**5] * 4)
    assert short == long
    assert short.bytes == 4 * 2 * spec.mamba_state_bytes_per_layer + 4 * 2 * 2688 * 2
    assert attention_shape(spec, 0).fixed_flops_per_request == 6 * 64 * 64 * 128
    assert gpu_ops.attention_out_params(spec, 0) == 4096 * 2688
    layer = AttentionLayer.from_model(spec, 0)
    assert (layer.kind, layer.kv_heads, layer.head_dim, layer.value_dim) == ("linear", 64, 128, 64)
    pim = EnginePimCost.for_model(spec, get_hardware("b200"), layer=0)
    t8, t16 = pim.attention_time_s([100] * 8), pim.attention_time_s([100] * 16)
    assert 0 < t8 < t16 and pim.attention_time_s([10**5] * 8) == t8
    assert pim.up_width == 1856    # the ungated experts' first GEMV: up alone


def test_nemotron_h_tensor_shard_and_toml_round_trip(tmp_path):
    spec = _nemotron()
    shard = spec.tensor_shard(8)
    assert (shard.mamba_num_heads, shard.mamba_groups) == (8, 1)
    assert shard.mamba_state_bytes_per_layer * 8 == pytest.approx(spec.mamba_state_bytes_per_layer, rel=0.05)
    with pytest.raises(ConfigError, match=r"mamba_groups = 8: expected a multiple of the 16 GPUs"):
        spec.tensor_shard(16)
    path = tmp_path / "n.toml"
    save_model_toml(spec, path)
    again = load_model_toml(path)
    assert again == spec and again.total_params == spec.total_params


@pytest.mark.parametrize("key, value, expected", [
    ("hybrid_override_pattern", "EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEM", "each MLP block after a mixer"),
    ("hybrid_override_pattern", "MEME", "52 blocks"),
    ("hybrid_override_pattern", "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEM-", "no dense MLP block"),
    ("hybrid_override_pattern", "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEMX", "one of"),
    ("mlp_hidden_act", "gelu", "relu2"),
    ("mamba_proj_bias", True, "false"),
    ("use_conv_bias", False, "true"),
    ("mlp_bias", True, "false"),
    ("mamba_ssm_cache_dtype", "float128", "one of"),
    ("n_groups", 3, "a divisor of mamba_num_heads = 64"),
])
def test_nemotron_h_refusals_name_the_key(key, value, expected):
    with pytest.raises(ConfigError) as exc:
        _nemotron(**{key: value})
    assert key in str(exc.value) and expected in str(exc.value), str(exc.value)


def test_layers_without_an_mlp_only_beside_moe_layers():
    spec = _nemotron()
    with pytest.raises(ConfigError, match=r"layer_mlp = .*expected layers without an MLP \('none'\) only beside MoE"):
        spec.replace(layer_mlp=("dense",) + spec.layer_mlp[1:], dense_intermediate_size=1024)


# ---------------------------------------------------------------------- multi-token prediction
def test_deepseek_v3_mtp_module_against_the_published_checkpoint_size():
    """DeepSeek-V3's model card: 685B on Hugging Face, 671B of the main model and 14B of the MTP
    module; the checkpoint's MTP layer stores its own copies of the embedding and the LM head,
    which serving shares with the main model (not in mtp_params)."""
    spec = from_hf_config(DATA / "deepseek-ai--DeepSeek-V3.json", name="v3")
    assert spec.num_mtp_layers == 1
    copies = 2 * spec.vocab_size * spec.hidden_size
    assert abs(spec.total_params + spec.mtp_params + copies - 685e9) <= 0.03 * 685e9
    assert abs(spec.mtp_params + copies - 14e9) <= 0.05 * 14e9
    # one MTP layer: a copy of the last (MoE) layer, the 2h -> h projection and three RMSNorms
    h = spec.hidden_size
    assert spec.mtp_params == spec.layer_params(60) + 2 * h * h + 3 * h


def test_mtp_decoding_holds_the_mtp_weights():
    """MTP layers are held (total_bytes) only when MTP decoding is on; the publisher's total is unchanged."""
    base = get_model("deepseek-v3")
    on = base.replace(mtp_tokens=2)
    assert on.total_params == base.total_params and on.mtp_params == base.mtp_params
    assert on.total_bytes == pytest.approx(base.total_bytes + base.mtp_bytes)
    assert base.mtp_bytes == 2 * base.mtp_params          # bf16
    assert (base.num_moe_layers_held, on.num_moe_layers_held) == (58, 59)
    assert on.summary()["mtp_params"] == base.mtp_params
    fp8 = on.with_formats({"experts": "fp8"})
    assert fp8.mtp_bytes < on.mtp_bytes
    with pytest.raises(ConfigError, match=r"mtp_tokens = 1: expected 0 for a model without MTP layers"):
        get_model("gpt-oss-120b").replace(mtp_tokens=1)
    with pytest.raises(ConfigError, match=r"mtp_tokens = -1: expected a non-negative integer"):
        base.replace(mtp_tokens=-1)


# ---------------------------------------------------------------------- DeepSeek sparse attention
#   file                          total  active (without emb.)  GPUs (B200) of one decode step
DSA = {
    "deepseek-ai--DeepSeek-V3.2": (671e9, 37e9, 8),    # DeepSeek-V3's architecture + DSA: 671B, 37B activated
    "zai-org--GLM-5": (744e9, 40e9, 16),               # Z.ai: 744B parameters, 40B active
}


def _dsa(stem: str, **changes) -> ModelSpec:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return from_hf_config(dict(_file(stem), **changes), name=stem)


def _dsa_tensors(cfg: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor of a DeepSeek-V3.2 / GLM-5 checkpoint's main model with its shape (DeepSeek's
    inference/model.py: MLA, the Indexer's wq_b, wk, k_norm (a LayerNorm: weight and bias) and
    weights_proj, dense then MoE MLPs with the score-correction bias), from the config alone."""
    h, V, L = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    nq, qr, kr = cfg["num_attention_heads"], cfg["q_lora_rank"], cfg["kv_lora_rank"]
    nope, rope, v = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    nh, hd = cfg["index_n_heads"], cfg["index_head_dim"]
    E, I, F = cfg["n_routed_experts"], cfg["moe_intermediate_size"], cfg["intermediate_size"]
    S = cfg["n_shared_experts"] * I
    out: dict[str, tuple[int, ...]] = {"embed": (V, h), "norm": (h,), "head": (V, h)}
    for i in range(L):
        p = f"layers.{i}."
        out.update({p + "attn_norm": (h,), p + "ffn_norm": (h,), p + "wq_a": (qr, h), p + "q_norm": (qr,),
                    p + "wq_b": (nq * (nope + rope), qr), p + "wkv_a": (kr + rope, h), p + "kv_norm": (kr,),
                    p + "wkv_b": (nq * (nope + v), kr), p + "wo": (h, nq * v),
                    p + "indexer.wq_b": (nh * hd, qr), p + "indexer.wk": (hd, h), p + "indexer.k_norm.weight": (hd,),
                    p + "indexer.k_norm.bias": (hd,), p + "indexer.weights_proj": (nh, h)})
        if i < cfg["first_k_dense_replace"]:
            out.update({p + "mlp.w1": (F, h), p + "mlp.w3": (F, h), p + "mlp.w2": (h, F)})
            continue
        out.update({p + "gate.weight": (E, h), p + "gate.bias": (E,), p + "shared.w1": (S, h),
                    p + "shared.w3": (S, h), p + "shared.w2": (h, S)})
        for e in range(E):
            out.update({f"{p}experts.{e}.w1": (I, h), f"{p}experts.{e}.w3": (I, h), f"{p}experts.{e}.w2": (h, I)})
    return out


@pytest.mark.parametrize("stem", sorted(DSA))
def test_dsa_families_against_published_totals_and_a_per_tensor_count(stem):
    spec = _dsa(stem)
    total, active, _ = DSA[stem]
    assert abs(spec.total_params - total) <= 0.03 * total
    assert abs(spec.active_params - active) <= 0.03 * active
    assert spec.total_params == sum(math.prod(s) for s in _dsa_tensors(_file(stem)).values())
    assert (spec.index_n_heads, spec.index_head_dim, spec.index_topk) == tuple(
        _file(stem)[k] for k in ("index_n_heads", "index_head_dim", "index_topk"))
    assert "verified family" in spec.source and spec.num_mtp_layers == 1
    assert [k for k, why in spec.ignored_keys if why.startswith("not read")] == []
    # the latent, the rope key and the indexer's key are cached per token
    assert spec.kv_bytes_per_token(5) == (512 + 64 + 128) * 2


def test_deepseek_v32_checkpoint_size_with_its_mtp_module():
    """Hugging Face lists DeepSeek-V3.2 at 685B: the main model, the MTP layer and its copies of the
    embedding and LM head."""
    spec = _dsa("deepseek-ai--DeepSeek-V3.2")
    copies = 2 * spec.vocab_size * spec.hidden_size
    assert abs(spec.total_params + spec.mtp_params + copies - 685e9) <= 0.03 * 685e9


@pytest.mark.parametrize("stem", sorted(DSA))
def test_dsa_decode_step_is_finite(stem):
    from sievesim.system.step import simulate_step

    gpus = DSA[stem][2]
    bf16 = _dsa(stem).with_formats({"experts": "bf16", "weights": "bf16"})
    for policy in ("gpu-only", "sieve"):
        result = simulate_step(bf16, "b200", gpus=gpus, policy=policy, batch=gpus, steps=1, warmup=0)
        assert math.isfinite(result.step_time_s) and result.step_time_s > 0, policy


def test_dsa_attention_reads_the_selected_tokens_after_scoring_them_all():
    """Beyond index_topk tokens the attention's latent reads and FLOPs stop growing; the indexer's
    keys and scores grow with the whole context (on the GPU and on PIM)."""
    from sievesim.costs import attention_shape
    from sievesim.hardware import get_hardware
    from sievesim.pim.expert import EnginePimCost
    from sievesim.system import gpu_ops

    spec = _dsa("deepseek-ai--DeepSeek-V3.2")
    topk, latent, index = 2048, (512 + 64) * 2, 128 * 2
    for L in (1000, 2048, 8192):
        work = gpu_ops.decode_attention_on_gpu(spec, 5, [L])
        assert work.bytes == min(L, topk) * latent + L * index + 2 * 7168 * 2
        assert work.flops == 4 * 576 * 128 * min(L, topk) + 2 * 64 * 129 * L
    shape = attention_shape(spec, 5)
    assert shape.window == topk and shape.total_flops([8192]) == 4 * 576 * 128 * topk + 2 * 64 * 129 * 8192
    pim = EnginePimCost.for_model(spec, get_hardware("b200"), layer=5)
    idx = [pim.attention.indexer_s(pim.device, [L] * 4) for L in (2048, 8192, 65536)]
    att = [pim.attention_time_s([L] * 4) - i for L, i in zip((2048, 8192, 65536), idx)]
    assert 0 < idx[0] < idx[1] < idx[2]
    assert att[0] == pytest.approx(att[1], rel=1e-9) and att[1] == pytest.approx(att[2], rel=1e-9)


@pytest.mark.parametrize("key, value, expected", [
    ("index_topk", 0, "a positive number of selected tokens"),
    ("qk_head_dim", 128, "qk_nope_head_dim + qk_rope_head_dim = 256"),
    ("head_dim", 128, "qk_rope_head_dim = 64"),
])
def test_dsa_refusals_name_the_key(key, value, expected):
    with pytest.raises(ConfigError) as exc:
        _dsa("zai-org--GLM-5", **{key: value})
    assert key in str(exc.value) and expected in str(exc.value), str(exc.value)


def test_an_indexer_without_mla_is_refused_by_name():
    """The indexer's queries come from MLA's query latent: outside MLA its keys are not read."""
    olmoe = _file("allenai--OLMoE-1B-7B-0924")
    with pytest.raises(ConfigError, match=r"index_n_heads.*'<not handled>'"):
        from_hf_config(dict(olmoe, index_n_heads=8, index_head_dim=64, index_topk=512), name="o")
    with pytest.raises(ConfigError, match=r"index_n_heads, index_head_dim, index_topk = \[8, 0, 0\]"):
        get_model("deepseek-v3").replace(index_n_heads=8)


# ---------------------------------------------------------------------- per-kind attention shapes (MiMo-V2)
MIMO = "XiaomiMiMo--MiMo-V2-Flash"


def _mimo_tensors(cfg: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor of MiMo-V2-Flash's main model with its shape (q/k/v/o per layer with the full or
    sliding layers' KV heads, values of v_head_dim, a sink per query head on sliding layers, a dense
    first layer, MoE layers with the score-correction bias), from the config alone."""
    h, V = cfg["hidden_size"], cfg["vocab_size"]
    nq, d, dv = cfg["num_attention_heads"], cfg["head_dim"], cfg["v_head_dim"]
    E, I, F = cfg["n_routed_experts"], cfg["moe_intermediate_size"], cfg["intermediate_size"]
    out: dict[str, tuple[int, ...]] = {"embed_tokens": (V, h), "norm": (h,), "lm_head": (V, h)}
    for i, (swa, moe) in enumerate(zip(cfg["hybrid_layer_pattern"], cfg["moe_layer_freq"])):
        p = f"layers.{i}."
        nkv = cfg["swa_num_key_value_heads"] if swa else cfg["num_key_value_heads"]
        out.update({p + "input_layernorm": (h,), p + "post_attention_layernorm": (h,), p + "q_proj": (nq * d, h),
                    p + "k_proj": (nkv * d, h), p + "v_proj": (nkv * dv, h), p + "o_proj": (h, nq * dv)})
        if swa and cfg["add_swa_attention_sink_bias"]:
            out[p + "attention_sink_bias"] = (nq,)
        if not moe:
            out.update({p + "mlp.gate_proj": (F, h), p + "mlp.up_proj": (F, h), p + "mlp.down_proj": (h, F)})
            continue
        out.update({p + "gate.weight": (E, h), p + "gate.e_score_correction_bias": (E,)})
        for e in range(E):
            out.update({f"{p}experts.{e}.gate_proj": (I, h), f"{p}experts.{e}.up_proj": (I, h),
                        f"{p}experts.{e}.down_proj": (h, I)})
    return out


def test_mimo_v2_flash_against_published_totals_and_a_per_tensor_count():
    """Xiaomi's model card: 309B total, 15B active; 9 full layers (4 KV heads) and 39 sliding-window
    layers of 128 tokens (8 KV heads, sinks), keys of 192 and values of 128 elements per head."""
    spec = _dsa(MIMO)
    assert abs(spec.total_params - 309e9) <= 0.03 * 309e9
    assert abs(spec.active_params - 15e9) <= 0.03 * 15e9
    assert spec.total_params == sum(math.prod(s) for s in _mimo_tensors(_file(MIMO)).values())
    assert (spec.layer_attention.count("full"), spec.layer_attention.count("sliding")) == (9, 39)
    assert spec.attention_dims("full") == (64, 4, 192, 128) and spec.attention_dims("sliding") == (64, 8, 192, 128)
    assert spec.sliding_attention_sinks and not spec.attention_sinks and spec.num_dense_layers == 1
    assert spec.kv_bytes_per_token(0) == 4 * (192 + 128) * 2 and spec.kv_bytes_per_token(1) == 8 * (192 + 128) * 2
    assert spec.kv_tokens_held(1, 10**5) == 128 and "verified family" in spec.source
    assert [k for k, why in spec.ignored_keys if why.startswith("not read")] == []


def test_mimo_v2_flash_decode_step_and_per_kind_costs():
    from sievesim.costs import attention_shape
    from sievesim.pim.attention import AttentionLayer
    from sievesim.system import gpu_ops
    from sievesim.system.step import simulate_step

    spec = _dsa(MIMO).with_formats({"experts": "bf16", "weights": "bf16"})
    for policy in ("gpu-only", "sieve"):
        result = simulate_step(spec, "b200", gpus=DOC_ROWS[MIMO][3], policy=policy, batch=8, steps=1, warmup=0)
        assert math.isfinite(result.step_time_s) and result.step_time_s > 0, policy
    # full layer: 16 query heads per KV head over keys of 192 and values of 128
    assert attention_shape(spec, 0).flops_per_context_token == 2 * 64 * (192 + 128)
    assert attention_shape(spec, 1).window == 128
    assert gpu_ops.attention_out_params(spec, 0) == 64 * 128 * 4096
    full, swa = AttentionLayer.from_model(spec, 0), AttentionLayer.from_model(spec, 1)
    assert (full.kv_heads, full.q_per_kv, full.head_dim, full.value_dim) == (4, 16, 192, 128)
    assert (swa.kv_heads, swa.q_per_kv, swa.window) == (8, 8, 128)
    shard = spec.tensor_shard(8)
    assert shard.attention_dims("full")[1] == 1 and shard.attention_dims("sliding")[1] == 1


@pytest.mark.parametrize("key, value, expected", [
    ("hybrid_layer_pattern", [0, 1], "for each of the 48 layers"),
    ("swa_num_attention_heads", 32, "64, as the full-attention layers"),
    ("swa_head_dim", 128, "192, as the full-attention layers"),
    ("swa_num_key_value_heads", 5, "a divisor of num_attention_heads = 64"),
    ("sliding_window_size", 256, "sliding_window = 128"),
])
def test_mimo_v2_refusals_name_the_key(key, value, expected):
    with pytest.raises(ConfigError) as exc:
        _dsa(MIMO, **{key: value})
    assert key in str(exc.value), str(exc.value)
    assert expected in str(exc.value), str(exc.value)


def test_sinks_on_full_layers_alone_are_refused_both_are_read():
    with pytest.raises(ConfigError, match=r"add_full_attention_sink_bias = True: expected false, or sinks on the"):
        _dsa(MIMO, add_full_attention_sink_bias=True, add_swa_attention_sink_bias=False)
    both = _dsa(MIMO, add_full_attention_sink_bias=True)
    assert both.attention_sinks and both.total_params == _dsa(MIMO).total_params + 9 * 64


# ---------------------------------------------------------------------- Gemma 4 (global layers' own heads, keys as values)
GEMMA = "google--gemma-4-26B-A4B"


def _gemma_tensors(cfg: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor of Gemma 4 26B-A4B's language model with its shape (the checkpoint's names: seven
    RMSNorms, q/k norms, a layer scalar, the dense MLP, the router's scale, per-expert scale and
    projection, the fused experts; global layers of global_head_dim and num_global_key_value_heads
    without v_proj when attention_k_eq_v; embedding tied to the LM head), from the config alone."""
    t = cfg["text_config"]
    h, V, nq = t["hidden_size"], t["vocab_size"], t["num_attention_heads"]
    E, Ie, F = t["num_experts"], t["moe_intermediate_size"], t["intermediate_size"]
    out: dict[str, tuple[int, ...]] = {"embed_tokens": (V, h), "norm": (h,)}
    for i, kind in enumerate(t["layer_types"]):
        p = f"layers.{i}."
        glob = kind == "full_attention"
        d = t["global_head_dim"] if glob else t["head_dim"]
        nkv = t["num_global_key_value_heads"] if glob else t["num_key_value_heads"]
        out.update({p + "layer_scalar": (1,), p + "q_proj": (nq * d, h), p + "k_proj": (nkv * d, h),
                    p + "o_proj": (h, nq * d), p + "q_norm": (d,), p + "k_norm": (d,),
                    p + "mlp.gate_proj": (F, h), p + "mlp.up_proj": (F, h), p + "mlp.down_proj": (h, F),
                    p + "router.scale": (h,), p + "router.per_expert_scale": (E,), p + "router.proj": (E, h),
                    p + "experts.gate_up_proj": (E, 2 * Ie, h), p + "experts.down_proj": (E, h, Ie)})
        if not (glob and t["attention_k_eq_v"]):
            out[p + "v_proj"] = (nkv * d, h)
        for norm in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                     "post_feedforward_layernorm_1", "pre_feedforward_layernorm_2", "post_feedforward_layernorm_2",
                     "post_feedforward_layernorm"):
            out[p + norm] = (h,)
    return out


def test_gemma4_against_published_totals_and_a_per_tensor_count():
    """Google's Gemma 4 26B A4B: 25.2B total, 3.8B active; 25 sliding layers (8 KV heads of 256) and 5
    global layers (2 KV heads of 512, keys as values), 210 KiB of KV cache per token."""
    spec = _dsa(GEMMA)
    assert abs(spec.total_params - 25.2e9) <= 0.03 * 25.2e9
    assert abs(spec.active_params - 3.8e9) <= 0.03 * 3.8e9
    assert spec.total_params == sum(math.prod(s) for s in _gemma_tensors(_file(GEMMA)).values())
    assert spec.attention_dims("full") == (16, 2, 512, 512) and spec.attention_dims("sliding") == (16, 8, 256, 256)
    assert spec.full_k_eq_v and spec.kv_bytes_per_token(5) == 2 * 512 * 2 and spec.kv_bytes_per_token(0) == 8 * 512 * 2
    assert spec.kv_bytes_per_token_all_layers == 210 * 1024
    assert (spec.num_shared_experts, spec.shared_expert_intermediate_size, spec.top_k) == (1, 2112, 8)
    assert spec.tie_word_embeddings and "verified family" in spec.source
    assert [k for k, why in spec.ignored_keys if why.startswith("not read")] == []


def test_gemma4_decode_step_and_global_layer_costs():
    from sievesim.costs import attention_shape
    from sievesim.pim.attention import AttentionLayer
    from sievesim.system import gpu_ops
    from sievesim.system.step import simulate_step

    spec = _dsa(GEMMA)
    for policy in ("gpu-only", "sieve"):
        result = simulate_step(spec, "b200", gpus=DOC_ROWS[GEMMA][3], policy=policy, batch=8, steps=1, warmup=0)
        assert math.isfinite(result.step_time_s) and result.step_time_s > 0, policy
    # a global layer reads each key once but multiplies it for the scores and again for the values
    assert attention_shape(spec, 5).flops_per_context_token == 2 * 16 * (512 + 512)
    assert gpu_ops.decode_attention_on_gpu(spec, 5, [1000]).bytes == 1000 * 2 * 512 * 2 + 2 * 2816 * 2
    assert spec.attention_params_per_layer(5) == 2816 * (16 * 512 + 2 * 512 + 16 * 512) + 2 * 512
    glob = AttentionLayer.from_model(spec, 5)
    assert (glob.kv_heads, glob.q_per_kv, glob.head_dim, glob.value_dim, glob.window) == (2, 8, 512, 512, None)


@pytest.mark.parametrize("key, value, expected", [
    ("enable_moe_block", False, "true"),
    ("use_double_wide_mlp", True, "false"),
    ("hidden_size_per_layer_input", 256, "0 (not modelled)"),
    ("num_kv_shared_layers", 10, "0 (not modelled)"),
    ("num_global_key_value_heads", 3, "a divisor of num_attention_heads = 16"),
])
def test_gemma4_refusals_name_the_key(key, value, expected):
    cfg = _file(GEMMA)
    cfg["text_config"][key] = value
    with pytest.raises(ConfigError) as exc:
        from_hf_config(cfg, name="g")
    assert key in str(exc.value) and expected in str(exc.value), str(exc.value)


# ---------------------------------------------------------------------- every family's file, corrupted
@pytest.mark.parametrize("stem", [NEMOTRON] + sorted(DSA) + [MIMO, GEMMA])
def test_every_structural_key_corrupted_is_refused_by_name(stem):
    """As tests/test_models_families.py does for the other families: every decisive key of the
    file (of its ``text_config`` where it has one), corrupted in every way, refuses, naming the key."""
    from sievesim.models.hf_keys import _HF_BOOL_KEYS, _HF_INT_KEYS, _HF_LIST_KEYS, _HF_STR_KEYS, STRUCTURAL_KEYS

    decisive = set(STRUCTURAL_KEYS) | set(_HF_INT_KEYS) | set(_HF_BOOL_KEYS) | set(_HF_LIST_KEYS) | set(_HF_STR_KEYS)
    base = _file(stem)
    fields = base.get("text_config", base)
    missed = []
    for key in sorted(k for k, v in fields.items() if k in decisive and v is not None):
        for bad in (-1, -4096, 2.5, "two", {"value": 1}, [-1], True):
            if type(bad) is type(fields[key]):
                continue
            cfg = json.loads(json.dumps(base))
            cfg.get("text_config", cfg)[key] = bad
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    from_hf_config(cfg, name=stem)
                missed.append((key, bad, "read"))
            except ConfigError as exc:
                if key not in str(exc):
                    missed.append((key, bad, str(exc)))
    assert not missed


# ---------------------------------------------------------------------- docs/models.md shows these figures
DOC = Path(__file__).resolve().parents[1] / "docs" / "models.md"
#: Each row's file and the published figures it shows: total, active (with the embedding, or None), G.
DOC_ROWS = {NEMOTRON: ("31.6", "3.2", "3.6", 1), "deepseek-ai--DeepSeek-V3.2": ("671", "37", None, 8),
            "zai-org--GLM-5": ("744", "40", None, 16), MIMO: ("309", "15", None, 8),
            "google--gemma-4-26B-A4B": ("25.2", "3.8", None, 1)}


def test_docs_table_shows_what_the_reader_computes():
    import re

    text = DOC.read_text()
    table = text[text.index("### Hybrid Mamba, sparse attention, multi-token prediction"):]
    table = table[:table.index("Published figures:")]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        match = re.search(r"\(`([^`]+)`\)", cells[0]) if len(cells) > 4 else None
        if match:
            rows[match.group(1)] = cells
    assert set(rows) == set(DOC_ROWS)
    for stem, (total, active, with_emb, gpus) in DOC_ROWS.items():
        spec = _dsa(stem)
        cells = rows[stem]
        assert cells[1] == f"{spec.total_params / 1e9:.2f} / {total}"
        shown = f"{spec.active_params / 1e9:.2f} ({spec.active_params_with_embedding / 1e9:.2f}) / {active}"
        assert cells[2] == shown + (f" ({with_emb})" if with_emb else "")
        assert int(cells[3]) == gpus == (DSA[stem][2] if stem in DSA else gpus)   # the decode tests' G
    assert f"23 x {_nemotron().mamba_state_bytes_per_layer / 2**20:.2f} MiB" in rows[NEMOTRON][4]
    v32, v3 = _dsa("deepseek-ai--DeepSeek-V3.2"), get_model("deepseek-v3")
    copies = 2 * v32.vocab_size * v32.hidden_size
    for figure in (f"its MTP layer ({v32.mtp_params / 1e9:.2f}, `mtp_params`)", f"LM head ({copies / 1e9:.2f})",
                   f"{(v32.total_params + v32.mtp_params + copies) / 1e9:.2f} in all",
                   f"only the indexer, {(v32.total_params - v3.total_params) / 1e9:.2f} B here"):
        assert figure in text, figure
    assert f"23 layers of {_nemotron().mamba_state_bytes_per_layer / 2**20:.2f} MiB" in text


@pytest.mark.parametrize("stem", sorted(DOC_ROWS))
def test_toml_round_trip_keeps_the_new_fields(stem, tmp_path):
    """Every family above, written to sievesim's TOML and read back, is the same model (the Mamba,
    per-kind attention, indexer and MTP fields included)."""
    spec = _dsa(stem)
    path = tmp_path / "m.toml"
    save_model_toml(spec, path)
    again = load_model_toml(path)
    assert again == spec and again.total_params == spec.total_params
    assert again.kv_bytes_per_token_all_layers == spec.kv_bytes_per_token_all_layers
    on = spec.replace(mtp_tokens=1) if spec.num_mtp_layers else spec
    save_model_toml(on, path)
    assert load_model_toml(path) == on


def test_the_memory_check_splits_the_mtp_layers_experts_over_the_gpus():
    from sievesim.capacity import memory_per_gpu
    from sievesim.hardware import get_hardware
    base = get_model("deepseek-v3")
    on = base.replace(mtp_tokens=1)
    hw = get_hardware("b200")
    off_use, on_use = memory_per_gpu(base, hw, 8, []), memory_per_gpu(on, hw, 8, [])
    one_layer = 256 // 8 * float(base.bytes_per_expert)
    assert on_use.expert_weights - off_use.expert_weights == pytest.approx(one_layer)
    assert on_use.replicated_weights - off_use.replicated_weights == pytest.approx(base.mtp_bytes - 256 * float(base.bytes_per_expert))
