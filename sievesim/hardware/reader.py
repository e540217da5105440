"""Reading hardware: TOML files and presets, ``base =`` chains, every problem of a file in one message."""
from __future__ import annotations

import dataclasses
import difflib
import functools
import os
from pathlib import Path
from typing import Any, Mapping

from .._inputs import is_int as _is_int, read_toml
from ..errors import ConfigError, field_error
from .spec import (_FIELD_CHECKS, _PRESET_DIR, GPU_ENERGY_FIELDS, GPUSpec, HardwareSpec, InterconnectSpec, PIMSpec,
                   _is_number, hardware_to_dict)


_SECTIONS: dict[str, type] = {"gpu": GPUSpec, "pim": PIMSpec, "interconnect": InterconnectSpec}
_TOP_KEYS = ("name", "description", "base", "gpu", "pim", "interconnect")
# Accepted Python types per annotation word (``from __future__ import annotations``: strings).
_TYPE_WORDS = {"float": ("a number", lambda v: _is_number(v)), "int": ("an integer", _is_int),
               "str": ("a string", lambda v: isinstance(v, str)), "bool": ("true or false", lambda v: isinstance(v, bool))}


def _closest(key: str, names: Any, prefix: str = "") -> str:
    names = list(names)
    words = sorted(str(key).lower().split("_"))
    same_words = [n for n in names if sorted(n.split("_")) == words]     # peak_bf16_flops -> peak_flops_bf16
    close = same_words + [n for n in difflib.get_close_matches(str(key), names, n=3, cutoff=0.6) if n not in same_words]
    close = close[:3]
    return f" (did you mean {', '.join(prefix + c for c in close)}?)" if close else ""


def _type_problem(cls: type, fname: str, value: Any) -> str | None:
    """What ``value`` should have been for field ``fname`` of ``cls``, or None when its type fits."""
    words = [w.strip() for w in str({f.name: f.type for f in dataclasses.fields(cls)}[fname]).split("|")]
    if value is None:
        return None if "None" in words else "a value"
    if any(_TYPE_WORDS[w][1](value) for w in words if w in _TYPE_WORDS):
        return None
    return " or ".join(_TYPE_WORDS[w][0] for w in words if w in _TYPE_WORDS)


def _section_problems(key: str, data: Any) -> list[str]:
    """Unknown fields (closest valid name suggested), wrong types, values out of range and missing
    fields of one section."""
    cls = _SECTIONS[key]
    if not isinstance(data, Mapping):
        return [f"{key} = {data!r}: expected a table of {cls.__name__} fields"]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    problems = []
    for k, value in data.items():
        if k not in fields:
            problems.append(f"{key}.{k} = '<unknown field>': expected one of the {cls.__name__} fields"
                            f"{_closest(k, fields, key + '.')}")
            continue
        expected = _type_problem(cls, k, value)
        if expected is not None:
            problems.append(f"{key}.{k} = {value!r}: expected {expected}")
            continue
        try:  # the type fits: the range, now, so that one message has every problem
            _FIELD_CHECKS[cls][k](f"{key}.{k}", value, None)
        except ConfigError as exc:
            problems.append(str(exc))
    if cls is GPUSpec and any(data.get(k) is not None for k in GPU_ENERGY_FIELDS):
        problems += [f"{key}.{k} = '<missing>': expected a value (required with the other energy fields: "
                     f"{', '.join(GPU_ENERGY_FIELDS)})" for k in GPU_ENERGY_FIELDS if data.get(k) is None]
    for name, f in fields.items():
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and name not in data:  # type: ignore[misc]
            problems.append(f"{key}.{name} = '<missing>': expected a value (required field)")
    return problems


def _raise_all(problems: list[str], src: str) -> None:
    if len(problems) == 1:
        raise ConfigError(f"{src}: {problems[0]}")
    if problems:
        raise ConfigError(f"{src}: {len(problems)} problems: " + "; ".join(problems))


#: Longest chain of ``base =`` files one hardware file may sit on (presets are one or two deep).
MAX_BASE_DEPTH = 32


