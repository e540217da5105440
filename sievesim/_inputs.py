"""Small helpers shared by every reader of user input (TOML files, specs, text files)."""
from __future__ import annotations

import os
from typing import Any

try:  # Python >= 3.11
    import tomllib as _toml
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as _toml  # type: ignore[no-redef]

from .errors import ConfigError, field_error

__all__ = ["read_toml", "read_text", "is_int"]


def _not_utf8(path: Any, exc: UnicodeDecodeError) -> ConfigError:
    return ConfigError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                       "expected a UTF-8 file")


def read_text(path: str | os.PathLike[str], what: str = "file") -> str:
    """The file as UTF-8 text; a missing, unreadable or non-UTF-8 file is a :class:`ConfigError`."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise field_error("path", str(path), f"an existing {what}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc) from None


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The parsed TOML file; a missing, unreadable, non-UTF-8 or malformed file is a :class:`ConfigError`."""
    text = read_text(path, "TOML file")
    try:
        return _toml.loads(text)
    except _toml.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except (ValueError, RecursionError) as exc:  # an integer of thousands of digits, deep nesting
        raise ConfigError(f"{path}: not valid TOML: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None


def is_int(value: Any) -> bool:
    """An integer that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)
