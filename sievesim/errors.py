"""Errors that users see.

Every error raised for bad input is a :class:`SievesimError` (or a subclass) whose
message names the field, the value and what was expected. The CLI prints the
message and exits with status 2; it never shows a traceback for these.
"""
from __future__ import annotations

from typing import Any

__all__ = ["SievesimError", "ConfigError", "TraceError", "field_error"]


class SievesimError(ValueError):
    """Base class of all user-facing input errors."""


class ConfigError(SievesimError):
    """A configuration (preset name, TOML/YAML file, CLI argument) is invalid."""


class TraceError(SievesimError):
    """A trace file or array is malformed."""


_MAX_VALUE_CHARS = 200


def field_error(field: str, value: Any, expected: str, *, source: str | None = None,
                cls: type[SievesimError] = ConfigError) -> SievesimError:
    """Build an error that names ``field``, the offending ``value`` and what was ``expected``."""
    where = f"{source}: " if source else ""
    shown = repr(value)
    if len(shown) > _MAX_VALUE_CHARS:  # a 5000-digit number or a whole table stays one readable line
        shown = f"{shown[:_MAX_VALUE_CHARS // 2]}...{shown[-20:]} ({len(shown)} characters)"
    return cls(f"{where}{field} = {shown}: expected {expected}")
