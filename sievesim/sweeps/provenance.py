"""Provenance by content: digests of the inputs a sweep point reads.

A sweep point names its model, hardware and routing trace by preset name or by path. A path says
nothing of what the file held when the point ran, so :mod:`sievesim.sweeps.run` also keys every point
by the *content* of its input files (:func:`point_inputs`): edit a hardware TOML and the points
that use it get new ids and run again. Every result row records the digests of the resolved model
and hardware (:func:`spec_digest`), whatever named them, so that two rows can be told apart even
when their settings read the same.

Digests are SHA-256, written as 16 hex digits (64 bits: a collision among a researcher's inputs is
not a practical concern). File digests are cached by (path, size, modification time).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Mapping

__all__ = ["file_digest", "spec_digest", "resolved_digest", "point_inputs", "DIGEST_HEX"]

#: Hex digits kept of each SHA-256 digest.
DIGEST_HEX = 16

_FILE_CACHE: dict[tuple[str, int, int], str] = {}


def _stat_key(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns)


def file_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 of the file's bytes (first :data:`DIGEST_HEX` hex digits); a directory holding a
    Hugging Face ``config.json`` is digested by that file."""
    p = Path(path)
    if p.is_dir() and (p / "config.json").is_file():
        p = p / "config.json"
    key = _stat_key(p)
    out = _FILE_CACHE.get(key)
    if out is None:
        h = hashlib.sha256()
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        out = _FILE_CACHE[key] = h.hexdigest()[:DIGEST_HEX]
    return out


def _plain(value: Any) -> Any:
    """A JSON-ready form of a spec (dataclasses, tuples, numpy values, paths)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def spec_digest(spec: Any) -> str:
    """Digest of a resolved model or hardware spec: every field's value (a ``base =`` chain and a
    Hugging Face config are already merged into it). A hardware spec whose PIM runs on a DRAM
    configuration file also covers that file's bytes."""
    text = json.dumps(_plain(spec), sort_keys=True, separators=(",", ":"), allow_nan=True, default=repr)
    h = hashlib.sha256(text.encode())
    dram = getattr(getattr(spec, "pim", None), "dram_config", None)
    if isinstance(dram, str) and os.path.isfile(dram):
        h.update(file_digest(dram).encode())
    return h.hexdigest()[:DIGEST_HEX]


def _is_file_input(value: Any) -> bool:
    if not isinstance(value, (str, os.PathLike)):
        return False
    text = os.fspath(value)
    return os.path.isfile(text) or (os.path.isdir(text) and os.path.isfile(os.path.join(text, "config.json")))


def point_inputs(settings: Mapping[str, Any], memo: dict[tuple[str, str], str] | None = None) -> dict[str, str]:
    """Content digests of the file inputs of a sweep point: ``{setting: digest}`` for ``model``,
    ``hardware`` (its resolved spec: a ``base`` file or DRAM configuration it names counts) and
    ``trace`` (the file's bytes) when they name files; empty when every input is a preset.
    ``memo`` keeps the digests of one sweep's inputs (files are read once per sweep)."""
    memo = {} if memo is None else memo
    out: dict[str, str] = {}
    for key in ("model", "hardware", "trace"):
        value = settings.get(key)
        if not _is_file_input(value):
            continue
        text = os.fspath(value)
        digest = memo.get((key, text))
        if digest is None:
            digest = memo[(key, text)] = file_digest(text) if key == "trace" else resolved_digest(key, text)
        out[key] = digest
    return out


def resolved_digest(kind: str, name_or_path: Any) -> str:
    """:func:`spec_digest` of the model (``kind="model"``) or hardware (``"hardware"``) that
    ``name_or_path`` names (a preset name or a file), read now."""
    text = os.fspath(name_or_path)
    if kind == "model":
        from ..models import get_model
        spec: Any = get_model(text)
    else:
        from ..hardware import get_hardware
        spec = get_hardware(text)
    return spec_digest(spec)
