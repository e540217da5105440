"""Former place of :mod:`sievesim.sweeps.grid`: importing ``sievesim.grid`` gives that same module
object (its every name, private ones and monkeypatching included)."""
import sys

from .sweeps import grid as _module

sys.modules[__name__] = _module
