"""Former place of :mod:`sievesim.sweeps.results`: importing ``sievesim.results`` gives that same module
object (its every name, private ones and monkeypatching included)."""
import sys

from .sweeps import results as _module

sys.modules[__name__] = _module
