"""Shared test setup.

Makes helper modules in tests/ (e.g. dram_checker) importable, and derandomizes hypothesis on CI
(``CI`` set): the same examples every run, so a landing never depends on a lucky draw. Locally the
examples are random, which is how new counterexamples get found.
"""
import functools
import importlib.util
import os
import pathlib
import sys

import pytest
from hypothesis import settings

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

# Subprocesses of the tests (``python -m sievesim``, ``python -c``) must import the sievesim the tests
# import, not the source tree that Python would otherwise put first when the current directory is
# the repository (after ``pip install .`` that tree has no compiled engine).
os.environ["PYTHONSAFEPATH"] = "1"

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def package_root() -> str:
    """The folder that holds the sievesim this test process imported: the source tree when it runs
    from there (PYTHONPATH, an editable install), site-packages after ``pip install .`` (where the
    source tree has no compiled engine). Subprocesses of the tests put this on their PYTHONPATH."""
    import sievesim

    return str(pathlib.Path(sievesim.__file__).resolve().parent.parent)


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a subprocess that must import the same sievesim as the tests."""
    path = os.pathsep.join(p for p in (package_root(), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


@functools.cache
def load_script(path: pathlib.Path):
    """A script that is not a package module (one of benchmarks/) loaded as a module, once per
    test session."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def reproduction_dir(tmp_path_factory):
    """One folder for the reproduction page's runs (docs/reproduction.md's blocks write ``figs/``
    under it) and the quick figures of tests/test_reproduce_step.py: a quick figure's points are
    points of the full figure (tests/test_reproduce_judge.py), so a quick run after the page's full
    run resumes from its records instead of simulating them again. Either test alone computes
    everything itself."""
    return tmp_path_factory.mktemp("reproduction")


_HAVE_XDIST = importlib.util.find_spec("xdist") is not None


def pytest_addoption(parser: pytest.Parser) -> None:
    """pyproject's addopts run the suite on pytest-xdist workers (it comes with the test extra).
    Without pytest-xdist installed, accept the three options addopts gives so that ``pytest`` still
    runs, in one process (:func:`pytest_configure` says so)."""
    if _HAVE_XDIST:
        return
    group = parser.getgroup("xdist-absent", "pytest-xdist is not installed: these options are ignored")
    group.addoption("--numprocesses", default=None, help="ignored: pytest-xdist is not installed")
    # own dests: plugins that look for xdist's "dist" option (pytest-benchmark) must not see one
    group.addoption("--maxprocesses", dest="xdist_absent_maxprocesses", help="ignored: pytest-xdist is not installed")
    group.addoption("--dist", dest="xdist_absent_dist", help="ignored: pytest-xdist is not installed")


def pytest_configure(config: pytest.Config) -> None:
    if not _HAVE_XDIST and config.getoption("numprocesses") not in (None, "0"):
        config.issue_config_time_warning(pytest.PytestConfigWarning(
            "pytest-xdist is not installed: the tests run in one process "
            "(pip install pytest-xdist, or the test extra: pip install '.[test]')"), stacklevel=2)
