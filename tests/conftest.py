"""Shared test setup: make helper modules in tests/ (e.g. dram_checker) importable."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
