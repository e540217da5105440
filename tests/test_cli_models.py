"""The `models`, `model show|save` and `hardware` commands: output, JSON, exit status 2 on bad input."""
from __future__ import annotations

import json

import pytest

from sievesim.cli import main
from sievesim.hardware import get_hardware
from sievesim.models import get_model, list_models


def _run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_models_table(capsys):
    rc, out, _ = _run(capsys, "models")
    assert rc == 0
    for name in list_models():
        assert name in out
    assert "116.83B" in out and "5.13B" in out  # gpt-oss-120b total / active


def test_models_json(capsys):
    rc, out, _ = _run(capsys, "models", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert rc == 0 and set(rows) == set(list_models())
    assert rows["deepseek-v3"]["total_params"] == get_model("deepseek-v3").total_params
    assert rows["qwen3-30b-a3b"]["top_k"] == 8


def test_model_show_json_fields(capsys):
    rc, out, _ = _run(capsys, "model", "show", "qwen3.5-397b-a17b", "--json")
    d = json.loads(out)
    spec = get_model("qwen3.5-397b-a17b")
    assert rc == 0
    assert d["total_params"] == spec.total_params and d["active_params"] == spec.active_params
    assert (d["num_experts"], d["top_k"], d["num_layers"], d["moe_layers"]) == (512, 10, 60, 60)
    assert d["attention_layer_counts"] == {"full": 15, "linear": 45}


def test_model_show_top_k_override(capsys):
    _, out8, _ = _run(capsys, "model", "show", "qwen3-30b-a3b", "--json")
    _, out4, _ = _run(capsys, "model", "show", "qwen3-30b-a3b", "--json", "--top-k", "4")
    d8, d4 = json.loads(out8), json.loads(out4)
    assert (d8["top_k"], d4["top_k"]) == (8, 4)
    assert d8["active_params"] - d4["active_params"] == 48 * 4 * 3 * 2048 * 768


def test_model_show_text_and_toml(capsys):
    rc, out, _ = _run(capsys, "model", "show", "gpt-oss-120b")
    assert rc == 0 and "18 sliding" in out and "18 full" in out and "sliding window 128" in out
    rc, out, _ = _run(capsys, "model", "show", "deepseek-v3", "--toml")
    assert rc == 0 and 'attention = "mla"' in out


def test_model_save_then_show_from_hf_config(capsys, tmp_path):
    cfg = {"model_type": "mixtral", "num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8,
           "num_key_value_heads": 2, "num_local_experts": 8, "num_experts_per_tok": 2,
           "intermediate_size": 1024, "vocab_size": 1000}
    path = tmp_path / "tiny" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg))
    out_toml = tmp_path / "tiny.toml"
    rc, _, _ = _run(capsys, "model", "save", str(path), str(out_toml))
    assert rc == 0 and out_toml.is_file()
    rc, out, _ = _run(capsys, "model", "show", str(out_toml), "--json")
    d = json.loads(out)
    assert rc == 0 and d["name"] == "tiny" and d["head_dim"] == 64
    assert d["total_params"] == get_model(str(path)).total_params


@pytest.mark.parametrize("argv, match", [
    (["model", "show", "qwen3-30b"], "nearest: qwen3-30b-a3b"),
    (["model", "show", "mixtral-8x7b", "--top-k", "9"], "top_k = 9"),
    (["model", "show", "mixtral-8x7b", "--top-k", "0"], "--top-k = 0"),
    (["hardware", "show", "b20"], "nearest: b200"),
])
def test_bad_input_exit_code_2(capsys, argv, match):
    rc, _, err = _run(capsys, *argv)
    assert rc == 2
    assert err.startswith("sievesim: error:") and match in err


def test_bad_toml_exit_code_2(capsys, tmp_path):
    bad = tmp_path / "bad.toml"
    good = ('name = "x"\nnum_layers = 2\nattention = "full"\nnum_attention_heads = 4\nnum_kv_heads = 2\n'
            'head_dim = 16\nnum_experts = 8\ntop_k = 2\nmoe_intermediate_size = 32\nvocab_size = 100\n')
    bad.write_text(good + "hidden_size = 64\n")
    rc, _, _ = _run(capsys, "model", "show", str(bad))
    assert rc == 0
    bad.write_text(good + "hidden_size = -5\n")
    rc, _, err = _run(capsys, "model", "show", str(bad))
    assert rc == 2 and "hidden_size = -5" in err
    bad.write_text(good.replace("num_experts = 8\n", "") + "hidden_size = 64\n")
    rc, _, err = _run(capsys, "model", "show", str(bad))
    assert rc == 2 and "num_experts = '<missing>'" in err
    hw = tmp_path / "hw.toml"
    hw.write_text('name = "x"\n[gpu]\nname = "g"\n'
                  '[interconnect]\nbandwidth_bytes_per_s_per_direction = 1e11\nlatency_s = 1e-6\n')
    rc, _, err = _run(capsys, "hardware", "show", str(hw))
    assert rc == 2 and "gpu.peak_flops_bf16 = '<missing>'" in err


def test_hardware_list_and_json(capsys):
    rc, out, _ = _run(capsys, "hardware")
    assert rc == 0 and "b200-pim4x" in out and "hbm3e-8000" in out
    rc, out, _ = _run(capsys, "hardware", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["b200"]["pim_peak_flops"] == 128e12


def test_hardware_show_json_and_save(capsys, tmp_path):
    rc, out, _ = _run(capsys, "hardware", "show", "b200", "--json")
    d = json.loads(out)
    assert rc == 0 and d["gpu"]["peak_flops_bf16"] == 2.25e15
    assert d["derived"]["pim_internal_bandwidth_bytes_per_s_per_stack"] == 16e12
    target = tmp_path / "mine.toml"
    rc, _, _ = _run(capsys, "hardware", "save", "h200", str(target))
    import dataclasses
    assert rc == 0 and get_hardware(str(target)) == dataclasses.replace(get_hardware("h200"), name="mine")
    rc, out, _ = _run(capsys, "hardware", "show", str(target))
    assert rc == 0 and "H200" in out
