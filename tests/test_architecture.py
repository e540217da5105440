"""The shape of the package: no import cycle among sievesim's modules (function-local imports
counted too), and no module longer than a newcomer reads in one sitting (docs/architecture.md)."""
from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "sievesim"
MAX_LINES = 650


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, pathlib.Path]:
    """Every module of the package: ``.py`` files and the compiled ``.pyx`` ones (which import
    nothing of sievesim's, so they are leaves of the graph)."""
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py*")) if p.suffix in (".py", ".pyx")}


def import_graph() -> dict[str, set[str]]:
    """Module -> the sievesim modules it imports anywhere in its text (top level, function bodies,
    ``TYPE_CHECKING`` blocks alike). ``from .pkg import name`` counts as importing ``pkg.name`` when
    that is a module, else ``pkg`` itself.

    An import of one of the module's own ancestor packages (``from .. import __version__``) is no
    edge: Python runs every ancestor's ``__init__`` before the module anyway, so that edge is there
    for every module alike and says nothing about layers; what an ``__init__`` imports is an edge.
    """
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        if path.suffix == ".pyx":
            graph[name] = set()
            continue
        is_pkg = path.name == "__init__.py"
        here = name.split(".") if is_pkg else name.split(".")[:-1]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[:len(here) - (node.level - 1)]
                    base_name = ".".join(base + ([node.module] if node.module else []))
                else:
                    base_name = node.module or ""
                for alias in node.names:
                    sub = f"{base_name}.{alias.name}"
                    targets.append(sub if sub in modules else base_name)
            for target in targets:
                # "import sievesim.a.b" names the innermost module of the package it reaches
                while target and target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != name and not name.startswith(target + "."):
                    edges.add(target)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (a list of modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_graph_sees_function_local_and_relative_imports():
    graph = import_graph()
    assert "sievesim.errors" in graph["sievesim.dram.config"]  # top level, two dots
    assert "sievesim.models" in graph["sievesim.commands.models"]  # inside a function
    assert "sievesim.dram.config" in graph["sievesim.dram"]  # a package's __init__
    assert "sievesim.policies._sieve_kernel" in graph["sievesim.policies.sieve"]  # a compiled module
    assert "sievesim.models.llama4" in graph["sievesim.models.hf"]  # "from . import llama4"
    assert "sievesim" not in graph["sievesim.system.step"]  # "from .. import __version__": an ancestor
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_module_above_the_line_limit():
    too_long = {}
    for path in sorted(PACKAGE.rglob("*.py*")):
        if path.suffix not in (".py", ".pyx"):
            continue
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if rel.startswith("sievesim/_core/") and path.suffix == ".pyx":  # the engine: one compiled unit
            continue
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_LINES:
            too_long[rel] = n
    assert not too_long, f"modules above {MAX_LINES} lines: {too_long}"


MAX_FUNCTION_LINES = 120


def _long_functions() -> dict[str, int]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    out[f"{rel}:{node.name}"] = n
    return out


def test_no_function_above_the_line_limit():
    too_long = _long_functions()
    assert not too_long, f"functions above {MAX_FUNCTION_LINES} lines: {too_long}"


def test_the_sweep_family_is_one_package():
    """sweep.py, serve_sweep.py, grid.py, results.py, provenance.py, workers.py and plotting.py live in
    sievesim/sweeps/; at the package's top only their former names stay, each a module alias."""
    for name in ("sweep", "serve_sweep", "grid", "results", "provenance", "workers", "plotting"):
        text = (PACKAGE / f"{name}.py").read_text(encoding="utf-8")
        assert len(text.splitlines()) <= 8 and "sys.modules[__name__] = _module" in text, name
    assert {p.stem for p in (PACKAGE / "sweeps").glob("*.py")} >= {
        "grid", "run", "serve_points", "results", "provenance", "workers", "plotting"}
