"""Former place of :mod:`sievesim.sweeps.serve_points`: importing ``sievesim.serve_sweep`` gives that same module
object (its every name, private ones and monkeypatching included)."""
import sys

from .sweeps import serve_points as _module

sys.modules[__name__] = _module
