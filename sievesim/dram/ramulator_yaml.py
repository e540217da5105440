"""Read a Ramulator 2.0 YAML configuration into a :class:`DRAMConfig` on the mirror standards.

Supported: GenericDRAM memory system, HBM3/HBM2 devices (presets and per-field overrides), the
Generic controller with FRFCFS, AllBank refresh, Open/ClosedRowPolicy, the RoBaRaCoCh / ChRaBaRoCo
/ MOP4CLXOR mappers, and the LoadStoreTrace / ReadWriteTrace frontends with NoTranslation. Any other
key is an error that names it: nothing is silently ignored.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping

from .._inputs import read_text
from .._validate import Problems, check_int, check_number
from ..errors import ConfigError
from .spec import PLUGINS, ControllerPlugin, DRAMConfig
from .standards import _jedec_rounding, _r2_finish_timings, get_standard

if TYPE_CHECKING:
    import pathlib

__all__ = ["load_ramulator_yaml"]

_DEVICES = {"HBM3": "ramulator2-hbm3", "HBM2": "ramulator2-hbm2"}
_ROW_POLICIES = {"OpenRowPolicy": "open", "ClosedRowPolicy": "closed"}


_MAX_DEPTH = 64


def _flow_depth(text: str) -> int:
    """Deepest nesting of YAML flow brackets ([ and {), counted without parsing."""
    depth = deepest = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


class _Reader:
    """Reads one parsed document, collecting every problem so that one message reports them all:
    structure, keys and types of every section first, then meaning (density, missing timings)."""

    def __init__(self, src: str) -> None:
        self.src = src
        self.problems = Problems(src)

    def problem(self, path: str, value: Any, expected: str) -> None:
        self.problems.add(path, value, expected)

    def section(self, node: Any, path: str) -> dict | None:
        """``node`` when it is a mapping; else a problem and None (the section is skipped)."""
        if not isinstance(node, dict):
            self.problem(path, "<missing>" if node is None else node, "a mapping")
            return None
        return node

    def keys(self, node: dict, allowed: set[str], path: str) -> None:
        unknown = [str(k) for k in node if k not in allowed]
        if unknown:
            with self.problems.check():
                raise ConfigError(f"{self.src}: {', '.join(f'{path}.{k}' for k in unknown)}: not supported by "
                                  f"sievesim (supported keys here: {sorted(allowed)})")

    def impl(self, node: dict, path: str, allowed: set[str]) -> str | None:
        impl = node.get("impl")
        if not isinstance(impl, str) or impl not in allowed:
            self.problem(f"{path}.impl", "<missing>" if impl is None else impl, f"one of {sorted(allowed)}")
            return None
        return impl

    def preset(self, node: dict, path: str, presets: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
        """A copy of the preset ``node`` names, or None (absent, or a problem when unknown)."""
        if "preset" not in node:
            return None
        name = node["preset"]
        if not isinstance(name, str) or name not in presets:
            self.problem(f"{path}.preset", name, f"one of {sorted(presets)}")
            return None
        return dict(presets[name])

    def int(self, value: Any, path: str, kind: str = "cycles", **bounds: int) -> int | None:
        with self.problems.check():
            return check_int(path, value, kind, source=self.src, **bounds)
        return None

    def number(self, value: Any, path: str, **kw: Any) -> float | None:
        with self.problems.check():
            return check_number(path, value, source=self.src, **kw)
        return None


def _load_yaml(yaml: Any, text: str) -> Any:
    """``yaml.safe_load(text)``, parsed by libyaml where PyYAML has it (faster, on every ``dram
    run``'s start-up); input that libyaml refuses is parsed again by PyYAML's own parser, whose
    error the caller reports (the same messages with or without libyaml)."""
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is not None:
        try:
            return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
        except yaml.YAMLError:
            pass
    return yaml.safe_load(text)


def load_ramulator_yaml(path: str | pathlib.Path) -> DRAMConfig:
    """Parse ``path``; the frontend's trace path is kept in ``DRAMConfig.source`` only."""
    src = os.fspath(path)
    r, doc = _read_document(src)
    # ---- structure, keys and types of every section (every problem gathered, then raised at once)
    clock_ratio, ms, mem_ratio = _frontend_and_memory_system(doc, r)
    std, org_node, tim_node = _dram_section(ms, r)
    org, density, dq = _organisation(std, org_node, r)
    timings, tnames = _timing_section(std, tim_node, r, src)
    plugins, row_policy, cap, watermarks = _controller(ms, std, r)
    mapper = _address_mapper(ms, r)
    r.problems.raise_if_any()
    assert std is not None and tim_node is not None
    # ---- meaning: the organisation's density and every timing
    _check_density(std, org, density, dq, r)
    timings = _resolved_timings(std, timings, tnames, tim_node, density, r)
    return DRAMConfig(
        name=os.path.splitext(os.path.basename(src))[0], standard=std, org=org, timings=timings, mapper=mapper,
        row_policy=row_policy, row_policy_cap=cap, refresh=True,
        wr_low_watermark=watermarks["wr_low_watermark"], wr_high_watermark=watermarks["wr_high_watermark"],
        clock_ratio=clock_ratio, memory_clock_ratio=mem_ratio, end="accepted", source=src, plugins=plugins,
    )


def _read_document(src: str) -> tuple[_Reader, dict]:
    """The YAML file's top mapping with the reader that gathers its problems; a file that is not
    YAML (or nests brackets deeper than a configuration does) stops here."""
    import yaml  # here, not at the top: ``import sievesim.dram`` stays free of the YAML parser

    text = read_text(src, "Ramulator 2.0 YAML file")
    depth = _flow_depth(text)
    if depth > _MAX_DEPTH:  # the pure-Python YAML parser takes seconds on such input before it fails
        raise ConfigError(f"{src}: not valid YAML: brackets nested {depth} deep (a Ramulator configuration "
                          f"nests fewer than {_MAX_DEPTH})")
    try:
        doc = _load_yaml(yaml, text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{src}: not valid YAML: {exc.problem or exc.context}{where}") from None
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        raise ConfigError(f"{src}: not valid YAML: {' '.join(str(exc).split())[:200]}") from None
    r = _Reader(src)
    doc = r.section(doc, "<top>")
    r.problems.raise_if_any()
    assert doc is not None
    r.keys(doc, {"Frontend", "MemorySystem"}, "<top>")
    return r, doc


def _frontend_and_memory_system(doc: dict, r: _Reader) -> tuple[int | None, dict | None, int | None]:
    """(the frontend's clock ratio, the ``MemorySystem`` section, its clock ratio)."""
    clock_ratio: int | None = 1
    fe = r.section(doc.get("Frontend", {}), "Frontend")
    if fe:
        r.impl(fe, "Frontend", {"LoadStoreTrace", "ReadWriteTrace"})
        r.keys(fe, {"impl", "path", "clock_ratio", "Translation"}, "Frontend")
        clock_ratio = r.int(fe.get("clock_ratio", 1), "Frontend.clock_ratio", "clock_ratio")
        if "Translation" in fe:
            tr = r.section(fe["Translation"], "Frontend.Translation")
            if tr is not None:
                r.impl(tr, "Frontend.Translation", {"NoTranslation"})
                r.keys(tr, {"impl", "max_addr"}, "Frontend.Translation")

    ms = r.section(doc.get("MemorySystem"), "MemorySystem")
    mem_ratio: int | None = 1
    if ms is not None:
        r.impl(ms, "MemorySystem", {"GenericDRAM"})
        r.keys(ms, {"impl", "clock_ratio", "DRAM", "Controller", "AddrMapper"}, "MemorySystem")
        mem_ratio = r.int(ms.get("clock_ratio", 1), "MemorySystem.clock_ratio", "clock_ratio")
    return clock_ratio, ms, mem_ratio


def _dram_section(ms: dict | None, r: _Reader) -> tuple[Any, dict | None, dict | None]:
    """(the standard ``MemorySystem.DRAM.impl`` names, its ``org`` node, its ``timing`` node)."""
    dram = r.section(ms.get("DRAM"), "MemorySystem.DRAM") if ms is not None else None
    std = org_node = tim_node = None
    if dram is not None:
        device = r.impl(dram, "MemorySystem.DRAM", set(_DEVICES))
        r.keys(dram, {"impl", "org", "timing"}, "MemorySystem.DRAM")
        std = get_standard(_DEVICES[device]) if device else None
        org_node = r.section(dram.get("org", {}), "MemorySystem.DRAM.org")
        tim_node = r.section(dram.get("timing", {}), "MemorySystem.DRAM.timing")
    return std, org_node, tim_node


def _organisation(std: Any, org_node: dict | None, r: _Reader
                  ) -> tuple[dict[str, int], int | None, int | None]:
    """(level counts, density in Mb, dq) from ``org``: its preset, then the keys that override it."""
    org: dict[str, int] = {}
    density = dq = None
    if std is not None and org_node is not None:
        where = "MemorySystem.DRAM.org"
        r.keys(org_node, {"preset", "dq", "density", "channel_width", *std.levels}, where)
        preset = r.preset(org_node, where, std.org_presets)
        if preset is not None:
            density, dq = preset.pop("density"), preset.pop("dq")
            org.update(preset)
        for key in std.levels:
            if key in org_node:
                org[key] = r.int(org_node[key], f"{where}.{key}", "org_level")
        if "dq" in org_node:
            dq = r.int(org_node["dq"], f"{where}.dq", "org_level")
        if "density" in org_node:
            density = r.int(org_node["density"], f"{where}.density", "org_level")
        if "channel_width" in org_node and org_node["channel_width"] != std.channel_width_bits:
            r.problem(f"{where}.channel_width", org_node["channel_width"],
                      f"{std.channel_width_bits} (the only width sievesim's {std.name} mirror supports)")
    return org, density, dq


def _timing_section(std: Any, tim_node: dict | None, r: _Reader, src: str) -> tuple[dict[str, int], set[str]]:
    """(the timings of the preset or the rate, -1 where still unknown; the timing names the file may
    override), the overrides' types checked (they apply once the clock is known)."""
    timings: dict[str, int] = {}
    tnames: set[str] = set()
    if std is not None and tim_node is not None:
        where = "MemorySystem.DRAM.timing"
        tnames = set(std.timing_names) - {"rate", "tCK_ps"}
        r.keys(tim_node, {"preset", "rate", *tnames, *("t" + n[1:] for n in tnames)}, where)
        if "preset" in tim_node:
            timings = r.preset(tim_node, where, std.timing_presets) or {}
            if "rate" in tim_node:
                with r.problems.check():
                    raise ConfigError(f"{src}: {where}.rate: cannot change the rate of a speed preset")
        elif "rate" not in tim_node:
            r.problem(f"{where}.rate", None, "a rate in MT/s (or a timing preset)")
        else:
            rate = r.int(tim_node["rate"], f"{where}.rate", lo=1, hi=1 << 20)
            if rate is not None:
                timings = {n: -1 for n in std.timing_names}
                timings["rate"] = rate
        for n in sorted(tnames):  # the overrides' types; applied once the clock is known
            if n in tim_node:  # -1: "not applicable", as Ramulator writes it
                r.int(tim_node[n], f"{where}.{n}", lo=-1 if n in ("nRFC", "nRFCSB", "nREFISB") else 0)
            elif "t" + n[1:] in tim_node:
                r.number(tim_node["t" + n[1:]], f"{where}.t{n[1:]}", lo=0, hi=1e9, what="a time in ns")
    return timings, tnames


def _controller(ms: dict | None, std: Any, r: _Reader
                ) -> tuple[tuple[ControllerPlugin, ...], str, int | None, dict[str, float | None]]:
    """(plugins, row policy, its cap, write watermarks) of ``MemorySystem.Controller``."""
    ctrl = r.section(ms.get("Controller"), "MemorySystem.Controller") if ms is not None else None
    plugins: tuple[ControllerPlugin, ...] = ()
    row_policy, cap, watermarks = "open", 10_000_000, {}
    if ctrl is not None:
        r.impl(ctrl, "MemorySystem.Controller", {"Generic"})
        r.keys(ctrl, {"impl", "Scheduler", "RefreshManager", "RowPolicy", "plugins",
                      "wr_low_watermark", "wr_high_watermark"}, "MemorySystem.Controller")
        plugins = _plugins(ctrl.get("plugins"), std, r)
        for key, impl in (("Scheduler", "FRFCFS"), ("RefreshManager", "AllBank")):
            node = r.section(ctrl.get(key), f"MemorySystem.Controller.{key}")
            if node is not None:
                r.impl(node, f"MemorySystem.Controller.{key}", {impl})
                r.keys(node, {"impl"}, f"MemorySystem.Controller.{key}")
        if "RowPolicy" in ctrl:
            where = "MemorySystem.Controller.RowPolicy"
            rp = r.section(ctrl["RowPolicy"], where)
            if rp is not None:
                impl = r.impl(rp, where, set(_ROW_POLICIES))
                row_policy = _ROW_POLICIES.get(impl or "", "open")
                r.keys(rp, {"impl", "cap"} if impl == "ClosedRowPolicy" else {"impl"}, where)
                cap = r.int(rp.get("cap", cap), f"{where}.cap", "requests")
        for key, default in (("wr_low_watermark", 0.2), ("wr_high_watermark", 0.8)):
            watermarks[key] = r.number(ctrl.get(key, default), f"MemorySystem.Controller.{key}", lo=0, hi=1,
                                       what="a fraction of the write queue")
    return plugins, row_policy, cap, watermarks


def _address_mapper(ms: dict | None, r: _Reader) -> str | None:
    """The ``MemorySystem.AddrMapper`` impl, or None (the standard's default mapper)."""
    mapper = None
    mapper_node = r.section(ms.get("AddrMapper"), "MemorySystem.AddrMapper") if ms is not None else None
    if mapper_node is not None:
        mapper = r.impl(mapper_node, "MemorySystem.AddrMapper", {"RoBaRaCoCh", "ChRaBaRoCo", "MOP4CLXOR"})
        r.keys(mapper_node, {"impl"}, "MemorySystem.AddrMapper")
    return mapper


def _check_density(std: Any, org: dict[str, int], density: int | None, dq: int | None, r: _Reader) -> None:
    """Every level counted, and the density the one the organisation gives (as Ramulator checks)."""
    where = "MemorySystem.DRAM.org"
    for key in std.levels:
        if key not in org:
            r.problem(f"{where}.{key}", None, "a count (or an org preset)")
    if density is None or dq is None:
        r.problem(f"{where}.density", density, "a density in Mb (or an org preset)")
    elif all(key in org for key in std.levels):
        computed = (org["pseudochannel"] * org["bankgroup"] * org["bank"] * org["row"] * org["column"] * dq) >> 20
        if computed != density:
            r.problem(f"{where}.density", density,
                      f"{computed} Mb, the density the organisation gives (as Ramulator checks)")
    if density is not None and density not in (2048, 4096, 8192, 16384):
        r.problem(f"{where}.density", density, "2048, 4096, 8192 or 16384 Mb (Ramulator 2.0's tRFC table)")
    r.problems.raise_if_any()


def _resolved_timings(std: Any, timings: dict[str, int], tnames: set[str], tim_node: dict, density: int | None,
                      r: _Reader) -> dict[str, int]:
    """Every timing in cycles: the preset's or the rate's (Ramulator 2.0's formulas), then the file's
    overrides (``nX`` in cycles, ``tX`` in ns rounded as JEDEC does); one still unknown is a problem."""
    timings = _r2_finish_timings(timings, density)
    tck_ps = timings["tCK_ps"]
    for n in sorted(tnames):
        if n in tim_node:
            timings[n] = tim_node[n]
        elif "t" + n[1:] in tim_node:
            timings[n] = _jedec_rounding(float(tim_node["t" + n[1:]]), tck_ps)
    for n in std.timing_names:
        if timings.get(n, -1) == -1 and n not in ("nRFCSB", "nREFISB"):
            r.problem(f"MemorySystem.DRAM.timing.{n}", None, "a value in cycles")
    r.problems.raise_if_any()
    return timings


def _plugins(node: Any, std: Any, r: _Reader) -> tuple[ControllerPlugin, ...]:
    """``Controller.plugins``: a list of ``{ControllerPlugin: {impl, path, ...}}``; TraceRecorder and
    CommandCounter are carried out, any other plugin is refused by name."""
    if not node:
        return ()
    path = "MemorySystem.Controller.plugins"
    if not isinstance(node, list):
        r.problem(path, node, "a list of ControllerPlugin entries")
        return ()
    out = []
    for i, entry in enumerate(node):
        where = f"{path}[{i}]"
        if not isinstance(entry, dict) or set(entry) != {"ControllerPlugin"}:
            r.problem(where, entry, "{ControllerPlugin: {impl: ..., path: ...}}")
            continue
        plug = r.section(entry["ControllerPlugin"], f"{where}.ControllerPlugin")
        if plug is None:
            continue
        impl = plug.get("impl")
        if impl not in PLUGINS:
            r.problem(f"{where}.ControllerPlugin.impl", impl,
                      f"one of {list(PLUGINS)} (other Ramulator plugins are not supported by sievesim)")
            continue
        allowed = {"impl", "path"} | ({"commands_to_count"} if impl == "CommandCounter" else set())
        r.keys(plug, allowed, f"{where}.ControllerPlugin")
        target = plug.get("path")
        if not isinstance(target, str) or not target:
            r.problem(f"{where}.ControllerPlugin.path", target, "a file path (required)")
        commands: tuple[str, ...] = ()
        if impl == "CommandCounter":
            names = plug.get("commands_to_count")
            if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
                r.problem(f"{where}.ControllerPlugin.commands_to_count", names,
                          "a non-empty list of command names (required)")
            elif std is not None:
                known = [c.name for c in std.commands]
                for n in names:
                    if n not in known:
                        r.problem(f"{where}.ControllerPlugin.commands_to_count", n,
                                  f"a command of {std.name}: {known}")
                commands = tuple(names)
        if isinstance(target, str) and target:
            out.append(ControllerPlugin(impl=impl, path=target, commands_to_count=commands))
    return tuple(out)
