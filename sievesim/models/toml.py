"""sievesim's own model files: a :class:`~sievesim.models.ModelSpec` as a dict or TOML and back.

The schema is the spec's fields (``docs/models.md``) plus a compact layer layout: ``attention``
(one kind for all layers) or ``attention_pattern`` (repeated over the layers) instead of
``layer_attention``, and ``dense_layers`` (indices) instead of ``layer_mlp``. Presets
(``sievesim/data/models/*.toml``) are such files.
"""
from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Mapping

from .._inputs import is_int as _is_int, read_toml as _read_toml
from .._validate import BOUNDS, Problems
from ..errors import ConfigError, field_error
from .kinds import ATTENTION_KINDS
from .spec import _DEFAULTS, _FIELD_NAMES, _LAYOUT_KEYS, ModelSpec, _field_problems, _kind_problems, \
    _plain_fields, _unknown_field


def _shortest_period(seq: tuple[str, ...]) -> tuple[str, ...]:
    n = len(seq)
    for p in range(1, n + 1):
        if n % p == 0 and seq == seq[:p] * (n // p):
            return seq[:p]
    return seq  # pragma: no cover - p = n always matches


def model_to_dict(spec: ModelSpec, *, compact: bool = True) -> dict[str, Any]:
    """The spec as a plain dict (TOML/JSON-ready; ``None`` values are left out).

    With ``compact`` the per-layer lists are written as ``attention_pattern`` (the shortest
    repeating pattern of ``layer_attention``) and ``dense_layers`` (indices of the dense layers),
    and fields equal to their default are left out; :func:`model_from_dict` reads both forms.
    """
    if not compact:
        return _plain_fields(spec)
    out: dict[str, Any] = {}
    for fname in _FIELD_NAMES:
        value = getattr(spec, fname)
        if value is None:
            continue
        if fname in _DEFAULTS and value == _DEFAULTS[fname] and type(value) is type(_DEFAULTS[fname]):
            continue
        if fname == "layer_attention":
            pattern = _shortest_period(value)
            if len(pattern) == 1:
                out["attention"] = pattern[0]
            elif len(pattern) < len(value):
                out["attention_pattern"] = list(pattern)
            else:
                out["layer_attention"] = list(value)
            continue
        if fname == "layer_mlp":
            if "none" in value:    # layers without an MLP (Nemotron-H): one kind per layer
                out["layer_mlp"] = list(value)
            else:
                out["dense_layers"] = [i for i, k in enumerate(value) if k == "dense"]
            continue
        out[fname] = list(value) if isinstance(value, tuple) else value
    return out


def model_from_dict(data: Mapping[str, Any], *, source: str | None = None) -> ModelSpec:
    """Build a spec from a dict in sievesim's schema (see :func:`model_to_dict`); unknown keys are errors.

    ``num_layers`` plus one of ``layer_attention`` (per layer), ``attention_pattern`` (repeated
    over the layers) or ``attention`` (one kind for all layers); ``layer_mlp`` (per layer) or
    ``dense_layers`` (indices; all other layers are MoE; default none).
    """
    if not isinstance(data, Mapping):
        raise field_error("model", type(data).__name__, "a table of ModelSpec fields", source=source)
    src = source or f"model {data.get('name', '?')!r}"
    problems = Problems(src)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key not in _FIELD_NAMES and key not in _LAYOUT_KEYS:
            with problems.check():
                raise _unknown_field(key, src)
        elif key not in _LAYOUT_KEYS:
            kwargs[key] = value
    for required in ("name", "num_layers", "hidden_size", "num_attention_heads", "num_kv_heads",
                     "num_experts", "top_k", "moe_intermediate_size", "vocab_size"):
        if required not in kwargs:
            with problems.check():
                raise field_error(required, "<missing>", "a value (required field)", source=src)
    _field_problems(kwargs, problems, src)
    n = kwargs.get("num_layers")
    n_ok = _is_int(n) and 1 <= n <= BOUNDS["layers"].hi
    h, nq = kwargs.get("hidden_size"), kwargs.get("num_attention_heads")
    if "head_dim" not in kwargs and _is_int(h) and _is_int(nq) and h > 0 and nq > 0:
        with problems.check():
            if h % nq:
                raise field_error("num_attention_heads", nq,
                                  f"a divisor of hidden_size = {h} (or give head_dim explicitly)", source=src)
        kwargs["head_dim"] = h // nq
    _layer_layout(data, kwargs, n if n_ok else None, problems, src)
    problems.raise_if_any()
    try:
        return ModelSpec(**kwargs)
    except ConfigError as exc:  # meaning: name the file rather than the model
        prefix = f"model {kwargs['name']!r}: "
        msg = str(exc)
        if source and msg.startswith(prefix):
            raise ConfigError(f"{source}: {msg[len(prefix):]}") from None
        raise


def _layer_layout(data: Mapping[str, Any], kwargs: dict[str, Any], n: int | None, problems: Problems,
                  src: str) -> None:
    """Set ``kwargs``' ``layer_attention`` and ``layer_mlp`` from whichever form ``data`` gives them
    in (see :func:`model_from_dict`); ``n``: the number of layers, None when it is not valid."""
    given = [k for k in ("layer_attention", "attention_pattern", "attention") if k in data]
    with problems.check():
        if len(given) != 1:
            raise field_error("layer_attention", given or "<missing>",
                              "exactly one of layer_attention, attention_pattern, attention", source=src)
    if len(given) == 1 and n is not None and "attention" in data:
        attention = data["attention"]
        with problems.check():
            if not isinstance(attention, str) or attention not in ATTENTION_KINDS:
                close = difflib.get_close_matches(str(attention), ATTENTION_KINDS, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise field_error("attention", attention, f"one of {list(ATTENTION_KINDS)}{hint}", source=src)
        kwargs["layer_attention"] = (attention,) * n
    elif len(given) == 1 and n is not None and "attention_pattern" in data:
        pattern = data["attention_pattern"]
        with problems.check():
            if isinstance(pattern, str) or not isinstance(pattern, (list, tuple)) or not pattern or n % len(pattern):
                raise field_error("attention_pattern", pattern,
                                  f"a non-empty list whose length divides num_layers = {n}", source=src)
            _kind_problems("attention_pattern", pattern, ATTENTION_KINDS, problems, src)
            kwargs["layer_attention"] = tuple(pattern) * (n // len(pattern))
    with problems.check():
        if "layer_mlp" in data and "dense_layers" in data:
            raise field_error("dense_layers", data["dense_layers"], "not given together with layer_mlp",
                              source=src)
    if "layer_mlp" not in data and n is not None:
        dense = data.get("dense_layers", [])
        with problems.check():
            if isinstance(dense, str) or not isinstance(dense, (list, tuple)) \
                    or not all(_is_int(i) and 0 <= i < n for i in dense):
                raise field_error("dense_layers", dense, f"a list of layer indices in [0, {n})", source=src)
            kwargs["layer_mlp"] = tuple("dense" if i in set(dense) else "moe" for i in range(n))


def load_model_toml(path: str | os.PathLike[str]) -> ModelSpec:
    """Read a model spec from a TOML file (keys as in :func:`model_to_dict`, optionally under ``[model]``)."""
    path = Path(path)
    data = _read_toml(path)
    if set(data) == {"model"} and isinstance(data["model"], dict):
        data = data["model"]
    return model_from_dict(data, source=str(path))


def save_model_toml(spec: ModelSpec, path: str | os.PathLike[str]) -> None:
    """Write ``spec`` to ``path`` as TOML (compact layout; :func:`load_model_toml` reads it back equal)."""
    import tomli_w

    text = "# sievesim model spec (see docs/models.md); sizes in elements, *_bytes in bytes\n"
    text += tomli_w.dumps(model_to_dict(spec, compact=True))
    from .._outputs import write_output

    write_output(path, text, "model TOML")
