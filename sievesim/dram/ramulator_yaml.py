"""Read a Ramulator 2.0 YAML configuration into a :class:`DRAMConfig` on the mirror standards.

Supported: GenericDRAM memory system, HBM3/HBM2 devices (presets and per-field overrides), the
Generic controller with FRFCFS, AllBank refresh, Open/ClosedRowPolicy, the RoBaRaCoCh / ChRaBaRoCo
/ MOP4CLXOR mappers, and the LoadStoreTrace / ReadWriteTrace frontends with NoTranslation. Any other
key is an error that names it: nothing is silently ignored.
"""
from __future__ import annotations

import pathlib
from typing import Any

import yaml

from ..errors import ConfigError, field_error
from .config import PLUGINS, ControllerPlugin, DRAMConfig
from .standards import _r2_finish_timings, get_standard

__all__ = ["load_ramulator_yaml"]

_DEVICES = {"HBM3": "ramulator2-hbm3", "HBM2": "ramulator2-hbm2"}
_ROW_POLICIES = {"OpenRowPolicy": "open", "ClosedRowPolicy": "closed"}


def _section(node: Any, path: str, src: str) -> dict:
    if not isinstance(node, dict):
        raise field_error(path, node, "a mapping", source=src)
    return node


def _check_keys(node: dict, allowed: set[str], path: str, src: str) -> None:
    for key in node:
        if key not in allowed:
            raise ConfigError(f"{src}: {path}.{key}: not supported by sievesim "
                              f"(supported keys here: {sorted(allowed)})")


def _impl(node: dict, path: str, allowed: set[str], src: str) -> str:
    impl = node.get("impl")
    if impl not in allowed:
        raise field_error(f"{path}.impl", impl, f"one of {sorted(allowed)}", source=src)
    return impl


