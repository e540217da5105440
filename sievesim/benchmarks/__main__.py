"""``python -m sievesim.benchmarks NAME [ARGS]``: run one of the measurement scripts (no NAME: list them)."""
from __future__ import annotations

import importlib
import pkgutil
import sys

import sievesim.benchmarks as _pkg


def scripts() -> dict[str, str]:
    """Script name -> module name of every module with a ``main``."""
    out = {}
    for info in pkgutil.iter_modules(_pkg.__path__):
        if not info.name.startswith("_"):
            out[info.name.replace("_", "-")] = f"{_pkg.__name__}.{info.name}"
    return out


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = scripts()
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m sievesim.benchmarks NAME [ARGS]   (NAME --help for its options)\n")
        for name, module in sorted(names.items()):
            doc = (importlib.import_module(module).__doc__ or "").strip().splitlines()
            print(f"  {name:20s} {doc[0] if doc else ''}")
        return 0 if argv else 2
    name = argv[0].replace("_", "-")
    if name not in names:
        import difflib
        close = difflib.get_close_matches(name, names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        print(f"sievesim.benchmarks: error: script = {argv[0]!r}: expected one of {', '.join(sorted(names))}{hint}",
              file=sys.stderr)
        return 2
    try:
        return int(importlib.import_module(names[name]).main(argv[1:]) or 0)
    except BrokenPipeError:       # e.g. `... | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