def _is_preset_reference(text: str) -> bool:
    return "/" not in text and not text.lower().endswith(".toml") and \
        (_PRESET_DIR / f"{text.strip().lower()}.toml").is_file()


def _raw_hardware(ref: str, relative_to: Path | None, seen: tuple[Path, ...], src: str) -> tuple[dict, Path]:
    """The merged table of a preset or file named by ``base`` (its own ``base`` applied)."""
    if "\x00" in ref:
        raise field_error("base", ref, "a hardware preset name or a .toml path without a NUL byte", source=src)
    if _is_preset_reference(ref):
        path = _PRESET_DIR / f"{ref.strip().lower()}.toml"
    else:
        path = Path(ref)
        if not path.is_absolute() and relative_to is not None:
            path = relative_to / path
        if not path.exists():
            names = list_hardware()
            raise field_error("base", ref, f"a preset name ({', '.join(names)}) or a .toml file{_closest(ref, names)}"
                              + (f" (looked for {path})" if relative_to is not None else ""), source=src)
    path = path.resolve()
    if path in seen:
        raise field_error("base", ref, "a file that does not (through its own base) extend itself", source=src)
    if len(seen) >= MAX_BASE_DEPTH:
        raise field_error("base", ref, f"a chain of at most {MAX_BASE_DEPTH} files (each file's base, its base's "
                          "base, ...); flatten the chain into fewer files", source=src)
    try:
        data = read_toml(path)
    except ConfigError as exc:     # the file base names cannot be read: say it was base that named it
        raise ConfigError(f"{src}: base = {ref!r}: {exc}") from None
    return _apply_base(data, path.parent, seen + (path,), str(path)), path


def _apply_base(data: Mapping[str, Any], relative_to: Path | None, seen: tuple[Path, ...], src: str) -> dict:
    """``data`` with its ``base`` (a preset name or a .toml path, relative to the file's folder)
    filled in: sections merge field by field, ``pim = false`` drops the base's PIM. The name and
    description of the base are not inherited; a missing description lists what changed."""
    if not isinstance(data, Mapping) or "base" not in data:
        return dict(data) if isinstance(data, Mapping) else data  # type: ignore[return-value]
    ref = data["base"]
    if not isinstance(ref, str) or not ref.strip():
        raise field_error("base", ref, "a hardware preset name or a .toml path", source=src)
    base, _ = _raw_hardware(ref, relative_to, seen, src)
    merged: dict[str, Any] = {k: v for k, v in base.items() if k not in ("name", "description")}
    changed = []
    for key, value in data.items():
        if key == "base":
            continue
        if key in _SECTIONS and isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = {**merged[key], **value}
            changed += [f"{key}.{k}" for k in value]
        elif key == "pim" and value is False:
            merged.pop("pim", None)
            changed.append("no pim")
        else:
            merged[key] = value
            if key in _SECTIONS:
                changed.append(key)
    if "description" not in data:
        merged["description"] = f"{ref} with " + (", ".join(changed) if changed else "no changes")
    return merged


#: How far a file's ``internal_bandwidth_ratio`` may lie from the engine's derivation (the B200
#: presets' 16x / 8x / 4x are 2.4 % below the engine's 16.4 / 8.2 / 4.1 TB/s per stack).
RATIO_TOLERANCE = 0.05


@functools.lru_cache(maxsize=64)
def _engine_internal_bandwidth(dram_config: str, banks_per_pu: int, macs_per_command: int,
                               operand_bytes: float, global_buffer_bytes: int, macab_interval_cycles: int = 0) -> float:
    from ..pim.expert import PIMDevice  # noqa: PLC0415 - the engine's organisation (a lower layer)

    dev = PIMDevice(dram_config=dram_config, stacks=1, banks_per_pu=banks_per_pu,
                    macs_per_command=macs_per_command, operand_bytes=int(round(operand_bytes)),
                    global_buffer_bytes=global_buffer_bytes, macab_interval_cycles=macab_interval_cycles)
    return dev.peak_flops() / 2.0 * operand_bytes