def _int(value: Any, path: str, src: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise field_error(path, value, "an integer", source=src)
    return value


def load_ramulator_yaml(path: str | pathlib.Path) -> DRAMConfig:
    """Parse ``path``; the frontend's trace path is kept in ``DRAMConfig.source`` only."""
    path = pathlib.Path(path)
    src = str(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{src}: cannot read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{src}: not valid YAML ({exc})") from None
    doc = _section(doc, "<top>", src)
    _check_keys(doc, {"Frontend", "MemorySystem"}, "<top>", src)

    fe = _section(doc.get("Frontend", {}), "Frontend", src)
    clock_ratio = 1
    if fe:
        _impl(fe, "Frontend", {"LoadStoreTrace", "ReadWriteTrace"}, src)
        _check_keys(fe, {"impl", "path", "clock_ratio", "Translation"}, "Frontend", src)
        clock_ratio = _int(fe.get("clock_ratio", 1), "Frontend.clock_ratio", src)
        if "Translation" in fe:
            tr = _section(fe["Translation"], "Frontend.Translation", src)
            _impl(tr, "Frontend.Translation", {"NoTranslation"}, src)
            _check_keys(tr, {"impl", "max_addr"}, "Frontend.Translation", src)

    ms = _section(doc.get("MemorySystem"), "MemorySystem", src)
    _impl(ms, "MemorySystem", {"GenericDRAM"}, src)
    _check_keys(ms, {"impl", "clock_ratio", "DRAM", "Controller", "AddrMapper"}, "MemorySystem", src)
    mem_ratio = _int(ms.get("clock_ratio", 1), "MemorySystem.clock_ratio", src)

    dram = _section(ms.get("DRAM"), "MemorySystem.DRAM", src)
    device = _impl(dram, "MemorySystem.DRAM", set(_DEVICES), src)
    _check_keys(dram, {"impl", "org", "timing"}, "MemorySystem.DRAM", src)
    std = get_standard(_DEVICES[device])

    org_node = _section(dram.get("org", {}), "MemorySystem.DRAM.org", src)
    _check_keys(org_node, {"preset", "dq", "density", "channel_width", *std.levels}, "MemorySystem.DRAM.org", src)
    org: dict[str, int] = {}
    density = dq = None
    if "preset" in org_node:
        name = org_node["preset"]
        if name not in std.org_presets:
            raise field_error("MemorySystem.DRAM.org.preset", name, f"one of {sorted(std.org_presets)}", source=src)
        preset = dict(std.org_presets[name])
        density, dq = preset.pop("density"), preset.pop("dq")
        org.update(preset)
    for key in std.levels:
        if key in org_node:
            org[key] = _int(org_node[key], f"MemorySystem.DRAM.org.{key}", src)
    if "dq" in org_node:
        dq = _int(org_node["dq"], "MemorySystem.DRAM.org.dq", src)
    if "density" in org_node:
        density = _int(org_node["density"], "MemorySystem.DRAM.org.density", src)
    if "channel_width" in org_node and org_node["channel_width"] != std.channel_width_bits:
        raise field_error("MemorySystem.DRAM.org.channel_width", org_node["channel_width"],
                          f"{std.channel_width_bits} (the only width sievesim's {std.name} mirror supports)", source=src)
    for key in std.levels:
        if key not in org:
            raise field_error(f"MemorySystem.DRAM.org.{key}", None, "a count (or an org preset)", source=src)
    if density is None or dq is None:
        raise field_error("MemorySystem.DRAM.org.density", density, "a density in Mb (or an org preset)", source=src)
    computed = (org["pseudochannel"] * org["bankgroup"] * org["bank"] * org["row"] * org["column"] * dq) >> 20
    if computed != density:
        raise field_error("MemorySystem.DRAM.org.density", density,
                          f"{computed} Mb, the density the organisation gives (as Ramulator checks)", source=src)

    tim_node = _section(dram.get("timing", {}), "MemorySystem.DRAM.timing", src)
    tnames = set(std.timing_names) - {"rate", "tCK_ps"}
    _check_keys(tim_node, {"preset", "rate", *tnames, *("t" + n[1:] for n in tnames)}, "MemorySystem.DRAM.timing", src)
    if "preset" in tim_node:
        name = tim_node["preset"]
        if name not in std.timing_presets:
            raise field_error("MemorySystem.DRAM.timing.preset", name, f"one of {sorted(std.timing_presets)}", source=src)
        if "rate" in tim_node:
            raise ConfigError(f"{src}: MemorySystem.DRAM.timing.rate: cannot change the rate of a speed preset")
        timings = dict(std.timing_presets[name])
    else:
        timings = {n: -1 for n in std.timing_names}
        if "rate" not in tim_node:
            raise field_error("MemorySystem.DRAM.timing.rate", None, "a rate in MT/s (or a timing preset)", source=src)
        timings["rate"] = _int(tim_node["rate"], "MemorySystem.DRAM.timing.rate", src)
    if density not in (2048, 4096, 8192, 16384):
        raise field_error("MemorySystem.DRAM.org.density", density, "2048, 4096, 8192 or 16384 Mb "
                          "(Ramulator 2.0's tRFC table)", source=src)
    timings = _r2_finish_timings(timings, density)
    tck_ps = timings["tCK_ps"]
    for n in sorted(tnames):
        if n in tim_node:
            timings[n] = _int(tim_node[n], f"MemorySystem.DRAM.timing.{n}", src)
        elif "t" + n[1:] in tim_node:
            from .standards import _jedec_rounding
            v = tim_node["t" + n[1:]]
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise field_error(f"MemorySystem.DRAM.timing.t{n[1:]}", v, "a time in ns", source=src)
            timings[n] = _jedec_rounding(v, tck_ps)
    for n in std.timing_names:
        if timings.get(n, -1) == -1 and n not in ("nRFCSB", "nREFISB"):
            raise field_error(f"MemorySystem.DRAM.timing.{n}", None, "a value in cycles", source=src)

    ctrl = _section(ms.get("Controller"), "MemorySystem.Controller", src)
    _impl(ctrl, "MemorySystem.Controller", {"Generic"}, src)
    _check_keys(ctrl, {"impl", "Scheduler", "RefreshManager", "RowPolicy", "plugins",
                       "wr_low_watermark", "wr_high_watermark"}, "MemorySystem.Controller", src)
    plugins = _plugins(ctrl.get("plugins"), std, src)
    sched = _section(ctrl.get("Scheduler"), "MemorySystem.Controller.Scheduler", src)
    _impl(sched, "MemorySystem.Controller.Scheduler", {"FRFCFS"}, src)
    _check_keys(sched, {"impl"}, "MemorySystem.Controller.Scheduler", src)
    refresh = _section(ctrl.get("RefreshManager"), "MemorySystem.Controller.RefreshManager", src)
    _impl(refresh, "MemorySystem.Controller.RefreshManager", {"AllBank"}, src)
    _check_keys(refresh, {"impl"}, "MemorySystem.Controller.RefreshManager", src)
    row_policy, cap = "open", 10_000_000
    if "RowPolicy" in ctrl:
        rp = _section(ctrl["RowPolicy"], "MemorySystem.Controller.RowPolicy", src)
        row_policy = _ROW_POLICIES[_impl(rp, "MemorySystem.Controller.RowPolicy", set(_ROW_POLICIES), src)]
        _check_keys(rp, {"impl", "cap"} if row_policy == "closed" else {"impl"}, "MemorySystem.Controller.RowPolicy", src)
        cap = _int(rp.get("cap", cap), "MemorySystem.Controller.RowPolicy.cap", src)

    mapper_node = _section(ms.get("AddrMapper"), "MemorySystem.AddrMapper", src)
    mapper = _impl(mapper_node, "MemorySystem.AddrMapper", {"RoBaRaCoCh", "ChRaBaRoCo", "MOP4CLXOR"}, src)
    _check_keys(mapper_node, {"impl"}, "MemorySystem.AddrMapper", src)

    def _float(key: str, default: float) -> float:
        v = ctrl.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise field_error(f"MemorySystem.Controller.{key}", v, "a fraction", source=src)
        return float(v)

    return DRAMConfig(
        name=path.stem, standard=std, org=org, timings=timings, mapper=mapper,
        row_policy=row_policy, row_policy_cap=cap, refresh=True,
        wr_low_watermark=_float("wr_low_watermark", 0.2), wr_high_watermark=_float("wr_high_watermark", 0.8),
        clock_ratio=clock_ratio, memory_clock_ratio=mem_ratio, end="accepted", source=src, plugins=plugins,
    )


def _plugins(node: Any, std: Any, src: str) -> tuple[ControllerPlugin, ...]:
    """``Controller.plugins``: a list of ``{ControllerPlugin: {impl, path, ...}}``; TraceRecorder and
    CommandCounter are carried out, any other plugin is refused by name."""
    if not node:
        return ()
    path = "MemorySystem.Controller.plugins"
    if not isinstance(node, list):
        raise field_error(path, node, "a list of ControllerPlugin entries", source=src)
    out = []
    for i, entry in enumerate(node):
        where = f"{path}[{i}]"
        if not isinstance(entry, dict) or set(entry) != {"ControllerPlugin"}:
            raise field_error(where, entry, "{ControllerPlugin: {impl: ..., path: ...}}", source=src)
        plug = _section(entry["ControllerPlugin"], f"{where}.ControllerPlugin", src)
        impl = plug.get("impl")
        if impl not in PLUGINS:
            raise field_error(f"{where}.ControllerPlugin.impl", impl,
                              f"one of {list(PLUGINS)} (other Ramulator plugins are not supported by sievesim)",
                              source=src)
        allowed = {"impl", "path"} | ({"commands_to_count"} if impl == "CommandCounter" else set())
        _check_keys(plug, allowed, f"{where}.ControllerPlugin", src)
        target = plug.get("path")
        if not isinstance(target, str) or not target:
            raise field_error(f"{where}.ControllerPlugin.path", target, "a file path (required)", source=src)
        commands: tuple[str, ...] = ()
        if impl == "CommandCounter":
            names = plug.get("commands_to_count")
            if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
                raise field_error(f"{where}.ControllerPlugin.commands_to_count", names,
                                  "a non-empty list of command names (required)", source=src)
            known = [c.name for c in std.commands]
            for n in names:
                if n not in known:
                    raise field_error(f"{where}.ControllerPlugin.commands_to_count", n,
                                      f"a command of {std.name}: {known}", source=src)
            commands = tuple(names)
        out.append(ControllerPlugin(impl=impl, path=target, commands_to_count=commands))
    return tuple(out)
