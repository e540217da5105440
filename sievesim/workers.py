"""Former place of :mod:`sievesim.sweeps.workers`: importing ``sievesim.workers`` gives that same module
object (its every name, private ones and monkeypatching included)."""
import sys

from .sweeps import workers as _module

sys.modules[__name__] = _module