def engine_internal_bandwidth_bytes_per_s_per_stack(pim: PIMSpec) -> float:
    """Bytes/s the PUs of one stack read in the cycle-accurate engine: PUs x ``macs_per_command`` x
    ``operand_bytes`` per all-bank MAC command, one every ``nCCD_AB`` of ``dram_config`` (or
    ``macab_interval_cycles`` when a power limit sets it). Raises
    :class:`ConfigError` when ``dram_config`` is not an engine configuration with PIM commands."""
    return _engine_internal_bandwidth(pim.dram_config, pim.banks_per_pu, pim.macs_per_command,
                                      float(pim.operand_bytes), pim.global_buffer_bytes,
                                      int(pim.macab_interval_cycles))


def _check_engine_ratio(built: dict[str, Any], pim_data: Mapping[str, Any], own_pim: Mapping[str, Any],
                        problems: list[str]) -> None:
    """``pim_data``: the [pim] table with its base's fields; ``own_pim``: the file's own. A ratio the
    file leaves out is derived from the engine, unless its base's ratio is within the tolerance of
    that (a preset's stated ratio is kept); a base's ratio that the file's changes put out of the
    tolerance is derived again (it belonged to the base's PUs), only the file's own is refused."""
    pim, gpu = built["pim"], built["gpu"]
    try:
        engine_bw = engine_internal_bandwidth_bytes_per_s_per_stack(pim)
    except ConfigError as exc:
        problems.append(f"pim.dram_config = {pim.dram_config!r}: expected an engine configuration with PIM "
                        f"commands ({exc})")
        return
    derived = engine_bw / gpu.hbm_bandwidth_per_stack
    off = abs(pim.internal_bandwidth_ratio - derived) > RATIO_TOLERANCE * derived
    if "internal_bandwidth_ratio" not in pim_data or (off and "internal_bandwidth_ratio" not in own_pim):
        built["pim"] = dataclasses.replace(pim, internal_bandwidth_ratio=derived)
    elif off:
        problems.append(
            f"pim.internal_bandwidth_ratio = {pim.internal_bandwidth_ratio:g}: expected {derived:.4g} within "
            f"{RATIO_TOLERANCE:.0%}, the ratio the engine derives (pu_placement {pim.pu_placement!r}, "
            f"macs_per_command {pim.macs_per_command}, dram_config {pim.dram_config!r}: {engine_bw / 1e12:.2f} "
            f"TB/s per stack over the GPU's {gpu.hbm_bandwidth_per_stack / 1e9:.4g} GB/s); set it so or leave it out")


def hardware_from_dict(data: Mapping[str, Any], *, source: str | None = None,
                       relative_to: str | os.PathLike[str] | None = None) -> HardwareSpec:
    """Build a :class:`HardwareSpec` from ``{name, description?, base?, gpu: {...}, pim?: {...}, interconnect: {...}}``.

    ``base`` names a preset or a .toml file (relative to ``relative_to``, the file's folder) whose
    fields the table extends: only the fields that change need to be given. Every problem of the
    table -- unknown keys (with the closest valid name), wrong types, missing fields, then values out
    of range -- is reported in one :class:`ConfigError`.
    """
    src = source or "hardware"
    if not isinstance(data, Mapping):
        raise field_error("hardware", type(data).__name__, "a table", source=src)
    problems = [f"{k} = '<unknown field>': expected one of {list(_TOP_KEYS)}{_closest(k, _TOP_KEYS)}"
                for k in data if k not in _TOP_KEYS]
    for k in data:  # a section field written at top level: say where it belongs
        for sec, cls in _SECTIONS.items():
            if k not in _TOP_KEYS and k in {f.name for f in dataclasses.fields(cls)}:
                problems.append(f"{k}: belongs in the [{sec}] table")
    has_base = "base" in data
    own_pim = data.get("pim") if isinstance(data.get("pim"), Mapping) else {}
    data = _apply_base(data, Path(relative_to) if relative_to is not None else None, (), src)
    if "name" not in data and not has_base:
        problems.append("name = '<missing>': expected a value (required)")
    for r in ("gpu", "interconnect"):
        if r not in data:
            problems.append(f"{r} = '<missing>': expected a table (required)")
    if "name" in data and (not isinstance(data["name"], str) or not data["name"]):
        problems.append(f"name = {data['name']!r}: expected a non-empty string")
    description = data.get("description", "")
    if not isinstance(description, str):
        problems.append(f"description = {description!r}: expected a string")
    present = [k for k in _SECTIONS if data.get(k) is not None]
    for key in present:
        problems += _section_problems(key, data[key])
    _raise_all(problems, src)
    built: dict[str, Any] = {}
    for key in present:  # value checks of each section; all sections are tried
        try:
            built[key] = _SECTIONS[key](**dict(data[key]))
        except ConfigError as exc:
            problems.append(f"[{key}] {exc}")
    if "pim" in built and "gpu" in built:  # resolve dram_config now, and check (or fill in) the ratio the engine derives
        _check_engine_ratio(built, data["pim"], own_pim, problems)
    _raise_all(problems, src)
    try:
        return HardwareSpec(name=data.get("name") or Path(src).stem, gpu=built["gpu"], pim=built.get("pim"),
                            interconnect=built["interconnect"], description=description)
    except ConfigError as exc:
        raise ConfigError(f"{src}: {exc}") from None


