"""sievesim's own TOML configuration files for memory systems.

Example (every table optional except ``standard``)::

    name = "my-hbm3"
    standard = "hbm3"                 # hbm3 | hbm2 | ramulator2-hbm3 | ramulator2-hbm2
    base = "hbm3-6400"                # optional: start from a built-in configuration
    [org]                             # counts per level; or preset = "HBM3_16Gb_8hi"
    preset = "HBM3_16Gb_8hi"
    channel = 8
    [timing]                          # cycles; or preset = "HBM3_6400"
    preset = "HBM3_6400"
    nCL = 22
    [controller]
    mapper = "RoBaRaCoCh"             # RoBaRaCoCh | ChRaBaRoCo | MOP4CLXOR
    row_policy = "open"               # open | closed
    row_policy_cap = 1
    refresh = true
    read_queue_size = 32
    write_queue_size = 32
    wr_low_watermark = 0.2
    wr_high_watermark = 0.8
    clock_ratio = 1
    end = "completed"                 # completed | accepted
    [energy]                          # overrides of the standard's energy figures (docs/energy.md)
    act_pj_per_bit = 0.11
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._inputs import read_toml
from .._validate import Problems, check_str, check_table
from ..errors import ConfigError, field_error
from .energy import ENERGY_PARAMS, check_energy_table
from .spec import BUILTIN_CONFIGS, DRAMConfig, check_controller_field, check_org_level, check_timing
from .standards import get_standard

if TYPE_CHECKING:
    import pathlib

__all__ = ["load_dram_toml"]

_CONTROLLER_KEYS = {"mapper", "row_policy", "row_policy_cap", "refresh", "read_queue_size", "write_queue_size",
                    "active_queue_size", "priority_queue_size", "wr_low_watermark", "wr_high_watermark",
                    "clock_ratio", "memory_clock_ratio", "end"}
_TOP_KEYS = ("name", "standard", "base", "org", "timing", "controller", "energy")


def load_dram_toml(path: str | pathlib.Path) -> DRAMConfig:
    """Read a configuration; every problem of the file (unknown keys, types, ranges) is reported in
    one message, and the meaning (timing constraints) is checked once the types are right."""
    import pathlib      # (here: the `dram run` path of a YAML configuration imports no pathlib)

    path = pathlib.Path(path)
    src = str(path)
    doc = read_toml(path)
    problems = Problems(src)

    unknown = [k for k in doc if k not in _TOP_KEYS]
    if unknown:
        with problems.check():
            raise ConfigError(f"{src}: {', '.join(unknown)}: unknown key (expected {', '.join(_TOP_KEYS)})")
    for key, check in (("name", check_str), ("standard", check_str), ("base", check_str),
                       ("org", check_table), ("timing", check_table), ("controller", check_table),
                       ("energy", check_table)):
        if key in doc:
            with problems.check():
                check(key, doc[key], source=src)
    std = None
    org: dict[str, Any] = {}
    timings: dict[str, Any] = {}
    ctrl: dict[str, Any] = {}
    if isinstance(doc.get("base"), str):
        if doc["base"] not in BUILTIN_CONFIGS:
            problems.add("base", doc["base"], f"one of {sorted(BUILTIN_CONFIGS)}")
        else:
            base = BUILTIN_CONFIGS[doc["base"]]()
            std = base.standard
            org, timings, ctrl = dict(base.org), dict(base.timings), {k: getattr(base, k) for k in _CONTROLLER_KEYS}
    elif "base" not in doc and "standard" not in doc:
        problems.add("standard", None, "a standard name (hbm3, hbm2, ramulator2-hbm3, ramulator2-hbm2)")
    if isinstance(doc.get("standard"), str):
        with problems.check():
            std = get_standard(doc["standard"])

    org_node = dict(doc["org"]) if isinstance(doc.get("org"), dict) else {}
    tim_node = dict(doc["timing"]) if isinstance(doc.get("timing"), dict) else {}
    if std is not None:
        if "preset" in org_node:
            p = org_node.pop("preset")
            if not isinstance(p, str) or p not in std.org_presets:
                problems.add("org.preset", p, f"one of {sorted(std.org_presets)}")
            else:
                org.update({k: v for k, v in std.org_presets[p].items() if k in std.levels})
        for k, v in org_node.items():
            if k not in std.levels:
                problems.add(f"org.{k}", v, f"a level of {std.name}: {list(std.levels)}")
            else:
                with problems.check():
                    org[k] = check_org_level(std, k, v, source=src)
        if "preset" in tim_node:
            p = tim_node.pop("preset")
            if not isinstance(p, str) or p not in std.timing_presets:
                problems.add("timing.preset", p, f"one of {sorted(std.timing_presets)}")
            else:
                timings.update(std.timing_presets[p])
        for k, v in tim_node.items():
            if k not in std.timing_names:
                import difflib

                close = difflib.get_close_matches(str(k), std.timing_names, n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                problems.add(f"timing.{k}", v, f"a timing of {std.name}{hint}: {list(std.timing_names)}")
            else:
                with problems.check():
                    timings[k] = check_timing(k, v, source=src)
    controller = doc["controller"] if isinstance(doc.get("controller"), dict) else {}
    for k, v in controller.items():
        with problems.check():
            if k not in _CONTROLLER_KEYS:
                raise field_error(f"controller.{k}", v, f"one of {sorted(_CONTROLLER_KEYS)}", source=src)
            ctrl[k] = check_controller_field(k, v, field=f"controller.{k}", source=src)
    energy: dict[str, float] = {}
    if isinstance(doc.get("energy"), dict):
        with problems.check():
            energy = check_energy_table(doc["energy"], source=src,
                                        required=std is not None and std.name not in ENERGY_PARAMS)
    problems.raise_if_any()
    assert std is not None
    return DRAMConfig(name=doc.get("name", path.stem), standard=std, org=org, timings=timings, source=src,
                      energy=energy, **ctrl)
