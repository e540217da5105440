"""Hardware specifications: GPU, HBM-PIM stack, interconnect, system; presets and TOML files.

Units are in the field names: ``*_flops*`` in FLOP/s, ``*_bytes_per_s*`` in bytes per second,
``*_bytes`` in bytes, ``*_s`` in seconds; ratios and efficiencies are dimensionless.

::

    hw = get_hardware("b200")          # preset (sievesim/data/hardware/b200.toml)
    hw = get_hardware("my_hw.toml")    # a TOML file in the same schema
    hw.pim_peak_flops                   # PIM FLOP/s of all stacks of one GPU

This module only stores the *name* of the engine's DRAM configuration (``PIMSpec.dram_config``,
e.g. ``"hbm3e-8000"``); timings and organisation live in :mod:`sievesim.dram`, which checks the name
when a PIM program is compiled.
"""
from __future__ import annotations

from .reader import (engine_internal_bandwidth_bytes_per_s_per_stack, get_hardware, hardware_from_dict,
                     list_hardware, load_hardware_toml, save_hardware_toml)
from .spec import (BANKS_PER_PU, PU_PLACEMENTS, GPUSpec, HardwareSpec, InterconnectSpec, PIMSpec, SystemSpec,
                   hardware_to_dict)

__all__ = [
    "PU_PLACEMENTS",
    "BANKS_PER_PU",
    "GPUSpec",
    "PIMSpec",
    "InterconnectSpec",
    "HardwareSpec",
    "SystemSpec",
    "get_hardware",
    "list_hardware",
    "load_hardware_toml",
    "save_hardware_toml",
    "hardware_to_dict",
    "hardware_from_dict",
    "engine_internal_bandwidth_bytes_per_s_per_stack",
]
