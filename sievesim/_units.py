"""Names of PIM placement units (expert-parallel PIM, PIMoE), shared by the cost estimates
(:mod:`sievesim.costs`) and the engine (:mod:`sievesim.pim.expert`).

A unit is a base unit, ``"pseudo_channel"``, ``"channel"`` or ``"stack"``, or a group of ``S``
consecutive base units written ``"BASE*S"`` (``"channel*4"``: four channels that hold and run
their experts together, tensor-parallel inside the group). ``"BASE*1"`` is ``"BASE"``. Whether
``S`` divides the number of base units is checked where that number is known
(:meth:`sievesim.costs.PimOrganisation.count`, :meth:`sievesim.pim.expert.PIMDevice.unit_pcs`).
"""
from __future__ import annotations

from .errors import field_error

__all__ = ["BASE_UNITS", "split_unit", "join_unit"]

#: Placement units from the finest to the coarsest.
BASE_UNITS: tuple[str, ...] = ("pseudo_channel", "channel", "stack")

_EXPECTED = ("one of pseudo_channel, channel, stack, or a group of S of them written "
             "BASE*S (e.g. channel*4; S a positive integer)")


def split_unit(unit: object) -> tuple[str, int]:
    """``"channel*4"`` -> ``("channel", 4)``; ``"stack"`` -> ``("stack", 1)``.

    Raises :class:`~sievesim.errors.ConfigError` naming the unit for anything else (unknown base,
    a span that is not a positive decimal integer, spaces, signs).
    """
    if not isinstance(unit, str):
        raise field_error("unit", unit, _EXPECTED)
    base, star, span_text = unit.partition("*")
    if base not in BASE_UNITS:
        raise field_error("unit", unit, _EXPECTED)
    if not star:
        return base, 1
    if not (span_text.isascii() and span_text.isdigit()) or len(span_text) > 9 or int(span_text) < 1:
        raise field_error("unit", unit, _EXPECTED)
    return base, int(span_text)


def join_unit(base: str, span: int) -> str:
    """The canonical name of ``span`` base units: ``"channel*4"``, or ``"channel"`` for one."""
    return base if span == 1 else f"{base}*{span}"
