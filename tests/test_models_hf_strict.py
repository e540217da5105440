"""No silent misreads of a Hugging Face config.json: structural keys the reader does not handle are
refused by name, unverified families are read only when every structural key is understood and are
labelled as such."""
from __future__ import annotations

import json

import pytest
from test_models import HF_CONFIGS

from sievesim.cli import main
from sievesim.errors import ConfigError
from sievesim.models import STRUCTURAL_KEYS, VERIFIED_FAMILIES, UnverifiedFamilyWarning, from_hf_config

# allenai/OLMoE-1B-7B-0924's config.json under a model_type sievesim has not checked against
# published counts (a user's own family; OLMoE itself is verified since issue 70)
OLMOE = {
    "architectures": ["MyMoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "clip_qkv": None,
    "eos_token_id": 50279, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 1024, "max_position_embeddings": 4096, "model_type": "my_moe", "norm_topk_prob": False,
    "num_attention_heads": 16, "num_experts": 64, "num_experts_per_tok": 8, "num_hidden_layers": 16,
    "num_key_value_heads": 16, "output_router_logits": False, "pad_token_id": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": None, "rope_theta": 10000.0, "router_aux_loss_coef": 0.01, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 50304,
}
DEEPSEEK_V3 = HF_CONFIGS["deepseek-v3"]    # the published config.json, as in test_models.py


def test_unverified_family_read_when_every_structural_key_is_understood():
    with pytest.warns(UnverifiedFamilyWarning, match=r"model_type 'my_moe' is an unverified family"):
        spec = from_hf_config(OLMOE, name="my-moe")
    assert "my_moe" not in VERIFIED_FAMILIES
    assert "unverified family" in spec.source
    assert spec.num_moe_layers == 16 and spec.num_experts == 64 and spec.moe_intermediate_size == 1024


def test_verified_family_is_labelled():
    assert "verified family (DeepSeek-V3)" in from_hf_config(DEEPSEEK_V3, name="d").source


@pytest.mark.parametrize("extra, named", [
    ({"moe_layer_start_index": 1}, "moe_layer_start_index"),          # ERNIE 4.5's layer pattern
    ({"moe_num_shared_experts": 2}, "moe_num_shared_experts"),        # shared experts under another name
    ({"attn_layer_period": 8}, "attn_layer_period"),                  # Jamba layer kinds
    ({"sliding_window_pattern": 6, "sliding_window": 512}, "sliding_window_pattern"),
])
def test_unhandled_structural_key_is_named(extra, named):
    with pytest.raises(ConfigError, match=rf"{named} \(.*\) = '<not handled>'"):
        from_hf_config(dict(OLMOE, **extra), name="x")


def test_unknown_structural_looking_key_of_unverified_family_is_refused():
    with pytest.raises(ConfigError, match=r"moe_router_layers = '<not understood>'.*unverified family"):
        from_hf_config(dict(OLMOE, moe_router_layers=[1, 3]), name="x")
    # a verified family's published files carry no such key either (issue 70): refused there too
    with pytest.raises(ConfigError, match=r"moe_router_layers = '<not understood>'.*'deepseek_v3' is a verified "
                       r"family, but its published files carry no such key"):
        from_hf_config(dict(DEEPSEEK_V3, moe_router_layers=[1]), name="d")
    # a key whose name suggests no shape is read past, and listed
    spec = from_hf_config(dict(DEEPSEEK_V3, comment="fine-tuned"), name="d")
    assert dict(spec.ignored_keys)["comment"].startswith("not read")


def test_verified_family_with_a_key_its_reader_does_not_use():
    # decoder_sparse_step is Qwen's; the DeepSeek reading places MoE layers by first_k_dense_replace
    with pytest.raises(ConfigError, match=r"decoder_sparse_step \(every N-th layer is MoE \(Qwen\)\)"):
        from_hf_config(dict(DEEPSEEK_V3, decoder_sparse_step=2), name="d")
    # a switched-off structural key changes nothing and is accepted
    assert from_hf_config(dict(DEEPSEEK_V3, decoder_sparse_step=0, mlp_bias=False), name="d").num_moe_layers == 58


def test_all_unhandled_keys_in_one_message():
    with pytest.raises(ConfigError) as exc:
        from_hf_config(dict(OLMOE, moe_layer_start_index=1, dense_intermediate_size=4096), name="x")
    assert "moe_layer_start_index" in str(exc.value) and "dense_intermediate_size" in str(exc.value)


def test_two_names_for_one_quantity_must_agree():
    with pytest.raises(ConfigError, match=r"experts_per_token = 2: expected 4, the value of num_experts_per_tok"):
        from_hf_config(dict(OLMOE, num_experts_per_tok=4, experts_per_token=2), name="x")


def test_structural_keys_catalogue_names_what_they_mean():
    assert all(isinstance(v, str) and v for v in STRUCTURAL_KEYS.values())


def test_cli_prints_unverified_family_and_exits_2_on_unhandled_key(tmp_path, capsys):
    good = tmp_path / "olmoe" / "config.json"
    good.parent.mkdir()
    good.write_text(json.dumps(OLMOE))
    assert main(["model", "show", str(good)]) == 0
    out, err = capsys.readouterr()
    assert "unverified family" in out
    assert err.startswith("sievesim: warning: ") and "unverified family" in err and len(err.splitlines()) == 1
    bad = tmp_path / "ernie" / "config.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps(dict(OLMOE, moe_layer_start_index=1)))
    assert main(["model", "show", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "moe_layer_start_index" in err and len(err.strip().splitlines()) == 1


def test_sliding_window_that_a_reading_would_drop_is_named():
    # DeepSeek's MLA reading has no sliding layers: a window asked for is not silently dropped
    with pytest.raises(ConfigError, match=r"sliding_window \(window of sliding-window layers\)"):
        from_hf_config(dict(DEEPSEEK_V3, sliding_window=4096), name="d")
    assert from_hf_config(dict(DEEPSEEK_V3, sliding_window=4096, use_sliding_window=False), name="d").num_layers == 61
