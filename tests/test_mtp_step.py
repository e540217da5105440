"""Multi-token-prediction decoding in the decode step (sievesim/system/mtp.py): the verification rows,
the (1 + k)-query attention, the k draft passes, the accepted tokens, the refusals."""
from __future__ import annotations

import numpy as np
import pytest

from sievesim.cli import main
from sievesim.costs.gpu import shared_expert_work
from sievesim.errors import ConfigError
from sievesim.models import get_model
from sievesim.system import StepSimulator, gpu_ops, simulate_step  # noqa: F401
from sievesim.system.mtp import DEFAULT_ACCEPTANCE, tokens_per_request

#: A small MoE given one MTP layer (the step's machinery, not a published model's).
SMALL = get_model("qwen3-30b-a3b").replace(num_mtp_layers=1)
B, G = 8, 2


def _run(k: int, policy: str = "gpu-only", **kw):
    return simulate_step(SMALL, "b200", gpus=G, policy=policy, batch=B, steps=1, warmup=1, gpu_model="roofline",
                         mtp_tokens=k, context_len=kw.pop("context_len", 1024), **kw)


def _nodes(r, kind: str, layer: int | None = None):
    return [n for n in r.nodes() if n.kind == kind and (layer is None or n.layer == layer)]


@pytest.mark.parametrize("k", [1, 2])
def test_the_step_routes_and_multiplies_b_times_1_plus_k_rows(k):
    sim = StepSimulator(SMALL, "b200", gpus=G, policy="gpu-only", batch=B, gpu_model="roofline", mtp_tokens=k)
    ids, counts, owner, rows = sim._step_tokens()
    assert ids.shape[0] == B * (1 + k) and owner.size == B * (1 + k)
    assert (counts.sum(axis=1) == B * (1 + k) * SMALL.top_k).all()          # every row routed at every layer
    # draft j of request i sits at B + j B + i, on its request's GPU
    assert (owner[B:].reshape(k, B) == owner[:B]).all()
    r = _run(k)
    for kind in ("pre_attention", "post_attention"):
        assert sum(n.tokens for n in _nodes(r, kind, 0)) == B * (1 + k)
    head = _nodes(r, "lm_head")
    assert [n.tokens for n in head] == [B // G * (1 + k)] * G                 # logits of every verified row


def test_attention_reads_the_kv_once_with_1_plus_k_times_the_flops():
    r0, r1 = _run(0), _run(1)
    a0, a1 = _nodes(r0, "attention", 0), _nodes(r1, "attention", 0)
    m = SMALL
    for n0, n1 in zip(a0, a1):
        assert n1.flops == 2 * n0.flops
        # the KV bytes are the same; only the query and output vectors of the extra token are added
        assert n1.bytes - n0.bytes == (B // G) * m.hidden_size * m.dtype_bytes * 2
    # PIM attention: one pass of the engine per query token (roofline GPU model: no fixed cost)
    p0, p1 = _run(0, "sieve"), _run(1, "sieve")
    t0 = [n.duration_s for n in _nodes(p0, "attention", 0)]
    t1 = [n.duration_s for n in _nodes(p1, "attention", 0)]
    assert t1 == pytest.approx([2 * t for t in t0], rel=1e-12)
    e0 = [n.energy_j for n in _nodes(p0, "attention", 0)]
    e1 = [n.energy_j for n in _nodes(p1, "attention", 0)]
    assert e0[0] > 0 and e1 == pytest.approx([2 * e for e in e0], rel=1e-12)    # and its PIM energy


def test_k_draft_passes_per_gpu_run_before_the_first_layer_and_cost_what_they_hold():
    k = 2
    r = _run(k)
    drafts = _nodes(r, "mtp_draft")
    assert len(drafts) == k * G
    m = SMALL
    t = B // G
    for g in range(G):
        mine = sorted((n for n in drafts if n.gpu == g), key=lambda n: n.start_s)
        assert len(mine) == k and all(n.tokens == t for n in mine)
        first_layer = min(n.start_s for n in _nodes(r, "pre_attention", 0) if n.gpu == g)
        assert mine[-1].end_s <= first_layer
        assert mine[1].start_s >= mine[0].end_s                            # sequential
    # by hand: embedding, 2h -> h projection, the last layer's attention block, MoE, LM head
    h, last = m.hidden_size, m.num_layers - 1
    lens = np.full(t, 1024 + 1)            # warm-up step, then the measured step: one token longer
    E, K, ppe = m.num_experts, m.top_k, m.params_per_expert
    flops = (2 * t * 2 * h * h + 8 * t * h
             + gpu_ops.pre_attention(m, last, t).flops + gpu_ops.post_attention(m, last, t).flops
             + gpu_ops.decode_attention_on_gpu(m, last, lens).flops
             + 2 * ppe * B * K / G + shared_expert_work(m, t).flops + gpu_ops.aggregate(m, t).flops
             + gpu_ops.lm_head(m, t).flops)
    assert drafts[0].flops == pytest.approx(flops, rel=1e-12)
    routed_bytes = E * (1 - (1 - K / E) ** B) * ppe * m.expert_bytes_per_param / G
    assert drafts[0].bytes > routed_bytes + m.lm_head_params * m.dtype_bytes
    # the step with drafts is longer than without by at least the drafts on one GPU
    r0 = _run(0)
    assert r.step_time_s > r0.step_time_s + sum(n.duration_s for n in drafts if n.gpu == 0)


def test_throughput_counts_accepted_tokens():
    r0 = _run(0)
    assert r0.tokens_per_request_per_step == 1.0 and "tokens_per_request_per_step" not in r0.to_dict()
    r = _run(2, mtp_acceptance=0.7)
    per = 1 + 0.7 + 0.7 ** 2
    assert r.tokens_per_request_per_step == pytest.approx(per)
    assert r.throughput_tokens_per_s_per_gpu == pytest.approx(B * per / r.step_time_s / G)
    assert r.interactivity_tokens_per_s_per_user == pytest.approx(per / r.step_time_s)
    d = r.to_dict()
    assert (d["mtp_tokens"], d["mtp_acceptance"], d["tokens_per_request_per_step"]) == (2, 0.7, pytest.approx(per))
    assert d["tokens_per_joule"] == pytest.approx(B * per / d["energy_j"])
    assert _run(1).tokens_per_request_per_step == 1 + DEFAULT_ACCEPTANCE == tokens_per_request(1, 0.85)
    assert tokens_per_request(3, 1.0) == 4.0 and tokens_per_request(2, 0.0) == 1.0


def test_mtp_tokens_0_is_the_step_as_before():
    plain = simulate_step(SMALL, "b200", gpus=G, policy="gpu-only", batch=B, steps=2, warmup=1)
    zero = simulate_step(SMALL, "b200", gpus=G, policy="gpu-only", batch=B, steps=2, warmup=1, mtp_tokens=0)
    assert [repr(x) for x in zero.step_times_s] == [repr(x) for x in plain.step_times_s]
    assert "mtp_tokens" not in zero.to_dict()


def test_other_step_shapes_take_the_verification_rows():
    for kw in (dict(microbatches=2), dict(prefill="2:16"), dict(attention="tp")):
        r = _run(1, **kw)
        pf = 2 * 16 if "prefill" in kw else 0
        per = G if kw.get("attention") == "tp" else 1
        assert sum(n.tokens for n in _nodes(r, "pre_attention", 0)) == (B * 2 + pf) * per, kw
        assert len(_nodes(r, "mtp_draft")) == G * (2 if "microbatches" in kw else 1), kw


def test_refusals_name_the_field():
    with pytest.raises(ConfigError, match="mtp_tokens = 1.*without MTP layers"):
        StepSimulator("qwen3-30b-a3b", "b200", policy="gpu-only", batch=4, mtp_tokens=1)
    with pytest.raises(ConfigError, match="mtp_acceptance = 1.5"):
        StepSimulator(SMALL, "b200", policy="gpu-only", batch=4, mtp_tokens=1, mtp_acceptance=1.5)
    with pytest.raises(ConfigError, match="mtp_acceptance = 0.9: expected only with mtp_tokens > 0"):
        StepSimulator(SMALL, "b200", policy="gpu-only", batch=4, mtp_acceptance=0.9)
    with pytest.raises(ConfigError, match="mtp_tokens"):
        StepSimulator(SMALL, "b200", policy="gpu-only", batch=4, mtp_tokens=-1)
    with pytest.raises(ConfigError, match="mtp_tokens = True"):
        StepSimulator(SMALL, "b200", policy="gpu-only", batch=4, mtp_tokens=True)


def test_cli_mtp_flags(capsys):
    assert main(["run", "--model", "qwen3-30b-a3b", "--mtp-tokens", "1", "--policy", "gpu-only", "--quiet"]) == 2
    assert "mtp_tokens = 1" in capsys.readouterr().err
    assert main(["run", "--model", "deepseek-v3", "--gpus", "8", "--batch", "8", "--policy", "gpu-only",
                 "--mtp-tokens", "1", "--mtp-acceptance", "0.9", "--steps", "1", "--warmup", "0", "--quiet",
                 "--json"]) == 0
    import json
    d = json.loads(capsys.readouterr().out)
    assert d["mtp_tokens"] == 1 and d["tokens_per_request_per_step"] == pytest.approx(1.9)



def test_the_models_own_mtp_tokens_turns_it_on(tmp_path):
    from sievesim.models import load_model_toml, save_model_toml
    path = tmp_path / "small-mtp.toml"
    save_model_toml(SMALL.replace(mtp_tokens=1), path)
    spec = load_model_toml(path)
    assert spec.mtp_tokens == 1
    by_field = simulate_step(spec, "b200", gpus=G, policy="gpu-only", batch=B, steps=1, warmup=1, gpu_model="roofline",
                             context_len=1024)
    by_option = _run(1)
    assert by_field.step_times_s == by_option.step_times_s and by_field.tokens_per_request_per_step == 1.85
    # an explicit 0 turns it off for a model that says 1
    off = simulate_step(spec, "b200", gpus=G, policy="gpu-only", batch=B, steps=1, warmup=1, gpu_model="roofline",
                        context_len=1024, mtp_tokens=0)
    assert off.step_times_s == _run(0).step_times_s


def test_serving_refuses_mtp_decoding_by_name():
    from sievesim.errors import ConfigError
    from sievesim.models import get_model
    from sievesim.serving import ServingSimulator
    with pytest.raises(ConfigError, match=r"mtp_tokens = 1: expected 0: serving prices one token per request"):
        ServingSimulator(get_model("deepseek-v3").replace(mtp_tokens=1), gpus=8)
    with pytest.raises(ConfigError, match=r"mtp_tokens = 2: expected 0"):
        ServingSimulator("deepseek-v3", gpus=8, mtp_tokens=2)
