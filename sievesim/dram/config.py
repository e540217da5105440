"""Where a memory-system configuration comes from: :func:`get_config` takes a built-in name
(:data:`BUILTIN_CONFIGS`), a sievesim TOML file (:func:`sievesim.dram.toml_config.load_dram_toml`)
or a Ramulator 2.0 YAML file (:func:`sievesim.dram.ramulator_yaml.load_ramulator_yaml`).

The definitions the readers share -- :class:`DRAMConfig`, its field checks, the built-ins -- live
in :mod:`sievesim.dram.spec`; they are re-exported here, so ``sievesim.dram.config`` stays the one
import for users, and the readers import :mod:`~sievesim.dram.spec`, never this module.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..errors import ConfigError
from .ramulator_yaml import load_ramulator_yaml
from .spec import (ACTION_CODES, BUILTIN_CONFIGS, CONTROLLER_FIELDS, END_CONDITIONS, FLAG_ACCESSING, FLAG_CLOSING,
                   FLAG_OPENING, FLAG_REFRESHING, MAPPERS, PIM_COMMANDS, PLUGINS, PREREQ_CODES, ROW_POLICIES,
                   ControllerPlugin, DRAMConfig, check_controller_field, check_engine_memory, check_org_level,
                   check_timing, engine_memory_bytes)
from .toml_config import load_dram_toml

if TYPE_CHECKING:
    import pathlib

__all__ = ["DRAMConfig", "ControllerPlugin", "BUILTIN_CONFIGS", "PLUGINS", "get_config", "MAPPERS", "ROW_POLICIES", "engine_memory_bytes",
           "check_engine_memory",
           # what the module held before the readers' definitions moved to spec.py
           "ACTION_CODES", "CONTROLLER_FIELDS", "END_CONDITIONS", "FLAG_ACCESSING", "FLAG_CLOSING", "FLAG_OPENING",
           "FLAG_REFRESHING", "PIM_COMMANDS", "PREREQ_CODES", "check_controller_field", "check_org_level", "check_timing",
           "load_dram_toml", "load_ramulator_yaml"]


def get_config(name_or_path: str | pathlib.Path) -> DRAMConfig:
    """A built-in configuration name, a sievesim ``.toml`` file or a Ramulator 2.0 ``.yaml`` file."""
    from .._validate import check_name_or_path
    from .spec import DRAMConfig

    if isinstance(name_or_path, DRAMConfig):
        return name_or_path
    key = check_name_or_path("config", name_or_path, "a built-in DRAM configuration name, a .toml or a .yaml file")
    if key in BUILTIN_CONFIGS:
        return BUILTIN_CONFIGS[key]()
    # (os.path, not pathlib: the `dram run` path imports no pathlib, tests/test_cli_startup.py)
    suffix = os.path.splitext(key)[1].lower()
    if suffix in (".yaml", ".yml"):
        return load_ramulator_yaml(key)
    if suffix == ".toml":
        return load_dram_toml(key)
    import difflib      # (only for the error: the `dram run` path stays light)

    near = difflib.get_close_matches(key, list(BUILTIN_CONFIGS), n=3)
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    raise ConfigError(f"config = {key!r}: expected a built-in name {sorted(BUILTIN_CONFIGS)}, "
                      f"a .toml file or a Ramulator .yaml file{hint}")