def load_hardware_toml(path: str | os.PathLike[str]) -> HardwareSpec:
    """Read a hardware spec from TOML (top-level ``name``, tables ``[gpu]``, ``[pim]``, ``[interconnect]``;
    or ``base = "b200"`` (a preset or a path relative to this file) and only the fields that change;
    the name defaults to the file's stem)."""
    path = Path(path)
    data = read_toml(path)
    if "base" in data and "name" not in data:
        data = {"name": path.stem, **data}
    return hardware_from_dict(data, source=str(path), relative_to=path.parent)


def save_hardware_toml(hw: HardwareSpec, path: str | os.PathLike[str]) -> None:
    """Write ``hw`` to ``path`` as TOML; :func:`load_hardware_toml` reads back an equal spec."""
    import tomli_w

    text = ("# sievesim hardware spec (see docs/hardware.md): FLOP/s, bytes/s, bytes, seconds, "
            "as the field names say\n")
    from .._outputs import write_output

    write_output(path, text + tomli_w.dumps(hardware_to_dict(hw)), "hardware TOML")


def list_hardware() -> list[str]:
    """Names of the hardware presets (``sievesim/data/hardware/*.toml``), sorted."""
    return sorted(p.stem for p in _PRESET_DIR.glob("*.toml"))


def get_hardware(name_or_path: str | os.PathLike[str]) -> HardwareSpec:
    """A hardware spec from a preset name (case-insensitive) or a TOML file path.

    An unknown name raises :class:`ConfigError` listing the nearest preset names.
    """
    from .._validate import check_name_or_path

    if isinstance(name_or_path, HardwareSpec):
        return name_or_path
    text = check_name_or_path("hardware", name_or_path, "a hardware preset name or a .toml file")
    preset = _PRESET_DIR / f"{text.strip().lower()}.toml"
    if isinstance(name_or_path, str) and "/" not in text and preset.is_file():
        return load_hardware_toml(preset)
    path = Path(text)
    if path.is_file():
        if path.suffix.lower() != ".toml":
            raise field_error("hardware", text, "a preset name or a .toml file")
        return load_hardware_toml(path)
    names = list_hardware()
    if "/" in text or os.sep in text or path.suffix.lower() == ".toml":     # meant as a file
        raise ConfigError(f"file not found: {text} (hardware: expected a preset name ({', '.join(names)}) "
                          "or an existing .toml file)")
    close = difflib.get_close_matches(text.lower(), names, n=3, cutoff=0.4)
    hint = f"; nearest: {', '.join(close)}" if close else ""
    raise field_error("hardware", text, f"a preset name ({', '.join(names)}) or a .toml file{hint}")
