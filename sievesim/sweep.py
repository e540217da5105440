"""Former place of :mod:`sievesim.sweeps.run`: importing ``sievesim.sweep`` gives that same module
object (its every name, private ones and monkeypatching included)."""
import sys

from .sweeps import run as _module

sys.modules[__name__] = _module
