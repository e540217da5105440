"""MoE model specifications: presets, TOML files and Hugging Face ``config.json``.

A :class:`ModelSpec` carries exactly what the simulator needs about one Mixture-of-Experts
transformer: the kind of every layer (attention: full / sliding-window / chunked / linear (Gated
DeltaNet) / MLA / Mamba-2; MLP: MoE, dense or none), the tensor shapes, and the storage widths. Everything else --
parameter counts, bytes per expert, KV-cache bytes, linear-attention state -- is *derived* from
those shapes by its properties, never stored.

Units: sizes called ``*_size`` / ``*_dim`` / ``*_rank`` are element counts; ``*_bytes`` are bytes;
parameter counts are numbers of scalar weights; ``sliding_window`` is in tokens.

Three ways to get a spec (see ``docs/models.md``)::

    get_model("gpt-oss-120b")               # a preset (sievesim/data/models/<name>.toml)
    get_model("my_model.toml")              # a TOML file in sievesim's own schema
    get_model("path/to/config.json")        # a Hugging Face config.json, as published

The package, read top down:

==================  ==============================================================================
``kinds.py``        the attention and MLP kinds a layer can be
``spec.py``         :class:`ModelSpec`: the fields, their checks, what they must mean together
``structure.py``    the checks of the fields of Mamba, sparse-attention, MTP and per-kind attention
``weights.py``      derived: parameter counts and weight bytes (per expert, per layer, in total)
``cache.py``        derived: KV-cache bytes per token and per request, linear-attention state
``toml.py``         sievesim's own schema: :func:`model_to_dict`, :func:`model_from_dict`, TOML I/O
``hf_keys.py``      what the keys of a Hugging Face ``config.json`` mean, and checked access to them
``hf.py``           :func:`from_hf_config`: reading a ``config.json``, stage by stage
``hf_families.py``  per-family small weights (biases, q/k norms, router bias) and MTP layers
``llama4.py``       Llama 4's own rules (iRoPE chunked attention, interleaved MoE layers)
``nemotron_h.py``   Nemotron-H's own rules (hybrid Mamba-2 / attention / MoE blocks, ungated MLPs)
``gemma4.py``       Gemma 4's own rules (global layers' heads, keys as values, dense MLP beside the experts)
``presets.py``      the presets in ``sievesim/data/models/`` and :func:`get_model`
==================  ==============================================================================
"""
from __future__ import annotations

from .hf import UnverifiedFamilyWarning, from_hf_config
from .hf_keys import NO_DECODE_EFFECT_KEYS, STRUCTURAL_KEYS, VERIFIED_FAMILIES, is_verified_family
from .kinds import ATTENTION_KINDS, MLP_KINDS, chunked_attended_tokens
from .presets import get_model, list_models
from .spec import ModelSpec
from .toml import load_model_toml, model_from_dict, model_to_dict, save_model_toml

# Private names of the former single module ``sievesim/models.py``, importable from here as before.
from .hf import _check_unused_keys, _unset  # noqa: E402,F401
from .hf_keys import (_EXPERT_COUNT_KEYS, _HF, _HF_BOOL_KEYS, _HF_INT_KEYS, _HF_LAYER_TYPES,  # noqa: E402,F401
                      _HF_LIST_KEYS, _HF_MAX_INT, _HF_NEVER_ZERO, _HF_REQUIRED, _KNOWN_TORCH_DTYPES,
                      _NON_STRUCTURAL_KEYS, _STRUCTURAL_NAME, _TOP_K_KEYS, _TORCH_DTYPE_BYTES)
from .kinds import _SOFTMAX_GQA_KINDS  # noqa: E402,F401
from .llama4 import attention_kinds as _llama4_attention  # noqa: E402,F401
from .presets import _PRESET_DIR, _preset_path  # noqa: E402,F401
from .spec import (_BOOL_FIELDS, _DEFAULTS, _DTYPE_FIELDS, _FIELD_BOUND, _FIELD_NAMES,  # noqa: E402,F401
                   _LAYOUT_KEYS, _NON_NEGATIVE_INT_FIELDS, _POSITIVE_INT_FIELDS, _field_problems, _is_number,
                   _kind_problems, _unknown_field)
from .toml import _shortest_period  # noqa: E402,F401

__all__ = [
    "ATTENTION_KINDS",
    "MLP_KINDS",
    "ModelSpec",
    "NO_DECODE_EFFECT_KEYS",
    "STRUCTURAL_KEYS",
    "UnverifiedFamilyWarning",
    "VERIFIED_FAMILIES",
    "chunked_attended_tokens",
    "from_hf_config",
    "is_verified_family",
    "get_model",
    "list_models",
    "load_model_toml",
    "model_from_dict",
    "model_to_dict",
    "save_model_toml",
]
