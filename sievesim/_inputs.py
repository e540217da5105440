"""Small helpers shared by every reader of user input (TOML files, specs)."""
from __future__ import annotations

import os
from typing import Any

try:  # Python >= 3.11
    import tomllib as _toml
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as _toml  # type: ignore[no-redef]

from .errors import ConfigError, field_error

__all__ = ["read_toml", "is_int"]


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The parsed TOML file; a missing, unreadable or malformed file is a :class:`ConfigError`."""
    try:
        with open(path, "rb") as fh:
            return _toml.load(fh)
    except FileNotFoundError:
        raise field_error("path", str(path), "an existing TOML file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    except _toml.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def is_int(value: Any) -> bool:
    """An integer that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)
