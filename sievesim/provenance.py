"""Former place of :mod:`sievesim.sweeps.provenance`: importing ``sievesim.provenance`` gives that same module
object (its every name, private ones and monkeypatching included)."""
import sys

from .sweeps import provenance as _module

sys.modules[__name__] = _module
