"""Run the asv-style benchmarks without asv.

The files ``benchmarks/benchmarks_*.py`` follow asv's conventions (classes or functions named
``time_*``, ``peakmem_*``, ``track_*``; optional ``setup``, ``params``/``param_names``), so
``asv run`` works on them too. This runner is for a quick look on a machine without asv::

    python benchmarks/run.py                 # every benchmark
    python benchmarks/run.py engine track_   # those whose module/name contain both words

``time_*`` reports the median of ``repeat`` runs (seconds), ``peakmem_*`` the peak resident
memory growth in bytes (tracemalloc, Python allocations only), ``track_*`` the returned value.
"""
from __future__ import annotations

import importlib.util
import inspect
import itertools
import os
import pathlib
import statistics
import sys
import time
import tracemalloc

HERE = pathlib.Path(__file__).resolve().parent

# no benchmark here does linear algebra, but OpenBLAS's worker threads spin for a while after a
# numpy call (a setup's): on a small machine they take a core from the runs being timed, even
# those of a child process (a user's own setting is kept)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _load(path: pathlib.Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _targets(module):
    for name, obj in vars(module).items():
        if inspect.isclass(obj) and obj.__module__ == module.__name__:
            for meth in dir(obj):
                if meth.startswith(("time_", "peakmem_", "track_")):
                    yield obj, meth
        elif inspect.isfunction(obj) and name.startswith(("time_", "peakmem_", "track_")):
            yield None, name


def _param_grid(owner):
    params = getattr(owner, "params", None) if owner else None
    if params is None:
        return [()]
    if params and not isinstance(params[0], (list, tuple)):
        params = [params]
    return list(itertools.product(*params))


def run(filters: list[str]) -> int:
    for path in sorted(HERE.glob("benchmarks_*.py")):
        module = _load(path)
        for owner, meth in _targets(module):
            label = f"{path.stem}.{owner.__name__ + '.' if owner else ''}{meth}"
            if not all(f in label for f in filters):
                continue
            for combo in _param_grid(owner):
                inst = owner() if owner else None
                func = getattr(inst, meth) if owner else getattr(module, meth)
                if inst is not None and hasattr(inst, "setup"):
                    inst.setup(*combo)
                repeat = getattr(owner, "repeat", 3) if owner else 3
                if meth.startswith("time_"):
                    samples = []
                    for _ in range(repeat if isinstance(repeat, int) else 3):
                        t0 = time.perf_counter()
                        func(*combo)
                        samples.append(time.perf_counter() - t0)
                    value, unit = statistics.median(samples), "s"
                elif meth.startswith("peakmem_"):
                    tracemalloc.start()
                    func(*combo)
                    value, unit = tracemalloc.get_traced_memory()[1], "bytes"
                    tracemalloc.stop()
                else:
                    value = func(*combo)
                    unit = getattr(func, "unit", "")
                if inst is not None and hasattr(inst, "teardown"):
                    inst.teardown(*combo)
                print(f"{label}{list(combo) if combo else ''}: {value:.6g} {unit}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
