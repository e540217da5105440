"""The preset models (``sievesim/data/models/<name>.toml``) and :func:`get_model`, which takes a
preset name, a sievesim TOML file or a Hugging Face ``config.json``."""
from __future__ import annotations

import difflib
import os
from pathlib import Path

from ..errors import field_error
from .hf import from_hf_config
from .spec import ModelSpec
from .toml import load_model_toml

_PRESET_DIR = Path(__file__).resolve().parent.parent / "data" / "models"


def list_models() -> list[str]:
    """Names of the preset models (``sievesim/data/models/*.toml``), sorted."""
    return sorted(p.stem for p in _PRESET_DIR.glob("*.toml"))


def _preset_path(name: str) -> Path | None:
    key = name.strip().lower()
    path = _PRESET_DIR / f"{key}.toml"
    return path if path.is_file() else None


def get_model(name_or_path: str | os.PathLike[str], *, top_k: int | None = None) -> ModelSpec:
    """A spec from a preset name (case-insensitive), a ``.toml`` file, or an HF ``config.json``
    (a ``.json`` file or a directory holding ``config.json``). ``top_k`` overrides the routed top-k.

    An unknown name raises :class:`ConfigError` listing the nearest preset names.
    """
    from .._validate import check_name_or_path

    if isinstance(name_or_path, ModelSpec):      # already a spec: only the top-k override applies
        return name_or_path if top_k is None else name_or_path.with_top_k(top_k)
    text = check_name_or_path("model", name_or_path, "a model preset name, a .toml file or a config.json")
    spec: ModelSpec
    preset = _preset_path(text) if isinstance(name_or_path, str) else None
    if preset is not None:
        spec = load_model_toml(preset)
    else:
        path = Path(text)
        if path.is_dir() and (path / "config.json").is_file():
            path = path / "config.json"
        if path.is_file() and path.suffix.lower() == ".toml":
            spec = load_model_toml(path)
        elif path.is_file() and path.suffix.lower() == ".json":
            spec = from_hf_config(path)
        elif path.is_file():
            raise field_error("model", text, "a .toml spec or a Hugging Face config.json")
        elif "/" in text or os.sep in text or path.suffix.lower() in (".toml", ".json"):    # meant as a file
            from ..errors import ConfigError
            raise ConfigError(f"file not found: {text} (model: expected a preset name, an existing .toml file "
                              "or a Hugging Face config.json or its folder)")
        else:
            names = list_models()
            close = difflib.get_close_matches(text.lower(), names, n=3, cutoff=0.4)
            hint = f"; nearest: {', '.join(close)}" if close else ""
            raise field_error("model", text, f"a preset name ({', '.join(names)}), a .toml file "
                              f"or a config.json path{hint}")
    return spec.with_top_k(top_k) if top_k is not None else spec

