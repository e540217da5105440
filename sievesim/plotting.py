"""Former place of :mod:`sievesim.sweeps.plotting`: importing ``sievesim.plotting`` gives that same module
object (its every name, private ones and monkeypatching included)."""
import sys

from .sweeps import plotting as _module

sys.modules[__name__] = _module
