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
"""
from __future__ import annotations

import pathlib

from .._inputs import read_toml
from .._validate import check_bool, check_number, check_str, check_table
from ..errors import ConfigError, field_error
from .config import BUILTIN_CONFIGS, DRAMConfig
from .standards import get_standard

__all__ = ["load_dram_toml"]

_CONTROLLER_KEYS = {"mapper", "row_policy", "row_policy_cap", "refresh", "read_queue_size", "write_queue_size",
                    "active_queue_size", "priority_queue_size", "wr_low_watermark", "wr_high_watermark",
                    "clock_ratio", "memory_clock_ratio", "end"}


def load_dram_toml(path: str | pathlib.Path) -> DRAMConfig:
    path = pathlib.Path(path)
    src = str(path)
    doc = read_toml(path)
    for key in doc:
        if key not in {"name", "standard", "base", "org", "timing", "controller"}:
            raise ConfigError(f"{src}: {key}: unknown key (expected name, standard, base, org, timing, controller)")
    if "name" in doc:
        check_str("name", doc["name"], source=src)
    for key in ("standard", "base"):
        if key in doc:
            check_str(key, doc[key], source=src)
    for key in ("org", "timing", "controller"):
        if key in doc:
            check_table(key, doc[key], source=src)
    if "base" in doc:
        if doc["base"] not in BUILTIN_CONFIGS:
            raise field_error("base", doc["base"], f"one of {sorted(BUILTIN_CONFIGS)}", source=src)
        base = BUILTIN_CONFIGS[doc["base"]]()
        std = base.standard if "standard" not in doc else get_standard(doc["standard"])
        org, timings, ctrl = dict(base.org), dict(base.timings), {k: getattr(base, k) for k in _CONTROLLER_KEYS}
    else:
        if "standard" not in doc:
            raise field_error("standard", None, "a standard name (hbm3, hbm2, ramulator2-hbm3, ramulator2-hbm2)", source=src)
        std = get_standard(doc["standard"])
        org, timings, ctrl = {}, {}, {}
    org_node = dict(doc.get("org", {}))
    if "preset" in org_node:
        p = org_node.pop("preset")
        if not isinstance(p, str) or p not in std.org_presets:
            raise field_error("org.preset", p, f"one of {sorted(std.org_presets)}", source=src)
        org.update({k: v for k, v in std.org_presets[p].items() if k in std.levels})
    for k, v in org_node.items():
        if k not in std.levels:
            raise field_error(f"org.{k}", v, f"a level of {std.name}: {list(std.levels)}", source=src)
        org[k] = v
    tim_node = dict(doc.get("timing", {}))
    if "preset" in tim_node:
        p = tim_node.pop("preset")
        if not isinstance(p, str) or p not in std.timing_presets:
            raise field_error("timing.preset", p, f"one of {sorted(std.timing_presets)}", source=src)
        timings.update(std.timing_presets[p])
    for k, v in tim_node.items():
        if k not in std.timing_names:
            raise field_error(f"timing.{k}", v, f"a timing of {std.name}: {list(std.timing_names)}", source=src)
        timings[k] = v
    for k, v in doc.get("controller", {}).items():
        if k not in _CONTROLLER_KEYS:
            raise field_error(f"controller.{k}", v, f"one of {sorted(_CONTROLLER_KEYS)}", source=src)
        if k == "refresh":
            check_bool(f"controller.{k}", v, source=src)
        elif k in ("mapper", "row_policy", "end"):
            check_str(f"controller.{k}", v, source=src)
        elif k in ("wr_low_watermark", "wr_high_watermark"):
            check_number(f"controller.{k}", v, lo=0, hi=1, source=src, what="a fraction of the write queue")
        ctrl[k] = v
    return DRAMConfig(name=doc.get("name", path.stem), standard=std, org=org, timings=timings, source=src, **ctrl)
