"""Shared test setup.

Makes helper modules in tests/ (e.g. dram_checker) importable, and derandomizes hypothesis on CI
(``CI`` set): the same examples every run, so a landing never depends on a lucky draw. Locally the
examples are random, which is how new counterexamples get found.
"""
import os
import pathlib
import sys

from hypothesis import settings

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
